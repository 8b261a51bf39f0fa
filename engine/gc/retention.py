"""Ending protections: purging dropped tenants and long-dropped tables.

Purging removes a dropped tenant's snapshots, schedule and PITR window and
ends every membership of its tables (``removed_ts`` = the purge), which makes
its unshared objects collectable after the grace period. Objects it shares
with other tenants stay: GC counts references per (table, object), across
tenants. A dropped table is released the same way once no protected time of
its tenant is older than its drop.

Retention is a promise in real time ("kept for 7 days"), so ``retain_until``
(a commit ts plus the retention) is compared with the wall clock, never with
the commit clock a backup restore may have pushed ahead (engine/gc/clocks.py);
the memberships a purge ends are stamped on the commit clock, like every
other change.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.gc.clocks import real_now
from tenants.catalog import Catalog, Tx
from tenants.errors import InvalidArgument
from tenants.protection import protection, wall_now
from tenants.tenancy import TenantRecord, find_tenant


@dataclass(frozen=True)
class PurgeResult:
    tenant: str
    memberships_ended: int
    snapshots_dropped: int


def purge_tenant_tx(tx: Tx, tenant: TenantRecord, ts: int) -> PurgeResult:
    snapshots = tx.execute("DELETE FROM snapshots WHERE tenant_id = ?", (tenant.id,))
    tx.execute("DELETE FROM snapshot_schedules WHERE tenant_id = ?", (tenant.id,))
    tx.execute("DELETE FROM pitr_windows WHERE tenant_id = ?", (tenant.id,))
    ended = tx.execute(
        "UPDATE membership SET removed_ts = ? WHERE removed_ts IS NULL "
        "AND table_id IN (SELECT id FROM tables WHERE tenant_id = ?)",
        (ts, tenant.id),
    )
    tx.execute("UPDATE tenants SET purged_ts = ? WHERE id = ?", (ts, tenant.id))
    return PurgeResult(tenant.ref, ended, snapshots)


def purge_tenant(catalog: Catalog, ref: str) -> PurgeResult:
    """Purge one dropped tenant now, before its retention ends (on request)."""
    with catalog.transaction() as tx:
        tenant = find_tenant(tx, ref)
        if tenant.state != "dropped":
            raise InvalidArgument(
                f"tenant {tenant.ref} is active; drop it first (`rewind tenant drop`), then purge"
            )
        if tenant.purged_ts is not None:
            raise InvalidArgument(f"tenant {tenant.ref} was already purged")
        running = tx.one(
            "SELECT id FROM restore_jobs WHERE source_tenant_id = ? "
            "AND state IN ('planned', 'rewriting', 'verifying', 'installing', 'failed')",
            (tenant.id,),
        )
        if running:
            raise InvalidArgument(
                f"tenant {tenant.ref} is the source of unfinished restore job {running['id']}; "
                "finish or cancel it first"
            )
        return purge_tenant_tx(tx, tenant, tx.commit_ts())


def expire_retention(tx: Tx) -> list[PurgeResult]:
    """Purge every dropped tenant past ``retain_until``; release long-dropped tables."""
    now = wall_now(tx)  # commit-clock "now": the ts memberships end at
    expired_before = real_now(tx.catalog)  # retention is real time
    results = []
    rows = tx.all(
        "SELECT * FROM tenants WHERE state = 'dropped' AND purged_ts IS NULL "
        "AND retain_until IS NOT NULL AND retain_until < ? AND id NOT IN "
        "(SELECT source_tenant_id FROM restore_jobs WHERE state IN "
        "('planned', 'rewriting', 'verifying', 'installing', 'failed'))",
        (expired_before,),
    )
    for row in rows:
        results.append(purge_tenant_tx(tx, TenantRecord.from_row(row), now))
    _release_dropped_tables(tx, now)
    return results


def _release_dropped_tables(tx: Tx, now: int) -> int:
    """End memberships of tables dropped before every protected time of an active tenant."""
    released = 0
    for row in tx.all("SELECT * FROM tenants WHERE state = 'active'"):
        tenant = TenantRecord.from_row(row)
        guard = protection(tx, tenant)
        oldest = min(
            [guard.current_from] + guard.points + ([guard.window[0]] if guard.window else [])
        )
        released += tx.execute(
            "UPDATE membership SET removed_ts = ? WHERE removed_ts IS NULL AND table_id IN "
            "(SELECT id FROM tables WHERE tenant_id = ? AND dropped_ts IS NOT NULL AND dropped_ts <= ?)",
            (now, tenant.id, oldest),
        )
    return released
