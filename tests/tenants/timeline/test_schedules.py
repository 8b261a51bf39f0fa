"""Scheduled snapshots under a controllable clock: due times, idempotent ticks, expiry.

The schedule in most tests is "first at 02:00 UTC, every 6 hours", so the due
times of 2026-01-05 are 02:00, 08:00, 14:00 and 20:00.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from tenants.errors import InvalidArgument, InvalidName
from tenants.store import TableStore
from tenants.timeline.schedules import Schedule, parse_time_of_day
from tenants.times import US, parse_duration, parse_instant
from tests.helpers.item_rows import SCHEMA, rows

H = US["h"]
M = US["m"]
DAY = parse_instant("2026-01-05T00:00:00Z")
FIRST = parse_time_of_day("02:00")
EVERY = parse_duration("6h")


def names(store: TableStore, tenant: str) -> list[str]:
    return [s.name for s in store.snapshots(tenant)]


def scheduled(store: TableStore, tenant: str) -> list[str]:
    return [s.name for s in store.snapshots(tenant) if s.kind == "scheduled"]


def tick_at(store: TableStore, clock, tenant: str, at: int) -> tuple[list[str], list[str]]:
    """Tick one tenant at ``at``: (created names, expired names)."""
    clock.fixed = at
    [result] = store.tick(tenant)
    assert result.tenant == tenant
    return [s.name for s in result.created], [s.name for s in result.expired]


@pytest.fixture
def tenant(store: TableStore, clock) -> str:
    """A tenant with one table, created at 00:30 on DAY (clock frozen)."""
    clock.fixed = DAY + 30 * M
    name = f"t-{uuid.uuid4().hex[:10]}"
    store.create_tenant(name)
    store.create_table(name, "db.items", SCHEMA)
    return name


def test_schedule_strings_parse_to_microseconds():
    assert FIRST == 2 * H
    assert EVERY == 6 * H
    assert parse_time_of_day("23:59:59") == 24 * H - US["s"]
    assert parse_duration("1h30m") == 90 * M
    assert Schedule(FIRST, EVERY, None, None, "auto").name_for(DAY + 2 * H) == (
        "auto-20260105T020000Z"
    )


def test_tick_creates_the_due_snapshot_named_for_its_due_time(store, clock, tenant):
    clock.fixed = DAY + H
    store.write(tenant, "db.items", upserts=rows((1, "a")))
    schedule = store.set_schedule(
        tenant, first_at_us=FIRST, interval_us=EVERY, retain_age_us=parse_duration("2d")
    )
    assert store.schedule(tenant) == schedule

    created, expired = tick_at(store, clock, tenant, DAY + 2 * H + 5 * M)

    assert (created, expired) == (["auto-20260105T020000Z"], [])
    snap = store.snapshot(tenant, "auto-20260105T020000Z")
    assert snap.kind == "scheduled"
    assert snap.ts == DAY + 2 * H  # the due time itself: nothing changed since 01:00
    assert snap.expires_at == DAY + 2 * H + 48 * H
    clock.fixed = DAY + 3 * H
    store.write(tenant, "db.items", upserts=rows((1, "b")))
    assert store.read(tenant, "db.items", snap.name).to_pylist() == [{"id": 1, "v": "a"}]


def test_second_tick_at_the_same_time_is_a_no_op(store, clock, tenant):
    clock.fixed = DAY + H
    store.set_schedule(tenant, first_at_us=FIRST, interval_us=EVERY, retain_count=3)
    assert tick_at(store, clock, tenant, DAY + 2 * H) == (["auto-20260105T020000Z"], [])
    before = store.snapshots(tenant)

    assert tick_at(store, clock, tenant, DAY + 2 * H) == ([], [])
    assert tick_at(store, clock, tenant, DAY + 7 * H) == ([], [])  # still the 02:00 period
    assert store.snapshots(tenant) == before


def test_tick_past_the_next_due_time_creates_the_next_snapshot(store, clock, tenant):
    clock.fixed = DAY + H
    store.set_schedule(tenant, first_at_us=FIRST, interval_us=EVERY, name_prefix="nightly")
    tick_at(store, clock, tenant, DAY + 2 * H)
    clock.fixed = DAY + 4 * H
    store.write(tenant, "db.items", upserts=rows((1, "a")))

    assert tick_at(store, clock, tenant, DAY + 8 * H - 1) == ([], [])
    assert tick_at(store, clock, tenant, DAY + 8 * H) == (["nightly-20260105T080000Z"], [])
    assert store.snapshot(tenant, "nightly-20260105T080000Z").ts == DAY + 8 * H
    assert scheduled(store, tenant) == ["nightly-20260105T020000Z", "nightly-20260105T080000Z"]


def test_late_tick_records_only_the_newest_missed_period(store, clock, tenant):
    clock.fixed = DAY + H
    store.set_schedule(tenant, first_at_us=FIRST, interval_us=EVERY)
    tick_at(store, clock, tenant, DAY + 2 * H)

    assert tick_at(store, clock, tenant, DAY + 21 * H) == (["auto-20260105T200000Z"], [])
    assert scheduled(store, tenant) == ["auto-20260105T020000Z", "auto-20260105T200000Z"]


def test_scheduled_snapshot_whose_due_time_is_unprotected_takes_the_tick_commit_ts(
    store, clock, tenant
):
    clock.fixed = DAY + H
    store.set_schedule(tenant, first_at_us=FIRST, interval_us=EVERY)
    clock.fixed = DAY + 2 * H + M  # a change after 02:00 leaves 02:00 unprotected
    store.write(tenant, "db.items", upserts=rows((1, "a")))

    assert tick_at(store, clock, tenant, DAY + 2 * H + 10 * M) == (["auto-20260105T020000Z"], [])
    snap = store.snapshot(tenant, "auto-20260105T020000Z")
    assert snap.ts == snap.created_ts >= DAY + 2 * H + 10 * M
    assert store.read(tenant, "db.items", snap.name).to_pylist() == [{"id": 1, "v": "a"}]


def test_retention_by_count_expires_the_oldest_scheduled_snapshots(store, clock, tenant):
    clock.fixed = DAY + H
    store.create_snapshot(tenant, "manual")
    store.set_schedule(tenant, first_at_us=FIRST, interval_us=EVERY, retain_count=2)

    assert tick_at(store, clock, tenant, DAY + 2 * H) == (["auto-20260105T020000Z"], [])
    assert tick_at(store, clock, tenant, DAY + 8 * H) == (["auto-20260105T080000Z"], [])
    assert tick_at(store, clock, tenant, DAY + 14 * H) == (
        ["auto-20260105T140000Z"],
        ["auto-20260105T020000Z"],
    )

    assert names(store, tenant) == ["manual", "auto-20260105T080000Z", "auto-20260105T140000Z"]


def test_retention_by_age_expires_scheduled_snapshots_older_than_it(store, clock, tenant):
    clock.fixed = DAY + H
    store.create_snapshot(tenant, "manual")
    store.set_schedule(
        tenant, first_at_us=FIRST, interval_us=EVERY, retain_age_us=parse_duration("12h")
    )
    for hour in (2, 8, 14):
        tick_at(store, clock, tenant, DAY + hour * H)
    assert store.snapshot(tenant, "auto-20260105T080000Z").expires_at == DAY + 20 * H

    # At 20:00 the 08:00 snapshot is exactly 12 h old (kept); 02:00 is older (expired).
    assert tick_at(store, clock, tenant, DAY + 20 * H) == (
        ["auto-20260105T200000Z"],
        ["auto-20260105T020000Z"],
    )
    assert tick_at(store, clock, tenant, DAY + 20 * H + 1) == ([], ["auto-20260105T080000Z"])
    assert names(store, tenant) == ["manual", "auto-20260105T140000Z", "auto-20260105T200000Z"]


def test_manual_snapshots_never_expire(store, clock, tenant):
    clock.fixed = DAY + H
    store.create_snapshot(tenant, "manual_old")
    store.set_schedule(
        tenant, first_at_us=FIRST, interval_us=EVERY, retain_count=1, retain_age_us=H
    )
    hours = (2, 8, 14, 20, 26, 32, 98)
    for hour in hours:
        tick_at(store, clock, tenant, DAY + hour * H)
        store.create_snapshot(tenant, f"manual_{hour}")

    manual = [s.name for s in store.snapshots(tenant) if s.kind == "manual"]
    assert manual == ["manual_old"] + [f"manual_{h}" for h in hours]
    assert scheduled(store, tenant) == ["auto-20260109T020000Z"]


def test_tick_without_a_tenant_applies_every_active_tenant_schedule(store, clock, tenant):
    other = f"t-{uuid.uuid4().hex[:10]}"
    store.create_tenant(other)
    clock.fixed = DAY + H
    store.set_schedule(tenant, first_at_us=FIRST, interval_us=EVERY)
    clock.fixed = DAY + 2 * H

    results = {r.tenant: r for r in store.tick()}

    assert [s.name for s in results[tenant].created] == ["auto-20260105T020000Z"]
    assert results[other].created == () and results[other].expired == ()
    assert store.snapshots(other) == []


def test_tick_before_the_first_due_time_after_set_schedule_creates_nothing(store, clock, tenant):
    """A schedule set at 01:00 for "02:00, every 6 h" first fires at 02:00.

    Due times before the schedule existed (20:00 the day before) are not its
    periods: the tick must not invent a snapshot named for one.
    """
    clock.fixed = DAY + H
    store.set_schedule(tenant, first_at_us=FIRST, interval_us=EVERY)

    assert tick_at(store, clock, tenant, DAY + H + M) == ([], [])
    assert store.snapshots(tenant) == []
    assert tick_at(store, clock, tenant, DAY + 2 * H) == (["auto-20260105T020000Z"], [])


def test_an_expired_scheduled_snapshot_is_not_created_again_by_a_later_tick(store, clock, tenant):
    clock.fixed = DAY + H
    store.set_schedule(tenant, first_at_us=FIRST, interval_us=EVERY, retain_age_us=H)
    assert tick_at(store, clock, tenant, DAY + 2 * H) == (["auto-20260105T020000Z"], [])
    assert tick_at(store, clock, tenant, DAY + 3 * H + M) == ([], ["auto-20260105T020000Z"])

    # Same period, later tick: the 02:00 snapshot had its life; nothing to do.
    assert tick_at(store, clock, tenant, DAY + 3 * H + 2 * M) == ([], [])
    assert store.snapshots(tenant) == []


# --- invalid schedules change nothing --------------------------------------------


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        (parse_duration, "6x", "invalid duration '6x'"),
        (parse_duration, "0h", "invalid duration '0h': must be longer than zero"),
        (parse_duration, "", "invalid duration ''"),
        (parse_duration, "h6", "invalid duration 'h6'"),
        (parse_duration, "-6h", "invalid duration '-6h'"),
        (parse_time_of_day, "25:00", "invalid time of day '25:00': out of range"),
        (parse_time_of_day, "02:60", "invalid time of day '02:60': out of range"),
        (parse_time_of_day, "2am", "invalid time of day '2am'"),
        (parse_time_of_day, "", "invalid time of day ''"),
    ],
)
def test_invalid_schedule_strings_are_refused_and_change_nothing(
    store, clock, tenant, parse: Callable[[str], int], text: str, message: str
):
    current = store.set_schedule(tenant, first_at_us=FIRST, interval_us=EVERY, retain_count=4)

    with pytest.raises(InvalidArgument, match=message):
        store.set_schedule(
            tenant,
            first_at_us=parse(text) if parse is parse_time_of_day else FIRST,
            interval_us=parse(text) if parse is parse_duration else EVERY,
        )

    assert store.schedule(tenant) == current


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"interval_us": 0}, InvalidArgument, "interval must be longer than zero"),
        ({"interval_us": -EVERY}, InvalidArgument, "interval must be longer than zero"),
        ({"first_at_us": 24 * H}, InvalidArgument, "must be a time of day"),
        ({"first_at_us": -1}, InvalidArgument, "must be a time of day"),
        ({"retain_count": 0}, InvalidArgument, "retain count must be at least 1"),
        ({"retain_age_us": 0}, InvalidArgument, "retain age"),
        ({"retain_age_us": -H}, InvalidArgument, "retain age"),
        ({"name_prefix": "9nightly"}, InvalidName, "invalid snapshot name"),
        ({"name_prefix": "night ly"}, InvalidName, "invalid snapshot name"),
        ({"name_prefix": "n" * 65}, InvalidArgument, "has 65 characters; use at most 64"),
    ],
    ids=[
        "zero-interval",
        "negative-interval",
        "first-at-24h",
        "first-at-negative",
        "retain-count-0",
        "retain-age-0",
        "retain-age-negative",
        "prefix-digit-first",
        "prefix-space",
        "prefix-longer-than-the-catalog-column",
    ],
)
def test_invalid_schedule_values_are_refused_and_change_nothing(
    store, clock, tenant, kwargs: dict, error: type[Exception], message: str
):
    current = store.set_schedule(tenant, first_at_us=FIRST, interval_us=EVERY, retain_count=4)
    args = {"first_at_us": FIRST, "interval_us": EVERY} | kwargs

    with pytest.raises(error, match=message):
        store.set_schedule(tenant, **args)

    assert store.schedule(tenant) == current
