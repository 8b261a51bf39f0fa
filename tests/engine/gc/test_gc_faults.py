"""GC that crashes between its steps, or meets a failing S3, converges on a rerun.

GC's order is: record the decisions in ``gc_pending`` (one transaction),
delete the keys from S3, drop the catalog rows (one transaction). Faults are
injected through wrappers around the real backends (an object store whose
delete_many dies, a catalog whose cleanup transaction dies, a boto3 client that
answers SlowDown or AccessDenied), never by editing production code. After
every fault and after every rerun: every tenant reads as before and no catalog
row points at an object the bucket lacks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from engine.gc.purge import purge_tenant
from engine.gc.run import run_gc
from engine.restore.job import restore_tenant
from engine.restore.journal import start_job
from engine.restore.members import PlanOutdated
from engine.restore.plan import plan_restore
from tenants.errors import ConcurrentModification, StorageError, TransientError
from tenants.store import TableStore
from tests.helpers.gc import (
    JOURNAL,
    CrashingCatalog,
    RecordingStore,
    ScriptedDeleteClient,
    Timeline,
    bucket_listing,
    catalog_dump,
    change_log_keys,
    dangling_keys,
    failed_gc_runs,
    keys_of,
    live_member_keys,
    object_rows,
    pending_rows,
    without_journal,
)
from tests.helpers.restores import SCHEMA, SimulatedCrash, crashed_at, keys, reads, rows


@dataclass
class Scene:
    """Garbage of every kind (compacted-away objects, a purged tenant's objects) next to
    live tenants that share objects (a source and its clone)."""

    store: TableStore
    at: Timeline
    garbage: set[str]
    expected: dict[str, Any]

    def reads_now(self) -> dict[str, Any]:
        return {
            "a": reads(self.store, "a"),
            "a@s": reads(self.store, "a", "s"),
            "c": reads(self.store, "c"),
            "c@s": reads(self.store, "c", "s"),
        }

    def check(self) -> None:
        """Every tenant reads as before; no catalog row points at a missing object."""
        assert self.reads_now() == self.expected
        assert dangling_keys(self.store) == set() or self._dangling_only_pending()

    def _dangling_only_pending(self) -> bool:
        # Between the S3 delete and the catalog cleanup, recorded decisions may point at
        # deleted keys; nothing live may.
        pending = {r["object_key"] for r in pending_rows(self.store)}
        dangling = dangling_keys(self.store)
        return dangling <= pending and not dangling & live_member_keys(
            self.store, active_only=False
        )

    def check_converged(self) -> None:
        assert self.reads_now() == self.expected
        assert dangling_keys(self.store) == set()
        assert pending_rows(self.store) == []
        listing = bucket_listing(self.store)
        assert not self.garbage & listing
        assert not self.garbage & set(object_rows(self.store).values())
        assert live_member_keys(self.store, active_only=False) <= listing


def gc(store: TableStore, **kwargs: Any) -> Any:
    return run_gc(store, dry_run=False, grace_us=0, allow_short_grace=True, compact=False, **kwargs)


@pytest.fixture
def scene(store: TableStore, clock: Any) -> Scene:
    at = Timeline(clock)
    store.create_tenant("a")
    store.create_table("a", "db.items", SCHEMA)
    store.create_table("a", "db.users", SCHEMA)
    for b in range(4):
        store.write("a", "db.items", upserts=rows(*[(b * 10 + i, f"i{b}") for i in range(5)]))
        store.write("a", "db.users", upserts=rows((b, f"u{b}")), deletes=keys(b + 100))
    snapshot = store.create_snapshot("a", "s")
    store.write("a", "db.items", upserts=rows((1, "new")), deletes=keys(2))
    restore_tenant(store, "a", "s", to="c", executor="local")
    store.create_tenant("b")
    store.create_table("b", "db.items", SCHEMA)
    store.write("b", "db.items", upserts=rows((1, "b")))
    b_keys = keys_of(store, "b")
    purge_tenant(store.catalog, store.drop_tenant("b").ref)
    before = keys_of(store, "a") | keys_of(store, "c")
    store.compact("a")
    store.compact("c", "db.users")
    # The commit after the snapshot stays in the change log (the compaction that
    # merged it is not garbage for diffs inside the horizon).
    kept = keys_of(store, "a") | keys_of(store, "c") | change_log_keys(store, snapshot.ts)
    garbage = (before - kept) | b_keys
    at(2)
    s = Scene(store, at, garbage, {})
    s.expected = s.reads_now()
    assert len(garbage) >= 8
    # Shared objects stay shared: the clone still uses some of the source's old objects.
    assert keys_of(store, "c") & before
    return s


def test_crash_after_recording_before_the_s3_delete_is_finished_by_a_rerun(scene: Scene) -> None:
    store = scene.store
    crashing = TableStore(store.catalog, RecordingStore(store.objects, crash_before_delete=True))
    with pytest.raises(SimulatedCrash, match=r"crash before deleting \d+ key\(s\)"):
        gc(crashing)
    assert {r["object_key"] for r in pending_rows(store)} == scene.garbage
    assert scene.garbage <= bucket_listing(store)
    scene.check()

    report = gc(store)
    assert report.collected.resumed == len(scene.garbage)
    assert report.collected.deleted_objects == len(scene.garbage)
    assert report.collected.candidates == ()
    scene.check_converged()


@pytest.mark.parametrize("how", ["store_dies_after_delete", "cleanup_transaction_dies"])
def test_crash_after_the_s3_delete_before_the_catalog_cleanup_is_finished_by_a_rerun(
    scene: Scene, how: str
) -> None:
    store = scene.store
    if how == "store_dies_after_delete":
        crashing = TableStore(store.catalog, RecordingStore(store.objects, crash_after_delete=True))
        crash = r"crash after deleting \d+ key\(s\)"
    else:
        crashing = TableStore(
            CrashingCatalog(store.catalog, "DELETE FROM membership WHERE object_id IN"),  # type: ignore[arg-type]
            store.objects,
        )
        crash = crashed_at("DELETE FROM membership WHERE object_id IN")
    with pytest.raises(SimulatedCrash, match=crash):
        gc(crashing)
    assert not scene.garbage & bucket_listing(store)
    assert {r["object_key"] for r in pending_rows(store)} == scene.garbage
    assert scene.garbage <= set(object_rows(store).values())  # the rows are still there
    scene.check()

    report = gc(store)  # deleting keys that are already gone is fine
    assert report.collected.resumed == len(scene.garbage)
    scene.check_converged()
    assert gc(store).collected.deleted_objects == 0


def test_crash_inside_the_recording_transaction_records_and_deletes_nothing(
    scene: Scene,
) -> None:
    store = scene.store
    before = catalog_dump(store)
    crashing = TableStore(CrashingCatalog(store.catalog, "INSERT INTO gc_pending"), store.objects)  # type: ignore[arg-type]
    with pytest.raises(SimulatedCrash, match=crashed_at("INSERT INTO gc_pending")):
        gc(crashing)
    assert without_journal(catalog_dump(store)) == without_journal(before)
    assert [e.split(":")[0] for e in failed_gc_runs(store)] == ["SimulatedCrash"]
    assert scene.garbage <= bucket_listing(store)
    scene.check()
    report = gc(store)
    assert report.collected.resumed == 0
    assert {c.key for c in report.collected.candidates} == scene.garbage
    scene.check_converged()


def test_a_restore_cannot_start_on_objects_a_crashed_gc_is_deleting(
    store: TableStore, clock: Any
) -> None:
    at = Timeline(clock)
    store.create_tenant("a")
    store.create_table("a", "db.items", SCHEMA)
    store.write("a", "db.items", upserts=rows((1, "x"), (2, "y")))
    store.create_snapshot("a", "s")
    store.write("a", "db.items", upserts=rows((1, "z")))
    expected = reads(store, "a", "s")
    plan = plan_restore(store.catalog, "a", "s", to="c")
    store.compact("a")
    at(2)
    crashing = TableStore(store.catalog, RecordingStore(store.objects, crash_before_delete=True))
    with pytest.raises(SimulatedCrash, match=r"crash before deleting \d+ key\(s\)"):
        gc(crashing)
    # The plan still counts the objects GC is deleting; the pins, taken from live
    # membership, cannot, so the job is refused before it journals anything.
    with pytest.raises(PlanOutdated, match="plan again"):
        start_job(store.catalog, plan, executor="local", verify="objects")
    gc(store)
    assert pending_rows(store) == []
    restore_tenant(store, "a", "s", to="c", executor="local")
    assert reads(store, "c") == expected
    assert dangling_keys(store) == set()


def _client(store: TableStore, script: list[tuple[str, str]], *, forever: bool = False) -> Any:
    client = ScriptedDeleteClient(store.objects._client, script, forever=forever)  # type: ignore[attr-defined]
    store.objects._client_obj = client  # type: ignore[attr-defined]
    return client


def _unwrap(store: TableStore, client: Any) -> None:
    store.objects._client_obj = client.inner  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "script",
    [
        [("raise", "SlowDown")],
        [("raise", "SlowDown"), ("raise", "ServiceUnavailable"), ("raise", "InternalError")],
        [("per_key", "SlowDown")],  # DeleteObjects answers 200 with per-key throttling errors
        [("per_key", "InternalError"), ("raise", "SlowDown")],
    ],
    ids=["slowdown", "three-5xx", "per-key-slowdown", "per-key-internal-then-slowdown"],
)
def test_throttled_s3_deletes_are_retried_and_gc_finishes(
    scene: Scene, script: list[tuple[str, str]]
) -> None:
    store = scene.store
    client = _client(store, script)
    report = gc(store)
    assert client.calls == len(script) + 1
    assert report.collected.deleted_objects == len(scene.garbage)
    _unwrap(store, client)
    scene.check_converged()


@pytest.mark.parametrize(
    ("how", "code", "error"),
    [
        ("raise", "AccessDenied", StorageError),
        ("per_key", "AccessDenied", StorageError),
        ("raise", "SlowDown", TransientError),
    ],
    ids=["access-denied", "per-key-access-denied", "persistent-slowdown"],
)
def test_a_persistent_s3_delete_failure_fails_loudly_and_drops_nothing_from_the_catalog(
    scene: Scene, how: str, code: str, error: type[Exception]
) -> None:
    store = scene.store
    before = catalog_dump(store)
    client = _client(store, [(how, code)], forever=True)
    with pytest.raises(error, match=code):
        gc(store)
    after = catalog_dump(store)
    # only the decisions are recorded (and stamped on the clock row: restore jobs
    # planned before them plan again, docs/membership.md), and the change log before
    # the horizon is forgotten (its rows, and the tables' changes_from_ts raised);
    # GC's queue lets go of what it examined (decided, or found still needed)
    # and the pass is journaled as failed, with its error
    changed = ("gc_pending", "clock", "change_objects", "tables", "gc_candidates", *JOURNAL)
    assert {k: v for k, v in after.items() if k not in changed} == {
        k: v for k, v in before.items() if k not in changed
    }
    (failed,) = failed_gc_runs(store)
    assert code in failed
    assert {r["object_key"] for r in pending_rows(store)} == scene.garbage
    assert scene.garbage <= bucket_listing(store)
    scene.check()
    assert dangling_keys(store) == set()

    _unwrap(store, client)
    report = gc(store)
    assert report.collected.resumed == len(scene.garbage)
    scene.check_converged()


def test_a_compaction_whose_input_gc_collected_while_it_read_lost_a_race(
    store: TableStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loader compacts its table while GC, with no grace, compacts the same
    table and collects the objects its compaction replaced, one of them the
    loader's merge is about to read. The loader lost the race, as it would have
    at its swap: ConcurrentModification, nothing changed, run it again (it once
    failed with a StorageError that named the missing object, and the loader
    of tests/tenants/test_concurrent_processes.py died of it)."""
    import tenants.compaction as compaction

    store.create_tenant("acme")
    store.create_table("acme", "db.items", SCHEMA)
    for n in range(3):
        store.write("acme", "db.items", upserts=rows((n, f"v{n}"), (n + 10, f"w{n}")))
    before = reads(store, "acme")
    real = compaction.stream_object

    def gc_wins_first(objects: Any, record: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(compaction, "stream_object", real)
        store.compact("acme", "db.items")  # GC's compaction swaps first...
        run_gc(store, dry_run=False, grace_us=0, allow_short_grace=True)  # ...and collects
        return real(objects, record, **kwargs)

    monkeypatch.setattr(compaction, "stream_object", gc_wins_first)
    with pytest.raises(ConcurrentModification, match=r"db\.items .*lost a race"):
        store.compact("acme", "db.items")
    assert reads(store, "acme") == before
    store.compact("acme", "db.items")  # run again: nothing to do, nothing lost
    assert reads(store, "acme") == before
