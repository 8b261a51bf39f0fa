"""The shared catalog under concurrency, on SQLite and PostgreSQL in one run.

Three measurements (issue 12), each on both catalog backends, with a
``file://`` warehouse (the catalog is what is measured):

1. **Other-tenant latency.** Tenant B has a small table. ``snapshot create``
   and a read at "now" of B are timed idle, then while another *process* loads
   tenant A (10^7 rows in commits of 10^6; ``--quick``: 10^6 in 10^5). Ratio =
   loaded ÷ idle, median and p95. Goal: under 1.5x on PostgreSQL, under 2x on
   SQLite (13.6x measured on SQLite before issue 12, when the load's uploads
   ran inside its catalog transaction).
2. **Commits per second** with 1, 4 and 16 writer processes, each committing
   10-row upserts for a fixed time, on distinct tenants and all on one tenant.
3. **Metadata-only restore** of a tenant with 10^6 objects (``--quick``: 10^5):
   plan + install with ``verify="none"``; the objects are registered straight
   in the catalog (fake keys). Goal: under 10 s on both backends.

Workers are subprocesses of this module (``--worker load|commit``), so each
has its own catalog connection, as separate hosts would. The code under test
is whatever ``tenants`` is importable, so the same file measures an older
commit: put it and ``benchmarks/common.py`` on that commit's tree.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from benchmarks.common import (
    CATALOG_BACKENDS,
    EVENTS_SCHEMA,
    CatalogBackend,
    finish_run,
    load_average,
    make_rows,
    open_store,
)
from tenants.store import TableStore

NAME = "bench_catalog_concurrency"
DATABASE = "db"
console = Console()


def _worker_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "benchmarks.bench_catalog_concurrency", "--worker", *args]


def _env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parent.parent)
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": root + (os.pathsep + path if path else "")}


def _percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def _summary(values: Sequence[float]) -> dict[str, Any]:
    return {
        "n": len(values),
        "median_s": statistics.median(values) if values else None,
        "p95_s": _percentile(values, 95),
        "max_s": max(values) if values else None,
    }


# 1. other-tenant latency ----------------------------------------------------------


def _b_ops(store: TableStore, tenant: str, label: str) -> tuple[float, float]:
    started = time.perf_counter()
    store.create_snapshot(tenant, f"{label}-{uuid.uuid4().hex[:8]}")
    snapshot_s = time.perf_counter() - started
    started = time.perf_counter()
    rows = store.read(tenant, f"{DATABASE}.small").num_rows
    query_s = time.perf_counter() - started
    assert rows == 1_000
    return snapshot_s, query_s


def latency_case(
    catalog: CatalogBackend, rows: int, commit_rows: int, samples: int
) -> dict[str, Any]:
    with open_store("file", catalog) as store:
        store.create_tenant("a")
        store.create_table("a", f"{DATABASE}.events", EVENTS_SCHEMA)
        store.create_tenant("b")
        store.create_table("b", f"{DATABASE}.small", EVENTS_SCHEMA)
        rng = np.random.default_rng(3)
        store.write("b", f"{DATABASE}.small", upserts=make_rows(np.arange(1_000), rng))
        for _ in range(3):  # warm up both paths
            _b_ops(store, "b", "warm")
        idle = [_b_ops(store, "b", "idle") for _ in range(samples)]
        loader = subprocess.Popen(
            _worker_command(
                "load", store.catalog.uri, store.objects.warehouse.uri, str(rows), str(commit_rows)
            ),
            stdout=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        assert loader.stdout is not None
        assert loader.stdout.readline().strip() == "loading"
        loaded: list[tuple[float, float]] = []
        load_started = time.perf_counter()
        while loader.poll() is None:
            loaded.append(_b_ops(store, "b", "loaded"))
            time.sleep(0.05)
        load_s = time.perf_counter() - load_started
        out = loader.stdout.read()
        if loader.returncode != 0:
            raise RuntimeError(f"loader failed ({loader.returncode}): {out}")
        report = json.loads(out.strip().splitlines()[-1])
        loaded_rows = sum(o.rows for _, o in store.objects_of("a"))
    if loaded_rows != rows:
        raise RuntimeError(f"the loader committed {loaded_rows} rows, not {rows}")
    result: dict[str, Any] = {
        "catalog": catalog,
        "rows": rows,
        "commit_rows": commit_rows,
        "load_seconds": load_s,
        "loader": report,
    }
    for index, op in enumerate(("snapshot_create", "query")):
        idle_s = [s[index] for s in idle]
        loaded_s = [s[index] for s in loaded]
        result[op] = {
            "idle": _summary(idle_s),
            "loaded": _summary(loaded_s),
            "ratio_median": statistics.median(loaded_s) / statistics.median(idle_s),
            "ratio_p95": _percentile(loaded_s, 95) / _percentile(idle_s, 95),
        }
    return result


def load_worker(catalog_uri: str, warehouse_uri: str, rows: int, commit_rows: int) -> None:
    store = TableStore.open(catalog_uri, warehouse_uri)
    rng = np.random.default_rng(7)
    print("loading", flush=True)
    commits = []
    for start in range(0, rows, commit_rows):
        batch = make_rows(np.arange(start, min(rows, start + commit_rows)), rng)
        began = time.perf_counter()
        store.write("a", f"{DATABASE}.events", upserts=batch)
        commits.append(time.perf_counter() - began)
    store.close()
    print(json.dumps({"commits": len(commits), "commit_s": _summary(commits)}), flush=True)


# 2. commits per second ------------------------------------------------------------


def commits_case(
    catalog: CatalogBackend, writers: int, shared: bool, seconds: float
) -> dict[str, Any]:
    with open_store("file", catalog) as store:
        tenants = ["shared"] if shared else [f"w{i}" for i in range(writers)]
        for tenant in tenants:
            store.create_tenant(tenant)
            store.create_table(tenant, f"{DATABASE}.t", EVENTS_SCHEMA)
        start_at = time.time() + 3.0 + 0.4 * writers  # after every worker has imported
        procs = [
            subprocess.Popen(
                _worker_command(
                    "commit",
                    store.catalog.uri,
                    store.objects.warehouse.uri,
                    tenants[0] if shared else tenants[i],
                    str(i),
                    str(start_at),
                    str(seconds),
                ),
                stdout=subprocess.PIPE,
                text=True,
                env=_env(),
            )
            for i in range(writers)
        ]
        reports = []
        for proc in procs:
            out, _ = proc.communicate(timeout=seconds + 120)
            if proc.returncode != 0:
                raise RuntimeError(f"commit worker failed ({proc.returncode}): {out}")
            reports.append(json.loads(out.strip().splitlines()[-1]))
    if any(r["late"] for r in reports):
        console.print(f"  [yellow]{sum(r['late'] for r in reports)} worker(s) started late[/]")
    latencies = [x for r in reports for x in r["latencies"]]
    total = sum(r["commits"] for r in reports)
    return {
        "catalog": catalog,
        "writers": writers,
        "tenants": "one" if shared else "distinct",
        "seconds": seconds,
        "commits": total,
        "commits_per_s": total / seconds,
        "latency": _summary(latencies),
        "late_workers": sum(r["late"] for r in reports),
    }


def commit_worker(
    catalog_uri: str, warehouse_uri: str, tenant: str, index: int, start_at: float, seconds: float
) -> None:
    store = TableStore.open(catalog_uri, warehouse_uri)
    rng = np.random.default_rng(index)
    batches = [
        make_rows(np.arange(k, k + 10) + index * 10_000_000, rng) for k in range(0, 2000, 10)
    ]
    late = time.time() > start_at
    time.sleep(max(0.0, start_at - time.time()))
    latencies = []
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:
        began = time.perf_counter()
        store.write(tenant, f"{DATABASE}.t", upserts=batches[n % len(batches)])
        latencies.append(time.perf_counter() - began)
        n += 1
    store.close()
    print(json.dumps({"commits": n, "latencies": latencies, "late": late}), flush=True)


# 3. metadata-only restore ------------------------------------------------------------


def restore_case(catalog: CatalogBackend, count: int) -> dict[str, Any]:
    from benchmarks.bench_restore import metadata_case

    row = metadata_case(count, 1, catalog=catalog)
    row["catalog"] = catalog
    return row


# report ------------------------------------------------------------------------------


def print_report(payload: dict[str, Any]) -> None:
    if payload.get("latency"):
        table = Table(title="1. tenant B while another process loads tenant A")
        for column in ("catalog", "rows", "load s", "op", "idle median", "loaded median",
                       "loaded p95", "n", "÷ idle (median)", "÷ idle (p95)"):  # fmt: skip
            table.add_column(column)
        for r in payload["latency"]:
            for op in ("snapshot_create", "query"):
                m = r[op]
                table.add_row(
                    r["catalog"], f"{r['rows']:,}", f"{r['load_seconds']:.1f}", op,
                    f"{m['idle']['median_s'] * 1e3:.1f} ms", f"{m['loaded']['median_s'] * 1e3:.1f} ms",
                    f"{m['loaded']['p95_s'] * 1e3:.1f} ms", str(m["loaded"]["n"]),
                    f"{m['ratio_median']:.2f}x", f"{m['ratio_p95']:.2f}x",
                )  # fmt: skip
        console.print(table)
    if payload.get("commits"):
        table = Table(title="2. commits per second (10-row upserts)")
        for column in ("catalog", "writers", "tenants", "commits/s", "p50 latency", "p95 latency"):
            table.add_column(column)
        for r in payload["commits"]:
            table.add_row(
                r["catalog"], str(r["writers"]), r["tenants"], f"{r['commits_per_s']:.0f}",
                f"{r['latency']['median_s'] * 1e3:.1f} ms", f"{r['latency']['p95_s'] * 1e3:.1f} ms",
            )  # fmt: skip
        console.print(table)
    if payload.get("restore"):
        table = Table(title="3. metadata-only restore (plan + install)")
        for column in ("catalog", "objects", "register s", "plan s", "restore s", "steps"):
            table.add_column(column)
        for r in payload["restore"]:
            steps = ", ".join(f"{k} {v:.2f}" for k, v in r["restore_best_steps"].items())
            table.add_row(
                r["catalog"], f"{r['objects']:,}", f"{r['register_s']:.1f}",
                f"{r['plan_best_s']:.2f}", f"{r['restore_best_s']:.2f}", steps,
            )  # fmt: skip
        console.print(table)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_catalog_concurrency",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a few minutes)")
    parser.add_argument("--only", choices=("latency", "commits", "restore"), action="append")
    parser.add_argument("--catalogs", default=",".join(CATALOG_BACKENDS))
    parser.add_argument(
        "--name", help="result file name (default bench_catalog_concurrency[_quick])"
    )
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.worker:
        role, *rest = args.worker
        if role == "load":
            load_worker(rest[0], rest[1], int(rest[2]), int(rest[3]))
        else:
            commit_worker(rest[0], rest[1], rest[2], int(rest[3]), float(rest[4]), float(rest[5]))
        return {}
    parts = set(args.only or ("latency", "commits", "restore"))
    catalogs: list[CatalogBackend] = [c for c in CATALOG_BACKENDS if c in args.catalogs.split(",")]
    if args.quick:
        rows, commit_rows, samples, seconds, objects = 1_000_000, 100_000, 10, 2.0, 100_000
    else:
        rows, commit_rows, samples, seconds, objects = 10_000_000, 1_000_000, 20, 5.0, 1_000_000
    load_start = load_average()
    started = time.perf_counter()
    console.print(f"[bold]{NAME}[/]: load average {load_start}")
    payload: dict[str, Any] = {"quick": bool(args.quick), "load_average_at_start": load_start}
    if "latency" in parts:
        payload["latency"] = []
        for catalog in catalogs:
            console.print(f"1. {catalog}: tenant B while A loads {rows:,} rows ...")
            payload["latency"].append(latency_case(catalog, rows, commit_rows, samples))
    if "commits" in parts:
        payload["commits"] = []
        for catalog in catalogs:
            for shared in (False, True):
                for writers in (1, 4, 16):
                    if shared and writers == 1:
                        continue  # the same as one writer on distinct tenants
                    console.print(f"2. {catalog}: {writers} writer(s), shared={shared} ...")
                    payload["commits"].append(commits_case(catalog, writers, shared, seconds))
    if "restore" in parts:
        payload["restore"] = []
        for catalog in catalogs:
            console.print(f"3. {catalog}: metadata-only restore of {objects:,} objects ...")
            payload["restore"].append(restore_case(catalog, objects))
    return finish_run(
        payload,
        name=args.name or (f"{NAME}_quick" if args.quick else NAME),
        started=started,
        console=console,
        report=print_report,
    )


if __name__ == "__main__":
    main()
