"""Write intents: every writer says where it may upload, and GC finds orphans only there.

Real moto S3 server, real catalogs (SQLite and PostgreSQL), the catalog's wall
clock moved on purpose (``Timeline``). A pass must find the orphans of every
kind of writer that died (a commit, a compaction, a cancelled restore job)
without listing the warehouse, and a writer slower than the grace must not
commit what the sweep may have deleted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pyarrow as pa
import pytest

from engine.backup.api import create_backup, restore_backup
from engine.gc.intents import sweep_intents
from engine.gc.ownership import ownership
from engine.gc.run import run_gc
from engine.restore.cancel import cancel_restore
from engine.restore.job import restore_tenant
from engine.restore.journal import start_job
from tenants.catalog.intents import count_intents
from tenants.errors import IntentRevoked, InvalidArgument
from tenants.objects.intents import new_intent
from tenants.objectstore import ObjectInfo, PrefixSet
from tenants.objectstore.embedded import EmbeddedS3
from tenants.store import TableStore
from tenants.tenancy import active_tenant, find_table
from tenants.writes import install_prepared, prepare_commit
from tests.helpers.gc import (
    GRACE,
    RecordingStore,
    Timeline,
    bucket_listing,
    dangling_keys,
    keys_of,
    live_member_keys,
    orphan_keys,
)
from tests.helpers.paths import HELPERS
from tests.helpers.restores import (
    SCHEMA,
    FaultyCatalog,
    SimulatedCrash,
    crashed_at,
    keys,
    planned_with_members,
    reads,
    rows,
    with_catalog,
    with_objects,
)
from tests.tenants.test_concurrent_processes import replay

H = GRACE
WORKER = str(HELPERS / "concurrent_worker.py")


class ListingStore:
    """The real object store; records every prefix listed."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.warehouse = inner.warehouse
        self.listed: list[str] = []

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        self.listed.append(prefix)
        return self.inner.list(prefix)

    def partial_writes(self, prefix: str) -> Any:
        self.listed.append(prefix)
        return self.inner.partial_writes(prefix)

    def partial_writes_under(self, prefixes: PrefixSet) -> Any:
        self.listed += prefixes
        return self.inner.partial_writes_under(prefixes)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def intents(store: TableStore) -> int:
    with store.catalog.snapshot() as tx:
        return count_intents(tx)


def seed(store: TableStore, name: str, *, batches: int = 3) -> None:
    store.create_tenant(name)
    store.create_table(name, "db.items", SCHEMA)
    for b in range(batches):
        store.write(name, "db.items", upserts=rows(*[(b * 10 + i, f"v{b}-{i}") for i in range(5)]))


def test_every_writer_ends_its_intent_in_its_commit(store: TableStore, bucket: str) -> None:
    seed(store, "a")
    store.set_pitr("a", 3_600_000_000)  # a revert reads the time before its commit
    assert intents(store) == 0
    store.load("a", "db.items", [rows((100, "loaded"))])
    first = store.write("a", "db.items", deletes=keys(100))
    store.revert("a", "db.items", first.ts)
    store.compact("a")
    store.create_snapshot("a", "s")
    restore_tenant(store, "a", "s", to="b")
    backup = create_backup(store, "a", "s", f"s3://{bucket}/backups")
    restore_backup(store, f"s3://{bucket}/backups", backup.backup_id, tenant="c")
    assert intents(store) == 0
    assert reads(store, "c") == reads(store, "a", "s")


def test_object_ids_begin_with_their_writers_intent(store: TableStore, clock: Any) -> None:
    """What lets a sweep list one writer's keys by prefix, not its whole table."""
    seed(store, "a", batches=1)
    broken = with_catalog(store, FaultyCatalog(store.catalog, "UPDATE tenants SET last_change_ts"))
    before = bucket_listing(store)
    with pytest.raises(SimulatedCrash):
        broken.write("a", "db.items", upserts=rows((7, "lost")), deletes=keys(1))
    left = bucket_listing(store) - before
    with store.catalog.snapshot() as tx:
        [intent_id] = [r[0] for r in tx.tuples("SELECT id FROM write_intents")]
    assert len(left) == 2
    assert all(k.rsplit("/", 1)[1].startswith(intent_id) for k in left)


