"""Logical dump-and-reload: a portable dump of a tenant at S, and the restore path built on it.

A dump is the state at S (no history): Parquet per table, sorted by key and
split at a target size, plus ``manifest.json`` written last. A dump without
its manifest is never loadable. A reload builds an invisible staging tenant
through the normal write path, checks counts and hashes, then swaps names in
one transaction, so a crash or a bad input leaves nothing visible.

Faults come from wrappers around the real backends (``restore_helpers``),
never from edits to production code.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.gc.run import run_gc
from engine.logical.dump import dump_tenant
from engine.logical.manifest import (
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    chain_hash,
    read_manifest,
    verify_dump,
)
from engine.logical.reload import discard_abandoned_staging, reload_dump
from engine.restore.job import (
    AlreadyInstalled,
    cancel_restore,
    choose_method,
    restore_tenant,
    resume_restore,
    staging_root,
)
from engine.restore.plan import plan_restore
from tenants.errors import (
    AlreadyExists,
    CorruptObject,
    InvalidArgument,
    NotFound,
    ObjectMissing,
)
from tenants.objects.row_hash import rows_hash
from tenants.store import TableStore
from tests.helpers.backups import (
    AT_MON,
    AT_SUN,
    DB,
    TABLES_AT_S,
    FailPutWhere,
    Source,
    build_source,
    catalog_counts,
    schema_of,
    tenant_rows,
    warehouse_keys,
)
from tests.helpers.restores import (
    FaultyCatalog,
    SimulatedCrash,
    WrappedObjectStore,
    catalog_rows,
    crashed_at,
    job_state,
    pins_of,
    reads,
    source_state,
    tenant_prefix,
    with_catalog,
    with_objects,
)

ROOT = "dumps/acme-mon"


@pytest.fixture
def source(store: TableStore) -> Source:
    return build_source(store)


def dump(store: TableStore, point: str | int = "mon", **kwargs: Any) -> Any:
    return dump_tenant(store, "acme", point, store.objects, ROOT, **kwargs).manifest


def file_table(store: TableStore, path: str, root: str = ROOT) -> pa.Table:
    return pq.read_table(io.BytesIO(store.objects.get(f"{root}/{path}")))


class Nothing:
    """What "nothing was loaded" means: no tenant row of any state, no catalog rows
    of a load, no keys under tenants/ of the warehouse, the same active tenants."""

    def __init__(self, store: TableStore) -> None:
        self.store = store
        self.tenants = tenant_rows(store)
        self.counts = catalog_counts(store)
        self.keys = warehouse_keys(store, "tenants/")
        self.source = source_state(store, "acme")

    def check(self) -> None:
        assert tenant_rows(self.store) == self.tenants
        assert catalog_counts(self.store) == self.counts
        assert warehouse_keys(self.store, "tenants/") == self.keys
        assert source_state(self.store, "acme") == self.source


# --- dump then reload -----------------------------------------------------------------------


def test_dump_then_reload_equals_the_source_at_s_with_the_schema_as_of_s(
    store: TableStore, source: Source
) -> None:
    dump(store)
    loaded = reload_dump(store, store.objects, ROOT, target_name="copy")

    assert loaded.tenant.name == "copy" and loaded.tenant.state == "active"
    assert (loaded.tenant.source_tenant_id, loaded.tenant.source_ts) == (
        store.tenant("acme").id,
        source.mon,
    )
    assert loaded.rows == sum(len(rows) for rows in AT_MON.values())
    # Every table live at S, including the empty one, the composite-key one and the one
    # dropped after S; not the one created after S; items without the column added after S.
    assert reads(store, "copy") == AT_MON
    assert schema_of(store, "copy") == schema_of(store, "acme", "mon")
    assert sorted(schema_of(store, "copy")) == TABLES_AT_S
    assert schema_of(store, "copy")["shop.orders"][1] == ("id", "region")
    assert [c.name for c in schema_of(store, "copy")["shop.items"][0]] == ["id", "v"]
    # The source is untouched and the copy is an ordinary, writable tenant.
    assert reads(store, "acme") == source.now_reads
    store.write("copy", f"{DB}.empty", upserts=pa.table({"id": [1], "note": ["x"]}))
    assert store.read("copy", f"{DB}.empty").to_pylist() == [{"id": 1, "note": "x"}]
    assert reads(store, "acme")["shop.empty"] == []


def test_dump_of_an_earlier_snapshot_reloads_that_snapshot(
    store: TableStore, source: Source
) -> None:
    dump_tenant(store, "acme", "sun", store.objects, "dumps/sun")
    reload_dump(store, store.objects, "dumps/sun", target_name="sunday")
    assert reads(store, "sunday") == AT_SUN


def test_manifest_records_format_source_time_ddl_counts_hashes_and_file_sizes(
    store: TableStore, source: Source
) -> None:
    written = dump(store, dump_id="d1")
    manifest = read_manifest(store.objects, ROOT)
    assert manifest == written
    raw = json.loads(store.objects.get(f"{ROOT}/{MANIFEST}"))
    assert (raw["format"], raw["format_version"]) == (FORMAT, FORMAT_VERSION) == ("rewind-dump", 3)
    acme = store.tenant("acme")
    assert (manifest.dump_id, manifest.source_tenant, manifest.source_tenant_id) == (
        "d1",
        "acme",
        acme.id,
    )
    assert (manifest.at_ts, manifest.at_label) == (source.mon, "mon")
    at_s = {t.qualified: t for t in store.tables("acme", "mon")}
    assert [t.qualified for t in manifest.tables] == sorted(at_s) == TABLES_AT_S
    keys = set(warehouse_keys(store, f"{ROOT}/"))
    listed = {f"{ROOT}/{MANIFEST}"}
    for table in manifest.tables:
        schema = at_s[table.qualified].schema
        assert table.schema() == schema
        assert (table.columns_json, table.primary_key_json, table.fingerprint) == (
            schema.columns_json(),
            schema.primary_key_json(),
            schema.fingerprint,
        )
        rows = store.read("acme", f"{DB}.{table.name}", "mon")
        assert table.rows == rows.num_rows == len(AT_MON[table.qualified])
        assert table.hash_kind == "row-parts"
        assert table.content_hash == chain_hash(
            [rows_hash(file_table(store, f.path)) for f in table.files]
        )
        assert table.content_hash == table.hash_of(rows)
        assert sum(f.rows for f in table.files) == table.rows
        for entry in table.files:
            data = store.objects.get(f"{ROOT}/{entry.path}")
            assert entry.bytes == len(data)
            assert entry.sha256 == hashlib.sha256(data).hexdigest()
            assert pq.read_table(io.BytesIO(data)).num_rows == entry.rows
            listed.add(f"{ROOT}/{entry.path}")
    # The manifest names every file of the dump, and nothing else is there.
    assert keys == listed
    assert manifest.rows == sum(len(r) for r in AT_MON.values())
    assert manifest.bytes == sum(
        size for key, size in warehouse_keys(store, f"{ROOT}/tables/").items()
    )


def test_dump_files_hold_the_visible_rows_sorted_by_key_without_ts(
    store: TableStore, source: Source
) -> None:
    manifest = dump(store)
    for table in manifest.tables:
        [entry] = table.files  # the default target size: one file per table
        assert entry.path == f"tables/{table.qualified}/part-00000.parquet"
        got = file_table(store, entry.path)
        assert "__ts" not in got.column_names
        assert got.to_pylist() == AT_MON[table.qualified]


def test_small_target_size_splits_a_table_into_several_sorted_parts(
    store: TableStore, source: Source
) -> None:
    manifest = dump(store, target_bytes=64)
    items = next(t for t in manifest.tables if t.name == "items")
    assert len(items.files) >= 3
    assert [f.path for f in items.files] == [
        f"tables/shop.items/part-{i:05d}.parquet" for i in range(len(items.files))
    ]
    parts = [file_table(store, f.path).to_pylist() for f in items.files]
    assert all(parts), "no empty part when the table has rows"
    # Parts are consecutive key ranges: their concatenation is the table at S in key order.
    assert [row for part in parts for row in part] == AT_MON["shop.items"]
    # An empty table still gets one (empty) file, so its schema travels with the dump.
    [empty] = [t.files for t in manifest.tables if t.name == "empty"]
    assert len(empty) == 1 and empty[0].rows == 0
    reload_dump(store, store.objects, ROOT, target_name="copy")
    assert reads(store, "copy") == AT_MON
    # One commit per non-empty file: each part became one object of the copy.
    copy_objects = [o for q, o in store.objects_of("copy") if q == "shop.items"]
    assert len(copy_objects) == len(items.files)


def test_dump_with_the_spark_reader_equals_the_local_one(
    store: TableStore, source: Source, spark: Any
) -> None:
    """Spark's executors write the files (one per key range), each hashed as it
    streams; the rows, in key order, are the local dump's, and the dump reloads."""
    local = dump(store)
    spark_dump = dump_tenant(
        store, "acme", "mon", store.objects, "dumps/spark", reader="spark", target_bytes=64
    ).manifest
    assert [(t.qualified, t.rows) for t in spark_dump.tables] == [
        (t.qualified, t.rows) for t in local.tables
    ]
    for ours, theirs in zip(spark_dump.tables, local.tables, strict=True):
        assert (ours.hash_kind, theirs.hash_kind) == ("row-parts", "row-parts")
        rows = [r for f in ours.files for r in file_table(store, f.path, "dumps/spark").to_pylist()]
        assert rows == AT_MON[ours.qualified]
        assert ours.hash_of(store.read("acme", f"{DB}.{ours.name}", "mon")) == ours.content_hash
    items = next(t for t in spark_dump.tables if t.name == "items")
    assert len(items.files) >= 2  # several executors' ranges, in key order
    reload_dump(store, store.objects, "dumps/spark", target_name="copy")
    assert reads(store, "copy") == AT_MON


