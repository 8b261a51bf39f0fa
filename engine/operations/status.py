"""``rewind status``: for every tenant, how far back it can be recovered, and what is wrong.

One read transaction runs one statement per column over all active tenants
(tenants.catalog.engine.status), so a status of 10,000 tenants costs what one
of 10 does, plus the Python that joins the columns by tenant.

The **recovery point** of a tenant is its newest finished backup's point (the
catalog time the backup is as of), and its age is how much of the tenant's
history losing the warehouse now would lose: snapshots and the PITR window
live in that warehouse and catalog, so they are shown beside it but do not
count (docs/decisions.md, "Recovery point objectives"). A tenant *misses* its
objective when that age exceeds it, or when it has no backup at all.

A **job** needs attention when it is *failed* (a restore job that failed and
was neither resumed nor cancelled; the newest run of a backup, GC pass or
drill that ended in error) or *stale* (journaled as running, but its lease
expired or, on this host, its process is gone: it died mid-way). Running jobs
are shown too. Only the newest run of each recurring job counts: a later run
of the same kind, tenant, destination and method supersedes it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, cast

from engine.restore.lease import lease_live
from tenants.catalog import Catalog, Row, Tx
from tenants.catalog.engine import status as columns
from tenants.catalog.engine.runs import FAILED, RUNNING
from tenants.store import TableStore
from tenants.tenancy import active_tenant
from tenants.timeline.protection import wall_now

JobState = Literal["running", "failed", "stale"]
Verdict = Literal["met", "missed", "none"]
"""Whether the recovery point meets the objective; ``none``: the tenant has no objective."""

RESTORE = "restore"
DRILL = "drill"
GC = "gc"
STALE = "stale"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The tenant's newest snapshot."""

    name: str
    ts: int
    count: int  # snapshots the tenant has
    age_us: int


@dataclass(frozen=True, slots=True)
class Pitr:
    """The PITR window and how far back it reaches now: never before ``since_ts``,
    when it was switched on (or grown), so a new 7d window reaches back minutes."""

    window_us: int
    since_ts: int
    start_ts: int  # the oldest time it protects now
    reach_us: int  # now - start_ts

    @property
    def full(self) -> bool:
        """Whether it already reaches back its whole window."""
        return self.reach_us >= self.window_us


@dataclass(frozen=True, slots=True)
class Backup:
    """The newest finished backup of the tenant to one destination."""

    target: str  # the destination URI, redacted
    method: str | None
    backup_id: str | None
    point_ts: int  # the catalog time it is as of: the recovery point it gives
    ended_us: int | None
    bytes: int | None
    age_us: int  # of its point


@dataclass(frozen=True, slots=True)
class Job:
    """A job that is running, failed or stale."""

    kind: str  # restore, backup, gc, drill
    id: str
    state: JobState
    tenant: str | None  # None: the whole warehouse (a GC pass)
    target: str | None = None
    method: str | None = None
    started_us: int | None = None
    error: str | None = None
    holder: str | None = None

    @property
    def needs_attention(self) -> bool:
        return self.state != "running"


@dataclass(frozen=True, slots=True)
class LastRun:
    """The newest run of a recurring job: a tenant's restore drill (kind ``drill``), a
    GC pass of one method."""

    id: str
    kind: str
    state: str  # done, failed, running, stale
    method: str | None
    target: str | None
    started_us: int
    ended_us: int | None
    backup_id: str | None
    error: str | None


@dataclass(frozen=True, slots=True)
class Storage:
    """Objects and bytes of one kind (data, tomb) the tenant's live tables hold."""

    objects: int
    bytes: int


