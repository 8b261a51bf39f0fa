"""PITR window rows: at most one per tenant (``tenant_id`` is the key).

``window_us`` is how far back from "now" the window reaches; ``since_ts`` is
the earliest time it may ever cover (the moment it took effect, so it never
claims history recorded before it was on). This module imports no domain code.
"""

from __future__ import annotations

from tenants.catalog.base import Tx


def pitr_window(tx: Tx, tenant_id: str) -> tuple[int, int] | None:
    """The tenant's ``(window_us, since_ts)``, or None when PITR is off."""
    row = tx.one("SELECT window_us, since_ts FROM pitr_windows WHERE tenant_id = ?", (tenant_id,))
    return None if row is None else (int(row["window_us"]), int(row["since_ts"]))


def delete_pitr_window(tx: Tx, tenant_id: str) -> None:
    """Turn the tenant's PITR window off (nothing if it had none)."""
    tx.execute("DELETE FROM pitr_windows WHERE tenant_id = ?", (tenant_id,))


def insert_pitr_window(tx: Tx, tenant_id: str, window_us: int, since_ts: int) -> None:
    """Give the tenant a PITR window. It must have none: replace one by
    :func:`delete_pitr_window` then this, in one transaction."""
    tx.execute(
        "INSERT INTO pitr_windows (tenant_id, window_us, since_ts) VALUES (?, ?, ?)",
        (tenant_id, window_us, since_ts),
    )
