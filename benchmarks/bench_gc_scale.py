"""GC pass time against warehouse size, with the same garbage (issue 37).

Per size N in ``--sizes`` (live objects), catalog and warehouse: N live
objects in N / 1,000 tables (at least 4), 1,000 garbage objects (registered,
their memberships ended) and 100 writers that died after uploading (an intent
begun 25 hours before the pass, two keys under it each, nothing registered).
Objects are 16-byte payloads put straight into the warehouse (as bench_gc
does: on moto into the in-process server's backend, on ``file://`` one file
each) and registered in the catalog in bulk; the pass runs with
``compact=False`` (they are not Parquet; what compaction's measurement costs
is bench_gc_measure's) and a zero grace for unreferenced objects, so the same
1,000 + 200 keys are garbage at every size.

A GC pass runs once after the live objects are registered and before the
garbage is made (registration queued every object for GC's decision, as a
deployment's earlier passes would have examined them), so the measured pass
sees the garbage, not the warehouse's first registration. Each measured pass
runs in a fresh child process (``--child``) so its peak RSS
(``VmHWM`` after ``/proc/self/clear_refs``) is its own: the **default pass**
(orphans found under stale intents) and, side by side in the same run, the
**deep pass** (``--deep``: the whole warehouse listed, which is what every
pass did before intents). Reported: seconds per phase (and collection's
steps: decide, delete, forget), keys deleted per second, peak RSS. A pass
takes well under a second, so on a SQLite catalog the default pass runs
``--repeat`` times (5), the catalog copied back and the deleted keys put back
between runs, and the median run is reported with every run's seconds. Goal: the default pass at 10^6 live objects within 1.5x of
the pass at 10^4; at least 5,000 deletes/s on moto; RSS under 256 MiB.

``--garbage 1e5`` makes the garbage large, to measure the rate a pass deletes
at end to end (the goal of 5,000/s on moto) rather than its fixed costs.

``python -m benchmarks.bench_gc_scale [--quick]`` (quick: 10^3 and 10^4, file and
moto, SQLite). JSON: ``benchmarks/results/bench_gc_scale[_quick].json``; the
picture ``..._passes.png`` beside it (benchmarks/plots.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks.bench_gc import PAYLOAD, _upload
from benchmarks.common import (
    RESULTS_DIR,
    ROOT,
    finish_run,
    load_average,
    moto_server,
    new_catalog_uri,
    parse_sizes,
)
from benchmarks.plots import draw_beside
from engine.gc.run import run_gc
from tenants.objects.intents import begin_intent
from tenants.objects.record import ObjectRecord, object_key
from tenants.schema import TableSchema
from tenants.store import TableStore
from tenants.tenancy import new_id
from tenants.times import US

NAME = "bench_gc_scale"
FULL_SIZES = (10_000, 100_000, 1_000_000)
QUICK_SIZES = (1_000, 10_000)
GARBAGE = 1_000
DEAD_WRITERS = 100
KEYS_PER_WRITER = 2
PER_TABLE = 1_000
SCHEMA = TableSchema.of([("id", "int64"), ("v", "string")], ["id"])
BATCH = 5_000
SAME_TABLES = 10  # --spread same: the garbage's tables at every size (all of them at 10^4)


class Clock:
    """The catalog's wall clock, set by the benchmark (intents must look stale)."""

    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def _records(
    table_id: str, tenant_id: str, ts: int, count: int, kind: str = "data"
) -> list[ObjectRecord]:
    out = []
    for i in range(count):
        object_id = new_id()
        out.append(
            ObjectRecord(
                id=object_id,
                key=object_key(tenant_id, table_id, "data", object_id),
                kind="data",
                fingerprint=SCHEMA.fingerprint,
                rows=1,
                bytes=len(PAYLOAD),
                min_ts=ts,
                max_ts=ts,
                min_pk=json.dumps([i]),
                max_pk=json.dumps([i]),
                sorted=True,
                checksum="0" * 64,
                created_ts=ts,
            )
        )
    return out


def _register(store: TableStore, table_id: str, records: list[ObjectRecord]) -> None:
    """Objects and one live membership each, in batched statements (setup, not
    measured: what a commit registers, without a statement per row)."""
    from tenants.catalog.objects import insert_members

    for start in range(0, len(records), BATCH):
        with store.catalog.transaction() as tx:
            ts = tx.commit_ts()
            insert_members(tx, [(table_id, r) for r in records[start : start + BATCH]], ts)