# --- a dump without its manifest -----------------------------------------------------------------


def assert_not_loadable(store: TableStore, root: str) -> None:
    nothing = Nothing(store)
    with pytest.raises(ObjectMissing, match="incomplete"):
        read_manifest(store.objects, root)
    with pytest.raises(ObjectMissing, match="incomplete"):
        verify_dump(store.objects, root)
    with pytest.raises(ObjectMissing, match="incomplete"):
        reload_dump(store, store.objects, root, target_name="copy")
    nothing.check()
    with pytest.raises(NotFound, match="tenant 'copy' does not exist"):
        store.tenant("copy")


def test_dump_that_crashed_before_its_manifest_is_never_loadable_and_a_rerun_finishes(
    store: TableStore, source: Source
) -> None:
    crashing = FailPutWhere(store.objects, lambda key: key.endswith(MANIFEST))
    with pytest.raises(SimulatedCrash, match=re.escape(f"crash at put {ROOT}/{MANIFEST}")):
        dump_tenant(store, "acme", "mon", crashing, ROOT, dump_id="d1")
    assert crashing.failed == [f"{ROOT}/{MANIFEST}"]
    files = warehouse_keys(store, f"{ROOT}/")
    assert len(files) == 4 and all("/tables/" in k for k in files)  # every file, no manifest
    assert_not_loadable(store, ROOT)

    manifest = dump(store, dump_id="d1")  # the rerun overwrites its own files
    assert set(warehouse_keys(store, f"{ROOT}/")) == set(files) | {f"{ROOT}/{MANIFEST}"}
    assert verify_dump(store.objects, ROOT) == manifest
    reload_dump(store, store.objects, ROOT, target_name="copy")
    assert reads(store, "copy") == AT_MON


