"""Snapshots and protected times: what a snapshot pins, which times are readable.

Every test runs on a real catalog (SQLite file) and a real S3 endpoint (moto
server), with the catalog's clock frozen by the ``clock`` fixture so commit
timestamps and the PITR window are exact.
"""

from __future__ import annotations

import uuid

import pytest

from tenants.errors import AlreadyExists, InvalidArgument, InvalidName, NotFound, UnprotectedTime
from tenants.store import TableStore
from tenants.times import US, format_ts, parse_instant
from tests.helpers.item_rows import SCHEMA, keys, pairs, rows

H = US["h"]
M = US["m"]
T0 = parse_instant("2026-01-05T00:30:00Z")


def read(store: TableStore, tenant: str, as_of: int | str | None = None) -> list[tuple[int, str]]:
    return pairs(store.read(tenant, "db.items", as_of))


def names(store: TableStore, tenant: str) -> list[str]:
    return [s.name for s in store.snapshots(tenant)]


def catalog_count(store: TableStore, table: str) -> int:
    with store.catalog.snapshot() as tx:
        return int(tx.scalar(f"SELECT COUNT(*) FROM {table}"))


@pytest.fixture
def tenant(store: TableStore, clock) -> str:
    """A fresh tenant with one table ``db.items``, created at T0 (clock frozen)."""
    clock.fixed = T0
    name = f"t-{uuid.uuid4().hex[:10]}"
    store.create_tenant(name)
    store.create_table(name, "db.items", SCHEMA)
    return name


# --- creating, listing, dropping -------------------------------------------------


def test_snapshot_at_now_follows_every_commit_and_keeps_reading_that_state(store, clock, tenant):
    clock.fixed = T0 + M
    first = store.write(tenant, "db.items", upserts=rows((1, "a"), (2, "b")))
    clock.fixed = T0 + 2 * M
    snap = store.create_snapshot(tenant, "s1")
    assert snap.ts > first.ts
    assert snap.kind == "manual" and snap.expires_at is None

    clock.fixed = T0 + H
    store.write(tenant, "db.items", upserts=rows((1, "a2"), (3, "c")), deletes=keys(2))
    clock.fixed = T0 + 2 * H
    store.compact(tenant, full=True)

    assert read(store, tenant, "s1") == [(1, "a"), (2, "b")]
    assert read(store, tenant, snap.ts) == [(1, "a"), (2, "b")]
    assert read(store, tenant) == [(1, "a2"), (3, "c")]


def test_snapshot_at_a_past_time_inside_the_pitr_window_reads_that_time(store, clock, tenant):
    store.set_pitr(tenant, 72 * H)
    clock.fixed = T0 + M
    first = store.write(tenant, "db.items", upserts=rows((1, "a")))
    clock.fixed = T0 + H
    store.write(tenant, "db.items", upserts=rows((1, "b")))
    clock.fixed = T0 + 3 * H

    by_ts = store.create_snapshot(tenant, "by_ts", at=first.ts)
    by_iso = store.create_snapshot(tenant, "by_iso", at=format_ts(first.ts + 10 * M))

    assert by_ts.ts == first.ts
    assert by_iso.ts == first.ts + 10 * M
    # The snapshots outlive the window that let them be created.
    store.set_pitr(tenant, None)
    assert read(store, tenant, "by_ts") == [(1, "a")]
    assert read(store, tenant, "by_iso") == [(1, "a")]
    assert read(store, tenant) == [(1, "b")]


def test_snapshots_list_by_ts_show_by_name_and_drop_by_name(store, clock, tenant):
    clock.fixed = T0 + H
    one = store.create_snapshot(tenant, "one")
    clock.fixed = T0 + 2 * H
    two = store.create_snapshot(tenant, "two")

    assert store.snapshots(tenant) == [one, two]
    assert store.snapshot(tenant, "two") == two
    assert store.drop_snapshot(tenant, "two") == two
    assert store.snapshots(tenant) == [one]
    with pytest.raises(NotFound, match="has no snapshot 'two'; newest: one"):
        store.snapshot(tenant, "two")


def test_drop_snapshots_older_than_drops_only_older_snapshots(store, clock, tenant):
    clock.fixed = T0 + H
    store.create_snapshot(tenant, "old")
    clock.fixed = T0 + 3 * H
    store.create_snapshot(tenant, "new")
    clock.fixed = T0 + 4 * H

    dropped = store.drop_snapshots(tenant, older_than_us=2 * H)  # cutoff T0 + 2h

    assert [s.name for s in dropped] == ["old"]
    assert names(store, tenant) == ["new"]


