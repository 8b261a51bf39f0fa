"""Version retention: what full compaction may drop, and what it must keep.

A version (pk, a) superseded at b survives a full compaction iff some
protected time p has a <= p < b; a tombstone survives while an older version
of its key survives. Partial compaction never drops anything.
"""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from tenants.schema import Column, TableSchema
from tenants.store import TableStore
from tenants.tenancy import TenantRecord
from tenants.timeline.protection import Protection
from tenants.timeline.retention import keep_masks
from tenants.times import US, parse_instant
from tests.helpers.item_rows import SCHEMA, keys, rows

H = US["h"]
M = US["m"]
T0 = parse_instant("2026-01-05T00:30:00Z")


def read(store: TableStore, tenant: str, as_of: int | str | None = None) -> list[dict]:
    return store.read(tenant, "db.items", as_of).to_pylist()


def stored(store: TableStore, tenant: str, kind: str) -> int:
    """Rows of ``kind`` ("data" or "tomb") in the tenant's live objects."""
    return sum(o.rows for _, o in store.objects_of(tenant) if o.kind == kind)


@pytest.fixture
def tenant(store: TableStore, clock) -> str:
    clock.fixed = T0
    name = f"t-{uuid.uuid4().hex[:10]}"
    store.create_tenant(name)
    store.create_table(name, "db.items", SCHEMA)
    return name


def at(clock, minutes: int) -> None:
    clock.fixed = T0 + minutes * M


# --- through the store -------------------------------------------------------------


def test_full_compaction_keeps_a_version_a_snapshot_needs_until_the_snapshot_is_dropped(
    store, clock, tenant
):
    at(clock, 1)
    store.write(tenant, "db.items", upserts=rows((1, "a"), (2, "b")))
    at(clock, 2)
    store.create_snapshot(tenant, "s1")
    at(clock, 3)
    store.write(tenant, "db.items", upserts=rows((1, "a2"), (2, "b2")))
    at(clock, 4)

    store.compact(tenant, full=True)
    assert stored(store, tenant, "data") == 4
    assert read(store, tenant, "s1") == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]

    store.drop_snapshot(tenant, "s1")
    store.compact(tenant, full=True)
    assert stored(store, tenant, "data") == 2
    assert read(store, tenant) == [{"id": 1, "v": "a2"}, {"id": 2, "v": "b2"}]


def test_full_compaction_keeps_versions_inside_the_pitr_window(store, clock, tenant):
    store.set_pitr(tenant, 2 * H)
    at(clock, 1)
    store.write(tenant, "db.items", upserts=rows((1, "a")))
    at(clock, 10)
    store.write(tenant, "db.items", upserts=rows((1, "b")))
    at(clock, 20)
    store.write(tenant, "db.items", upserts=rows((1, "c")))
    at(clock, 30)

    store.compact(tenant, full=True)
    assert stored(store, tenant, "data") == 3
    assert read(store, tenant, T0 + 5 * M) == [{"id": 1, "v": "a"}]

    # 2 h later the window is [T0 + 15m, T0 + 2h15m]: "a" (gone at 10m) is no longer needed,
    # "b" (alive over [10m, 20m)) still is.
    at(clock, 135)
    store.compact(tenant, full=True)
    assert stored(store, tenant, "data") == 2
    assert read(store, tenant, T0 + 15 * M) == [{"id": 1, "v": "b"}]


def test_full_compaction_drops_a_tombstone_when_nothing_older_of_its_key_remains(
    store, clock, tenant
):
    at(clock, 1)
    store.write(tenant, "db.items", upserts=rows((1, "a"), (2, "b")))
    at(clock, 2)
    store.write(tenant, "db.items", deletes=keys(1, 3))  # 3 never existed
    at(clock, 3)
    store.write(tenant, "db.items", upserts=rows((4, "d")))
    at(clock, 4)

    store.compact(tenant, full=True)

    assert (stored(store, tenant, "data"), stored(store, tenant, "tomb")) == (2, 0)
    assert read(store, tenant) == [{"id": 2, "v": "b"}, {"id": 4, "v": "d"}]


