"""Object records: what the catalog knows about each immutable Parquet object.

Keys are built from ids only (``tenants/<tenant_id>/<table_id>/<kind>/<id>.parquet``),
never from names. A record carries everything a restore planner needs to
classify the object without opening it: kind, fingerprint, rows, bytes, ts
range, key range, sortedness and checksum.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from tenants.catalog import Row, Tx
from tenants.schema import TS

ObjectKind = Literal["data", "tomb"]


def object_key(tenant_id: str, table_id: str, kind: ObjectKind, object_id: str) -> str:
    return f"tenants/{tenant_id}/{table_id}/{kind}/{object_id}.parquet"


@dataclass(frozen=True)
class ObjectRecord:
    id: str
    key: str
    kind: ObjectKind
    fingerprint: str
    rows: int
    bytes: int
    min_ts: int
    max_ts: int
    min_pk: str
    max_pk: str
    sorted: bool
    checksum: str
    created_ts: int

    @classmethod
    def from_row(cls, row: Row) -> ObjectRecord:
        return cls(
            row["id"],
            row["object_key"],
            row["kind"],
            row["fingerprint"],
            row["row_count"],
            row["byte_size"],
            row["min_ts"],
            row["max_ts"],
            row["min_pk"],
            row["max_pk"],
            bool(row["sorted"]),
            row["checksum"],
            row["created_ts"],
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RowStats:
    """Statistics of an object's rows, computed before it is registered."""

    rows: int
    min_ts: int
    max_ts: int
    min_pk: str
    max_pk: str
    sorted: bool


def _key_json(table: pa.Table, index: int, primary_key: Sequence[str]) -> str:
    return json.dumps([table.column(k)[index].as_py() for k in primary_key], default=str)


def sort_by_key_and_ts(table: pa.Table, primary_key: Sequence[str]) -> pa.Table:
    return table.sort_by([(k, "ascending") for k in primary_key] + [(TS, "ascending")])


def row_stats(table: pa.Table, primary_key: Sequence[str], *, is_sorted: bool) -> RowStats:
    """Stats of a non-empty table; ``is_sorted`` promises rows are in (pk, ts) order."""
    bounds = pc.min_max(table.column(TS))
    if is_sorted:
        first, last = 0, table.num_rows - 1
        keys = table
    else:
        keys = table.select(list(primary_key)).sort_by([(k, "ascending") for k in primary_key])
        first, last = 0, keys.num_rows - 1
    return RowStats(
        rows=table.num_rows,
        min_ts=int(bounds["min"].as_py()),
        max_ts=int(bounds["max"].as_py()),
        min_pk=_key_json(keys, first, primary_key),
        max_pk=_key_json(keys, last, primary_key),
        sorted=is_sorted,
    )


def insert_object(tx: Tx, record: ObjectRecord) -> None:
    tx.execute(
        "INSERT INTO objects (id, object_key, kind, fingerprint, row_count, byte_size, min_ts, "
        "max_ts, min_pk, max_pk, sorted, checksum, created_ts) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            record.id,
            record.key,
            record.kind,
            record.fingerprint,
            record.rows,
            record.bytes,
            record.min_ts,
            record.max_ts,
            record.min_pk,
            record.max_pk,
            int(record.sorted),
            record.checksum,
            record.created_ts,
        ),
    )


def add_member(tx: Tx, table_id: str, object_id: str, ts: int) -> None:
    tx.execute(
        "INSERT INTO membership (table_id, object_id, added_ts) VALUES (?, ?, ?)",
        (table_id, object_id, ts),
    )


# Columns in ObjectRecord's field order, so a row tuple builds a record positionally
# (planning a restore of 10^5 objects reads 10^5 of these: no per-row dicts).
RECORD_COLUMNS = (
    "o.id, o.object_key, o.kind, o.fingerprint, o.row_count, o.byte_size, o.min_ts, o.max_ts, "
    "o.min_pk, o.max_pk, o.sorted, o.checksum, o.created_ts"
)


# A table's live members (bind the table id). Without the hint SQLite's planner prefers
# the unique index on objects.id (one row, it assumes) to the covering objects_plan,
# and then reads every object's row: 3-10x slower for a restore plan's aggregates.
LIVE_MEMBERS = (
    "FROM membership m JOIN objects o INDEXED BY objects_plan ON o.id = m.object_id "
    "WHERE m.table_id = ? AND m.removed_ts IS NULL"
)


def record_from_tuple(r: tuple[Any, ...]) -> ObjectRecord:
    return ObjectRecord(
        r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], bool(r[10]), r[11], r[12]
    )


def live_objects(tx: Tx, table_id: str, kind: ObjectKind | None = None) -> list[ObjectRecord]:
    """The table's current members, oldest first (sorted here: SQLite would sort
    without an index, slower than Python's sort of already-built records)."""
    sql = f"SELECT {RECORD_COLUMNS} {LIVE_MEMBERS}"
    params: list[Any] = [table_id]
    if kind:
        sql += " AND o.kind = ?"
        params.append(kind)
    records = [record_from_tuple(r) for r in tx.tuples(sql, params)]
    records.sort(key=lambda o: (o.min_ts, o.id))
    return records


def tenant_objects(tx: Tx, tenant_id: str) -> list[tuple[str, ObjectRecord]]:
    """(``db.table``, object) for every live member of every table of a tenant."""
    rows = tx.all(
        "SELECT d.name || '.' || t.name AS qualified, o.* FROM tables t "
        "JOIN databases d ON d.id = t.database_id "
        "JOIN membership m ON m.table_id = t.id AND m.removed_ts IS NULL "
        "JOIN objects o ON o.id = m.object_id "
        "WHERE t.tenant_id = ? ORDER BY qualified, o.kind, o.min_ts, o.id",
        (tenant_id,),
    )
    return [(r["qualified"], ObjectRecord.from_row(r)) for r in rows]


def remove_members(tx: Tx, table_id: str, object_ids: Sequence[str], ts: int) -> int:
    """Mark members removed at ``ts``; only those still live count."""
    changed = 0
    for object_id in object_ids:
        changed += tx.execute(
            "UPDATE membership SET removed_ts = ? "
            "WHERE table_id = ? AND object_id = ? AND removed_ts IS NULL",
            (ts, table_id, object_id),
        )
    return changed