@pytest.mark.parametrize("crash_at_put", [1, 2, 3])
def test_dump_that_crashed_midway_is_never_loadable(
    store: TableStore, source: Source, crash_at_put: int
) -> None:
    crashing = WrappedObjectStore(store.objects, fail_put_at=crash_at_put)
    with pytest.raises(
        SimulatedCrash, match=rf"crash at put {re.escape(ROOT)}/tables/\S+\.parquet"
    ):
        dump_tenant(store, "acme", "mon", crashing, ROOT)
    assert len(warehouse_keys(store, f"{ROOT}/")) == crash_at_put - 1
    assert_not_loadable(store, ROOT)
    dump(store)
    reload_dump(store, store.objects, ROOT, target_name="copy")
    assert reads(store, "copy") == AT_MON


def test_dump_whose_manifest_was_deleted_is_never_loadable(
    store: TableStore, source: Source
) -> None:
    dump(store)
    store.objects.delete_many([f"{ROOT}/{MANIFEST}"])
    assert_not_loadable(store, ROOT)


# --- a reload that crashes ----------------------------------------------------------------------


@pytest.mark.parametrize("commit", [1, 2, 3])
def test_reload_crash_leaves_nothing_visible_and_a_rerun_with_the_same_staging_id_finishes(
    store: TableStore, source: Source, commit: int
) -> None:
    """Crash inside the k-th data commit of the load (3 non-empty files: items, gone, orders)."""
    manifest = dump(store)
    active = store.tenants()
    faulty = FaultyCatalog(store.catalog, "INSERT INTO membership (", occurrence=commit)
    with pytest.raises(SimulatedCrash, match=crashed_at("INSERT INTO membership (")):
        reload_dump(
            with_catalog(store, faulty),
            store.objects,
            ROOT,
            target_name="copy",
            staging_id="stage1",
        )

    assert store.tenants() == active
    with pytest.raises(NotFound, match="tenant 'copy' does not exist"):
        store.tenant("copy")
    assert reads(store, "acme") == source.now_reads
    # The half-built tenant is a staging row only, never active, never found by name.
    assert [r for r in tenant_rows(store) if r[1] == "stage1"] == [("copy", "stage1", "staging")]

    loaded = reload_dump(store, store.objects, ROOT, target_name="copy", staging_id="stage1")

    assert loaded.tenant.id == "stage1" and loaded.tenant.state == "active"
    assert reads(store, "copy") == AT_MON
    assert [r for r in tenant_rows(store) if r[2] == "staging"] == []
    # The objects the crashed attempt committed were forgotten, not installed twice.
    files = sum(1 for t in manifest.tables for f in t.files if f.rows)
    assert len(store.objects_of("copy")) == files


