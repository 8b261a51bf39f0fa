"""Restoring one table against restoring the whole tenant, and the other tables' writes meanwhile.

One run, on a ``file://`` warehouse and a SQLite catalog:

1. **Build** a tenant of ``--tables`` tables (default 10) of about
   ``--table-mb`` MB of Parquet each (default 200 MB: a 2 GB tenant; the
   issue's shape is 1 GB of 10 GB, ``--table-mb 1000``). Per table: commits of
   fresh keys, snapshot S, commits updating and deleting keys, then a
   compaction of every table, so its objects straddle S (the layout after a
   bad change and a night's compaction: everything must be rewritten).
2. **One table in place** (``restore_table(..., "t000", "s")``) against **the
   whole tenant as a clone** (``restore_tenant(..., "s", to=...)``), local
   executor, ``verify="objects"``: wall seconds, bytes written, objects
   rewritten; the ratios table ÷ tenant.
3. **Write latency of another table during a table restore.** A commit of
   ``--write-rows`` rows to ``t001`` is timed ``--writes`` times with nothing
   else running (idle), then continuously while a *separate process* restores
   ``t000`` in place again (a writer and a restore are different processes in
   production; one process would also share its GIL), only the commits that
   start while the restore runs counted. Median and p95 of each, and their
   ratio (goal: under 1.5x). Twice: the restore at normal priority, and at
   ``nice 10``, as a batch job beside a serving path is run (on 2 cores a
   restore's rewrite threads otherwise take the CPU a writer needs).

``python -m benchmarks.bench_table_restore [--quick] [--table-mb N] [--tables N]``;
the JSON goes to ``benchmarks/results/bench_table_restore[_quick].json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from benchmarks.common import (
    EVENTS_SCHEMA,
    MB,
    finish_run,
    key_table,
    load_average,
    make_rows,
    open_store,
    timed,
)
from engine.restore.job import RestoreOutcome, restore_tenant
from engine.restore.tables import restore_table
from tenants.store import TableStore

NAME = "bench_table_restore"
TENANT = "big"
DATABASE = "db"
SNAPSHOT = "s"
# Parquet bytes per EVENTS_SCHEMA row after compaction (measured, ~27).
BYTES_PER_ROW = 27
COMMITS_BEFORE = 6
COMMITS_AFTER = 2
GOAL_LATENCY_RATIO = 1.5
console = Console()


def build(store: TableStore, tables: int, table_bytes: int, seed: int) -> dict[str, Any]:
    """The tenant: per table fresh keys, snapshot S, updates and deletes, compaction."""
    rng = np.random.default_rng(seed)
    store.create_tenant(TENANT)
    names = [f"t{i:03d}" for i in range(tables)]
    for name in names:
        store.create_table(TENANT, f"{DATABASE}.{name}", EVENTS_SCHEMA)
    rows = max(100, table_bytes // BYTES_PER_ROW)
    per_commit = rows // COMMITS_BEFORE
    started = time.perf_counter()
    for step in range(COMMITS_BEFORE):
        keys = np.arange(step * per_commit, (step + 1) * per_commit, dtype=np.int64)
        for name in names:
            store.write(TENANT, f"{DATABASE}.{name}", upserts=make_rows(keys, rng))
    store.create_snapshot(TENANT, SNAPSHOT)
    changed = per_commit // 10
    for step in range(COMMITS_AFTER):
        for name in names:
            chosen = np.sort(rng.choice(per_commit * COMMITS_BEFORE, 2 * changed, replace=False))
            store.write(
                TENANT,
                f"{DATABASE}.{name}",
                upserts=make_rows(chosen[:changed].astype(np.int64), rng, version=step + 1),
                deletes=key_table(chosen[changed:].astype(np.int64)),
            )
    written_s = time.perf_counter() - started
    _, compact_s = timed(lambda: store.compact(TENANT))
    objects = [o for _, o in store.objects_of(TENANT)]
    return {
        "tables": tables,
        "rows_per_table": per_commit * COMMITS_BEFORE,
        "objects": len(objects),
        "bytes": sum(o.bytes for o in objects),
        "write_s": written_s,
        "compact_s": compact_s,
    }


def figures(outcome: RestoreOutcome, seconds: float) -> dict[str, Any]:
    totals = outcome.plan.totals()
    return {
        "seconds": seconds,
        "steps": outcome.seconds,
        "rewritten_objects": outcome.rewritten,
        "bytes_written": outcome.bytes_written,
        "reused": {"objects": totals["reuse"][0], "bytes": totals["reuse"][1]},
        "rewrite_planned_bytes": totals["rewrite"][1],
        "objects_verified": outcome.objects_verified,
    }


def one_write(store: TableStore, rows: int, rng: np.random.Generator, base: int) -> float:
    keys = np.arange(base, base + rows, dtype=np.int64)
    _, seconds = timed(
        lambda: store.write(TENANT, f"{DATABASE}.t001", upserts=make_rows(keys, rng, version=9))
    )
    return seconds


def latency(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "n": len(ordered),
        "median_s": statistics.median(ordered),
        "p95_s": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
        "max_s": ordered[-1],
    }


RESTORE_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from tenants.store import TableStore
    from engine.restore.tables import restore_table
    store = TableStore.open(sys.argv[1], sys.argv[2])
    began = time.time()
    outcome = restore_table(store, "big", "db.t000", "s", executor="local", verify="objects")
    print(json.dumps({"began": began, "ended": time.time(), "seconds": time.time() - began,
                      "bytes_written": outcome.bytes_written}))
    """
)


