"""A tenant name's history: which tenant id held the name at a given time.

A restore creates a new tenant id for the name and retires the old one, so
"acme at T" is the tenant that was acme at T: walk from the current holder
back through the previous holders of the name (``previous_holder_id``) and,
for a clone, into its source. Following where the data came from instead would
skip a tenant that held the name between two restores. This is how snapshots
taken after a restore point stay restorable by name, as a MatrixOne or
Snowflake user expects.

Two rules bound the walk:

- **A clone stops at its cut.** A tenant restored ``--to NEW`` at S inherits
  only its source's history up to S: the snapshot names (with ts <= S) its
  source's lineage had when the clone was made, and the times up to S. Names
  the source creates later and times after S never resolve in the clone, so
  one tenant never reads another's later data. An in-place restore keeps the
  whole lineage of the name.
- **Purged and expired tenants are walked past, never served.** Their data
  is gone (or about to be collected), but their ancestors may still hold data
  the name's history needs. A snapshot or time that only such a tenant could
  serve is a clear error, never empty rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from tenants.catalog import Tx
from tenants.errors import InvalidArgument, NotFound, UnprotectedTime
from tenants.tenancy import TenantRecord, tenant_by_id
from tenants.timeline.protection import protection, wall_now
from tenants.timeline.snapshots import SNAPSHOT_NAME, SnapshotRecord, find_snapshot, list_snapshots
from tenants.times import TIME_FORMS, check_ts, format_ts, parse_time, starts_time, time_word


@dataclass(frozen=True)
class Ancestor:
    """One tenant of a lineage, and how much of it the lineage's newest tenant inherits.

    ``until_ts``: the tightest clone cut between the two; times and snapshots
    after it are not the newest tenant's history (``None``: no clone between).
    ``known_by``: snapshots this tenant created after this commit ts are not
    inherited (the name, or the clone, had left it by then).
    ``gone``: why its data can no longer be served (purged, past retention).
    """

    tenant: TenantRecord
    until_ts: int | None = None
    known_by: int | None = None
    gone: str | None = None

    @property
    def serves(self) -> bool:
        return self.gone is None

    def inherits(self, snapshot: SnapshotRecord) -> bool:
        return (self.until_ts is None or snapshot.ts <= self.until_ts) and (
            self.known_by is None or snapshot.created_ts <= self.known_by
        )


def _earliest(bound: int | None, ts: int) -> int:
    return ts if bound is None else min(bound, ts)


def _gone(tenant: TenantRecord, now: int) -> str | None:
    if tenant.purged_ts is not None:
        return f"was purged at {format_ts(tenant.purged_ts)}"
    if tenant.state == "dropped" and tenant.retain_until is not None and tenant.retain_until < now:
        return f"passed its retention at {format_ts(tenant.retain_until)}"
    return None


def chain(tx: Tx, tenant: TenantRecord) -> list[Ancestor]:
    """``tenant`` and its ancestors, newest first, each with what ``tenant`` inherits of it.

    Purged and expired ancestors are included (marked ``gone``) so the walk
    reaches the tenants before them; a source in another catalog (a backup
    restored here) ends the walk.
    """
    now = wall_now(tx)
    result = [Ancestor(tenant)]
    seen = {tenant.id}
    current, until, known = tenant, None, None
    while True:
        parent_id = current.previous_holder_id or current.source_tenant_id
        if parent_id is None or parent_id in seen:
            break
        try:
            parent = tenant_by_id(tx, parent_id)
        except NotFound:
            break
        # Tenants restored in place before previous holders were recorded name
        # their source only; it held the same name.
        in_place = current.previous_holder_id is not None or parent.name == current.name
        if in_place:
            # The name passed at the swap: the previous holder was retired then.
            handover = current.created_ts
            if parent.state == "dropped" and parent.dropped_ts is not None:
                handover = max(handover, parent.dropped_ts)
            known = _earliest(known, handover)
        else:
            known = _earliest(known, current.created_ts)
            if current.source_ts is not None:
                until = _earliest(until, current.source_ts)
        result.append(Ancestor(parent, until, known, _gone(parent, now)))
        seen.add(parent.id)
        current = parent
    return result


def snapshot_in_lineage(
    tx: Tx, tenant: TenantRecord, name: str
) -> tuple[TenantRecord, SnapshotRecord]:
    """The snapshot ``name`` of the tenant or, failing that, of an ancestor it inherits.

    Raises:
        NotFound: no tenant of the lineage has it, or only one whose data is gone.
    """
    first_error: NotFound | None = None
    unservable: Ancestor | None = None
    gone: list[Ancestor] = []
    for ancestor in chain(tx, tenant):
        gone += [] if ancestor.serves else [ancestor]
        try:
            snapshot = find_snapshot(tx, ancestor.tenant, name)
        except NotFound as e:
            first_error = first_error or e
            continue
        if not ancestor.inherits(snapshot):
            continue
        if not ancestor.serves:
            unservable = unservable or ancestor
            continue
        return ancestor.tenant, snapshot
    if unservable is not None:
        raise NotFound(
            f"snapshot {name!r} of tenant {tenant.name!r} lives in {unservable.tenant.ref}, "
            f"which {unservable.gone}; its data is gone, so it cannot be read or restored "
            f"(`rewind snapshot list {tenant.name}` shows the snapshots that can)"
        )
    assert first_error is not None  # the tenant itself always inherits its own snapshots
    if gone:
        # A purge deletes a tenant's snapshot rows: the name may have lived there.
        lost = "; ".join(f"{a.tenant.ref}, which {a.gone}" for a in gone)
        raise NotFound(
            f"{first_error.message}; its lineage also passed through {lost}: snapshots that "
            "lived only there are gone with their data"
        )
    raise first_error


def holder_at(tx: Tx, tenant: TenantRecord, ts: int) -> Ancestor:
    """The tenant of the lineage that held the name at ``ts``.

    A restored tenant holds the name from its creation; before that its
    previous holder (or, for a clone, its source up to the cut) did. A time a
    tenant protects by a snapshot of its own is its own, even before its
    creation: a restore carries the versions its snapshots need. Never crosses
    a clone cut: a clone's times after its cut are its own, and unprotected.
    Falls back to the oldest ancestor the time may reach.
    """
    if ts < tenant.created_ts and any(s.ts == ts for s in list_snapshots(tx, tenant)):
        return Ancestor(tenant)
    lineage = chain(tx, tenant)
    chosen = lineage[0]
    for ancestor in lineage:
        if ancestor.until_ts is not None and ts > ancestor.until_ts:
            break
        chosen = ancestor
        if ancestor.tenant.created_ts <= ts:
            break
    return chosen


def inherited_snapshots(tx: Tx, tenant: TenantRecord, holder: TenantRecord) -> list[SnapshotRecord]:
    """The snapshots of ``holder`` (a tenant of ``tenant``'s lineage) that ``tenant`` inherits."""
    for ancestor in chain(tx, tenant):
        if ancestor.tenant.id == holder.id:
            return [s for s in list_snapshots(tx, holder) if ancestor.inherits(s)]
    return list_snapshots(tx, holder)  # the holder itself, named by ref


def require_data(tenant: TenantRecord) -> TenantRecord:
    """Refuse a purged tenant: its data is gone, and reading it must not look empty."""
    if tenant.purged_ts is not None:
        raise NotFound(
            f"tenant {tenant.ref} was purged at ts {tenant.purged_ts}; its data is gone and "
            "cannot be read or restored"
        )
    return tenant


def resolve_time(tx: Tx, tenant: TenantRecord, text: str | int) -> tuple[TenantRecord, int, str]:
    """A time named by snapshot, instant, ts or relative time → (holder of its data, ts, label).

    Text starting with a digit or ``-`` is a time (``-1h``: an hour before now);
    other text is a snapshot name of the lineage, except ``now`` and ISO-8601
    durations (``PT15M``: that long ago), which are times unless a snapshot of
    exactly that name exists (docs/decisions.md, "Naming a time"). "Now" is the
    catalog's clock, never behind its newest commit (``wall_now``), read in
    this transaction.

    Raises ``UnprotectedTime`` unless that tenant protects the time, and when
    the tenant that held the name then is purged or past its retention.
    """
    if isinstance(text, bool) or not isinstance(text, (str, int)):  # never truncated to a time
        raise InvalidArgument(
            f"time {text!r} for tenant {tenant.name!r}: give text (a snapshot name, an "
            "ISO-8601 instant, -1h) or an int of µs since the epoch"
        )
    if isinstance(text, str) and text.strip() and not starts_time(text):
        value = text.strip()
        if not SNAPSHOT_NAME.fullmatch(value):  # neither a name nor a time: say both
            raise InvalidArgument(f"invalid time or snapshot {value!r}: {TIME_FORMS}")
        try:
            holder, snap = snapshot_in_lineage(tx, require_data(tenant), value)
        except NotFound:
            if not time_word(value):
                raise
        else:
            return require_data(holder), snap.ts, snap.name
    if isinstance(text, str):
        ts = parse_time(text).resolve(wall_now(tx))
    else:
        ts = check_ts(int(text))
    ancestor = holder_at(tx, require_data(tenant), ts)
    if not ancestor.serves:
        raise UnprotectedTime(
            f"time {ts} ({format_ts(ts)}) of tenant {tenant.name!r} is no longer recoverable: "
            f"the name was then held by {ancestor.tenant.ref}, which {ancestor.gone}, so that "
            f"history is gone; `rewind snapshot list {tenant.name}` and "
            f"`rewind pitr show {tenant.name}` show what is recoverable"
        )
    holder = require_data(ancestor.tenant)
    try:
        protection(tx, holder).require(ts)
    except UnprotectedTime as refused:
        if holder.id == tenant.id:
            raise
        # The name's earlier holder answered: say so, and what the name protects now,
        # or the message describes a retired tenant the user never named.
        raise UnprotectedTime(
            f"time {ts} ({format_ts(ts)}) is not protected for tenant {tenant.name!r}: it is "
            f"before {tenant.ref} took the name at {format_ts(tenant.created_ts)} (a restore), "
            f"so it would read the history of {holder.ref}, which does not protect it (it "
            f"protects: {protection(tx, holder).recoverable()}); {tenant.name!r} protects: "
            f"{protection(tx, tenant).recoverable()}; `rewind pitr show {tenant.name}` and "
            f"`rewind snapshot list {tenant.name}` show them"
        ) from refused
    return holder, ts, str(ts)


def lineage_snapshots(tx: Tx, tenant: TenantRecord) -> list[tuple[TenantRecord, SnapshotRecord]]:
    """Every snapshot restorable by name for ``tenant``, with the tenant it lives in.

    A name found in a newer tenant of the lineage hides the same name further back
    (restores carry snapshots at or before the restore point forward). Snapshots
    the tenant does not inherit (after a clone's cut) or whose data is gone are
    left out.
    """
    seen: set[str] = set()
    found: list[tuple[TenantRecord, SnapshotRecord]] = []
    for ancestor in chain(tx, tenant):
        if not ancestor.serves:
            continue
        for snap in list_snapshots(tx, ancestor.tenant):
            if ancestor.inherits(snap) and snap.name not in seen:
                seen.add(snap.name)
                found.append((ancestor.tenant, snap))
    return sorted(found, key=lambda pair: (pair[1].ts, pair[1].name))