def test_a_crashed_compaction_is_swept_under_its_intent_without_listing_the_warehouse(
    store: TableStore, clock: Any
) -> None:
    at = Timeline(clock)
    seed(store, "a")
    seed(store, "big", batches=4)  # another tenant's objects: never listed
    expected = reads(store, "a")
    before = bucket_listing(store)
    with pytest.raises(SimulatedCrash, match=crashed_at("UPDATE membership SET removed_ts")):
        with_catalog(
            store, FaultyCatalog(store.catalog, "UPDATE membership SET removed_ts")
        ).compact("a")
    outputs = bucket_listing(store) - before
    assert outputs and intents(store) == 1

    at(23)
    listing = ListingStore(store.objects)
    report = run_gc(with_objects(store, listing), dry_run=False)
    assert report.intents.stale == 0 and outputs <= bucket_listing(store)
    at(25)
    dry = run_gc(store)
    assert orphan_keys(dry) == outputs and outputs <= bucket_listing(store)
    listing = ListingStore(store.objects)
    report = run_gc(with_objects(store, listing), dry_run=False)
    assert orphan_keys(report) == outputs
    assert report.intents.stale == report.intents.forgotten == 1 and intents(store) == 0
    assert bucket_listing(store) == before
    # Only the intent's own prefixes (and the dumps' staging/) were listed.
    [(tenant_id, table_id)] = {tuple(k.split("/")[1:3]) for k in outputs}
    for prefix in listing.listed:
        assert prefix == "staging/" or prefix.startswith(f"tenants/{tenant_id}/{table_id}/")
    assert reads(store, "a") == expected
    assert dangling_keys(store) == set()


def test_a_writer_slower_than_the_grace_cannot_commit_after_gc_swept_its_intent(
    store: TableStore, clock: Any
) -> None:
    at = Timeline(clock)
    seed(store, "a", batches=1)
    expected = reads(store, "a")
    before = bucket_listing(store)
    with store.catalog.snapshot() as tx:
        tenant = active_tenant(tx, "a")
        table = find_table(tx, tenant, "db", "items", tx.last_ts())
    prepared = prepare_commit(
        store.catalog, store.objects, tenant, table, rows((9, "late")), None
    )  # uploaded; the commit is 25 hours late
    at(25)
    report = run_gc(store, dry_run=False)
    assert orphan_keys(report) == {o.key for o in prepared.objects}
    assert prepared.intent is not None
    with pytest.raises(IntentRevoked, match=f"write intent {prepared.intent.id}"):
        install_prepared(store.catalog, store.objects, prepared, "a")
    assert reads(store, "a") == expected
    assert bucket_listing(store) == before and intents(store) == 0
    assert dangling_keys(store) == set()
    store.write("a", "db.items", upserts=rows((9, "on time")))  # a retry commits
    assert {"id": 9, "v": "on time"} in store.read("a", "db.items").to_pylist()


def test_a_cancelled_restore_jobs_leftover_outputs_are_swept_from_its_plan(
    store: TableStore, clock: Any
) -> None:
    at = Timeline(clock)
    seed(store, "a")
    store.create_snapshot("a", "s")
    store.write("a", "db.items", upserts=rows((1, "after")))
    store.compact("a")  # one merged object straddling s: a rewrite task
    plan, _ = planned_with_members(store, "a", "s", to="b")
    assert plan.tasks
    job = start_job(store.catalog, plan, executor="local", verify="objects")
    for task in plan.tasks:  # the rewrites ran ...
        store.objects.put(task.out_key, b"rewritten")
    dying = with_objects(store, RecordingStore(store.objects, crash_before_delete=True))
    with pytest.raises(SimulatedCrash):  # ... and the cancel died before deleting them
        cancel_restore(dying, job.id)
    outputs = {t.out_key for t in plan.tasks}
    assert outputs <= bucket_listing(store) and intents(store) == 1

    at(25)
    report = run_gc(store, dry_run=False)
    assert orphan_keys(report) == outputs and report.orphans.listed == 0
    assert not outputs & bucket_listing(store) and intents(store) == 0
    assert keys_of(store, "a") <= bucket_listing(store)