def writes_during_restore(
    store: TableStore, rows: int, idle_writes: int, seed: int, nice: int
) -> dict[str, Any]:
    """Idle write latency of t001, then while another process (at ``nice``)
    restores t000."""
    rng = np.random.default_rng(seed)
    base = 10**12
    one_write(store, rows, rng, base)  # warm
    idle = [one_write(store, rows, rng, base + i * rows) for i in range(1, idle_writes + 1)]
    warehouse = f"file://{store.objects.root}" if hasattr(store.objects, "root") else None
    assert warehouse is not None, "the latency case needs a file:// warehouse"
    process = subprocess.Popen(
        [
            "nice",
            "-n",
            str(nice),
            sys.executable,
            "-c",
            RESTORE_SCRIPT,
            store.catalog.uri,
            warehouse,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    timed_writes: list[tuple[float, float]] = []  # (wall start, seconds)
    i = idle_writes + 1
    while process.poll() is None:
        began = time.time()
        timed_writes.append((began, one_write(store, rows, rng, base + i * rows)))
        i += 1
    out, _ = process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"the restore process failed with exit {process.returncode}")
    restore = json.loads(out.strip().splitlines()[-1])
    # Only the writes that started while the restore ran (not its process's imports).
    during = [s for began, s in timed_writes if restore["began"] <= began <= restore["ended"]]
    idle_l, during_l = latency(idle), latency(during) if during else None
    return {
        "restore_nice": nice,
        "write_rows": rows,
        "idle": idle_l,
        "during_restore": during_l,
        "restore": restore,
        "median_ratio": during_l["median_s"] / idle_l["median_s"] if during_l else None,
        "p95_ratio": during_l["p95_s"] / idle_l["p95_s"] if during_l else None,
        "goal_ratio": GOAL_LATENCY_RATIO,
        "met": bool(during_l) and during_l["median_s"] / idle_l["median_s"] < GOAL_LATENCY_RATIO,
    }


def run(tables: int, table_mb: int, write_rows: int, writes: int, seed: int) -> dict[str, Any]:
    with open_store("file") as store:
        console.print(f"building {tables} tables of ~{table_mb} MB ...")
        built = build(store, tables, table_mb * MB, seed)
        console.print(f"  {built['bytes'] / MB:,.0f} MB in {built['objects']} objects")
        console.print("restoring one table in place ...")
        outcome, seconds = timed(
            lambda: restore_table(store, TENANT, "db.t000", SNAPSHOT, executor="local")
        )
        table = figures(outcome, seconds)
        console.print("restoring the whole tenant as a clone ...")
        outcome, seconds = timed(
            lambda: restore_tenant(store, TENANT, SNAPSHOT, to="whole", executor="local")
        )
        whole = figures(outcome, seconds)
        writes_cases = []
        for nice in (0, 10):
            console.print(
                f"write latency of t001, idle and during a table restore (nice {nice}) ..."
            )
            writes_cases.append(writes_during_restore(store, write_rows, writes, seed + nice, nice))
    return {
        "build": built,
        "table_restore": table,
        "tenant_restore": whole,
        "ratios": {
            "seconds": table["seconds"] / whole["seconds"],
            "bytes_written": table["bytes_written"] / max(1, whole["bytes_written"]),
        },
        "writes": writes_cases,
    }


def print_report(payload: dict[str, Any]) -> None:
    case = payload["case"]
    b = case["build"]
    out = Table(
        title=f"one table of {b['tables']} ({b['bytes'] / MB / b['tables']:,.0f} MB each, "
        f"{b['bytes'] / MB:,.0f} MB in all), every object straddling S"
    )
    for col in ("restore", "seconds", "bytes written", "objects rewritten", "reused objects"):
        out.add_column(col, justify="right")
    for label, key in (
        ("one table, in place", "table_restore"),
        ("whole tenant", "tenant_restore"),
    ):
        r = case[key]
        out.add_row(label, f"{r['seconds']:.2f}", f"{r['bytes_written'] / MB:,.1f} MB",
                    str(r["rewritten_objects"]), str(r["reused"]["objects"]))  # fmt: skip
    out.add_row("table ÷ tenant", f"{case['ratios']['seconds']:.3f}",
                f"{case['ratios']['bytes_written']:.3f}", "", "")  # fmt: skip
    console.print(out)
    for w in case["writes"]:
        lat = Table(
            title=f"commit of {w['write_rows']:,} rows to t001; the restore at nice {w['restore_nice']}"
        )
        for col in ("when", "n", "median ms", "p95 ms", "max ms"):
            lat.add_column(col, justify="right")
        for label, key in (("idle", "idle"), ("during a t000 restore", "during_restore")):
            v = w[key]
            if v:
                lat.add_row(label, str(v["n"]), f"{v['median_s'] * 1e3:.1f}",
                            f"{v['p95_s'] * 1e3:.1f}", f"{v['max_s'] * 1e3:.1f}")  # fmt: skip
        console.print(lat)
        console.print(
            f"median ratio {w['median_ratio']:.2f}x, p95 ratio {w['p95_ratio']:.2f}x (goal under "
            f"{w['goal_ratio']}x: {'met' if w['met'] else 'NOT met'}); the restore took "
            f"{w['restore']['seconds']:.1f} s in its own process"
        )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_table_restore", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="10 tables of 10 MB")
    parser.add_argument("--tables", type=int, default=10)
    parser.add_argument("--table-mb", type=int, default=200)
    parser.add_argument("--write-rows", type=int, default=1_000)
    parser.add_argument("--writes", type=int, default=40, help="idle writes timed")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--name", help="result name (default bench_table_restore[_quick])")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    table_mb = 10 if args.quick else args.table_mb
    started = time.perf_counter()
    payload: dict[str, Any] = {
        "quick": bool(args.quick),
        "load_average_at_start": load_average(),
        "tables": args.tables,
        "table_mb": table_mb,
    }
    payload["case"] = run(args.tables, table_mb, args.write_rows, args.writes, args.seed)
    return finish_run(
        payload,
        name=args.name or (f"{NAME}_quick" if args.quick else NAME),
        started=started,
        console=console,
        report=print_report,
    )


if __name__ == "__main__":
    main()
