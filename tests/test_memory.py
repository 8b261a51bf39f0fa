"""Memory is a budget: streamed operations stay bounded whatever the object's size.

Each operation runs in a fresh subprocess (tests/helpers/memory_job.py), on an object
large enough that holding it (as the code before streaming did: 480 MB of
growth for a 43 MB object) would break the bound many times over. These tests
assert memory, never time. The child gets production row-group and batch
sizes, not the suite's tiny ones.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from tenants import allocator
from tenants.objects import writer as object_writer
from tenants.objects.io import record_of
from tenants.objects.record import ObjectRecord, object_key
from tenants.objects.writer import ObjectWriter
from tenants.objectstore import ObjectStore, open_object_store
from tenants.objectstore.embedded import EmbeddedS3
from tenants.schema import TS
from tests.helpers.paths import HELPERS

MB = 1_000_000
JOB = HELPERS / "memory_job.py"
PRODUCTION_ROW_GROUP = 128 * 1024


def big_object(store: ObjectStore, target_bytes: int, name: str = "big") -> ObjectRecord:
    """A straddling object of about ``target_bytes`` of incompressible rows, two
    versions per id (ts 1 and 2), written in bounded memory."""
    rng = np.random.default_rng(7)
    payload = 200
    schema = pa.schema([("id", pa.int64()), ("p", pa.binary()), (TS, pa.int64())])
    key = object_key("src", "tbl", "data", name)
    rows_per_batch = min(50_000, max(2, target_bytes // payload // 2 * 2))
    batches = max(1, target_bytes // (rows_per_batch * payload))
    with ObjectWriter(store, key, schema, ["id"]) as writer:
        for b in range(batches):
            ids = np.repeat(np.arange(rows_per_batch // 2) + b * rows_per_batch, 2)
            stamps = np.tile([1, 2], rows_per_batch // 2)
            noise = rng.integers(0, 256, size=rows_per_batch * payload, dtype=np.uint8)
            offsets = pa.array(
                np.arange(0, (rows_per_batch + 1) * payload, payload, dtype=np.int32)
            )
            values = pa.BinaryArray.from_buffers(
                pa.binary(), rows_per_batch, [None, offsets.buffers()[1], pa.py_buffer(noise)]
            )
            writer.write(
                pa.RecordBatch.from_arrays([pa.array(ids), values, pa.array(stamps)], schema=schema)
            )
        written = writer.finish()
    return record_of(written, name, "data", "fp", 0)


def run_job(job: dict[str, object]) -> dict[str, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REWIND_")}
    done = subprocess.run(
        [sys.executable, str(JOB), json.dumps(job)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


@pytest.mark.parametrize("where", ["file", "s3"])
def test_rewrite_of_a_300_mb_object_grows_the_process_by_under_150_mb(
    where: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(object_writer, "ROW_GROUP_ROWS", PRODUCTION_ROW_GROUP)
    if where == "file":
        uri = f"file://{tmp_path / 'warehouse'}"
        store = open_object_store(uri)
    else:
        s3: EmbeddedS3 = request.getfixturevalue("s3_server")
        bucket: str = request.getfixturevalue("bucket")
        uri = f"s3://{bucket}/warehouse"
        store = open_object_store(uri, s3.settings)
    record = big_object(store, 300 * MB)
    assert record.bytes > 290 * MB
    warm = big_object(store, 2 * MB, "warm")

    report = run_job(
        {
            "what": "rewrite",
            "warehouse": uri,
            "record": asdict(record),
            "warm": asdict(warm),
            "as_of": 1,
        }
    )

    assert report["rows"] == record.rows // 2
    growth_mb = (report["peak_kib"] - report["baseline_kib"]) * 1024 / MB
    assert growth_mb < 150, (
        f"the rewrite of a {record.bytes / MB:.0f} MB object grew by {growth_mb:.0f} MB"
    )


def test_full_compaction_of_a_300_mb_table_stays_within_its_budget(
    tmp_path: Path, new_catalog_uri, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten commits that each span the whole key range: every merge round reads
    all ten objects at once, so the budget decides the batch sizes. The budget
    bounds the whole process's peak RSS (imports, catalog and all): 384 MiB,
    the least ``--memory`` accepts. Before the plan counted the process, the
    allocator and the checksum chunks, this peaked above it (454 MiB)."""
    from tenants.schema import Column, TableSchema
    from tenants.store import TableStore

    # Objects as Rewind writes them, not the suite's 40-row groups (whose
    # footers alone take MiBs per open reader).
    monkeypatch.setattr(object_writer, "ROW_GROUP_ROWS", PRODUCTION_ROW_GROUP)
    catalog = new_catalog_uri()
    warehouse = f"file://{tmp_path / 'warehouse'}"
    store = TableStore.open(catalog, warehouse)
    store.create_tenant("acme")
    schema = TableSchema((Column("id", "int64", nullable=False), Column("p", "binary")), ("id",))
    store.create_table("acme", "db.t", schema)
    rng = np.random.default_rng(3)
    rows = 150_000
    distinct: set[int] = set()
    for _ in range(10):
        ids = rng.choice(2_000_000, size=rows, replace=False)
        distinct.update(ids.tolist())
        payload = rng.integers(0, 256, size=rows * 200, dtype=np.uint8)
        offsets = np.arange(0, (rows + 1) * 200, 200, dtype=np.int32)
        values = pa.BinaryArray.from_buffers(
            pa.binary(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(payload)]
        )
        store.write("acme", "db.t", upserts=pa.table({"id": ids, "p": values}))
    stored = sum(o.bytes for _, o in store.objects_of("acme"))
    assert stored > 290 * MB
    budget = 384 * 1024 * 1024

    report = run_job(
        {"what": "compact", "catalog": catalog, "warehouse": warehouse, "memory": budget}
    )

    assert report["rows"] == len(distinct)  # no snapshot: the newest version of each id
    peak_mib = report["peak_kib"] / 1024
    assert peak_mib <= budget / 1024 / 1024, (
        f"compacting {stored / MB:.0f} MB under a {budget >> 20} MiB budget peaked at "
        f"{peak_mib:.0f} MiB (baseline {report['baseline_kib'] / 1024:.0f} MiB)"
    )