def test_a_running_restore_jobs_intent_is_left_alone(store: TableStore, clock: Any) -> None:
    at = Timeline(clock)
    seed(store, "a")
    store.create_snapshot("a", "s")
    store.write("a", "db.items", upserts=rows((1, "after")))
    store.compact("a")
    plan, _ = planned_with_members(store, "a", "s", to="b")
    start_job(store.catalog, plan, executor="local", verify="objects")
    for task in plan.tasks:
        store.objects.put(task.out_key, b"rewritten")
    at(24 * 30)
    report = run_gc(store, dry_run=False)
    assert report.intents.running_jobs == 1 and orphan_keys(report) == set()
    assert {t.out_key for t in plan.tasks} <= bucket_listing(store)


def test_a_warehouse_from_before_intents_asks_for_one_deep_pass(
    store: TableStore, clock: Any
) -> None:
    at = Timeline(clock)
    seed(store, "a", batches=1)
    with store.catalog.transaction() as tx:  # as the migration marks an older catalog
        tx.execute("INSERT INTO meta (key, value) VALUES ('gc_needs_deep', '1')")
    planted = f"tenants/{store.tenant('a').id}/{'0' * 32}/data/{'1' * 32}.parquet"
    store.objects.put(planted, b"an orphan from before intents")
    at(25)
    report = run_gc(store, dry_run=False)
    assert report.intents.needs_deep and planted in bucket_listing(store)
    report = run_gc(store, dry_run=False, deep=True)
    assert planted in orphan_keys(report) and planted not in bucket_listing(store)
    assert not run_gc(store, dry_run=True).intents.needs_deep


def test_intent_prefixes_are_the_writers_alone(store: TableStore) -> None:
    """Two writes to one table: each commit's ids share its own intent's prefix only."""
    seed(store, "a", batches=0)
    one = store.write("a", "db.items", upserts=rows((1, "x")), deletes=keys(5))
    two = store.write("a", "db.items", upserts=rows((2, "y")))
    assert len({i[:16] for i in one.object_ids}) == 1
    assert {i[:16] for i in one.object_ids}.isdisjoint({i[:16] for i in two.object_ids})
    assert pa.array(one.object_ids).type == pa.string()


def test_writers_racing_gc_with_no_orphan_grace_lose_nothing_and_leave_nothing(
    new_catalog_uri: Callable[[], str], s3_server: EmbeddedS3, bucket: str, tmp_path: Path
) -> None:
    """Two loader processes commit (and compact) while a third runs GC passes that
    revoke every intent at once (orphan grace 0): a write whose intent is revoked
    fails and is retried with a new one, so every write a loader reports is
    readable, no row names a missing key, and once they stop one more pass
    leaves only live keys in the bucket."""
    catalog, warehouse = new_catalog_uri(), f"s3://{bucket}/wh"
    store = TableStore.open(catalog, warehouse, s3=s3_server.settings)
    loaders = ("w0", "w1")
    try:
        for tenant in loaders:
            store.create_tenant(tenant)
            store.create_table(tenant, "db.items", SCHEMA)
    finally:
        store.close()
    stop = tmp_path / "stop"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}

    def spawn(role: str, *argv: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, WORKER, role, catalog, warehouse, *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )

    gc = spawn("gc", "--orphan-grace-us", "0", "--until", str(stop))
    loading = {
        t: spawn("load", t, "--seed", str(i), "--commits", "15") for i, t in enumerate(loaders)
    }
    logs = {t: p.communicate(timeout=600) for t, p in loading.items()}
    stop.touch()
    gc_out, gc_err = gc.communicate(timeout=600)
    assert gc.returncode == 0, gc_err[-2000:]
    assert json.loads(gc_out.splitlines()[-1])["passes"] >= 1
    for tenant, p in loading.items():
        assert p.returncode == 0, logs[tenant][1][-2000:]

    store = TableStore.open(catalog, warehouse, s3=s3_server.settings)
    try:
        for tenant in loaders:
            expected = replay(logs[tenant][0])
            table = store.read(tenant, "db.items")
            got = dict(
                zip(table.column("id").to_pylist(), table.column("v").to_pylist(), strict=True)
            )
            assert got == expected, tenant
        assert dangling_keys(store) == set()
        run_gc(store, dry_run=False, grace_us=0, allow_short_grace=True, orphan_grace_us=0)
        assert intents(store) == 0
        assert bucket_listing(store) == live_member_keys(store, active_only=True)
    finally:
        store.close()


