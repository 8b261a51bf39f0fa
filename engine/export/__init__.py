"""Tables at a snapshot, out of Rewind: plain Parquet or Iceberg (docs/engines.md, "Export").

``export_tables(store, tenant, tables, as_of, to, format=...)`` →
:class:`ExportResult`. The Parquet format writes the visible rows as plain
files and a manifest, published by a pointer (engine.export.parquet); the
Iceberg format commits one Iceberg snapshot per export, copying the objects
wholly visible at the time inside the object store and rewriting the rest
(engine.export.iceberg).
"""

from __future__ import annotations

from engine.export.api import export_tables
from engine.export.plan import FORMATS, Format, check_format
from engine.export.result import ExportResult, TableExported

__all__ = ["FORMATS", "ExportResult", "Format", "TableExported", "check_format", "export_tables"]