def test_full_compaction_keeps_a_tombstone_while_an_older_protected_version_remains(
    store, clock, tenant
):
    at(clock, 1)
    store.write(tenant, "db.items", upserts=rows((1, "a"), (2, "b")))
    at(clock, 2)
    store.create_snapshot(tenant, "s1")
    at(clock, 3)
    store.write(tenant, "db.items", deletes=keys(1))
    at(clock, 4)
    store.write(tenant, "db.items", upserts=rows((2, "b2")))
    at(clock, 5)

    store.compact(tenant, full=True)

    assert (stored(store, tenant, "data"), stored(store, tenant, "tomb")) == (3, 1)
    assert read(store, tenant) == [{"id": 2, "v": "b2"}]
    assert read(store, tenant, "s1") == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]

    store.drop_snapshot(tenant, "s1")
    store.compact(tenant, full=True)
    assert (stored(store, tenant, "data"), stored(store, tenant, "tomb")) == (1, 0)
    assert read(store, tenant) == [{"id": 2, "v": "b2"}]


def test_partial_compaction_never_drops_a_row(store, clock, tenant):
    for minute, (upserts, deletes) in enumerate(
        [
            (rows((1, "a"), (2, "b"), (3, "c")), None),
            (rows((1, "a2")), keys(1, 2)),
            (None, keys(3)),
            (rows((2, "b3"), (4, "d")), None),
            (rows((4, "d2")), None),
        ],
        start=1,
    ):
        at(clock, minute)
        store.write(tenant, "db.items", upserts=upserts, deletes=deletes)
    at(clock, 10)
    before = (stored(store, tenant, "data"), stored(store, tenant, "tomb"))
    objects_before = len(store.objects_of(tenant))

    [result] = store.compact(tenant, full=False)

    assert result.inputs == objects_before and result.outputs == 2
    assert len(store.objects_of(tenant)) == 2
    assert (stored(store, tenant, "data"), stored(store, tenant, "tomb")) == before == (7, 3)
    assert read(store, tenant) == [{"id": 1, "v": "a2"}, {"id": 2, "v": "b3"}, {"id": 4, "v": "d2"}]


@pytest.mark.parametrize(
    ("protect", "kept"),
    [("none", False), ("at_a", True), ("between", True), ("at_b", False)],
)
def test_version_superseded_by_a_tombstone_at_b_is_kept_iff_a_protected_time_is_in_a_b(
    store, clock, tenant, protect: str, kept: bool
):
    at(clock, 1)
    a = store.write(tenant, "db.items", upserts=rows((1, "a"))).ts
    if protect == "at_a":
        store.create_snapshot(tenant, "p", at=a)
    at(clock, 2)
    if protect == "between":
        store.create_snapshot(tenant, "p")
    at(clock, 3)
    b = store.write(tenant, "db.items", deletes=keys(1)).ts
    if protect == "at_b":
        store.create_snapshot(tenant, "p", at=b)
    at(clock, 4)
    store.write(tenant, "db.items", upserts=rows((2, "x")))  # moves "now" past b
    at(clock, 5)

    store.compact(tenant, full=True)

    assert stored(store, tenant, "data") == (2 if kept else 1)
    assert stored(store, tenant, "tomb") == (1 if kept else 0)
    if protect != "none":
        assert read(store, tenant, "p") == ([{"id": 1, "v": "a"}] if kept else [])
    assert read(store, tenant) == [{"id": 2, "v": "x"}]


def test_full_compaction_never_merges_schemas_and_old_times_keep_dropped_columns(
    store, clock, tenant
):
    at(clock, 1)
    store.write(tenant, "db.items", upserts=rows((1, "a"), (2, "b")))
    at(clock, 2)
    store.write(tenant, "db.items", upserts=rows((3, "c")))
    at(clock, 3)
    store.create_snapshot(tenant, "wide")
    at(clock, 4)
    store.alter_table(tenant, "db.items", drop=["v"], add=[Column("n", "int64")])
    at(clock, 5)
    store.write(tenant, "db.items", upserts=pa.table({"id": [2, 4], "n": [20, 40]}))
    at(clock, 6)
    store.write(tenant, "db.items", upserts=pa.table({"id": [5], "n": [50]}))
    at(clock, 7)
    old_fp = SCHEMA.fingerprint
    new_fp = store.tables(tenant)[0].schema.fingerprint

    store.compact(tenant, full=True)

    objects = [o for _, o in store.objects_of(tenant)]
    assert sorted((o.kind, o.fingerprint, o.rows) for o in objects) == sorted(
        [("data", old_fp, 3), ("data", new_fp, 3)]
    )
    assert read(store, tenant, "wide") == [
        {"id": 1, "v": "a"},
        {"id": 2, "v": "b"},
        {"id": 3, "v": "c"},
    ]
    assert read(store, tenant) == [
        {"id": 1, "n": None},
        {"id": 2, "n": 20},
        {"id": 3, "n": None},
        {"id": 4, "n": 40},
        {"id": 5, "n": 50},
    ]


# --- keep_masks on hand-built events ---------------------------------------------------