def test_loading_a_400_mb_csv_grows_the_process_by_under_300_mb(
    tmp_path: Path, new_catalog_uri
) -> None:
    import pyarrow.csv as pa_csv

    from tenants.schema import Column, TableSchema
    from tenants.store import TableStore

    catalog = new_catalog_uri()
    warehouse = f"file://{tmp_path / 'warehouse'}"
    store = TableStore.open(catalog, warehouse)
    store.create_tenant("acme")
    schema = TableSchema((Column("id", "int64", nullable=False), Column("v", "string")), ("id",))
    store.create_table("acme", "db.t", schema)
    store.create_table("acme", "db.warm", schema)
    csv = tmp_path / "big.csv"
    rng = np.random.default_rng(4)
    ids = rng.permutation(1_900_000)  # shuffled: every chunk spans the whole key range
    width = 200
    with pa_csv.CSVWriter(csv, pa.schema([("id", pa.int64()), ("v", pa.string())])) as out:
        for start in range(0, len(ids), 100_000):
            chunk = ids[start : start + 100_000]
            letters = rng.integers(ord("a"), ord("z") + 1, size=len(chunk) * width, dtype=np.uint8)
            offsets = np.arange(0, (len(chunk) + 1) * width, width, dtype=np.int32)
            values = pa.StringArray.from_buffers(
                len(chunk), pa.py_buffer(offsets), pa.py_buffer(letters)
            )
            out.write_table(pa.table({"id": chunk, "v": values}))
    warm = tmp_path / "warm.csv"
    warm.write_text("id,v\n1,a\n2,b\n")
    size_mb = csv.stat().st_size / MB
    assert size_mb > 390

    report = run_job(
        {
            "what": "load",
            "catalog": catalog,
            "warehouse": warehouse,
            "csv": str(csv),
            "warm": str(warm),
        }
    )

    assert report["rows"] == len(ids)
    growth_mb = (report["peak_kib"] - report["baseline_kib"]) * 1024 / MB
    assert growth_mb < 300, f"loading {size_mb:.0f} MB grew the process by {growth_mb:.0f} MB"


