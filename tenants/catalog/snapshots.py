"""Snapshot rows: a tenant's named, protected timestamps.

A ``snapshots`` row names one ts of one tenant; ``(tenant_id, name)`` is its
primary key. ``kind`` is ``manual`` or ``scheduled``; ``created_ts`` is the
commit that recorded it and ``expires_at`` (scheduled ones) when its schedule
lets it go. Rows are inserted and deleted, never updated. This module imports
no domain code (``tenants.timeline.snapshots`` builds ``SnapshotRecord`` from the rows).
"""

from __future__ import annotations

from collections.abc import Sequence

from tenants.catalog.base import Row, Tx
from tenants.errors import AlreadyExists


def snapshot_exists(tx: Tx, tenant_id: str, name: str) -> bool:
    """Whether the tenant has a snapshot called ``name``.

    Creators check this in the transaction that inserts, to say ``AlreadyExists``
    clearly; the primary key is what forbids the duplicate.
    """
    return (
        tx.one("SELECT name FROM snapshots WHERE tenant_id = ? AND name = ?", (tenant_id, name))
        is not None
    )


def insert_snapshot(
    tx: Tx,
    tenant_id: str,
    name: str,
    ts: int,
    kind: str,
    created_ts: int,
    expires_at: int | None,
) -> None:
    """Record snapshot ``name`` of the tenant at ``ts``, made by the commit ``created_ts``.

    Raises:
        AlreadyExists: the tenant has a snapshot named ``name`` (the primary key).
    """
    taken = f"tenant {tenant_id} already has a snapshot named {name!r}"
    with tx.unique(lambda: AlreadyExists(taken)):
        tx.execute(
            "INSERT INTO snapshots (tenant_id, name, ts, kind, created_ts, expires_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (tenant_id, name, ts, kind, created_ts, expires_at),
        )


def insert_snapshots(tx: Tx, rows: Sequence[tuple[str, str, int, str, int, int | None]]) -> None:
    """Carried snapshots as (tenant_id, name, ts, kind, created_ts, expires_at) tuples."""
    tx.executemany(
        "INSERT INTO snapshots (tenant_id, name, ts, kind, created_ts, expires_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        rows,
    )


def snapshot_rows(tx: Tx, tenant_id: str) -> list[Row]:
    """Every snapshot of the tenant, oldest ts first (ties by name)."""
    return tx.all("SELECT * FROM snapshots WHERE tenant_id = ? ORDER BY ts, name", (tenant_id,))


def snapshot_row(tx: Tx, tenant_id: str, name: str) -> Row | None:
    """The tenant's snapshot called ``name``, if any."""
    return tx.one("SELECT * FROM snapshots WHERE tenant_id = ? AND name = ?", (tenant_id, name))


def newest_snapshot_names(tx: Tx, tenant_id: str) -> list[str]:
    """The names of the tenant's five newest snapshots, newest first (for error hints)."""
    return [
        str(r["name"])
        for r in tx.all(
            "SELECT name FROM snapshots WHERE tenant_id = ? ORDER BY ts DESC LIMIT 5",
            (tenant_id,),
        )
    ]


def snapshot_points(tx: Tx, tenant_id: str) -> list[tuple[int, str]]:
    """``(ts, name)`` of every snapshot of the tenant, by ts then name: the protected
    points that ``tenants.timeline.protection`` bisects."""
    return [
        (int(r["ts"]), str(r["name"]))
        for r in tx.all(
            "SELECT ts, name FROM snapshots WHERE tenant_id = ? ORDER BY ts, name", (tenant_id,)
        )
    ]


def delete_snapshot(tx: Tx, tenant_id: str, name: str) -> int:
    """Forget the tenant's snapshot ``name``; returns how many rows went (0 or 1).

    Its ts stops being protected at this commit: compaction and GC may then drop
    versions only it needed.
    """
    return tx.execute("DELETE FROM snapshots WHERE tenant_id = ? AND name = ?", (tenant_id, name))