def test_drop_snapshots_by_kind_drops_only_that_kind(store, clock, tenant):
    day = parse_instant("2026-01-05T00:00:00Z")
    clock.fixed = day + H
    store.create_snapshot(tenant, "manual_one")
    store.set_schedule(tenant, first_at_us=2 * H, interval_us=6 * H)
    clock.fixed = day + 2 * H
    store.tick(tenant)
    clock.fixed = day + 8 * H
    store.tick(tenant)
    store.create_snapshot(tenant, "manual_two")
    assert names(store, tenant) == [
        "manual_one",
        "auto-20260105T020000Z",
        "auto-20260105T080000Z",
        "manual_two",
    ]

    old_scheduled = store.drop_snapshots(tenant, older_than_us=3 * H, kind="scheduled")
    assert [s.name for s in old_scheduled] == ["auto-20260105T020000Z"]
    scheduled = store.drop_snapshots(tenant, kind="scheduled")
    assert [s.name for s in scheduled] == ["auto-20260105T080000Z"]
    assert names(store, tenant) == ["manual_one", "manual_two"]


def test_creating_a_snapshot_writes_no_object_and_no_object_record(store, clock, tenant):
    clock.fixed = T0 + M
    store.write(tenant, "db.items", upserts=rows((1, "a"), (2, "b")))
    store.write(tenant, "db.items", deletes=keys(2))
    bucket_keys = sorted(o.key for o in store.objects.list("tenants/"))
    objects = catalog_count(store, "objects")
    members = catalog_count(store, "membership")
    assert len(bucket_keys) == objects == 2

    clock.fixed = T0 + H
    store.create_snapshot(tenant, "cheap")
    store.create_snapshot(tenant, "cheap_past", at=T0 + 30 * M)

    assert sorted(o.key for o in store.objects.list("tenants/")) == bucket_keys
    assert catalog_count(store, "objects") == objects
    assert catalog_count(store, "membership") == members
    assert catalog_count(store, "snapshots") == 2


# --- bad inputs change nothing -------------------------------------------------


def test_duplicate_snapshot_name_is_refused_and_changes_nothing(store, clock, tenant):
    clock.fixed = T0 + H
    store.create_snapshot(tenant, "s1")
    before, last_ts = store.snapshots(tenant), store.now()
    clock.fixed = T0 + 2 * H

    with pytest.raises(AlreadyExists, match="already has a snapshot named 's1'"):
        store.create_snapshot(tenant, "s1")

    assert store.snapshots(tenant) == before
    assert store.now() == last_ts


def test_unknown_snapshot_is_not_found_for_show_drop_and_read(store, clock, tenant):
    store.create_snapshot(tenant, "known")
    before = store.snapshots(tenant)

    with pytest.raises(NotFound, match="has no snapshot 'nope'; newest: known"):
        store.snapshot(tenant, "nope")
    with pytest.raises(NotFound, match="has no snapshot 'nope'"):
        store.drop_snapshot(tenant, "nope")
    with pytest.raises(NotFound, match="has no snapshot 'nope'"):
        store.read(tenant, "db.items", "nope")

    assert store.snapshots(tenant) == before


@pytest.mark.parametrize("bad", ["", "9lives", "-dash", "a b", "semi;colon", "x" * 129, "ü"])
def test_invalid_snapshot_name_is_refused_and_changes_nothing(store, clock, tenant, bad):
    last_ts = store.now()
    with pytest.raises(InvalidName, match="invalid snapshot name"):
        store.create_snapshot(tenant, bad)
    with pytest.raises(InvalidName, match="invalid snapshot name"):
        store.drop_snapshot(tenant, bad)
    assert store.snapshots(tenant) == []
    assert store.now() == last_ts


def test_snapshot_or_read_in_the_future_is_invalid_and_changes_nothing(store, clock, tenant):
    clock.fixed = T0 + H
    last_ts = store.now()

    with pytest.raises(InvalidArgument, match="is in the future") as raised:
        store.create_snapshot(tenant, "later", at=T0 + 2 * H)
    assert not isinstance(raised.value, UnprotectedTime)
    with pytest.raises(InvalidArgument, match="is in the future"):
        store.create_snapshot(tenant, "later", at=format_ts(T0 + 2 * H))
    with pytest.raises(InvalidArgument, match="is in the future"):
        store.read(tenant, "db.items", T0 + H + 1)

    assert store.snapshots(tenant) == []
    assert store.now() == last_ts


