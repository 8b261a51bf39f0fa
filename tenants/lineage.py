"""A tenant name's history: which tenant id held the name at a given time.

A restore creates a new tenant id for the name and retires the old one, so
"acme at T" is the tenant that was acme at T: walk from the current holder
back through the previous holders of the name (``previous_holder_id``; for a
clone, its source) while they are retained. Following where the data came
from instead would skip a tenant that held the name between two restores. This is
how snapshots taken after a restore point stay restorable by name, as a
MatrixOne or Snowflake user expects.
"""

from __future__ import annotations

from tenants.catalog import Tx
from tenants.errors import InvalidArgument, NotFound
from tenants.protection import protection, wall_now
from tenants.snapshots import SNAPSHOT_NAME, SnapshotRecord, find_snapshot, list_snapshots
from tenants.tenancy import TenantRecord, tenant_by_id
from tenants.times import TIME_FORMS, check_ts, parse_instant


def chain(tx: Tx, tenant: TenantRecord) -> list[TenantRecord]:
    """``tenant`` and its retained ancestors, newest first."""
    now = wall_now(tx)
    result = [tenant]
    seen = {tenant.id}
    current = tenant
    while (before := current.previous_holder_id or current.source_tenant_id) and before not in seen:
        try:
            parent = tenant_by_id(tx, before)
        except NotFound:
            break
        expired = parent.state == "dropped" and (parent.retain_until or now) < now
        if parent.purged_ts is not None or expired:
            break
        result.append(parent)
        seen.add(parent.id)
        current = parent
    return result


def snapshot_in_lineage(
    tx: Tx, tenant: TenantRecord, name: str
) -> tuple[TenantRecord, SnapshotRecord]:
    """The snapshot ``name`` of the tenant or, failing that, of its retained ancestors."""
    first_error: NotFound | None = None
    for holder in chain(tx, tenant):
        try:
            return holder, find_snapshot(tx, holder, name)
        except NotFound as e:
            first_error = first_error or e
    assert first_error is not None
    raise first_error


def holder_at(tx: Tx, tenant: TenantRecord, ts: int) -> TenantRecord:
    """The tenant of the lineage that held the name at ``ts``.

    A restored tenant holds the name from its creation; before that its
    source did. Falls back to the oldest retained ancestor.
    """
    lineage = chain(tx, tenant)
    for holder in lineage:
        if holder.created_ts <= ts:
            return holder
    return lineage[-1]


def require_data(tenant: TenantRecord) -> TenantRecord:
    """Refuse a purged tenant: its data is gone, and reading it must not look empty."""
    if tenant.purged_ts is not None:
        raise NotFound(
            f"tenant {tenant.ref} was purged at ts {tenant.purged_ts}; its data is gone and "
            "cannot be read or restored"
        )
    return tenant


def resolve_point(tx: Tx, tenant: TenantRecord, text: str | int) -> tuple[TenantRecord, int, str]:
    """A time named by snapshot, instant or ts → (tenant holding its data, ts, label).

    Raises ``UnprotectedTime`` unless that tenant protects the time.
    """
    if isinstance(text, str) and text.strip() and not text.strip()[0].isdigit():
        if not SNAPSHOT_NAME.fullmatch(text.strip()):  # neither a name nor a time: say both
            raise InvalidArgument(f"invalid time or snapshot {text.strip()!r}: {TIME_FORMS}")
        holder, snap = snapshot_in_lineage(tx, require_data(tenant), text.strip())
        return require_data(holder), snap.ts, snap.name
    ts = parse_instant(text) if isinstance(text, str) else check_ts(int(text))
    holder = require_data(holder_at(tx, require_data(tenant), ts))
    protection(tx, holder).require(ts)
    return holder, ts, str(ts)


def lineage_snapshots(tx: Tx, tenant: TenantRecord) -> list[tuple[TenantRecord, SnapshotRecord]]:
    """Every snapshot restorable by name for ``tenant``, with the tenant it lives in.

    A name found in a newer tenant of the lineage hides the same name further back
    (restores carry snapshots at or before the restore point forward).
    """
    seen: set[str] = set()
    found: list[tuple[TenantRecord, SnapshotRecord]] = []
    for holder in chain(tx, tenant):
        for snap in list_snapshots(tx, holder):
            if snap.name not in seen:
                seen.add(snap.name)
                found.append((holder, snap))
    return sorted(found, key=lambda pair: (pair[1].ts, pair[1].name))
