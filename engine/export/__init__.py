"""Tables at a snapshot, out of Rewind: plain Parquet or Iceberg (docs/engines.md, "Export").

``export_tables(store, tenant, tables, as_of, to, format=...)`` →
:class:`ExportResult`. The Parquet format writes the visible rows as plain
files and a manifest, published by a pointer (engine.export.parquet); the
Iceberg format commits one Iceberg snapshot per export, copying the objects
wholly visible at the time inside the object store and rewriting the rest
(engine.export.iceberg).

The names load on first use (PEP 562), as ``engine``'s do: ``rewind export
--help`` reads the formats (engine.export.plan) without loading the export.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenants import lazy_exports

_EXPORTS = {
    "export_tables": "engine.export.api",
    "FORMATS": "engine.export.plan",
    "Format": "engine.export.plan",
    "check_format": "engine.export.plan",
    "ExportResult": "engine.export.result",
    "TableExported": "engine.export.result",
}

__all__ = ["FORMATS", "ExportResult", "Format", "TableExported", "check_format", "export_tables"]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:  # what a type checker and an IDE see; at run time, __getattr__
    from engine.export.api import export_tables as export_tables
    from engine.export.plan import FORMATS as FORMATS
    from engine.export.plan import Format as Format
    from engine.export.plan import check_format as check_format
    from engine.export.result import ExportResult as ExportResult
    from engine.export.result import TableExported as TableExported