@dataclass(frozen=True, slots=True)
class TenantStatus:
    name: str
    id: str
    objective_us: int | None
    snapshot: Snapshot | None
    pitr: Pitr | None
    backups: tuple[Backup, ...]  # newest point first
    jobs: tuple[Job, ...]
    drill: LastRun | None  # the newest restore drill
    storage: dict[str, Storage]

    @property
    def recovery_point_ts(self) -> int | None:
        """The newest backup's point: what losing the warehouse would leave."""
        return self.backups[0].point_ts if self.backups else None

    @property
    def recovery_point_age_us(self) -> int | None:
        return self.backups[0].age_us if self.backups else None

    @property
    def verdict(self) -> Verdict:
        if self.objective_us is None:
            return "none"
        age = self.recovery_point_age_us
        return "met" if age is not None and age <= self.objective_us else "missed"

    @property
    def troubled_jobs(self) -> tuple[Job, ...]:
        return tuple(j for j in self.jobs if j.needs_attention)

    @property
    def healthy(self) -> bool:
        return self.verdict != "missed" and not self.troubled_jobs


@dataclass(frozen=True, slots=True)
class StatusReport:
    now_ts: int  # what ages are counted from: the catalog's clock
    tenants: tuple[TenantStatus, ...]  # worst first
    warehouse_jobs: tuple[Job, ...] = ()  # GC passes; restore jobs of no active tenant
    gc: tuple[LastRun, ...] = ()  # the newest GC pass per method (default, deep)

    @property
    def healthy(self) -> bool:
        """No tenant misses its objective and no job failed or is stale (exit 0)."""
        return all(t.healthy for t in self.tenants) and not any(
            j.needs_attention for j in self.warehouse_jobs
        )


def status(store: TableStore, tenant: str | None = None) -> StatusReport:
    """The status of every active tenant, worst first, or of the one ``tenant`` names.

    Raises:
        NotFound: ``tenant`` names no tenant. TenantDropped: it was dropped
            (status covers active tenants).
    """
    return catalog_status(store.catalog, tenant)


def catalog_status(catalog: Catalog, tenant: str | None = None) -> StatusReport:
    """:func:`status` from the catalog alone (what ``rewind status`` opens: a host
    that reaches the catalog needs nothing else), in one read transaction."""
    with catalog.snapshot() as tx:
        name = None if tenant is None else active_tenant(tx, tenant).name
        return read_status(tx, name)


def read_status(tx: Tx, name: str | None = None) -> StatusReport:
    """:func:`status` inside an open transaction: a constant number of statements."""
    now = wall_now(tx)
    tenants = columns.active_tenants(tx, name)
    objectives = columns.objectives(tx, name)
    snapshots = _one_snapshot_each(columns.newest_snapshots(tx, name), now)
    windows = {
        tenant_id: _pitr(window, since, now)
        for tenant_id, window, since in columns.pitr_windows(tx, name)
    }
    backups = _one_backup_per_destination(columns.newest_backups(tx, name), now)
    runs = columns.newest_runs(tx, name)
    restores = columns.unfinished_restore_jobs(tx, name)
    storage: dict[str, dict[str, Storage]] = {}
    for tenant_id, kind, objects, size in columns.storage_by_kind(tx, name):
        storage.setdefault(tenant_id, {})[kind] = Storage(int(objects or 0), int(size or 0))

    names = {tenant_name for _, tenant_name in tenants}
    jobs: dict[str | None, list[Job]] = {}
    drills: dict[str, LastRun] = {}
    gc: list[LastRun] = []
    for row in runs:
        owner = None if row["tenant_name"] is None else str(row["tenant_name"])
        if owner is not None and owner not in names:
            continue  # a dropped tenant's runs: nothing to do about them any more
        last = _last_run(row)
        if row["kind"] == GC and owner is None:
            gc.append(last)
        if row["kind"] == DRILL and owner is not None:
            if owner not in drills or last.started_us > drills[owner].started_us:
                drills[owner] = last
        if last.state in (RUNNING, FAILED, STALE):
            jobs.setdefault(owner, []).append(_run_job(row, last.state))
    for row in restores:
        owner = next((str(n) for n in (row["lock_name"], row["source_name"]) if n in names), None)
        jobs.setdefault(owner, []).append(_restore_job(row, owner))

    no_jobs: list[Job] = []
    report = [
        TenantStatus(
            name=tenant_name,
            id=tenant_id,
            objective_us=objectives.get(tenant_name),
            snapshot=snapshots.get(tenant_id),
            pitr=windows.get(tenant_id),
            backups=backups.get(tenant_name, ()),
            jobs=tuple(jobs.get(tenant_name, no_jobs)),
            drill=drills.get(tenant_name),
            storage=storage.get(tenant_id, {}),
        )
        for tenant_id, tenant_name in tenants
    ]
    return StatusReport(
        now,
        tuple(sorted(report, key=worst_first)),
        tuple(jobs.get(None, ())) if name is None else (),
        tuple(sorted(gc, key=lambda r: r.method or "")),
    )


