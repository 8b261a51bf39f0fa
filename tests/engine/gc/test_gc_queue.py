"""GC's candidate queue: every event that can free an object queues it, and GC examines only the queue.

GC's decision reads ``gc_candidates``, which triggers fill (the queue's
migration step), not every object: its cost follows what changed since the
last run. These tests drive each event by a plain statement, as any code
path would, and check the queue on both catalogs; then that GC finds in the
queue exactly what a full scan finds, keeps young garbage queued until its
grace passes, and that a full scan (the audit) finds and requeues what the
queue was made to miss. tests/engine/gc/test_model_gc.py checks, after every
step of random histories, that the queue holds every unreferenced object.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from engine.gc.collect import collect
from tenants.store import TableStore
from tests.helpers.gc import GRACE, Timeline, bucket_listing, keys_of, register_unreferenced
from tests.helpers.restores import SCHEMA, catalog_rows, rows


def queue(store: TableStore) -> set[str]:
    return {r["object_id"] for r in catalog_rows(store, "SELECT object_id FROM gc_candidates")}


def run(store: TableStore, *statements: tuple[str, tuple[Any, ...]]) -> None:
    with store.catalog.transaction() as tx:
        for sql, params in statements:
            tx.execute(sql, params)


@pytest.fixture
def world(store: TableStore) -> dict[str, Any]:
    """Two tables of one tenant, each holding objects; the queue emptied."""
    store.create_tenant("a")
    store.create_table("a", "db.items", SCHEMA)
    store.create_table("a", "db.other", SCHEMA)
    for i in range(3):
        store.write("a", "db.items", upserts=rows((i, f"v{i}")))
    store.write("a", "db.other", upserts=rows((9, "x")))
    with store.catalog.snapshot() as tx:
        tables = {
            r["name"]: r["id"]
            for r in tx.all("SELECT id, name FROM tables WHERE dropped_ts IS NULL")
        }
        members = {
            name: sorted(
                r[0]
                for r in tx.tuples(
                    "SELECT object_id FROM membership WHERE table_id = ? AND removed_ts IS NULL",
                    (table_id,),
                )
            )
            for name, table_id in tables.items()
        }
        tenant_id = tx.scalar("SELECT id FROM tenants WHERE name = 'a'")
    run(store, ("DELETE FROM gc_candidates", ()))
    return {"tables": tables, "members": members, "tenant": tenant_id, "ts": store.now()}


def test_registering_an_object_queues_it(store: TableStore, world: dict[str, Any]) -> None:
    register_unreferenced(store, 3)
    assert len(queue(store)) == 3


def test_ending_or_deleting_a_membership_queues_its_object(
    store: TableStore, world: dict[str, Any]
) -> None:
    first, second, third = world["members"]["items"]
    items = world["tables"]["items"]
    ts = world["ts"]
    run(store, ("UPDATE membership SET max_ts = max_ts WHERE table_id = ?", (items,)))
    assert queue(store) == set()  # a live row changed, no membership ended
    run(
        store,
        ("UPDATE membership SET removed_ts = ? WHERE object_id = ?", (ts, first)),
        ("DELETE FROM change_objects WHERE object_id = ?", (second,)),
    )
    assert queue(store) == {first, second}
    run(store, ("DELETE FROM gc_candidates", ()))
    run(store, ("DELETE FROM membership WHERE object_id = ?", (third,)))
    assert queue(store) == {third}


def test_a_row_born_removed_queues_its_object(store: TableStore, world: dict[str, Any]) -> None:
    """A shadow row: the other table hides an object it inherited."""
    [obj] = world["members"]["items"][:1]
    ts = world["ts"]
    run(
        store,
        (
            "INSERT INTO membership (table_id, object_id, added_ts, removed_ts, max_ts) "
            "VALUES (?, ?, ?, ?, 0)",
            (world["tables"]["other"], obj, ts, ts),
        ),
    )
    assert queue(store) == {obj}


def test_releasing_or_deleting_a_base_queues_what_its_table_held_at_the_base_ts(
    store: TableStore, world: dict[str, Any]
) -> None:
    items, ts = world["tables"]["items"], world["ts"]
    inheriting = uuid.uuid4().hex
    run(
        store,
        (
            "INSERT INTO membership_bases (table_id, depth, base_table_id, base_ts, cut_ts) "
            "VALUES (?, 1, ?, ?, ?)",
            (inheriting, items, ts, ts),
        ),
    )
    assert queue(store) == set()
    run(store, ("UPDATE membership_bases SET released_ts = ? WHERE table_id = ?", (ts, inheriting)))
    assert queue(store) == set(world["members"]["items"])
    run(store, ("DELETE FROM gc_candidates", ()))
    run(store, ("DELETE FROM membership_bases WHERE table_id = ?", (inheriting,)))
    assert queue(store) == set(world["members"]["items"])


def test_a_restore_job_letting_its_pins_go_queues_them(
    store: TableStore, world: dict[str, Any]
) -> None:
    first, second, third = world["members"]["items"]
    ts = world["ts"]
    jobs = []
    for _ in range(3):
        job = uuid.uuid4().hex
        jobs.append(job)
        run(
            store,
            (
                "INSERT INTO restore_jobs (id, lock_name, source_tenant_id, new_tenant_id, "
                "target_name, at_ts, mode, method, state, executor, verify, created_ts, "
                "updated_ts) VALUES (?, ?, ?, ?, 'c', ?, 'clone', 'physical', 'planned', "
                "'local', 'objects', ?, ?)",
                (job, job, world["tenant"], uuid.uuid4().hex, ts, ts, ts),
            ),
        )
    for job, obj in zip(jobs, (first, second, third), strict=True):
        run(
            store,
            (
                "INSERT INTO job_pins (job_id, table_id, object_id, action) "
                "VALUES (?, ?, ?, 'reuse')",
                (job, world["tables"]["items"], obj),
            ),
        )
    run(store, ("UPDATE restore_jobs SET state = 'rewriting' WHERE id = ?", (jobs[0],)))
    assert queue(store) == set()  # still unfinished: still pinned
    run(store, ("UPDATE restore_jobs SET state = 'done' WHERE id = ?", (jobs[0],)))
    assert queue(store) == {first}
    run(store, ("DELETE FROM job_pins WHERE job_id = ?", (jobs[1],)))
    assert queue(store) == {first, second}
    run(store, ("DELETE FROM restore_jobs WHERE id = ?", (jobs[2],)))
    assert queue(store) == {first, second, third}


def test_gc_decides_from_the_queue_and_keeps_young_garbage_queued(
    store: TableStore, clock: Any
) -> None:
    at = Timeline(clock)
    store.create_tenant("a")
    store.create_table("a", "db.items", SCHEMA)
    for i in range(4):
        store.write("a", "db.items", upserts=rows((i, f"v{i}")))
    before = keys_of(store, "a")
    store.compact("a")
    replaced = before - keys_of(store, "a")
    at(0.5)

    young = collect(store.catalog, store.objects, grace_us=GRACE, dry_run=False)
    assert young.candidate_count == 0
    with store.catalog.snapshot() as tx:
        queued = {
            r[0]
            for r in tx.tuples(
                "SELECT o.object_key FROM gc_candidates q JOIN objects o ON o.id = q.object_id"
            )
        }
    assert queued == replaced  # unreferenced, younger than the grace: examined again next run

    at(1.5)
    report = collect(store.catalog, store.objects, grace_us=GRACE, dry_run=False)
    assert {c.key for c in report.candidates} == replaced
    assert queue(store) == set()
    assert not replaced & bucket_listing(store)


def test_a_full_scan_finds_what_the_queue_missed_and_requeues_young_garbage(
    store: TableStore, clock: Any
) -> None:
    at = Timeline(clock)
    store.create_tenant("a")
    store.create_table("a", "db.items", SCHEMA)
    store.write("a", "db.items", upserts=rows((1, "x")))
    register_unreferenced(store, 5)
    run(store, ("DELETE FROM gc_candidates", ()))  # as if the events were missed
    at(2)
    assert collect(store.catalog, store.objects, grace_us=0).candidate_count == 0
    audit = collect(store.catalog, store.objects, grace_us=0, full_scan=True)
    assert audit.candidate_count == 5

    # Young garbage found by the scan is queued for the runs after it.
    collect(store.catalog, store.objects, grace_us=100 * GRACE, dry_run=False, full_scan=True)
    assert len(queue(store)) == 5
    assert collect(store.catalog, store.objects, grace_us=0, dry_run=False).candidate_count == 5
    assert queue(store) == set()