def test_reload_crash_at_the_swap_of_an_in_place_reload_keeps_the_old_tenant_active(
    store: TableStore, source: Source
) -> None:
    dump(store)
    acme = store.tenant("acme")
    faulty = FaultyCatalog(store.catalog, "UPDATE tenants SET state = 'active'")
    with pytest.raises(SimulatedCrash, match=crashed_at("UPDATE tenants SET state = 'active'")):
        reload_dump(
            with_catalog(store, faulty),
            store.objects,
            ROOT,
            target_name="acme",
            replace_tenant_id=acme.id,
            staging_id="stage2",
        )
    assert store.tenant("acme").id == acme.id and store.tenant("acme").state == "active"
    assert reads(store, "acme") == source.now_reads

    loaded = reload_dump(
        store,
        store.objects,
        ROOT,
        target_name="acme",
        replace_tenant_id=acme.id,
        staging_id="stage2",
    )
    assert store.tenant("acme").id == loaded.tenant.id == "stage2"
    assert store.tenant(acme.ref).state == "dropped"
    assert reads(store, "acme") == AT_MON
    assert reads(store, acme.ref) == source.now_reads


# --- restore_tenant(method="logical") --------------------------------------------------------------


def test_logical_clone_equals_physical_clone_equals_the_source_at_s(
    store: TableStore, source: Source
) -> None:
    before = source_state(store, "acme")
    logical = restore_tenant(store, "acme", "mon", to="lclone", method="logical")
    physical = restore_tenant(store, "acme", "mon", to="pclone", method="physical")

    assert (logical.method, physical.method) == ("logical", "physical")
    assert reads(store, "lclone") == reads(store, "pclone") == AT_MON
    assert (
        schema_of(store, "lclone") == schema_of(store, "pclone") == schema_of(store, "acme", "mon")
    )
    lclone = store.tenant("lclone")
    assert (lclone.source_tenant_id, lclone.source_ts, lclone.restore_job_id) == (
        before.tenant.id,
        source.mon,
        logical.job_id,
    )
    # A logical restore copies every row: it shares no object with the source.
    source_ids = {o.id for _, o in store.objects_of("acme")}
    assert all(o.key.startswith(tenant_prefix(lclone.id)) for _, o in store.objects_of("lclone"))
    assert not source_ids & {o.id for _, o in store.objects_of("lclone")}
    # The job is journaled, done, its pins released and its staging dump removed.
    assert job_state(store, logical.job_id) == "done"
    [job] = catalog_rows(store, "SELECT method FROM restore_jobs WHERE id = ?", (logical.job_id,))
    assert job["method"] == "logical"
    assert pins_of(store, logical.job_id) == []
    assert warehouse_keys(store, "staging/") == {}
    assert source_state(store, "acme") == before


