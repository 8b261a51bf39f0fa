"""The change log: each write commit's own objects, by table and commit ts.

A commit uploads one data object (its upserts) and one tombstone object (its
delete keys), each sorted by key and holding only that commit's rows. Compaction
later merges them into outputs that span all of history, where one commit's
rows can no longer be told apart without reading every row. ``change_objects``
keeps the commit's own objects findable: a diff between two times reads the
objects of the commits between them (one index range), then looks those keys up
in the table, instead of scanning it. GC keeps an object while a row here names
it, and forgets the rows older than the tenant's change horizon
(``tenants.timeline.protection.Protection.change_horizon``), raising the
table's ``changes_from_ts`` in the same transaction: a diff that reaches before
it takes the scan path rather than a log with holes (docs/diff.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from tenants.catalog.base import Tx
from tenants.catalog.objects import RECORD_COLUMNS


def record_change_objects(tx: Tx, table_id: str, ts: int, object_ids: Sequence[str]) -> None:
    """Log ``object_ids`` as the objects of the write commit at ``ts`` on ``table_id``."""
    tx.executemany(
        "INSERT INTO change_objects (table_id, ts, object_id) VALUES (?, ?, ?)",
        [(table_id, ts, object_id) for object_id in object_ids],
    )


def change_object_tuples(
    tx: Tx, table_id: str, after_ts: int, until_ts: int
) -> list[tuple[object, ...]]:
    """The objects of ``table_id``'s write commits with ``after_ts < ts <= until_ts``:
    each an object's record columns (``RECORD_COLUMNS``) then the commit's ts,
    oldest commit first."""
    return tx.tuples(
        f"SELECT {RECORD_COLUMNS}, c.ts FROM change_objects c "
        "JOIN objects o ON o.id = c.object_id "
        "WHERE c.table_id = ? AND c.ts > ? AND c.ts <= ? ORDER BY c.ts, o.kind",
        (table_id, after_ts, until_ts),
    )


def changes_from(tx: Tx, table_id: str) -> int:
    """The ts from which ``table_id``'s change log is complete."""
    return int(tx.scalar("SELECT changes_from_ts FROM tables WHERE id = ?", (table_id,)))


def tenants_with_changes(tx: Tx) -> list[str]:
    """Ids of the tenants whose tables have rows in the change log."""
    rows = tx.all(
        "SELECT DISTINCT t.tenant_id FROM change_objects c JOIN tables t ON t.id = c.table_id"
    )
    return [str(r["tenant_id"]) for r in rows]


def forget_changes_before(tx: Tx, tenant_id: str, horizon: int) -> int:
    """Forget the change log of tenant ``tenant_id``'s tables before ``horizon`` and
    raise their ``changes_from_ts`` to it, in one transaction (a diff must never
    read a log with holes); return how many rows went."""
    tables = "SELECT id FROM tables WHERE tenant_id = ?"
    gone = tx.execute(
        f"DELETE FROM change_objects WHERE ts < ? AND table_id IN ({tables})",
        (horizon, tenant_id),
    )
    tx.execute(
        f"UPDATE tables SET changes_from_ts = ? WHERE changes_from_ts < ? AND id IN ({tables})",
        (horizon, horizon, tenant_id),
    )
    return gone


def forget_changes_of_tables(tx: Tx, tables_select: str, params: Sequence[object]) -> None:
    """Forget the whole change log of the tables ``tables_select`` names (purged or
    released: no time of theirs is protected any more)."""
    tx.execute(f"DELETE FROM change_objects WHERE table_id IN ({tables_select})", tuple(params))
