"""Member totals: how many objects and bytes each table holds, per kind and schema.

``member_totals`` counts a table's view (its own live members and what it
inherits, ``tenants.catalog.inherited``) per (kind, schema fingerprint). Every
statement that changes a view keeps it: a member added or ended, a shadow, a
restored table's inherited share (from its plan), a purge or release. A
restore plan then reads the totals and only the members after S, never every
member (``engine.restore.plan``). ``counted`` counts a table's view member
by member: the tests' invariant.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tenants.catalog.base import Tx
from tenants.catalog.inherited import chunked, view_select

Group = tuple[str, str]  # (kind, fingerprint)

_UPSERT = (
    "INSERT INTO member_totals (table_id, kind, fingerprint, objects, bytes) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (table_id, kind, fingerprint) DO UPDATE SET "
    "objects = member_totals.objects + excluded.objects, "
    "bytes = member_totals.bytes + excluded.bytes"
)
# SQLite's default limit on bound parameters is 999.
_CHUNK = 500


def add_totals(tx: Tx, rows: Iterable[tuple[str, str, str, int, int]]) -> None:
    """Add ``(table_id, kind, fingerprint, objects, bytes)`` to the totals (negative
    counts subtract), summed per key first: one upsert per key."""
    summed: dict[tuple[str, str, str], list[int]] = {}
    for table_id, kind, fingerprint, objects, size in rows:
        total = summed.setdefault((table_id, kind, fingerprint), [0, 0])
        total[0] += objects
        total[1] += size
    tx.executemany(_UPSERT, [(*key, n, b) for key, (n, b) in summed.items() if n or b])


def subtract_objects(tx: Tx, table_id: str, object_ids: Sequence[str]) -> None:
    """Take the objects ``object_ids`` (which the table no longer holds) off its totals."""
    rows: list[tuple[str, str, str, int, int]] = []
    for start in range(0, len(object_ids), _CHUNK):
        chunk = list(object_ids[start : start + _CHUNK])
        marks = ", ".join("?" for _ in chunk)
        rows.extend(
            (table_id, kind, fingerprint, -1, -int(size))
            for kind, fingerprint, size in tx.tuples(
                f"SELECT kind, fingerprint, byte_size FROM objects WHERE id IN ({marks})", chunk
            )
        )
    add_totals(tx, rows)


def totals_of(tx: Tx, table_id: str) -> dict[Group, tuple[int, int]]:
    """(objects, bytes) the table holds per (kind, fingerprint), groups of none left out."""
    return totals_of_tables(tx, [table_id]).get(table_id, {})


def totals_of_tables(tx: Tx, table_ids: Sequence[str]) -> dict[str, dict[Group, tuple[int, int]]]:
    """``totals_of`` for many tables, in a statement per ``CHUNK`` of them."""
    out: dict[str, dict[Group, tuple[int, int]]] = {}
    for chunk in chunked(table_ids):
        marks = ", ".join("?" for _ in chunk)
        for table_id, kind, fingerprint, objects, size in tx.tuples(
            "SELECT table_id, kind, fingerprint, objects, bytes FROM member_totals "
            f"WHERE table_id IN ({marks}) AND objects <> 0",
            chunk,
        ):
            out.setdefault(str(table_id), {})[(kind, fingerprint)] = (int(objects), int(size))
    return out


def drop_totals(tx: Tx, table_ids_sql: str, params: Sequence[Any]) -> None:
    """Forget the totals of the tables the subquery selects (they hold nothing now)."""
    tx.execute(f"DELETE FROM member_totals WHERE table_id IN ({table_ids_sql})", params)


def counted(tx: Tx, table_id: str) -> dict[Group, tuple[int, int]]:
    """(objects, bytes) per group counted from the table's view, member by member."""
    view, params = view_select(tx, table_id, "o.kind, o.fingerprint, o.byte_size")
    return {
        (kind, fingerprint): (int(objects), int(size))
        for kind, fingerprint, objects, size in tx.tuples(
            f"SELECT kind, fingerprint, COUNT(*), SUM(byte_size) FROM ({view}) v "
            "GROUP BY kind, fingerprint",
            params,
        )
    }
