"""Rewind's engine: backup and restore of the tenants of a :mod:`tenants` store,
and the ``rewind`` command line.

The public API is what this package exports (``__all__``, listed in
docs/api.md): ``from engine import restore_tenant, restore_table, run_gc``.
A function that acts on a tenant takes the store first (``tenants.TableStore``),
then the tenant, then what it acts on and the time (``tenants.AsOf``); one that
acts on a backup destination takes its URI first. Options are keyword-only
and safe by default.
Every other module is internal and may move. Exports load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenants import allocator as _allocator  # first: before anything loads pyarrow
from tenants import lazy_exports

del _allocator

_EXPORTS = {
    "restore_tenant": "engine.restore.job",
    "resume_restore": "engine.restore.job",
    "RestoreOutcome": "engine.restore.job",
    "cancel_restore": "engine.restore.cancel",
    "restore_table": "engine.restore.tables",
    "restore_database": "engine.restore.tables",
    "undrop_table": "engine.restore.tables",
    "export_tables": "engine.export.api",
    "ExportResult": "engine.export.result",
    "create_backup": "engine.backup.api",
    "restore_backup": "engine.backup.api",
    "backups": "engine.backup.api",
    "show_backup": "engine.backup.api",
    "verify_backup": "engine.backup.api",
    "delete_backup": "engine.backup.api",
    "drill_backup": "engine.backup.drill",
    "DrillResult": "engine.backup.drill",
    "run_gc": "engine.gc.run",
    "GcReport": "engine.gc.run",
    "status": "engine.operations.status",
    "StatusReport": "engine.operations.status",
    "set_recovery_objective": "engine.operations.objectives",
    "recovery_objectives": "engine.operations.objectives",
}

__all__ = list(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:  # what a type checker and an IDE see; at run time, __getattr__
    from engine.backup.api import backups as backups
    from engine.backup.api import create_backup as create_backup
    from engine.backup.api import delete_backup as delete_backup
    from engine.backup.api import restore_backup as restore_backup
    from engine.backup.api import show_backup as show_backup
    from engine.backup.api import verify_backup as verify_backup
    from engine.backup.drill import DrillResult as DrillResult
    from engine.backup.drill import drill_backup as drill_backup
    from engine.export.api import export_tables as export_tables
    from engine.export.result import ExportResult as ExportResult
    from engine.gc.run import GcReport as GcReport
    from engine.gc.run import run_gc as run_gc
    from engine.operations.objectives import recovery_objectives as recovery_objectives
    from engine.operations.objectives import set_recovery_objective as set_recovery_objective
    from engine.operations.status import StatusReport as StatusReport
    from engine.operations.status import status as status
    from engine.restore.cancel import cancel_restore as cancel_restore
    from engine.restore.job import RestoreOutcome as RestoreOutcome
    from engine.restore.job import restore_tenant as restore_tenant
    from engine.restore.job import resume_restore as resume_restore
    from engine.restore.tables import restore_database as restore_database
    from engine.restore.tables import restore_table as restore_table
    from engine.restore.tables import undrop_table as undrop_table