KEY = TableSchema.of([("id", "int64"), ("v", "string")], ["id"])
TENANT = TenantRecord("0" * 32, "acme", "active", 1, None, 1)


def data(*events: tuple[int, int]) -> tuple[str, pa.Table]:
    """A data object of (id, ts) versions."""
    return "data", pa.table(
        {
            "id": pa.array([e[0] for e in events], pa.int64()),
            "v": pa.array([f"{e[0]}@{e[1]}" for e in events], pa.string()),
            "__ts": pa.array([e[1] for e in events], pa.int64()),
        }
    )


def tomb(*events: tuple[int, int]) -> tuple[str, pa.Table]:
    """A tombstone object of (id, ts) deletes."""
    return "tomb", pa.table(
        {
            "id": pa.array([e[0] for e in events], pa.int64()),
            "__ts": pa.array([e[1] for e in events], pa.int64()),
        }
    )


def guard(
    *points: int, window: tuple[int, int] | None = None, now: int = 1000, current_from: int = 900
) -> Protection:
    """Protected: the snapshot ``points``, the ``window`` and [current_from, now]."""
    snapshots = tuple((p, f"s{p}") for p in sorted(points))
    return Protection(TENANT, now, snapshots, window, current_from)


def masks(objects, protection: Protection) -> list[list[bool]]:
    return [m.tolist() for m in keep_masks(objects, KEY, protection)]


@pytest.mark.parametrize(
    ("point", "kept"),
    [(9, False), (10, True), (15, True), (19, True), (20, False), (25, False)],
)
def test_keep_masks_keep_a_version_superseded_by_a_tombstone_iff_a_snapshot_is_in_a_b(
    point: int, kept: bool
):
    # Version at a=10, tombstone at b=20; "now" starts after both.
    objects = [data((1, 10)), tomb((1, 20))]
    assert masks(objects, guard(point)) == [[kept], [kept]]


@pytest.mark.parametrize(
    ("window", "kept"),
    [((0, 9), False), ((0, 10), True), ((12, 18), True), ((19, 30), True), ((20, 30), False)],
)
def test_keep_masks_keep_a_version_iff_the_pitr_window_meets_a_b(
    window: tuple[int, int], kept: bool
):
    objects = [data((1, 10)), tomb((1, 20))]
    assert masks(objects, guard(window=window)) == [[kept], [kept]]


@pytest.mark.parametrize(("current_from", "kept"), [(19, True), (20, False)])
def test_keep_masks_keep_a_version_iff_now_reaches_back_into_a_b(current_from: int, kept: bool):
    objects = [data((1, 10)), tomb((1, 20))]
    assert masks(objects, guard(current_from=current_from)) == [[kept], [kept]]


def test_keep_masks_an_update_at_the_tombstone_ts_supersedes_the_older_version_at_that_ts():
    # Version at 10, then an update at 20 (tombstone and version both at 20).
    objects = [data((1, 10), (1, 20)), tomb((1, 20))]
    assert masks(objects, guard(20)) == [[False, True], [False]]
    assert masks(objects, guard(19)) == [[True, True], [True]]
    assert masks(objects, guard(10)) == [[True, True], [True]]


def test_keep_masks_superseded_by_a_newer_version_follows_the_same_rule():
    objects = [data((1, 10)), data((1, 20), (2, 5)), data((1, 30))]
    assert masks(objects, guard(10)) == [[True], [False, True], [True]]
    assert masks(objects, guard(20)) == [[False], [True, True], [True]]
    assert masks(objects, guard(30)) == [[False], [False, True], [True]]
    assert masks(objects, guard()) == [[False], [False, True], [True]]


def test_keep_masks_drop_a_tombstone_with_nothing_older_of_its_key_left():
    # Key 1: version at 10 deleted at 20, recreated at 30, deleted at 40.
    # Key 2: a delete of a key that never existed. Key 3: a version never superseded.
    objects = [data((1, 10), (1, 30), (3, 35)), tomb((1, 20), (1, 40), (2, 25))]
    assert masks(objects, guard()) == [[False, False, True], [False, False, False]]
    # A snapshot at 30 keeps the recreated version and so the tombstones after
    # older kept versions; the version at 10 and the tombstone hiding only it go.
    assert masks(objects, guard(30)) == [[False, True, True], [False, True, False]]
    # A snapshot at 10 keeps the first version, so both later tombstones stay.
    assert masks(objects, guard(10)) == [[True, False, True], [True, True, False]]


def test_keep_masks_of_no_objects_are_no_masks():
    assert keep_masks([], KEY, guard()) == []
