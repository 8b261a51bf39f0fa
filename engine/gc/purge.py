"""Ending protections: purging dropped tenants and long-dropped tables.

Purging removes a dropped tenant's snapshots, schedule and PITR window and
ends every membership of its tables (``removed_ts`` = the purge), which makes
its unshared objects collectable after the grace period. Objects it shares
with other tenants stay: GC counts references per (table, object), across
tenants. A dropped table is released the same way once no protected time of
its tenant is older than its drop. The change log of commit objects kept
for diffs (tenants.catalog.changes) is forgotten before each tenant's change
horizon, which makes the commit objects compaction has merged collectable.

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
from tenants.catalog.changes import forget_changes_before, tenants_with_changes
from tenants.catalog.engine.gc import (
    active_tenant_rows,
    purge_tenant_rows,
    release_tables_dropped_by,
    tenants_past_retention,
    unfinished_restore_from,
)
from tenants.errors import InvalidArgument
from tenants.tenancy import TenantRecord, find_tenant, tenant_by_id
from tenants.timeline.protection import protection, wall_now


@dataclass(frozen=True)
class PurgeResult:
    tenant: str
    memberships_ended: int
    snapshots_dropped: int


def purge_tenant_tx(tx: Tx, tenant: TenantRecord, ts: int) -> PurgeResult:
    ended, snapshots = purge_tenant_rows(tx, tenant.id, ts)
    return PurgeResult(tenant.ref, ended, snapshots)


def purge_tenant(catalog: Catalog, ref: str) -> PurgeResult:
    """Purge one dropped tenant now, before its retention ends (on request).

    Raises:
        NotFound: no tenant ``ref``.
        InvalidArgument: the tenant is active (drop it first), already purged,
            or the source of an unfinished restore job.
    """
    with catalog.transaction() as tx:
        tenant = find_tenant(tx, ref)
        if tenant.state != "dropped":
            raise InvalidArgument(
                f"tenant {tenant.ref} is active; drop it first (`rewind tenant drop {tenant.name}`), "
                "then purge"
            )
        if tenant.purged_ts is not None:
            raise InvalidArgument(f"tenant {tenant.ref} was already purged")
        running = unfinished_restore_from(tx, tenant.id)
        if running:
            raise InvalidArgument(
                f"tenant {tenant.ref} is the source of unfinished restore job {running}; "
                "finish or cancel it first"
            )
        return purge_tenant_tx(tx, tenant, tx.commit_ts())


def expire_retention(tx: Tx) -> list[PurgeResult]:
    """Purge every dropped tenant past ``retain_until``; release long-dropped tables."""
    now = wall_now(tx)  # commit-clock "now": the ts memberships end at
    expired_before = real_now(tx.catalog)  # retention is real time
    results = []
    for row in tenants_past_retention(tx, expired_before):
        results.append(purge_tenant_tx(tx, TenantRecord.from_row(row), now))
    _release_dropped_tables(tx, now)
    _forget_old_changes(tx)
    return results


def _release_dropped_tables(tx: Tx, now: int) -> int:
    """End memberships of tables dropped before every protected time of an active tenant."""
    released = 0
    for row in active_tenant_rows(tx):
        tenant = TenantRecord.from_row(row)
        released += release_tables_dropped_by(tx, tenant.id, protection(tx, tenant).oldest, now)
    return released


def _forget_old_changes(tx: Tx) -> int:
    """Forget each tenant's change log before its change horizon (the commit
    objects GC kept for diffs become garbage like any other unreferenced object)."""
    forgotten = 0
    for tenant_id in tenants_with_changes(tx):
        tenant = tenant_by_id(tx, tenant_id)
        forgotten += forget_changes_before(tx, tenant.id, protection(tx, tenant).change_horizon)
    return forgotten