def worst_first(tenant: TenantStatus) -> tuple[bool, bool, float, str]:
    """Missed objectives first, then failed or stale jobs, then the oldest recovery
    point (none at all is the oldest), then by name."""
    age = tenant.recovery_point_age_us
    return (
        tenant.verdict != "missed",
        not tenant.troubled_jobs,
        -(float("inf") if age is None else age),
        tenant.name,
    )


def _one_snapshot_each(rows: Iterable[tuple[str, str, int, int]], now: int) -> dict[str, Snapshot]:
    """The newest snapshot per tenant id; of two at the same ts, the last by name."""
    out: dict[str, Snapshot] = {}
    for tenant_id, name, ts, count in rows:
        kept = out.get(tenant_id)
        if kept is None or name > kept.name:
            out[tenant_id] = Snapshot(name, ts, count, max(now - ts, 0))
    return out


def _one_backup_per_destination(
    rows: Iterable[tuple[Any, ...]], now: int
) -> dict[str, tuple[Backup, ...]]:
    """Per tenant name, the backup with the newest point at each destination (two
    methods to one destination: the newer point, then the later end), newest first."""
    found: dict[str, dict[str, Backup]] = {}
    for tenant_name, *row in rows:
        backup, per_target = _backup(*row, now=now), found.setdefault(tenant_name, {})
        kept = per_target.get(backup.target)
        if kept is None or (backup.point_ts, backup.ended_us or 0) > (
            kept.point_ts,
            kept.ended_us or 0,
        ):
            per_target[backup.target] = backup
    return {
        tenant_name: tuple(per_target.values())
        if len(per_target) == 1
        else tuple(sorted(per_target.values(), key=lambda b: (-b.point_ts, b.target)))
        for tenant_name, per_target in found.items()
    }


def _pitr(window: int, since: int, now: int) -> Pitr:
    start = min(max(now - window, since), now)
    return Pitr(window, since, start, now - start)


def _backup(
    target: str | None,
    method: str | None,
    backup_id: str | None,
    point: int,
    ended_us: int | None,
    size: int | None,
    *,
    now: int,
) -> Backup:
    return Backup(target or "", method, backup_id, point, ended_us, size, max(now - point, 0))


def _run_state(row: Row) -> str:
    """done, failed, running, or stale (running, but its lease says nobody runs it)."""
    if row["state"] == RUNNING and not lease_live(row):
        return STALE
    return str(row["state"])


def _last_run(row: Row) -> LastRun:
    return LastRun(
        id=str(row["id"]),
        kind=str(row["kind"]),
        state=_run_state(row),
        method=row["method"],
        target=row["target"],
        started_us=int(row["started_us"]),
        ended_us=None if row["ended_us"] is None else int(row["ended_us"]),
        backup_id=row["backup_id"],
        error=row["error"],
    )


def _run_job(row: Row, state: str) -> Job:
    return Job(
        kind=str(row["kind"]),
        id=str(row["id"]),
        state=cast(JobState, state),  # running, failed or stale: the caller checked
        tenant=row["tenant_name"],
        target=row["target"],
        method=row["method"],
        started_us=int(row["started_us"]),
        error=row["error"],
        holder=row["lease_holder"],
    )


def _restore_job(row: Row, owner: str | None) -> Job:
    if row["state"] == FAILED:
        state: JobState = "failed"
    else:
        state = "running" if lease_live(row) else "stale"
    return Job(
        kind=RESTORE,
        id=str(row["id"]),
        state=state,
        tenant=owner if owner is not None else str(row["lock_name"]),
        target=str(row["lock_name"]),
        method=f"{row['scope']} {row['method']}",
        started_us=int(row["created_ts"]),
        error=row["error"],
        holder=row["lease_holder"],
    )