def test_logical_restore_in_place_equals_physical_and_retires_the_old_tenant(
    store: TableStore, s3_server: Any, tmp_path: Any, source: Source
) -> None:
    old = store.tenant("acme")
    outcome = restore_tenant(store, "acme", "mon", method="logical")

    new = store.tenant("acme")
    assert outcome.tenant.id == new.id != old.id and outcome.method == "logical"
    assert store.tenant(old.ref).state == "dropped"
    assert reads(store, "acme") == AT_MON
    assert schema_of(store, "acme") == schema_of(store, old.ref, "mon")
    assert reads(store, old.ref) == source.now_reads  # the retired tenant still reads
    # A physical restore in place of the same point (from the retired tenant's lineage) agrees.
    physical = restore_tenant(store, old.ref, "mon", to="pclone", method="physical")
    assert reads(store, physical.tenant.ref) == reads(store, "acme")
    assert warehouse_keys(store, "staging/") == {}
    store.write("acme", f"{DB}.orders", deletes=pa.table({"id": [1], "region": ["eu"]}))
    assert len(reads(store, "acme")["shop.orders"]) == len(AT_MON["shop.orders"]) - 1


def test_auto_method_chooses_physical(store: TableStore, source: Source) -> None:
    plan = plan_restore(store.catalog, "acme", "mon", to="auto")
    assert choose_method("auto", plan)[0] == "physical"
    assert choose_method("logical", plan)[0] == "logical"
    with pytest.raises(InvalidArgument, match="unknown restore method 'dump'"):
        choose_method("dump", plan)
    outcome = restore_tenant(store, "acme", "mon", to="auto")
    assert outcome.method == "physical"
    [row] = catalog_rows(store, "SELECT method FROM restore_jobs WHERE id = ?", (outcome.job_id,))
    assert row["method"] == "physical"
    assert reads(store, "auto") == AT_MON


def only_unfinished_job(store: TableStore) -> str:
    [row] = catalog_rows(
        store, "SELECT id FROM restore_jobs WHERE state NOT IN ('done', 'cancelled')"
    )
    return str(row["id"])


CRASHES = {
    # the 2nd put of the dump into staging/<job>/
    "mid_dump": lambda s: with_objects(s, WrappedObjectStore(s.objects, fail_put_at=2)),
    # the dump is complete: its manifest write is where it dies
    "at_dump_manifest": lambda s: with_objects(
        s, FailPutWhere(s.objects, lambda key: key.endswith(MANIFEST))
    ),
    # the 2nd data commit of the reload
    "mid_reload": lambda s: with_catalog(
        s, FaultyCatalog(s.catalog, "INSERT INTO membership (", occurrence=2)
    ),
    # the swap commits, the job does not learn it
    "after_swap": lambda s: with_catalog(
        s, FaultyCatalog(s.catalog, "UPDATE tenants SET state = 'active'", after_commit=True)
    ),
}
# What each of them says when it dies.
CRASHED = {
    "mid_dump": r"crash at put staging/\w+/tables/\S+\.parquet",
    "at_dump_manifest": rf"crash at put staging/\w+/{re.escape(MANIFEST)}",
    "mid_reload": crashed_at("INSERT INTO membership ("),
    "after_swap": crashed_at("UPDATE tenants SET state = 'active'", after_commit=True),
}


@pytest.mark.parametrize("in_place", [False, True], ids=["clone", "in_place"])
@pytest.mark.parametrize("crash", sorted(CRASHES))
def test_logical_restore_is_journaled_and_a_crash_anywhere_resumes_to_the_same_result(
    store: TableStore, source: Source, crash: str, in_place: bool
) -> None:
    before = source_state(store, "acme")
    to = None if in_place else "clone"
    with pytest.raises(SimulatedCrash, match=CRASHED[crash]):
        restore_tenant(CRASHES[crash](store), "acme", "mon", to=to, method="logical")
    target = "acme" if in_place else "clone"
    if crash == "after_swap":
        # The swap and the job's end are one commit: the job is done, and neither
        # --resume nor --cancel (which would delete the live tenant's objects) applies.
        [row] = catalog_rows(store, "SELECT id FROM restore_jobs WHERE state = 'done'")
        job_id = str(row["id"])
        with pytest.raises(InvalidArgument, match=f"restore job {job_id} is done"):
            resume_restore(store, job_id)
        with pytest.raises(AlreadyInstalled, match="cannot be cancelled"):
            cancel_restore(store, job_id)
        # The dump in staging/ is left for GC (the process died before deleting it).
        assert warehouse_keys(store, staging_root(job_id) + "/") != {}
        run_gc(store, dry_run=False, grace_us=0, orphan_grace_us=0, allow_short_grace=True)
        assert warehouse_keys(store, staging_root(job_id) + "/") == {}
        assert reads(store, target) == AT_MON
        return
    job_id = only_unfinished_job(store)
    # Nothing visible changed: the source still holds its name, no clone exists.
    assert source_state(store, "acme") == before
    if not in_place:
        with pytest.raises(NotFound, match="tenant 'clone' does not exist"):
            store.tenant("clone")

    outcome = resume_restore(store, job_id)

    assert outcome.job_id == job_id and outcome.method == "logical"
    assert job_state(store, job_id) == "done" and pins_of(store, job_id) == []
    assert reads(store, target) == AT_MON
    installed = catalog_rows(
        store, "SELECT id, state FROM tenants WHERE restore_job_id = ?", (job_id,)
    )
    assert installed == [{"id": store.tenant(target).id, "state": "active"}]
    assert [r for r in tenant_rows(store) if r[2] == "staging"] == []
    assert warehouse_keys(store, staging_root(job_id) + "/") == {}
    if in_place:
        assert store.tenant(before.tenant.ref).state == "dropped"
        assert reads(store, before.tenant.ref) == before.reads_now
    else:
        assert source_state(store, "acme") == before