def test_a_diff_and_a_revert_grow_the_process_by_what_they_read_at_once_not_the_change(
    tmp_path: Path, new_catalog_uri
) -> None:
    """A commit that rewrote every row of a table: its diff is the table twice
    (before and after), its revert a commit as big. Both stream: a change four
    times larger grows the process about as much (a row group per open object, a
    chunk of keys), and less than the change."""
    from tenants.schema import Column, TableSchema
    from tenants.store import TableStore

    catalog = new_catalog_uri()
    warehouse = f"file://{tmp_path / 'warehouse'}"
    store = TableStore.open(catalog, warehouse)
    store.create_tenant("acme")
    store.set_pitr("acme", 3_600_000_000)
    schema = TableSchema((Column("id", "int64", nullable=False), Column("v", "string")), ("id",))
    rng = np.random.default_rng(5)
    width = 200

    def batches(rows: int) -> Iterator[pa.Table]:
        for start in range(0, rows, 100_000):
            n = min(100_000, rows - start)
            letters = rng.integers(ord("a"), ord("z") + 1, size=n * width, dtype=np.uint8)
            offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
            values = pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(letters))
            yield pa.table({"id": np.arange(start, start + n) * 2, "v": values})

    sizes = {"db.warm": 1_000, "db.small": 150_000, "db.big": 600_000}
    for table, rows in sizes.items():
        store.create_table("acme", table, schema)
        store.load("acme", table, batches(rows))
    store.create_snapshot("acme", "before")
    # new random values: every row updated
    commits = {table: store.load("acme", table, batches(rows)).ts for table, rows in sizes.items()}
    store.close()

    report = run_job(
        {"what": "diff", "catalog": catalog, "warehouse": warehouse, "commits": commits}
    )

    mb = {k: v * 1024 / MB for k, v in report.items() if k.endswith("_kib")}
    assert report["small_rows"] == sizes["db.small"] and report["big_rows"] == sizes["db.big"]
    change_mb = 2 * sizes["db.big"] * width / MB  # before and after
    for what in ("small_diff", "big_diff", "small_revert", "big_revert"):
        assert mb[f"{what}_kib"] < 300, f"{what} grew the process by {mb[what + '_kib']:.0f} MB"
    for what in ("diff", "revert"):
        big, small = mb[f"big_{what}_kib"], mb[f"small_{what}_kib"]
        assert big < small + 60, f"a {what} 4x larger grew {big:.0f} MB, not ~{small:.0f} MB"
        assert big < change_mb, f"a {what} of {change_mb:.0f} MB of rows grew {big:.0f} MB"


def test_gc_collection_grows_the_process_by_the_same_few_mib_for_10x_the_garbage(
    tmp_path: Path, new_catalog_uri
) -> None:
    """GC decides with one INSERT ... SELECT and finishes its decisions 5,000 at
    a time, keeping only counts and a sample: collecting 2x10^5 garbage objects
    grows the process about as much as 2x10^4 (before, it held every candidate and
    every pending row as Python objects: ~100 MiB more per 10^5)."""
    from tenants.store import TableStore
    from tests.helpers.gc import register_unreferenced

    growth: dict[int, float] = {}
    for n in (20_000, 200_000):
        catalog = new_catalog_uri()
        warehouse = f"file://{tmp_path / f'warehouse-{n}'}"
        store = TableStore.open(catalog, warehouse)
        register_unreferenced(store, n)
        store.close()
        report = run_job({"what": "gc_collect", "catalog": catalog, "warehouse": warehouse})
        assert report["rows"] == n
        growth[n] = (report["peak_kib"] - report["baseline_kib"]) * 1024 / MB

    small, big = growth[20_000], growth[200_000]
    assert big < small + 8, f"10x the garbage grew the process {big:.1f} MB, not ~{small:.1f} MB"
    assert big < 40, f"collecting 2x10^5 objects grew the process by {big:.0f} MB"