# --- rewind gc --max-seconds -----------------------------------------------------------------


class CountedLimit:
    """A time limit that runs out after ``units`` checks (deterministic, no sleeping)."""

    def __init__(self, units: int) -> None:
        self.left = units

    def __call__(self, seconds: float | None) -> Any:
        outer = self

        class Limit:
            def up(self) -> bool:
                outer.left -= 1
                return outer.left < 0

        return Limit()


def test_a_pass_stopped_by_max_seconds_leaves_the_rest_to_the_next(
    store: TableStore, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = Timeline(clock)
    seed(store, "a", batches=1)
    expected = reads(store, "a")
    before = bucket_listing(store)
    for n in range(3):  # three writers die after uploading
        broken = with_catalog(
            store, FaultyCatalog(store.catalog, "UPDATE tenants SET last_change_ts")
        )
        with pytest.raises(SimulatedCrash):
            broken.write("a", "db.items", upserts=rows((100 + n, "lost")))
    left = bucket_listing(store) - before
    at(25)
    import engine.gc.intents as intents_module
    import engine.gc.run as run_module

    # The limit runs out after the phases before the sweep and one page of one intent.
    monkeypatch.setattr(intents_module, "PAGE", 1)
    monkeypatch.setattr(run_module, "TimeLimit", CountedLimit(4))
    first = run_gc(store, dry_run=False, compact=False, max_seconds=1)
    assert first.stopped == "intents" and first.intents.forgotten == 1 and intents(store) == 2
    assert len(orphan_keys(first)) == 1
    monkeypatch.setattr(run_module, "TimeLimit", CountedLimit(100))
    second = run_gc(store, dry_run=False, compact=False, max_seconds=1)
    assert second.stopped is None and second.intents.forgotten == 2 and intents(store) == 0
    assert orphan_keys(first) | orphan_keys(second) == left
    assert bucket_listing(store) == before and reads(store, "a") == expected


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "soon"])
def test_gc_refuses_a_bad_max_seconds_in_one_line(rewind: Callable[..., Any], bad: str) -> None:
    result = rewind("gc", "--yes", "--max-seconds", bad)
    assert result.exit_code != 0
    assert "max-seconds" in result.output and len(result.output.strip().splitlines()) == 1


def test_gc_json_reports_counts_per_phase(rewind: Callable[..., Any]) -> None:
    assert rewind("tenant", "create", "a").exit_code == 0
    result = rewind("--json", "gc", "--yes", "--max-seconds", "600")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["stopped"] is None and report["deep"] is False
    assert set(report["phases"]) == {"compact", "collect", "flatten", "intents", "orphans"}
    assert report["phases"]["intents"]["stale"] == 0 and "seconds" in report["phases"]["collect"]


