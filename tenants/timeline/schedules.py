"""Scheduled snapshots: a per-tenant schedule, and a tick that applies it.

A schedule is a first time of day (UTC), an interval, and retention by age
and/or by count. Due times are ``midnight + first + k * interval`` on the
epoch's grid. ``tick`` creates the snapshot for the latest due time that has
none (named ``<prefix>-<due time>``, so a second tick finds it and does
nothing) and expires scheduled snapshots past their retention. Missed
periods are not back-filled: like Paimon's automatic tags, a late tick
records the newest period only. A scheduled snapshot takes its due time as
ts when that time is still protected, else the tick's own commit ts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from tenants.catalog import Tx
from tenants.catalog.schedules import delete_schedule, insert_schedule, schedule_row
from tenants.catalog.snapshots import delete_snapshot
from tenants.errors import InvalidArgument
from tenants.tenancy import TenantRecord
from tenants.timeline.protection import protection, wall_now
from tenants.timeline.snapshots import (
    SnapshotRecord,
    create_snapshot,
    list_snapshots,
    snapshot_name,
)
from tenants.times import US, check_duration

MAX_RETAIN_COUNT = 1_000_000  # far past any real schedule, well inside SQLite's int64
_TIME_OF_DAY = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}))?")


def parse_time_of_day(text: str) -> int:
    """``HH:MM[:SS]`` (UTC) → µs after midnight."""
    match = _TIME_OF_DAY.fullmatch(text.strip())
    if not match:
        raise InvalidArgument(f"invalid time of day {text!r}: use HH:MM or HH:MM:SS (UTC)")
    hours, minutes, seconds = int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)
    if hours > 23 or minutes > 59 or seconds > 59:
        raise InvalidArgument(f"invalid time of day {text!r}: out of range")
    return (hours * 3600 + minutes * 60 + seconds) * US["s"]


MAX_PREFIX_CHARS = 64


@dataclass(frozen=True)
class Schedule:
    first_at_us: int
    interval_us: int
    retain_age_us: int | None
    retain_count: int | None
    name_prefix: str
    set_ts: int = 0

    def latest_due(self, now: int) -> int | None:
        """The newest due time at or before ``now``, if the schedule existed then."""
        due = self.first_at_us + (now - self.first_at_us) // self.interval_us * self.interval_us
        return due if self.set_ts <= due <= now else None

    def name_for(self, due: int) -> str:
        stamp = datetime.fromtimestamp(due / 1_000_000, tz=UTC).strftime("%Y%m%dT%H%M%SZ")
        return f"{self.name_prefix}-{stamp}"


@dataclass(frozen=True)
class TickResult:
    tenant: str
    created: tuple[SnapshotRecord, ...]
    expired: tuple[SnapshotRecord, ...]


def set_schedule(
    tx: Tx,
    tenant: TenantRecord,
    *,
    first_at_us: int,
    interval_us: int,
    retain_age_us: int | None = None,
    retain_count: int | None = None,
    name_prefix: str = "auto",
) -> Schedule:
    if interval_us <= 0:
        raise InvalidArgument("the snapshot interval must be longer than zero")
    check_duration(interval_us)
    if retain_age_us is not None and retain_age_us <= 0:
        raise InvalidArgument(f"retain age must be longer than zero, got {retain_age_us} µs")
    if retain_age_us is not None:
        check_duration(retain_age_us)
    if retain_count is not None and retain_count < 1:
        raise InvalidArgument(f"retain count must be at least 1, got {retain_count}")
    if retain_count is not None and retain_count > MAX_RETAIN_COUNT:
        raise InvalidArgument(
            f"retain count must be at most {MAX_RETAIN_COUNT:,}, got {retain_count}"
        )
    if not 0 <= first_at_us < US["d"]:
        raise InvalidArgument("the first snapshot time must be a time of day")
    snapshot_name(f"{name_prefix}-20260101T000000Z")
    if len(name_prefix) > MAX_PREFIX_CHARS:  # the catalog column's size (PostgreSQL enforces it)
        raise InvalidArgument(
            f"snapshot name prefix {name_prefix[:20]!r}... has {len(name_prefix)} characters; "
            f"use at most {MAX_PREFIX_CHARS}"
        )
    set_ts = wall_now(tx)
    delete_schedule(tx, tenant.id)
    insert_schedule(
        tx,
        tenant.id,
        first_at_us=first_at_us,
        interval_us=interval_us,
        retain_age_us=retain_age_us,
        retain_count=retain_count,
        name_prefix=name_prefix,
        set_ts=set_ts,
    )
    return Schedule(first_at_us, interval_us, retain_age_us, retain_count, name_prefix, set_ts)


def get_schedule(tx: Tx, tenant: TenantRecord) -> Schedule | None:
    row = schedule_row(tx, tenant.id)
    if row is None:
        return None
    return Schedule(
        row["first_at_us"],
        row["interval_us"],
        row["retain_age_us"],
        row["retain_count"],
        row["name_prefix"],
        row["set_ts"],
    )


def clear_schedule(tx: Tx, tenant: TenantRecord) -> None:
    delete_schedule(tx, tenant.id)


def tick(tx: Tx, tenant: TenantRecord) -> TickResult:
    """Create the due scheduled snapshot and expire old ones. Idempotent."""
    schedule = get_schedule(tx, tenant)
    if schedule is None:
        return TickResult(tenant.name, (), ())
    now = wall_now(tx)
    created: list[SnapshotRecord] = []
    due = schedule.latest_due(now)
    if due is not None:
        name = schedule.name_for(due)
        existing = {s.name for s in list_snapshots(tx, tenant)}
        expired_already = schedule.retain_age_us is not None and due < now - schedule.retain_age_us
        if name not in existing and not expired_already:
            at = due if protection(tx, tenant).covers(due) else None
            expires = due + schedule.retain_age_us if schedule.retain_age_us else None
            created.append(
                create_snapshot(tx, tenant, name, at=at, kind="scheduled", expires_at=expires)
            )
    expired = _expire(tx, tenant, schedule, now)
    return TickResult(tenant.name, tuple(created), tuple(expired))


def _expire(tx: Tx, tenant: TenantRecord, schedule: Schedule, now: int) -> list[SnapshotRecord]:
    scheduled = [s for s in list_snapshots(tx, tenant) if s.kind == "scheduled"]
    newest_first = sorted(scheduled, key=lambda s: (s.ts, s.name), reverse=True)
    doomed: list[SnapshotRecord] = []
    for rank, snap in enumerate(newest_first):
        too_old = schedule.retain_age_us is not None and snap.ts < now - schedule.retain_age_us
        too_many = schedule.retain_count is not None and rank >= schedule.retain_count
        if too_old or too_many:
            doomed.append(snap)
    for snap in doomed:
        delete_snapshot(tx, tenant.id, snap.name)
    return doomed