def test_rewind_allocates_through_jemalloc_where_pyarrow_has_it() -> None:
    """A fresh process that imports Rewind before pyarrow gets jemalloc (Linux,
    macOS): under mimalloc a 10 GB compaction overran ``--memory 512MiB``
    (577 MiB), under jemalloc it kept it (504 MiB; docs/decisions.md)."""
    code = "import tenants, pyarrow as pa; print(pa.default_memory_pool().backend_name)"
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    expected = allocator.ENVIRONMENT.get("ARROW_DEFAULT_MEMORY_POOL", "mimalloc")
    assert done.stdout.strip() == expected


@pytest.mark.parametrize("new_catalog_uri", ["sqlite"], indirect=True)
def test_a_table_at_a_snapshot_streams_through_each_engine_in_a_fraction_of_its_size(
    tmp_path: Path, new_catalog_uri, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 500 MB table (twenty appends, then updates and deletes across them) read at
    a snapshot through read_arrow, DuckDB and polars (tenants.reads.interop): after a
    warm-up read of a 50 MB table of the same shape, each grows the process by a
    fraction of the visible rows' size, which holding them would take. Measured:
    about 80-125 MB, the same for half the table (memory grows with how many
    objects overlap, a few batches each, never with the table's size:
    docs/engines.md)."""
    from tenants.schema import Column, TableSchema
    from tenants.store import TableStore

    monkeypatch.setattr(object_writer, "ROW_GROUP_ROWS", PRODUCTION_ROW_GROUP)
    catalog = new_catalog_uri()
    warehouse = f"file://{tmp_path / 'warehouse'}"
    store = TableStore.open(catalog, warehouse)
    store.create_tenant("acme")
    schema = TableSchema((Column("id", "int64", nullable=False), Column("p", "binary")), ("id",))
    rng = np.random.default_rng(5)
    rows, width = 120_000, 200

    def payload(count: int) -> pa.Array:
        noise = rng.integers(0, 256, size=count * width, dtype=np.uint8)
        offsets = np.arange(0, (count + 1) * width, width, dtype=np.int32)
        return pa.BinaryArray.from_buffers(
            pa.binary(), count, [None, pa.py_buffer(offsets), pa.py_buffer(noise)]
        )

    visible = {}
    for table, commits in (("warm", 2), ("t", 20)):
        store.create_table("acme", f"db.{table}", schema)
        for commit in range(commits):
            ids = np.arange(commit * rows, (commit + 1) * rows, dtype=np.int64)
            store.write("acme", f"db.{table}", upserts=pa.table({"id": ids, "p": payload(rows)}))
        changed = rng.choice(commits * rows, size=2_000, replace=False)
        store.write(
            "acme",
            f"db.{table}",
            upserts=pa.table({"id": changed[:1_000], "p": payload(1_000)}),
            deletes=pa.table({"id": changed[1_000:]}),
        )
        visible[table] = commits * rows - 1_000
    store.create_snapshot("acme", "s")
    store.write("acme", "db.t", deletes=pa.table({"id": np.arange(0, rows, dtype=np.int64)}))
    visible_mb = visible["t"] * (width + 8 + 4) / MB  # Arrow: id, payload, its offset
    assert visible_mb > 500

    grew = {}
    for engine in ("arrow", "duckdb", "polars"):
        report = run_job(
            {"what": "engine", "engine": engine, "catalog": catalog, "warehouse": warehouse}
        )
        assert report["rows"] == visible["t"], engine
        grew[engine] = (report["peak_kib"] - report["baseline_kib"]) * 1024 / MB
    print({engine: f"{mb:.0f} MB" for engine, mb in grew.items()}, f"visible {visible_mb:.0f} MB")
    for engine, growth_mb in grew.items():
        assert growth_mb < visible_mb / 3, (
            f"reading {visible_mb:.0f} MB of visible rows through {engine} grew the process "
            f"by {growth_mb:.0f} MB"
        )
