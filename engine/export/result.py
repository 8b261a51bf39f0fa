"""What an export did: per table, where it went, what was copied and what written."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from engine.export.plan import Format
from tenants.redaction import redact


@dataclass(frozen=True)
class TableExported:
    """One table's export.

    Bytes are counted where they moved: ``copied_bytes`` inside the object
    store (S3 CopyObject, a kernel file copy), never through Rewind's
    process; ``written_bytes`` through it (rewritten files, and reused objects
    that could not be copied server-side); ``metadata_bytes`` for what
    describes the files (a manifest, Iceberg's metadata).
    """

    table: str
    """``db.table`` in Rewind."""
    target: str
    """Parquet: the table's folder (URI). Iceberg: the table's identifier ``ns.table``."""
    location: str
    """The URI the table's files are under."""
    rows: int
    files: int
    reused_files: int
    """Objects wholly visible at the time, copied as they are."""
    rewritten_files: int
    copied_bytes: int
    written_bytes: int
    metadata_bytes: int
    checked_bytes: int
    """Key columns read to decide which objects are wholly visible."""
    iceberg_snapshot_id: int | None = None


@dataclass(frozen=True)
class ExportResult:
    tenant: str
    format: Format
    at_ts: int
    at: str
    """The time as ISO-8601."""
    snapshot: str | None
    to: str
    export_id: str
    tables: tuple[TableExported, ...]
    metadata_bytes: int
    """Manifests, pointers and Iceberg metadata written, over all tables."""
    seconds: float

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables)

    @property
    def copied_bytes(self) -> int:
        return sum(t.copied_bytes for t in self.tables)

    @property
    def written_bytes(self) -> int:
        return sum(t.written_bytes for t in self.tables)

    def to_json(self) -> dict[str, Any]:
        """The result as plain JSON values, with its totals; URIs redacted
        (tenants.redaction), as everywhere Rewind prints one."""
        tables = [
            asdict(t) | {"target": redact(t.target), "location": redact(t.location)}
            for t in self.tables
        ]
        return asdict(self) | {
            "to": redact(self.to),
            "tables": tables,
            "rows": self.rows,
            "copied_bytes": self.copied_bytes,
            "written_bytes": self.written_bytes,
        }