def build(
    backend: str,
    catalog: str,
    size: int,
    workdir: Path,
    garbage: int = GARBAGE,
    spread: str = "all",
) -> dict[str, Any]:
    """A warehouse of ``size`` live objects plus ``garbage``; what the child needs.

    ``spread``: ``all`` puts the garbage (and the dead writers) in every table,
    so at 10^6 each of the 1,000 tables has one garbage object; ``same`` keeps
    them in the first :data:`SAME_TABLES` tables at every size, so the same
    garbage sits in a larger warehouse."""
    catalog_uri = new_catalog_uri(catalog, workdir)  # type: ignore[arg-type]
    start = time.time_ns() // 1000
    clock = Clock(start)
    if backend == "moto":
        server = moto_server()
        bucket = f"rewind-bench-{uuid.uuid4().hex[:12]}"
        server.create_bucket(bucket)
        warehouse = f"s3://{bucket}/warehouse"
        store = TableStore.open(catalog_uri, warehouse, s3=server.settings, clock=clock)
    else:
        warehouse = f"file://{workdir / 'warehouse'}"
        store = TableStore.open(catalog_uri, warehouse, clock=clock)
    built = time.perf_counter()
    try:
        tenant = store.create_tenant("bench")
        tables = []
        for n in range(max(4, size // PER_TABLE)):
            tables.append(store.create_table("bench", f"db.t{n}", SCHEMA))
        keys: list[str] = []
        ts = store.now()
        per = -(-size // len(tables))
        garbage_ids: list[str] = []
        garbage_keys: list[str] = []
        hosts = len(tables) if spread == "all" else min(SAME_TABLES, len(tables))
        for n, table in enumerate(tables):
            count = min(per, size - n * per)
            extra = (garbage // hosts + (1 if n < garbage % hosts else 0)) if n < hosts else 0
            records = _records(table.id, tenant.id, ts, max(0, count) + extra)
            _register(store, table.id, records)
            garbage_ids += [r.id for r in records[:extra]]
            garbage_keys += [r.key for r in records[:extra]]
            keys += [r.key for r in records]
        # A pass before the garbage exists: registering the warehouse queued every
        # object for GC's decision (docs/gc.md), which a deployment's earlier passes
        # have examined; the measured pass then sees what changed since the last one.
        run_gc(store, dry_run=False, grace_us=0, allow_short_grace=True, compact=False)
        with store.catalog.transaction() as tx:  # the garbage: memberships ended long ago
            for s in range(0, len(garbage_ids), 500):
                chunk = garbage_ids[s : s + 500]
                marks = ", ".join("?" for _ in chunk)
                tx.execute(
                    f"UPDATE membership SET removed_ts = ? WHERE object_id IN ({marks})",
                    [ts + 1, *chunk],
                )
        orphans = []
        clock.now = start - 25 * US["h"]  # the dead writers began a day ago
        for n in range(DEAD_WRITERS):
            table = tables[n % hosts]
            intent = begin_intent(store.catalog, "write", [(tenant.id, table.id)], ["data"])
            for _ in range(KEYS_PER_WRITER):
                orphans.append(
                    object_key(tenant.id, table.id, "data", intent.new_object_id("data"))
                )
        clock.now = start
        method = _upload(store, backend, keys + orphans)  # type: ignore[arg-type]
    finally:
        store.close()
    return {
        "catalog_uri": catalog_uri,
        "warehouse": warehouse,
        "now_us": start + 26 * US["h"],
        "live": size,
        "tables": len(tables),
        "garbage": len(garbage_ids),
        "garbage_tables": hosts,
        "orphans": len(orphans),
        "build_seconds": round(time.perf_counter() - built, 1),
        "upload": method,
        "doomed_keys": garbage_keys + orphans,  # what a pass deletes: put back to repeat it
    }


def _catalog_file(spec: dict[str, Any]) -> Path | None:
    uri = spec["catalog_uri"]
    return Path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:///") else None


def keep_pristine(spec: dict[str, Any]) -> bool:
    """Copy a SQLite catalog aside so the pass can be repeated; False on PostgreSQL."""
    db = _catalog_file(spec)
    if db is None:
        return False
    with sqlite3.connect(db) as conn:  # the WAL into the file: one file to copy
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copyfile(db, db.with_suffix(".pristine"))
    return True


def reset(spec: dict[str, Any], backend: str) -> None:
    """The world as built again: the catalog from its copy, the deleted keys put back
    (their age is what the pass's clock, 26 h ahead, makes of now)."""
    db = _catalog_file(spec)
    assert db is not None
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(db.with_suffix(".pristine"), db)
    store = TableStore.open(spec["catalog_uri"], spec["warehouse"])
    try:
        _upload(store, backend, spec["doomed_keys"])  # type: ignore[arg-type]
    finally:
        store.close()


def child(spec: dict[str, Any], deep: bool) -> dict[str, Any]:
    """One real pass in this (fresh) process: seconds, phases, peak RSS."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    store = TableStore.open(spec["catalog_uri"], spec["warehouse"], clock=lambda: spec["now_us"])
    try:
        began = time.perf_counter()
        report = run_gc(
            store,
            dry_run=False,
            grace_us=0,
            allow_short_grace=True,
            compact=False,
            deep=deep,
        )
        seconds = time.perf_counter() - began
    finally:
        store.close()
    status = {
        line.split(":")[0]: int(line.split()[1]) * 1024
        for line in Path("/proc/self/status").read_text().splitlines()
        if line.startswith(("VmHWM:", "VmRSS:"))
    }
    deleted = (
        report.collected.deleted_objects + len(report.intents.orphans) + len(report.orphans.orphans)
    )
    return {
        "seconds": round(seconds, 3),
        "phases": {k: round(v, 3) for k, v in report.seconds.items()},
        "collect_steps": {k: round(v, 3) for k, v in report.collected.seconds.items()},
        "deleted": deleted,
        "deletes_per_s": round(deleted / seconds, 1) if seconds else None,
        "keys_listed": report.orphans.listed + report.intents.listed,
        "peak_rss_mib": round(status.get("VmHWM", 0) / 2**20, 1),
    }


def run_child(spec: dict[str, Any], deep: bool) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.bench_gc_scale",
            "--child",
            json.dumps({k: v for k, v in spec.items() if k != "doomed_keys"}),
        ]
        + (["--deep"] if deep else []),
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return dict(json.loads(done.stdout.splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sizes", nargs="*")
    parser.add_argument("--backends", default="file,moto")
    parser.add_argument("--catalogs", default="sqlite")
    parser.add_argument("--no-deep", action="store_true", help="skip the deep pass")
    parser.add_argument(
        "--garbage",
        default=str(GARBAGE),
        help=f"garbage objects at every size (default {GARBAGE:,}; e.g. 1e5 for the delete rate)",
    )
    parser.add_argument(
        "--spread",
        choices=("all", "same"),
        default="all",
        help="garbage in every table (all) or in the same 10 tables at every size (same)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=5,
        help="default passes per size on a SQLite catalog, the world put back between "
        "them; the median is reported (default 5)",
    )
    parser.add_argument("--name", help="results file name (default bench_gc_scale[_quick])")
    parser.add_argument("--label", help="how the plot names this run (default: its commit)")
    parser.add_argument("--child")
    parser.add_argument("--deep", action="store_true")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child), args.deep)))
        return
    sizes = (
        parse_sizes(args.sizes) if args.sizes else list(QUICK_SIZES if args.quick else FULL_SIZES)
    )
    garbage = parse_sizes([args.garbage])[0]
    started = time.perf_counter()
    payload: dict[str, Any] = {
        "load_average_at_start": load_average(),
        "sizes": sizes,
        "garbage": garbage,
        "spread": args.spread,
    }
    if args.label:
        payload["label"] = args.label
    results: list[dict[str, Any]] = []
    for backend in args.backends.split(","):
        if backend == "moto":
            moto_server()  # the children reach it through the AWS environment
        for catalog in args.catalogs.split(","):
            for size in sizes:
                workdir = Path(tempfile.mkdtemp(prefix="rewind-bench-gc-"))
                try:
                    spec = build(backend, catalog, size, workdir, garbage, args.spread)
                    row: dict[str, Any] = {"backend": backend, "catalog": catalog, **spec}
                    for key in ("catalog_uri", "warehouse", "now_us", "doomed_keys"):
                        row.pop(key)
                    repeats = args.repeat if keep_pristine(spec) else 1
                    passes = []
                    for n in range(repeats):
                        if n:
                            reset(spec, backend)
                        passes.append(run_child(spec, deep=False))
                    middle = statistics.median_low([p["seconds"] for p in passes])
                    row["default"] = next(p for p in passes if p["seconds"] == middle)
                    if repeats > 1:
                        row["default"]["repeats"] = [p["seconds"] for p in passes]
                    if not args.no_deep:
                        # a second world: the default pass deleted the garbage
                        spec2 = build(
                            backend, catalog, size, workdir / "deep", garbage, args.spread
                        )
                        row["deep"] = run_child(spec2, deep=True)
                    print(json.dumps(row), flush=True)
                    results.append(row)
                finally:
                    shutil.rmtree(workdir, ignore_errors=True)
    payload["results"] = results
    name = args.name or (f"{NAME}_quick" if args.quick else NAME)
    console = Console()
    finish_run(payload, name=name, started=started, console=console, report=_report)
    draw_beside(RESULTS_DIR / f"{name}.json", say=console.print)


def _report(payload: dict[str, Any]) -> None:
    table = Table(
        title=f"GC pass against warehouse size (same {payload['garbage']:,} garbage + 200 orphans)"
    )
    for column in (
        "backend",
        "catalog",
        "live objects",
        "pass",
        "s",
        "deletes/s",
        "listed",
        "RSS MiB",
    ):
        table.add_column(column, justify="right")
    for row in payload["results"]:
        for kind in ("default", "deep"):
            if kind in row:
                r = row[kind]
                table.add_row(
                    row["backend"],
                    row["catalog"],
                    f"{row['live']:,}",
                    kind,
                    f"{r['seconds']:.2f}",
                    f"{r['deletes_per_s']:,.0f}",
                    f"{r['keys_listed']:,}",
                    f"{r['peak_rss_mib']:.0f}",
                )
    Console().print(table)


if __name__ == "__main__":
    main()
