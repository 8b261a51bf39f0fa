"""Snapshot schedule rows: at most one schedule per tenant (``tenant_id`` is the key).

The columns are those of ``tenants.timeline.schedules.Schedule``: the first time of day
and interval in µs, retention by age (µs) and/or count, the name prefix of the
snapshots it makes, and ``set_ts``, when it was set (due times before it are
never filled in). This module imports no domain code.
"""

from __future__ import annotations

from tenants.catalog.base import Row, Tx


def schedule_row(tx: Tx, tenant_id: str) -> Row | None:
    """The tenant's snapshot schedule, if it has one."""
    return tx.one("SELECT * FROM snapshot_schedules WHERE tenant_id = ?", (tenant_id,))


def delete_schedule(tx: Tx, tenant_id: str) -> None:
    """Remove the tenant's schedule (nothing if it has none); its snapshots stay."""
    tx.execute("DELETE FROM snapshot_schedules WHERE tenant_id = ?", (tenant_id,))


def insert_schedule(
    tx: Tx,
    tenant_id: str,
    *,
    first_at_us: int,
    interval_us: int,
    retain_age_us: int | None,
    retain_count: int | None,
    name_prefix: str,
    set_ts: int,
) -> None:
    """Give the tenant a schedule. It must have none: replace one by
    :func:`delete_schedule` then this, in one transaction."""
    tx.execute(
        "INSERT INTO snapshot_schedules (tenant_id, first_at_us, interval_us, retain_age_us, "
        "retain_count, name_prefix, set_ts) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (tenant_id, first_at_us, interval_us, retain_age_us, retain_count, name_prefix, set_ts),
    )
