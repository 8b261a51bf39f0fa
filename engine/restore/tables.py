"""Restoring one table or one database, and undropping a table: the Python API.

The same job as a tenant restore (``engine.restore.job.run_restore``):
planned at a smaller scope (``engine.restore.table_plan``), journaled,
resumable (``resume_restore``) and cancellable (``cancel_restore``) by job
id, with reused objects inherited by reference and straddlers rewritten.
Its install adds the new tables to a tenant that exists, in one transaction.
"""

from __future__ import annotations

from engine.pipeline import ExecutorName, VerifyLevel
from engine.restore.job import OnInstalled, Progress, RestoreOutcome, run_restore
from engine.restore.table_plan import plan_database_restore, plan_table_restore
from tenants.observe import events
from tenants.store import TableStore
from tenants.times import AsOf


def restore_table(
    store: TableStore,
    tenant: str,
    table: str,
    as_of: AsOf,
    *,
    to: str | None = None,
    to_tenant: str | None = None,
    executor: ExecutorName = "auto",
    verify: VerifyLevel = "objects",
    progress: Progress | None = None,
    instant: bool = False,
    wait: bool = True,
    on_installed: OnInstalled | None = None,
) -> RestoreOutcome:
    """Restore ``table`` (``DB.TABLE``) of ``tenant`` to ``as_of`` (snapshot name,
    time or ts): in place, the table's content and schema become what they
    were then and every other table keeps every write; ``to`` (``DB.NEW``)
    makes a new table beside it; ``to_tenant`` makes it in another tenant.
    ``instant``, ``wait`` and ``on_installed`` as for
    :func:`engine.restore.job.restore_tenant`: installed before the rewrite.

    Raises:
        NotFound, UnprotectedTime, AlreadyExists: bad input; nothing changed.
        RestoreInProgress: the target tenant has an unfinished restore job.
        RewindError: a step failed; the job is ``failed`` and resumable.
    """
    with events.job("table_restore", tenant):
        return run_restore(
            store,
            lambda: plan_table_restore(
                store.catalog, tenant, table, as_of, to=to, to_tenant=to_tenant
            ),
            executor=executor,
            verify=verify,
            method="physical",
            progress=progress,
            instant=instant,
            wait=wait,
            on_installed=on_installed,
        )


def restore_database(
    store: TableStore,
    tenant: str,
    database: str,
    as_of: AsOf,
    *,
    to: str | None = None,
    to_tenant: str | None = None,
    executor: ExecutorName = "auto",
    verify: VerifyLevel = "objects",
    progress: Progress | None = None,
    instant: bool = False,
    wait: bool = True,
    on_installed: OnInstalled | None = None,
) -> RestoreOutcome:
    """Restore every table of ``database`` to ``as_of``, in one install: tables
    created after it are dropped, tables dropped since come back. ``to`` and
    ``to_tenant``, ``instant``, ``wait`` and ``on_installed`` as for
    :func:`restore_table` (a new database)."""
    with events.job("table_restore", tenant):
        return run_restore(
            store,
            lambda: plan_database_restore(
                store.catalog, tenant, database, as_of, to=to, to_tenant=to_tenant
            ),
            executor=executor,
            verify=verify,
            method="physical",
            progress=progress,
            instant=instant,
            wait=wait,
            on_installed=on_installed,
        )


def undrop_table(
    store: TableStore,
    tenant: str,
    table: str,
    *,
    as_name: str | None = None,
    executor: ExecutorName = "auto",
    verify: VerifyLevel = "objects",
) -> RestoreOutcome:
    """Bring back the most recently dropped ``table`` (``DB.TABLE``) of ``tenant``
    with its data as at the drop, under its name or ``as_name`` (``DB.NEW``),
    while the tenant still retains its history (a snapshot or PITR window
    reaching back before the drop).

    Raises:
        NotFound: no dropped table of that name.
        UnprotectedTime: its history is no longer retained.
        AlreadyExists: a live table has the name (undrop it ``as_name``).
    """
    with events.job("table_restore", tenant):
        return run_restore(
            store,
            lambda: plan_table_restore(store.catalog, tenant, table, None, to=as_name, undrop=True),
            executor=executor,
            verify=verify,
            method="physical",
        )