def test_logical_restore_at_now_resumes_after_the_source_took_a_write(
    store: TableStore, source: Source
) -> None:
    """The job pinned what it reads at S = now; a later write to the source must not
    make S unreachable for the resumed dump."""
    at = store.now()
    expected = reads(store, "acme")
    with pytest.raises(SimulatedCrash, match=r"crash at put staging/\w+/tables/\S+\.parquet"):
        restore_tenant(
            with_objects(store, WrappedObjectStore(store.objects, fail_put_at=1)),
            "acme",
            at,
            to="clone",
            method="logical",
        )
    job_id = only_unfinished_job(store)
    store.write("acme", f"{DB}.orders", deletes=pa.table({"id": [4], "region": ["eu"]}))

    resume_restore(store, job_id)

    assert reads(store, "clone") == expected


@pytest.mark.parametrize("crash", ["mid_dump", "mid_reload"])
def test_cancel_of_a_crashed_logical_restore_removes_its_staging_dump_and_tenant(
    store: TableStore, source: Source, crash: str
) -> None:
    before = source_state(store, "acme")
    with pytest.raises(SimulatedCrash, match=CRASHED[crash]):
        restore_tenant(CRASHES[crash](store), "acme", "mon", method="logical")
    job_id = only_unfinished_job(store)
    [row] = catalog_rows(store, "SELECT new_tenant_id FROM restore_jobs WHERE id = ?", (job_id,))
    new_id = row["new_tenant_id"]
    assert warehouse_keys(store, staging_root(job_id) + "/") != {}

    job = cancel_restore(store, job_id)

    assert job.state == "cancelled" and pins_of(store, job_id) == []
    assert warehouse_keys(store, staging_root(job_id) + "/") == {}
    assert warehouse_keys(store, tenant_prefix(new_id)) == {}
    assert catalog_rows(store, "SELECT id FROM tenants WHERE id = ?", (new_id,)) == []
    assert [r for r in tenant_rows(store) if r[2] == "staging"] == []
    assert source_state(store, "acme") == before
    # The tenant is free for another restore.
    restore_tenant(store, "acme", "mon", to="again", method="logical")
    assert reads(store, "again") == AT_MON


def test_tenant_purge_never_discards_the_staging_tenant_of_an_unfinished_restore_job(
    store: TableStore, source: Source
) -> None:
    """Only an abandoned staging tenant is discarded; one a resumable job is building
    is refused with the job that owns it and how to end that job."""
    with pytest.raises(SimulatedCrash, match=CRASHED["mid_reload"]):
        restore_tenant(CRASHES["mid_reload"](store), "acme", "mon", to="clone", method="logical")
    job_id = only_unfinished_job(store)
    [row] = catalog_rows(store, "SELECT new_tenant_id FROM restore_jobs WHERE id = ?", (job_id,))
    new_id = str(row["new_tenant_id"])
    keys_before = warehouse_keys(store, tenant_prefix(new_id))
    assert keys_before != {}

    with pytest.raises(
        InvalidArgument,
        match=rf"belongs to unfinished restore job {job_id}; resume or cancel that job "
        rf"\(`rewind restore-tenant clone --cancel {job_id}`\)",
    ):
        discard_abandoned_staging(store, f"clone@{new_id}")

    assert [r for r in tenant_rows(store) if r[1] == new_id] == [("clone", new_id, "staging")]
    assert warehouse_keys(store, tenant_prefix(new_id)) == keys_before
    resume_restore(store, job_id)
    assert reads(store, "clone") == AT_MON