def test_snapshot_at_an_unprotected_time_names_the_recoverable_range_and_nearest_snapshots(
    store, clock, tenant
):
    clock.fixed = T0 + M
    store.write(tenant, "db.items", upserts=rows((1, "a")))
    clock.fixed = T0 + 10 * M
    before = store.create_snapshot(tenant, "before")
    clock.fixed = T0 + 20 * M
    store.write(tenant, "db.items", upserts=rows((1, "b")))
    clock.fixed = T0 + 30 * M
    after = store.create_snapshot(tenant, "after")
    snapshots, last_ts = store.snapshots(tenant), store.now()
    lost = T0 + 15 * M

    expected = (
        rf"time {lost} \({format_ts(lost)}\) is not protected for tenant '{tenant}': "
        rf"recoverable are no PITR window, any time from {format_ts(T0 + 20 * M)} \(the last "
        rf"change\) to now, and its snapshots; nearest snapshots: "
        rf"before \(ts {before.ts}, before\), after \(ts {after.ts}, after\)"
    )
    with pytest.raises(UnprotectedTime, match=expected):
        store.create_snapshot(tenant, "lost", at=lost)
    with pytest.raises(UnprotectedTime, match=expected):
        store.create_snapshot(tenant, "lost", at=format_ts(lost))
    with pytest.raises(UnprotectedTime, match=expected):
        store.read(tenant, "db.items", lost)

    assert store.snapshots(tenant) == snapshots
    assert store.now() == last_ts


def test_unprotected_time_error_names_the_pitr_window_when_one_is_set(store, clock, tenant):
    clock.fixed = T0 + M
    store.write(tenant, "db.items", upserts=rows((1, "a")))
    clock.fixed = T0 + 10 * M
    store.write(tenant, "db.items", upserts=rows((1, "b")))
    clock.fixed = T0 + H
    store.set_pitr(tenant, 72 * H)  # since T0 + 1h: does not reach back to T0 + 5m
    window = rf"the PITR window {format_ts(T0 + H)} \.\. {format_ts(T0 + H)}"

    with pytest.raises(
        UnprotectedTime, match=rf"recoverable are {window}.*nearest snapshots: none"
    ):
        store.create_snapshot(tenant, "lost", at=T0 + 5 * M)
    assert store.snapshots(tenant) == []


def test_drop_snapshots_without_a_filter_is_invalid_and_drops_nothing(store, clock, tenant):
    store.create_snapshot(tenant, "keep_me")
    before = store.snapshots(tenant)

    with pytest.raises(InvalidArgument, match="give a snapshot name, or a filter"):
        store.drop_snapshots(tenant)

    assert store.snapshots(tenant) == before


# --- protected times -------------------------------------------------------------


def test_read_at_an_unprotected_time_fails_and_so_does_ddl_as_of_it(store, clock, tenant):
    clock.fixed = T0 + M
    store.write(tenant, "db.items", upserts=rows((1, "a")))
    clock.fixed = T0 + H
    store.write(tenant, "db.items", upserts=rows((1, "b")))

    with pytest.raises(UnprotectedTime, match="is not protected"):
        store.read(tenant, "db.items", T0 + 30 * M)
    with pytest.raises(UnprotectedTime, match="is not protected"):
        store.read(tenant, "db.items", format_ts(T0 + 30 * M))
    with pytest.raises(UnprotectedTime, match="is not protected"):
        store.tables(tenant, T0 + 30 * M)
    with pytest.raises(UnprotectedTime, match="is not protected"):
        store.resolve_time(tenant, str(T0 + 30 * M))


def test_a_snapshot_reads_the_same_by_name_iso_instant_and_raw_ts(store, clock, tenant):
    clock.fixed = T0 + M + 123_457  # odd µs, so the ISO form carries them
    store.write(tenant, "db.items", upserts=rows((1, "a"), (2, "b")))
    snap = store.create_snapshot(tenant, "s1")
    clock.fixed = T0 + H
    store.write(tenant, "db.items", upserts=rows((2, "c")), deletes=keys(1))

    expected = [(1, "a"), (2, "b")]
    assert store.resolve_time(tenant, format_ts(snap.ts)) == snap.ts
    for as_of in ("s1", " s1 ", format_ts(snap.ts), str(snap.ts), snap.ts):
        assert read(store, tenant, as_of) == expected, as_of
    assert read(store, tenant) == [(2, "c")]


