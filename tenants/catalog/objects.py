"""Objects and membership: the catalog's rows for immutable Parquet objects.

An ``objects`` row describes one object (``tenants.objects.record.ObjectRecord``); a
``membership`` row says a table held it from ``added_ts`` until ``removed_ts``
(``NULL`` while live). Rows are never updated except to end a membership, so
a reader at any ts sees the members of that ts. A restored table also holds
what it inherits (``tenants.catalog.inherited``): every read of "a table's
members" here goes through its levels.

Reads return positional tuples in ``RECORD_COLUMNS`` order, not dicts: the
restore planner reads 10^5 of them, and ``tenants.objects.record.record_from_tuple``
builds records from them without a per-row dict. This module imports no
domain code at run time (``tenants.objects.record`` imports it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tenants.catalog.base import Row, Tx
from tenants.catalog.inherited import shadow_members, view_select
from tenants.catalog.totals import add_totals, subtract_objects
from tenants.errors import NotFound

if TYPE_CHECKING:
    from tenants.objects.record import ObjectKind, ObjectRecord

# Columns in ObjectRecord's field order, so a row tuple builds a record positionally
# (planning a restore of 10^5 objects reads 10^5 of these: no per-row dicts).
RECORD_COLUMNS = (
    "o.id, o.object_key, o.kind, o.fingerprint, o.row_count, o.byte_size, o.min_ts, o.max_ts, "
    "o.min_pk, o.max_pk, o.sorted, o.checksum, o.created_ts"
)

# A member's columns: the object's, then its membership's cut (NULL when the table
# holds every row of the object; tenants.catalog.inherited).
MEMBER_COLUMNS = f"{RECORD_COLUMNS}, m.cut_ts"

OBJECT_COLUMNS = (
    "id", "object_key", "kind", "fingerprint", "row_count", "byte_size", "min_ts", "max_ts",
    "min_pk", "max_pk", "sorted", "checksum", "created_ts",
)  # fmt: skip
_INSERT_OBJECT = (
    f"INSERT INTO objects ({', '.join(OBJECT_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in OBJECT_COLUMNS)})"
)


def insert_object(tx: Tx, record: ObjectRecord) -> None:
    """Register an object (its bytes are already in the object store); it joins no table yet."""
    tx.execute(_INSERT_OBJECT, _object_values(record))


def insert_members(tx: Tx, members: Sequence[tuple[str, ObjectRecord]], ts: int) -> None:
    """Register many objects and make each a live member of its table from ``ts``
    (``(table_id, record)`` pairs): one batched statement each, not one per row."""
    tx.insert_many("objects", OBJECT_COLUMNS, (_object_values(r) for _, r in members))
    tx.insert_many(
        "membership",
        ("table_id", "object_id", "added_ts", "max_ts"),
        ((table_id, record.id, ts, record.max_ts) for table_id, record in members),
    )
    add_totals(tx, ((t, r.kind, r.fingerprint, 1, r.bytes) for t, r in members))


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
    """Make a registered object a live member of a table from ``ts`` on."""
    added = tx.execute(
        "INSERT INTO membership (table_id, object_id, added_ts, max_ts) "
        "SELECT ?, id, ?, max_ts FROM objects WHERE id = ?",
        (table_id, ts, object_id),
    )
    if added != 1:
        raise NotFound(f"object {object_id} is not registered; it cannot join table {table_id}")
    tx.execute(
        "INSERT INTO member_totals (table_id, kind, fingerprint, objects, bytes) "
        "SELECT ?, kind, fingerprint, 1, byte_size FROM objects WHERE id = ? "
        "ON CONFLICT (table_id, kind, fingerprint) DO UPDATE SET "
        "objects = member_totals.objects + 1, bytes = member_totals.bytes + excluded.bytes",
        (table_id, object_id),
    )


def remove_members(tx: Tx, table_id: str, object_ids: Sequence[str], ts: int) -> int:
    """Mark members removed at ``ts``; only those still live count. An inherited
    member is ended by a shadow row (``tenants.catalog.inherited.shadow_members``).

    The caller compares the count with ``len(object_ids)``: fewer means another
    writer removed some first (compare-and-set on membership).
    """
    ended: list[str] = []
    inherited: list[str] = []
    for object_id in object_ids:
        if tx.execute(
            "UPDATE membership SET removed_ts = ? "
            "WHERE table_id = ? AND object_id = ? AND removed_ts IS NULL",
            (ts, table_id, object_id),
        ):
            ended.append(object_id)
        else:
            inherited.append(object_id)
    ended += shadow_members(tx, table_id, inherited, ts)
    subtract_objects(tx, table_id, ended)
    return len(ended)


def live_member_tuples(
    tx: Tx, table_id: str, kind: ObjectKind | None = None
) -> list[tuple[Any, ...]]:
    """The table's live members, its own and inherited (of ``kind``, if given), as
    ``MEMBER_COLUMNS`` tuples in no particular order (the caller sorts the
    records it builds)."""
    if kind:
        return tx.tuples(*view_select(tx, table_id, MEMBER_COLUMNS, "AND o.kind = ?", (kind,)))
    return tx.tuples(*view_select(tx, table_id, MEMBER_COLUMNS))


def tenant_member_rows(tx: Tx, tenant_id: str) -> list[Row]:
    """Every live member of every table of a tenant: the ``objects`` row plus
    ``qualified`` (``db.table``), ordered by table, kind, min_ts and id."""
    out: list[Row] = []
    for table in tx.all(
        "SELECT t.id, d.name || '.' || t.name AS qualified FROM tables t "
        "JOIN databases d ON d.id = t.database_id WHERE t.tenant_id = ?",
        (tenant_id,),
    ):
        out.extend(
            {"qualified": table["qualified"], **row}
            for row in tx.all(*view_select(tx, table["id"], "o.*, m.cut_ts AS cut_ts"))
        )
    out.sort(key=lambda r: (r["qualified"], r["kind"], r["min_ts"], r["id"]))
    return out


def insert_cut_members(tx: Tx, members: Sequence[tuple[str, ObjectRecord, int]], ts: int) -> None:
    """Make each ``(table_id, record, cut_ts)`` a live member of its table from ``ts``,
    holding only the object's rows at or before ``cut_ts``: an instant restore's
    straddlers, installed before they are rewritten. The object stays where it
    is (another table's); the row's ``max_ts`` is what the table holds of it."""
    tx.insert_many(
        "membership",
        ("table_id", "object_id", "added_ts", "max_ts", "cut_ts"),
        (
            (table_id, record.id, ts, min(record.max_ts, cut), cut)
            for table_id, record, cut in members
        ),
    )
    add_totals(tx, ((t, r.kind, r.fingerprint, 1, r.bytes) for t, r, _ in members))


def swap_cut_member(tx: Tx, table_id: str, object_id: str, copy: ObjectRecord, ts: int) -> bool:
    """Replace the table's cut member ``object_id`` by ``copy`` (its rows up to the
    cut, rewritten; registered here) at ``ts``. Returns False, changing nothing,
    when the table no longer holds ``object_id`` with a cut (a compaction or a
    drop ended it first): the copy is then not needed."""
    ended = tx.execute(
        "UPDATE membership SET removed_ts = ? WHERE table_id = ? AND object_id = ? "
        "AND removed_ts IS NULL AND cut_ts IS NOT NULL",
        (ts, table_id, object_id),
    )
    if ended != 1:
        return False
    subtract_objects(tx, table_id, [object_id])
    insert_object(tx, copy)
    add_member(tx, table_id, copy.id, ts)
    return True


def restore_job_of_table(tx: Tx, table_id: str) -> str | None:
    """The restore job that created the table: its own (a table or database
    restore), else its tenant's; ``None`` for a table no restore created."""
    job = tx.scalar(
        "SELECT COALESCE(t.restore_job_id, n.restore_job_id) FROM tables t "
        "JOIN tenants n ON n.id = t.tenant_id WHERE t.id = ?",
        (table_id,),
    )
    return None if job is None else str(job)