# --- bad inputs: loud, and nothing loaded -----------------------------------------------------------


def _manifest_json(store: TableStore) -> dict[str, Any]:
    return json.loads(store.objects.get(f"{ROOT}/{MANIFEST}"))


def _put_manifest(store: TableStore, raw: dict[str, Any]) -> None:
    store.objects.put(f"{ROOT}/{MANIFEST}", json.dumps(raw).encode())


def _missing_file(store: TableStore) -> str:
    # The last file loaded (orders): the files before it are loaded first.
    path = f"{ROOT}/tables/shop.orders/part-00000.parquet"
    store.objects.delete_many([path])
    return "shop.orders/part-00000.parquet"


def _tampered_file(store: TableStore) -> str:
    path = f"{ROOT}/tables/shop.orders/part-00000.parquet"
    data = bytearray(store.objects.get(path))
    data[len(data) // 2] ^= 0xFF  # same size, different bytes
    store.objects.put(path, bytes(data))
    return "shop.orders/part-00000.parquet does not match the manifest"


def _unknown_version(store: TableStore) -> str:
    _put_manifest(store, _manifest_json(store) | {"format_version": FORMAT_VERSION + 1})
    return f"format version {FORMAT_VERSION + 1}"


def _version_1(store: TableStore) -> str:
    """Format 1 (a whole-table hash, no hash kind) is refused like any other version."""
    raw = _manifest_json(store)
    for table in raw["tables"]:
        del table["hash_kind"]
    _put_manifest(store, raw | {"format_version": 1})
    return f"format version 1; this Rewind reads version {FORMAT_VERSION}: use a matching Rewind"


def _altered_fingerprint(store: TableStore) -> str:
    raw = _manifest_json(store)
    raw["tables"][-1]["fingerprint"] = "0" * 32
    _put_manifest(store, raw)
    return "shop.orders: schema fingerprint 0+ does not match"


def _altered_columns(store: TableStore) -> str:
    raw = _manifest_json(store)
    table = raw["tables"][-1]
    table["columns_json"] = table["columns_json"].replace(
        '"qty", "type": "int32"', '"qty", "type": "int64"'
    )
    _put_manifest(store, raw)
    return "shop.orders: schema fingerprint"


def _existing_name(store: TableStore) -> str:
    store.create_tenant("copy")
    return "an active tenant has that name"


BAD_DUMPS: dict[str, tuple[Any, type[Exception]]] = {
    "missing_file": (_missing_file, ObjectMissing),
    "tampered_file": (_tampered_file, CorruptObject),
    "unknown_format_version": (_unknown_version, InvalidArgument),
    "format_version_1": (_version_1, InvalidArgument),
    "altered_fingerprint": (_altered_fingerprint, CorruptObject),
    "altered_columns": (_altered_columns, CorruptObject),
    "existing_name": (_existing_name, AlreadyExists),
}


@pytest.mark.parametrize("case", sorted(BAD_DUMPS))
def test_bad_dump_fails_loudly_and_loads_nothing(
    store: TableStore, source: Source, case: str
) -> None:
    dump(store)
    spoil, error = BAD_DUMPS[case]
    message = spoil(store)
    nothing = Nothing(store)

    with pytest.raises(error, match=message):
        reload_dump(store, store.objects, ROOT, target_name="copy")

    nothing.check()
    if case != "existing_name":
        with pytest.raises(error, match=message):
            verify_dump(store.objects, ROOT)
        with pytest.raises(NotFound, match="tenant 'copy' does not exist"):
            store.tenant("copy")


def test_reload_into_an_existing_name_with_replace_retires_that_tenant(
    store: TableStore, source: Source
) -> None:
    dump(store)
    other = store.create_tenant("copy")
    reload_dump(store, store.objects, ROOT, target_name="copy", replace_tenant_id=other.id)
    assert reads(store, "copy") == AT_MON
    assert store.tenant(other.ref).state == "dropped"