def test_any_time_from_the_last_change_up_to_now_reads_as_now(store, clock, tenant):
    clock.fixed = T0 + M
    store.write(tenant, "db.items", upserts=rows((1, "a")))
    clock.fixed = T0 + 10 * M
    last = store.write(tenant, "db.items", upserts=rows((1, "b"), (2, "c")))
    clock.fixed = T0 + 5 * H
    store.create_snapshot(tenant, "not_a_change")  # a commit, but no change of data
    clock.fixed = T0 + 6 * H
    now = read(store, tenant)

    for as_of in (last.ts, last.ts + 1, T0 + 3 * H, T0 + 6 * H, format_ts(T0 + 2 * H)):
        assert read(store, tenant, as_of) == now, as_of
    with pytest.raises(UnprotectedTime, match="is not protected"):
        store.read(tenant, "db.items", last.ts - 1)
    with pytest.raises(InvalidArgument, match="is in the future"):
        store.read(tenant, "db.items", T0 + 6 * H + 1)


def test_pitr_window_protects_times_inside_it_and_not_outside(store, clock, tenant):
    clock.fixed = T0 + M
    window = store.set_pitr(tenant, 72 * H)
    assert window is not None and window.window_us == 72 * H and window.since_ts == T0 + M
    assert store.pitr(tenant) == window
    clock.fixed = T0 + 2 * M
    store.write(tenant, "db.items", upserts=rows((1, "a")))
    clock.fixed = T0 + H
    store.write(tenant, "db.items", upserts=rows((1, "b")))
    clock.fixed = T0 + 50 * H
    store.write(tenant, "db.items", upserts=rows((1, "c")))

    clock.fixed = T0 + 60 * H
    assert store.protection(tenant).window == (T0 + M, T0 + 60 * H)
    assert read(store, tenant, T0 + 30 * M) == [(1, "a")]
    assert read(store, tenant, T0 + 2 * H) == [(1, "b")]

    clock.fixed = T0 + 74 * H  # window is now [T0 + 2h, T0 + 74h]
    assert store.protection(tenant).window == (T0 + 2 * H, T0 + 74 * H)
    assert store.protection(tenant).covers(T0 + 2 * H)
    assert not store.protection(tenant).covers(T0 + 2 * H - 1)
    assert read(store, tenant, T0 + 2 * H) == [(1, "b")]
    assert read(store, tenant, T0 + 49 * H) == [(1, "b")]
    with pytest.raises(UnprotectedTime, match="is not protected"):
        store.read(tenant, "db.items", T0 + 30 * M)


def test_pitr_window_never_reaches_before_it_was_set(store, clock, tenant):
    clock.fixed = T0 + M
    store.write(tenant, "db.items", upserts=rows((1, "a")))
    clock.fixed = T0 + 10 * M
    store.write(tenant, "db.items", upserts=rows((1, "b")))
    clock.fixed = T0 + H

    window = store.set_pitr(tenant, 72 * H)
    assert window is not None and window.since_ts == T0 + H
    assert store.protection(tenant).window == (T0 + H, T0 + H)
    with pytest.raises(UnprotectedTime, match="is not protected"):
        store.read(tenant, "db.items", T0 + 5 * M)

    # Growing the window later still does not reach before the first setting.
    clock.fixed = T0 + 2 * H
    grown = store.set_pitr(tenant, 96 * H)
    assert grown is not None and grown.since_ts == T0 + H
    assert store.protection(tenant).window == (T0 + H, T0 + 2 * H)
    with pytest.raises(UnprotectedTime, match="is not protected"):
        store.read(tenant, "db.items", T0 + 5 * M)


def test_turning_pitr_off_unprotects_its_times_but_not_snapshots(store, clock, tenant):
    store.set_pitr(tenant, 72 * H)
    clock.fixed = T0 + M
    store.write(tenant, "db.items", upserts=rows((1, "a")))
    clock.fixed = T0 + 10 * M
    store.create_snapshot(tenant, "kept")
    clock.fixed = T0 + H
    store.write(tenant, "db.items", upserts=rows((1, "b")))
    clock.fixed = T0 + 2 * H
    assert read(store, tenant, T0 + 5 * M) == [(1, "a")]

    assert store.set_pitr(tenant, None) is None

    assert store.pitr(tenant) is None
    assert store.protection(tenant).window is None
    with pytest.raises(UnprotectedTime, match="no PITR window"):
        store.read(tenant, "db.items", T0 + 5 * M)
    assert read(store, tenant, "kept") == [(1, "a")]


@pytest.mark.parametrize("window_us", [0, -H], ids=["zero", "negative"])
def test_pitr_window_must_be_longer_than_zero_and_a_bad_one_changes_nothing(
    store, clock, tenant, window_us: int
):
    current = store.set_pitr(tenant, 72 * H)
    clock.fixed = T0 + H

    with pytest.raises(InvalidArgument, match="PITR window"):
        store.set_pitr(tenant, window_us)

    assert store.pitr(tenant) == current