def swapped_members(tx: Tx, table_id: str, copies: dict[str, str]) -> dict[str, str]:
    """Of ``copies`` (a cut member's id -> its rewritten copy's id), those the table's
    swap replaced by the copy, which is still a live member: the cut member's row
    ended at the very ts the copy's began (``swap_cut_member``)."""
    found: dict[str, str] = {}
    for object_id, copy_id in copies.items():
        if tx.scalar(
            "SELECT COUNT(*) FROM membership m JOIN membership c "
            "ON c.table_id = m.table_id AND c.added_ts = m.removed_ts "
            "WHERE m.table_id = ? AND m.object_id = ? AND m.cut_ts IS NOT NULL "
            "AND c.object_id = ? AND c.removed_ts IS NULL",
            (table_id, object_id, copy_id),
        ):
            found[object_id] = copy_id
    return found


def live_cut_members(tx: Tx, table_ids: Sequence[str]) -> set[tuple[str, str]]:
    """``(table_id, object_id)`` of every member the tables still hold with a cut:
    an instant restore's straddlers not yet swapped for their copies or merged away."""
    return {
        (table_id, str(r[0]))
        for table_id in table_ids
        for r in tx.tuples(
            "SELECT object_id FROM membership WHERE table_id = ? AND removed_ts IS NULL "
            "AND cut_ts IS NOT NULL",
            (table_id,),
        )
    }


def registered_keys(tx: Tx, keys: Sequence[str]) -> set[str]:
    """Those of ``keys`` that an ``objects`` row names."""
    found: set[str] = set()
    for start in range(0, len(keys), 500):
        chunk = list(keys[start : start + 500])
        marks = ", ".join("?" for _ in chunk)
        found.update(
            str(r[0])
            for r in tx.tuples(
                f"SELECT object_key FROM objects WHERE object_key IN ({marks})", chunk
            )
        )
    return found