def test_max_seconds_stops_collection_between_batches_and_the_next_pass_finishes(
    store: TableStore, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import engine.gc.collect as collect_module
    import engine.gc.run as run_module

    at = Timeline(clock)
    seed(store, "a", batches=3)
    before = keys_of(store, "a")
    store.compact("a")
    replaced = before - keys_of(store, "a")
    assert len(replaced) == 3
    at(2)
    monkeypatch.setattr(collect_module, "FINISH_BATCH", 1)
    monkeypatch.setattr(run_module, "TimeLimit", CountedLimit(2))  # the phase, one batch
    first = run_gc(store, dry_run=False, compact=False, max_seconds=1)
    assert first.stopped == "collect" and first.collected.deleted_objects == 1
    assert len(replaced & bucket_listing(store)) == 2
    monkeypatch.setattr(run_module, "TimeLimit", CountedLimit(100))
    second = run_gc(store, dry_run=False, compact=False, max_seconds=1)
    assert second.stopped is None and second.collected.resumed == 2
    assert not replaced & bucket_listing(store)
    assert dangling_keys(store) == set()


# --- what a sweep asks S3 ----------------------------------------------------------------------


class S3Requests:
    """Counts the requests a boto3 client sends, by operation (botocore's own events)."""

    def __init__(self, client: Any) -> None:
        self.sent: Counter[str] = Counter()
        client.meta.events.register("before-call.s3", self._saw)

    def _saw(self, model: Any, **_: Any) -> None:
        self.sent[model.name] += 1


def crashed_write(store: TableStore, tenant: str, **change: Any) -> set[str]:
    """A write that uploaded and died in its commit: the keys it left."""
    before = bucket_listing(store)
    broken = with_catalog(store, FaultyCatalog(store.catalog, "UPDATE tenants SET last_change_ts"))
    with pytest.raises(SimulatedCrash):
        broken.write(tenant, "db.items", **change)
    return bucket_listing(store) - before


def intent_id_of(key: str) -> str:
    """The intent an object key was minted under (its id's first 16 hex digits)."""
    return key.rsplit("/", 1)[1][:16]


def test_an_intent_records_the_object_kinds_its_writer_mints(store: TableStore) -> None:
    seed(store, "a", batches=0)
    crashed_write(store, "a", upserts=rows((1, "x")))
    crashed_write(store, "a", deletes=keys(1))
    crashed_write(store, "a", upserts=rows((2, "y")), deletes=keys(3))
    with store.catalog.snapshot() as tx:
        recorded = sorted(str(r[0]) for r in tx.tuples("SELECT object_kinds FROM write_intents"))
    assert recorded == ["data", "data,tomb", "tomb"]
    intent = new_intent("write", ["data"])
    with pytest.raises(InvalidArgument, match="begin it with object_kinds that include 'tomb'"):
        intent.new_object_id("tomb")  # the sweep would never list where it goes


def test_a_sweep_sends_one_listing_per_intent_table_and_one_upload_listing_per_page(
    store: TableStore,
    s3_server: EmbeddedS3,
    bucket: str,
    clock: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What keeps the sweep's cost with the orphans: each stale intent is listed
    once per table and object kind it recorded (both kinds for an intent from
    before they were recorded), and each page's incomplete uploads come from one
    ListMultipartUploads, matched to its intents in memory, however many there are."""
    import engine.gc.intents as intents_module

    at = Timeline(clock)
    seed(store, "a", batches=1)
    seed(store, "b", batches=1)
    live = bucket_listing(store)
    data = crashed_write(store, "a", upserts=rows((7, "lost")))  # data: 1 listing
    both = crashed_write(store, "a", upserts=rows((8, "lost")), deletes=keys(1))  # 2
    older = crashed_write(store, "b", upserts=rows((9, "lost")))  # kinds unknown: 2
    tomb = crashed_write(store, "b", deletes=keys(2))  # 1
    with store.catalog.transaction() as tx:  # as an intent recorded before the migration
        [key] = older
        tx.execute(
            "UPDATE write_intents SET object_kinds = NULL WHERE id = ?",
            (intent_id_of(key),),
        )
    # The first writer also died mid-upload; an upload under no stale intent is alive.
    client = boto3.client("s3", **s3_server.settings.to_boto3())
    [key] = data
    directory, _ = key.rsplit("/", 1)
    dead = store.objects.warehouse.key(f"{directory}/{intent_id_of(key)}{'0' * 16}.parquet")
    alive = store.objects.warehouse.key(f"{directory}/{'1' * 32}.parquet")
    for upload_key in (dead, alive):
        upload = client.create_multipart_upload(Bucket=bucket, Key=upload_key)
        client.upload_part(
            Bucket=bucket, Key=upload_key, UploadId=upload["UploadId"], PartNumber=1, Body=b"x"
        )
    monkeypatch.setattr(intents_module, "PAGE", 3)  # 4 intents: two pages
    at(25)
    owner = ownership(store.catalog, store.objects)
    requests = S3Requests(store.objects._client)  # type: ignore[attr-defined]
    report = sweep_intents(
        store.catalog, store.objects, grace_us=24 * H, owner=owner, dry_run=False
    )
    assert requests.sent["ListObjectsV2"] == 1 + 2 + 2 + 1
    assert requests.sent["ListMultipartUploads"] == 2
    assert report.stale == report.forgotten == 4 and intents(store) == 0
    assert {o.key for o in report.orphans} == data | both | older | tomb
    assert [store.objects.warehouse.key(w.key) for w in report.partial] == [dead]
    assert bucket_listing(store) == live
    uploads = client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert [u["Key"] for u in uploads] == [alive]
