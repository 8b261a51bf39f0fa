"""Objects and membership: the catalog's rows for immutable Parquet objects.

An ``objects`` row describes one object (``tenants.objects.ObjectRecord``); a
``membership`` row says a table held it from ``added_ts`` until ``removed_ts``
(``NULL`` while live). Rows are never updated except to end a membership, so
a reader at any ts sees the members of that ts.

Reads return positional tuples in ``RECORD_COLUMNS`` order, not dicts: the
restore planner reads 10^5 of them, and ``tenants.objects.record_from_tuple``
builds records from them without a per-row dict. This module imports no
domain code at run time (``tenants.objects`` imports it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tenants.catalog.base import Row, Tx

if TYPE_CHECKING:
    from tenants.objects import ObjectKind, ObjectRecord

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


OBJECT_COLUMNS = (
    "id", "object_key", "kind", "fingerprint", "row_count", "byte_size", "min_ts", "max_ts",
    "min_pk", "max_pk", "sorted", "checksum", "created_ts",
)  # fmt: skip
_INSERT_OBJECT = (
    f"INSERT INTO objects ({', '.join(OBJECT_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in OBJECT_COLUMNS)})"
)


def insert_object(tx: Tx, record: ObjectRecord) -> None:
    """Register an object (its bytes are already in the store); it joins no table yet."""
    tx.execute(_INSERT_OBJECT, _object_values(record))


def insert_members(tx: Tx, members: Sequence[tuple[str, ObjectRecord]], ts: int) -> None:
    """Register many objects and make each a live member of its table from ``ts``
    (``(table_id, record)`` pairs): one batched statement each, not one per row."""
    tx.insert_many("objects", OBJECT_COLUMNS, (_object_values(r) for _, r in members))
    tx.insert_many(
        "membership",
        ("table_id", "object_id", "added_ts"),
        ((table_id, record.id, ts) for table_id, record in members),
    )


def _object_values(record: ObjectRecord) -> tuple[object, ...]:
    return (
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
    )


def add_member(tx: Tx, table_id: str, object_id: str, ts: int) -> None:
    """Make an object a live member of a table from ``ts`` on."""
    tx.execute(
        "INSERT INTO membership (table_id, object_id, added_ts) VALUES (?, ?, ?)",
        (table_id, object_id, ts),
    )


def remove_members(tx: Tx, table_id: str, object_ids: Sequence[str], ts: int) -> int:
    """Mark members removed at ``ts``; only those still live count.

    The caller compares the count with ``len(object_ids)``: fewer means another
    writer removed some first (compare-and-set on membership).
    """
    changed = 0
    for object_id in object_ids:
        changed += tx.execute(
            "UPDATE membership SET removed_ts = ? "
            "WHERE table_id = ? AND object_id = ? AND removed_ts IS NULL",
            (ts, table_id, object_id),
        )
    return changed


def live_member_tuples(
    tx: Tx, table_id: str, kind: ObjectKind | None = None
) -> list[tuple[Any, ...]]:
    """The table's live members (of ``kind``, if given) as ``RECORD_COLUMNS`` tuples,
    in no particular order (the caller sorts the records it builds)."""
    sql = f"SELECT {RECORD_COLUMNS} {LIVE_MEMBERS}"
    params: list[Any] = [table_id]
    if kind:
        sql += " AND o.kind = ?"
        params.append(kind)
    return tx.tuples(sql, params)


def tenant_member_rows(tx: Tx, tenant_id: str) -> list[Row]:
    """Every live member of every table of a tenant: the ``objects`` row plus
    ``qualified`` (``db.table``), ordered by table, kind, min_ts and id."""
    return tx.all(
        "SELECT d.name || '.' || t.name AS qualified, o.* FROM tables t "
        "JOIN databases d ON d.id = t.database_id "
        "JOIN membership m ON m.table_id = t.id AND m.removed_ts IS NULL "
        "JOIN objects o ON o.id = m.object_id "
        "WHERE t.tenant_id = ? ORDER BY qualified, o.kind, o.min_ts, o.id",
        (tenant_id,),
    )
