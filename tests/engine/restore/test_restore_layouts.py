"""Physical restore across object layouts: what is reused, what is rewritten, what is read.

Every test builds a real history (moto S3 + SQLite, catalog clock frozen so
timestamps are exact), restores, and checks three things: the plan's
classification (reuse / rewrite / skip counts), the restored tenant's reads at
now against the source read at S and against rows written out by hand, and
what the restore did to the bucket and the catalog.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from engine.pipeline import RestorePlan, RewriteResult, classify
from engine.restore.job import restore_tenant
from engine.restore.plan import plan_restore
from tenants.errors import TenantDropped
from tenants.objects.io import read_object
from tenants.objects.reader import object_row_hash
from tenants.schema import TS, Column, TableSchema
from tenants.store import TableStore
from tenants.times import parse_instant
from tests.helpers.restores import (
    SCHEMA,
    Minutes,
    bucket_keys,
    catalog_rows,
    ddl,
    keys,
    pairs,
    reads,
    restored_signature,
    rows,
    source_state,
    tenant_prefix,
    unique,
)


def counts(plan: RestorePlan) -> dict[str, int]:
    return {action: n for action, (n, _) in plan.totals().items()}


def items(
    store: TableStore, tenant: str, as_of: int | str | None = None, table: str = "items"
) -> list[tuple[int, str]]:
    return pairs(store.read(tenant, f"db.{table}", as_of))


def assert_restored_equals_source_at(
    store: TableStore, restored: str, source_ref: str, at: int
) -> None:
    """The restored tenant at now reads (and is shaped) as the source at S."""
    assert ddl(store, restored) == ddl(store, source_ref, at)
    assert reads(store, restored) == reads(store, source_ref, at)


@pytest.fixture
def at(clock: Any) -> Minutes:
    return Minutes(clock)


@pytest.fixture
def acme(store: TableStore, at: Minutes) -> str:
    """A tenant with tables db.items and db.users, created at T0."""
    at(0)
    name = unique("acme")
    store.create_tenant(name)
    store.create_table(name, "db.items", SCHEMA)
    store.create_table(name, "db.users", SCHEMA)
    return name


# --- layouts ---------------------------------------------------------------------------


def test_restore_without_straddling_objects_is_metadata_only(store, at, acme):
    """Objects wholly before S are reused, wholly after skipped; nothing is written."""
    at(1)
    store.write(acme, "db.items", upserts=rows((1, "a"), (2, "b")))
    store.write(acme, "db.users", upserts=rows((7, "u")))
    at(2)
    store.write(acme, "db.items", upserts=rows((2, "b2")), deletes=keys(1, 2))
    at(3)
    mon = store.create_snapshot(acme, "mon")
    at(4)
    store.write(acme, "db.items", upserts=rows((3, "c")), deletes=keys(2))
    store.write(acme, "db.users", deletes=keys(7))
    old = store.tenant(acme)
    keys_before = bucket_keys(store)

    at(5)
    outcome = restore_tenant(store, acme, "mon", executor="local")

    assert counts(outcome.plan) == {"reuse": 4, "rewrite": 0, "skip": 3}
    assert outcome.plan.tasks == ()
    assert outcome.rewritten == 0 and outcome.bytes_written == 0
    assert bucket_keys(store, tenant_prefix(outcome.tenant.id)) == {}
    assert bucket_keys(store) == keys_before
    assert outcome.objects_verified == 4
    assert_restored_equals_source_at(store, acme, old.ref, mon.ts)
    assert items(store, acme) == [(2, "b2")]
    assert items(store, acme, table="users") == [(7, "u")]
    # The restored tenant references exactly the source's objects at or before S.
    reused = {o.id for _, o in store.objects_of(acme)}
    assert reused == {o.id for _, o in store.objects_of(old.ref) if o.max_ts <= mon.ts}


def test_restore_to_now_reuses_every_object(store, at, acme):
    at(1)
    store.write(acme, "db.items", upserts=rows((1, "a"), (2, "b")))
    at(2)
    store.write(acme, "db.items", upserts=rows((2, "b2")), deletes=keys(1, 2))
    store.compact(acme)
    now = store.now()
    keys_before = bucket_keys(store)

    at(3)
    outcome = restore_tenant(store, acme, now, to=unique("copy"), executor="local")

    assert counts(outcome.plan) == {"reuse": 2, "rewrite": 0, "skip": 0}
    assert outcome.bytes_written == 0 and outcome.plan.tasks == ()
    assert bucket_keys(store) == keys_before
    assert reads(store, outcome.tenant.name) == reads(store, acme)
    assert items(store, outcome.tenant.name) == [(2, "b2")]


def test_every_object_straddling_s_is_rewritten_with_exactly_its_rows_at_s(store, at, acme):
    at(1)
    store.write(acme, "db.items", upserts=rows((1, "a"), (2, "b"), (3, "c")))
    at(2)
    store.write(acme, "db.items", upserts=rows((2, "b2")), deletes=keys(2, 3))
    at(3)
    mon = store.create_snapshot(acme, "mon")
    at(4)
    store.write(acme, "db.items", upserts=rows((3, "c2"), (4, "d")), deletes=keys(1, 3))
    store.compact(acme)
    [data, tomb] = sorted((o for _, o in store.objects_of(acme)), key=lambda o: o.kind)
    assert data.min_ts < mon.ts < data.max_ts and tomb.min_ts < mon.ts < tomb.max_ts
    old = store.tenant(acme)

    at(5)
    outcome = restore_tenant(store, acme, "mon", executor="local", verify="full")

    assert counts(outcome.plan) == {"reuse": 0, "rewrite": 2, "skip": 0}
    assert {t.input.id for t in outcome.plan.tasks} == {data.id, tomb.id}
    assert outcome.rewritten == 2 and outcome.bytes_written > 0
    assert_restored_equals_source_at(store, acme, old.ref, mon.ts)
    assert items(store, acme) == [(1, "a"), (2, "b2")]
    # Rewritten objects live under the new tenant, keep __ts exactly as written
    # (the commit ts, not a column of their own), and hold only rows at or before S.
    installed = {o.kind: o for _, o in store.objects_of(acme)}
    assert set(bucket_keys(store, tenant_prefix(outcome.tenant.id))) == {
        o.key for o in installed.values()
    }
    for kind, source in (("data", data), ("tomb", tomb)):
        before = read_object(store.objects, source)
        after = read_object(store.objects, installed[kind])
        expected = sorted(
            (r for r in before.to_pylist() if r[TS] <= mon.ts),
            key=lambda r: (r["id"], r[TS]),
        )
        assert after.to_pylist() == expected
        assert after.schema.field(TS).type == before.schema.field(TS).type
        assert installed[kind].max_ts <= mon.ts and installed[kind].sorted
        assert classify(installed[kind], mon.ts) == "reuse"


def test_straddling_tombstones_are_rewritten_while_data_before_s_is_reused(store, at, acme):
    """A tombstone before S hides a version in a reused object: losing it resurrects rows."""
    at(1)
    store.write(acme, "db.items", upserts=rows((1, "a"), (2, "b"), (3, "c")))
    at(2)
    store.write(acme, "db.items", upserts=rows((4, "d")))
    at(3)
    store.write(acme, "db.items", deletes=keys(1))
    at(4)
    mon = store.create_snapshot(acme, "mon")
    at(5)
    store.write(acme, "db.items", deletes=keys(2))
    store.compact(acme)
    at(6)
    store.write(acme, "db.items", upserts=rows((5, "e")))
    old = store.tenant(acme)
    by_kind: dict[str, list[str]] = {}
    for _, o in store.objects_of(acme):
        by_kind.setdefault(o.kind, []).append(classify(o, mon.ts))
    assert by_kind == {"data": ["reuse", "skip"], "tomb": ["rewrite"]}

    at(7)
    outcome = restore_tenant(store, acme, "mon", executor="local")

    assert counts(outcome.plan) == {"reuse": 1, "rewrite": 1, "skip": 1}
    assert [t.input.kind for t in outcome.plan.tasks] == ["tomb"]
    assert_restored_equals_source_at(store, acme, old.ref, mon.ts)
    assert items(store, acme) == [(2, "b"), (3, "c"), (4, "d")]


def test_tables_created_after_s_are_absent_and_tables_dropped_after_s_are_present(store, at, acme):
    at(1)
    store.write(acme, "db.items", upserts=rows((1, "a")))
    store.write(acme, "db.users", upserts=rows((2, "u")))
    at(2)
    mon = store.create_snapshot(acme, "mon")
    at(3)
    store.create_table(acme, "db.later", SCHEMA)
    store.write(acme, "db.later", upserts=rows((3, "x")))
    store.drop_table(acme, "db.users")
    old = store.tenant(acme)
    assert sorted(ddl(store, acme)) == ["db.items", "db.later"]

    at(4)
    outcome = restore_tenant(store, acme, "mon", executor="local", verify="full")

    assert sorted(ddl(store, acme)) == ["db.items", "db.users"]
    assert_restored_equals_source_at(store, acme, old.ref, mon.ts)
    assert items(store, acme, table="users") == [(2, "u")]
    assert outcome.tables_compared == 2
    assert {t.name for t in outcome.plan.tables} == {"items", "users"}


def test_table_dropped_before_s_is_hidden_now_but_readable_at_carried_snapshots(store, at, acme):
    at(1)
    store.write(acme, "db.users", upserts=rows((1, "u")))
    at(2)
    store.create_snapshot(acme, "early")
    at(3)
    store.drop_table(acme, "db.users")
    store.write(acme, "db.items", upserts=rows((1, "a")))
    at(4)
    mon = store.create_snapshot(acme, "mon")
    old = store.tenant(acme)

    at(5)
    restore_tenant(store, acme, "mon", executor="local", verify="full")

    assert sorted(ddl(store, acme)) == ["db.items"]
    assert_restored_equals_source_at(store, acme, old.ref, mon.ts)
    assert items(store, acme, "early", table="users") == [(1, "u")]
    assert reads(store, acme, "early") == reads(store, old.ref, "early")


def test_restore_to_an_instant_inside_the_pitr_window_reads_as_that_instant(store, at, acme):
    store.set_pitr(acme, 24 * 60 * 60_000_000)
    at(1)
    store.write(acme, "db.items", upserts=rows((1, "a"), (2, "b")))
    at(2)
    store.write(acme, "db.items", upserts=rows((2, "b2")), deletes=keys(1))
    at(3)
    store.write(acme, "db.items", upserts=rows((3, "c")))
    store.compact(acme)
    point = "2026-01-05T00:02:30Z"  # between the second and third commits
    s = parse_instant(point)

    outcome = restore_tenant(store, acme, point, to=unique("pitr"), executor="local")

    assert outcome.plan.at_ts == s
    # The merged data object straddles the instant; the lone tombstone object precedes it.
    assert counts(outcome.plan) == {"reuse": 1, "rewrite": 1, "skip": 0}
    assert items(store, outcome.tenant.name) == [(2, "b2")]
    assert_restored_equals_source_at(store, outcome.tenant.name, acme, s)
    assert store.pitr(outcome.tenant.name).window_us == 24 * 60 * 60_000_000


def test_restored_tenant_has_the_schema_as_of_s(store, at, acme):
    wide = TableSchema.of([("id", "int64"), ("v", "string"), ("w", "int32")], ["id"])
    store.create_table(acme, "db.wide", wide)
    at(1)
    store.write(
        acme, "db.wide", upserts=rows((1, "a"), (2, "b")).append_column("w", _int32([10, 20]))
    )
    at(2)
    mon = store.create_snapshot(acme, "mon")
    at(3)
    store.alter_table(acme, "db.wide", add=[Column("extra", "string")], drop=["w"])
    store.write(
        acme,
        "db.wide",
        upserts=rows((2, "b2"), (3, "c")).append_column("extra", _str(["x", "y"])),
    )
    store.compact(acme)
    old = store.tenant(acme)

    at(4)
    outcome = restore_tenant(store, acme, "mon", executor="local", verify="full")

    [table] = [t for t in store.tables(acme) if t.name == "wide"]
    assert table.schema == wide
    assert counts(outcome.plan)["skip"] == 1  # the object written under the new schema
    assert_restored_equals_source_at(store, acme, old.ref, mon.ts)
    assert store.read(acme, "db.wide").to_pylist() == [
        {"id": 1, "v": "a", "w": 10},
        {"id": 2, "v": "b", "w": 20},
    ]
    # Writes after the restore follow the schema as of S.
    at(5)
    store.write(acme, "db.wide", upserts=rows((4, "d")).append_column("w", _int32([40])))
    assert [r["id"] for r in store.read(acme, "db.wide").to_pylist()] == [1, 2, 4]


def _int32(values: list[int]) -> pa.Array:
    return pa.array(values, pa.int32())


def _str(values: list[str]) -> pa.Array:
    return pa.array(values, pa.string())


# --- in place, lineage, snapshots ------------------------------------------------------------


def test_in_place_restore_retires_the_old_tenant_and_hands_the_name_to_the_new_one(store, at, acme):
    at(1)
    store.write(acme, "db.items", upserts=rows((1, "a")))
    at(2)
    store.create_snapshot(acme, "mon")
    at(3)
    store.write(acme, "db.items", upserts=rows((2, "b")))
    old = store.tenant(acme)

    at(4)
    outcome = restore_tenant(store, acme, "mon", executor="local")

    new = store.tenant(acme)
    assert new.id == outcome.tenant.id != old.id
    assert (new.source_tenant_id, new.source_ts, new.restore_job_id) == (
        old.id,
        outcome.plan.at_ts,
        outcome.job_id,
    )
    retired = store.tenant(old.ref)
    assert retired.state == "dropped"
    assert retired.dropped_ts == new.created_ts
    assert retired.retain_until is not None and retired.retain_until > retired.dropped_ts
    active = [t.id for t in store.tenants()]
    assert new.id in active and old.id not in active
    # The retired tenant still reads as it was; it no longer takes writes.
    assert items(store, old.ref) == [(1, "a"), (2, "b")]
    with pytest.raises(TenantDropped, match=old.id):
        store.write(old.ref, "db.items", upserts=rows((9, "z")))
    assert items(store, old.ref) == [(1, "a"), (2, "b")]
    # The restored tenant takes writes, and they do not leak into the retired one.
    at(5)
    store.write(acme, "db.items", upserts=rows((3, "c")), deletes=keys(1))
    assert items(store, acme) == [(3, "c")]
    assert items(store, old.ref) == [(1, "a"), (2, "b")]


def test_snapshots_up_to_s_are_carried_and_later_ones_stay_restorable_through_lineage(
    store, at, acme
):
    at(1)
    store.write(acme, "db.items", upserts=rows((1, "a")))
    at(2)
    early = store.create_snapshot(acme, "early")
    at(3)
    store.write(acme, "db.items", upserts=rows((2, "b")))
    at(4)
    mon = store.create_snapshot(acme, "mon")
    at(5)
    store.write(acme, "db.items", upserts=rows((3, "c")), deletes=keys(1))
    at(6)
    wed = store.create_snapshot(acme, "wed")
    at(7)
    store.write(acme, "db.items", upserts=rows((4, "d")))
    store.compact(acme)
    first = store.tenant(acme)

    at(8)
    restore_tenant(store, acme, "mon", executor="local")

    assert [(s.name, s.ts) for s in store.snapshots(acme)] == [
        ("early", early.ts),
        ("mon", mon.ts),
    ]
    assert items(store, acme, "early") == [(1, "a")]
    assert items(store, acme, "mon") == [(1, "a"), (2, "b")]
    assert items(store, acme) == [(1, "a"), (2, "b")]
    # "wed" stayed with the retired tenant and is still readable by name.
    assert items(store, acme, "wed") == [(2, "b"), (3, "c")]

    at(9)
    outcome = restore_tenant(store, acme, "wed", executor="local", verify="full")

    assert outcome.plan.source.id == first.id
    assert items(store, acme) == [(2, "b"), (3, "c")]
    assert_restored_equals_source_at(store, acme, first.ref, wed.ts)
    assert [s.name for s in store.snapshots(acme)] == ["early", "mon", "wed"]
    # Restoring to an earlier snapshot is never a one-way door: back to "mon" again.
    at(10)
    restore_tenant(store, acme, "mon", executor="local")
    assert items(store, acme) == [(1, "a"), (2, "b")]


def test_snapshot_taken_between_two_restores_stays_restorable_by_name(store, at, acme):
    """After restore-to-mon, work and snapshot "thu", then restore-to-wed: "thu" is not lost.

    "thu" lives in the tenant the second restore retired; DESIGN.md says a
    restore is never a one-way door, so it must stay readable and restorable by name.
    """
    at(1)
    store.write(acme, "db.items", upserts=rows((1, "a")))
    at(2)
    store.create_snapshot(acme, "mon")
    at(3)
    store.write(acme, "db.items", upserts=rows((2, "b")))
    at(4)
    store.create_snapshot(acme, "wed")
    at(5)
    restore_tenant(store, acme, "mon", executor="local")
    at(6)
    store.write(acme, "db.items", upserts=rows((5, "e")))
    at(7)
    thu = store.create_snapshot(acme, "thu")
    second = store.tenant(acme)
    at(8)
    restore_tenant(store, acme, "wed", executor="local")
    assert items(store, acme) == [(1, "a"), (2, "b")]

    # A time when the second tenant held the name reads that tenant's data.
    assert items(store, acme, thu.ts) == [(1, "a"), (5, "e")]
    assert items(store, acme, "thu") == [(1, "a"), (5, "e")]
    at(9)
    outcome = restore_tenant(store, acme, "thu", executor="local")
    assert outcome.plan.source.id == second.id
    assert items(store, acme) == [(1, "a"), (5, "e")]


def test_clone_leaves_the_source_untouched(store, at, acme):
    at(1)
    store.write(acme, "db.items", upserts=rows((1, "a"), (2, "b")))
    at(2)
    mon = store.create_snapshot(acme, "mon")
    at(3)
    store.write(acme, "db.items", upserts=rows((2, "b2")), deletes=keys(1))
    store.compact(acme)
    before = source_state(store, acme)
    snapshots_before = store.snapshots(acme)

    at(4)
    copy = unique("copy")
    outcome = restore_tenant(store, acme, "mon", to=copy, executor="local")

    after = source_state(store, acme)
    assert after == before
    assert store.tenant(acme).id == before.tenant.id
    assert store.snapshots(acme) == snapshots_before
    assert outcome.plan.mode == "clone" and outcome.plan.replaced_tenant_id is None
    assert items(store, copy) == [(1, "a"), (2, "b")]
    assert_restored_equals_source_at(store, copy, acme, mon.ts)
    # The clone and the source evolve independently.
    at(5)
    store.write(copy, "db.items", upserts=rows((3, "c")))
    assert items(store, copy) == [(1, "a"), (2, "b"), (3, "c")]
    assert source_state(store, acme) == before


def test_undrop_brings_a_retired_tenant_back_under_a_new_name(store, at, acme):
    at(1)
    store.write(acme, "db.items", upserts=rows((1, "a")))
    at(2)
    store.create_snapshot(acme, "mon")
    at(3)
    store.write(acme, "db.items", upserts=rows((2, "b")))
    old = store.tenant(acme)
    at(4)
    restore_tenant(store, acme, "mon", executor="local")

    back = store.undrop_tenant(old.ref, "acme_old")

    assert (back.id, back.name, back.state, back.retain_until) == (
        old.id,
        "acme_old",
        "active",
        None,
    )
    assert items(store, "acme_old") == [(1, "a"), (2, "b")]
    assert items(store, acme) == [(1, "a")]
    at(5)
    store.write("acme_old", "db.items", upserts=rows((3, "c")))
    assert items(store, "acme_old") == [(1, "a"), (2, "b"), (3, "c")]
    assert items(store, acme) == [(1, "a")]


# --- the plan, verification, executors ---------------------------------------------------


def test_plan_json_round_trips_exactly(store, at, acme):
    at(1)
    store.write(acme, "db.items", upserts=rows((1, "a"), (2, "b")))
    store.write(acme, "db.users", upserts=rows((1, "u")))
    at(2)
    store.create_snapshot(acme, "mon")
    store.set_pitr(acme, 24 * 3_600_000_000)
    store.set_schedule(acme, first_at_us=3_600_000_000, interval_us=3_600_000_000, retain_count=3)
    at(3)
    store.write(acme, "db.items", upserts=rows((3, "c")), deletes=keys(1))
    store.compact(acme)

    for to in (None, "clone-target"):
        plan = plan_restore(store.catalog, acme, "mon", to=to)
        assert plan.tasks and plan.snapshots and plan.schedule and plan.pitr_window_us
        assert RestorePlan.from_json(plan.to_json()) == plan
        assert RestorePlan.from_json(plan.to_json()).to_json() == plan.to_json()


def test_verify_full_compares_every_live_table_with_the_source_at_s(store, at, acme):
    at(1)
    store.write(acme, "db.items", upserts=rows((1, "a"), (2, "b")))
    store.write(acme, "db.users", upserts=rows((1, "u")), deletes=keys(9))
    at(2)
    store.create_snapshot(acme, "mon")
    at(3)
    store.write(acme, "db.items", upserts=rows((3, "c")), deletes=keys(1))
    store.write(acme, "db.users", deletes=keys(1))
    store.compact(acme)

    outcome = restore_tenant(store, acme, "mon", to=unique("full"), executor="local", verify="full")

    # items: data straddles (rewrite), tombstone after S (skip);
    # users: data before S (reuse), tombstones straddle (rewrite).
    assert counts(outcome.plan) == {"reuse": 1, "rewrite": 2, "skip": 1}
    assert outcome.tables_compared == 2
    assert outcome.objects_verified == 3 and outcome.rewritten == 2
    assert items(store, outcome.tenant.name) == [(1, "a"), (2, "b")]


def test_local_and_spark_executors_restore_identical_contents(store, at, acme, spark):
    at(1)
    store.write(acme, "db.items", upserts=rows(*[(i, f"v{i}") for i in range(20)]))
    store.write(acme, "db.users", upserts=rows((1, "u"), (2, "w")))
    at(2)
    store.write(acme, "db.items", upserts=rows((3, "x")), deletes=keys(3, 4, 5))
    at(3)
    mon = store.create_snapshot(acme, "mon")
    at(4)
    store.write(
        acme,
        "db.items",
        upserts=rows((1, "y"), (8, "y"), (15, "y"), (19, "y")),
        deletes=keys(6, 12),
    )
    store.write(acme, "db.users", deletes=keys(1))
    store.compact(acme, "db.items", target_bytes=1_000)  # several objects, each straddling S

    by_executor = {}
    for executor in ("local", "spark"):
        outcome = restore_tenant(store, acme, "mon", to=unique(executor), executor=executor)
        assert outcome.executor == executor
        assert outcome.rewritten >= 3
        assert_restored_equals_source_at(store, outcome.tenant.name, acme, mon.ts)
        journaled = {
            r.task_id: r
            for r in (
                RewriteResult.from_json(row["result_json"])
                for row in catalog_rows(
                    store,
                    "SELECT result_json FROM restore_tasks WHERE job_id = ?",
                    (outcome.job_id,),
                )
            )
        }
        assert set(journaled) == {t.task_id for t in outcome.plan.tasks}
        hashes = {
            task.input.id: (
                journaled[task.task_id].content_hash,
                journaled[task.task_id].output.rows,
                journaled[task.task_id].output.checksum,
                object_row_hash(store.objects, journaled[task.task_id].output),
            )
            for task in outcome.plan.tasks
        }
        by_executor[executor] = (
            reads(store, outcome.tenant.name),
            hashes,
            restored_signature(store, outcome.tenant.name),
        )
    local, spark_ = by_executor["local"], by_executor["spark"]
    assert local[0] == spark_[0]
    assert local[1] == spark_[1]
    assert local[2] == spark_[2]
