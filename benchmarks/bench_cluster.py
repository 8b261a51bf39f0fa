"""Restore rewrite on a standalone Spark cluster, local Spark and local threads.

For each warehouse (``file://`` and ``s3://`` on moto's threaded server) and
each size of straddling bytes (full: 10 MB, 100 MB, 500 MB, 2 GB), one tenant
is built whose compacted objects (at most ~48 MB each) all straddle snapshot
S, and it is restored as a clone (``verify="none"``) by:

- ``local``: the thread-pool executor (4 threads);
- ``local_spark``: the Spark executor on a ``local[2]`` session;
- ``cluster``: the Spark executor on a real standalone cluster (one master,
  one worker with 2 cores, tests/helpers/spark_cluster.py) whose executors run a
  Python without Rewind (the package zip is shipped, as in production);
- ``pyarrow``: a bare read → filter ``__ts <= S`` → sort (pk, ``__ts``) →
  zstd Parquet → put of the same objects, 4 threads, no Rewind bookkeeping.

The figure is the rewrite step (``outcome.seconds["rewrite"]``); MB/s =
straddling input bytes ÷ those seconds. One Python process holds one
SparkContext at a time, so the runs go in three phases over the same
tenants: no Spark (local, pyarrow), then ``local[2]``, then that session is
stopped and a session on the cluster's master is created in this process.
Start costs are reported apart: cluster daemons (until the worker is ALIVE),
session creation, executor registration, the first trivial JVM and Python
jobs, and ``prepare`` (package zip + worker probe), against ``local[2]``'s.
A least-squares line per executor gives where (if anywhere) Spark beats the
local threads, compared with ``decide_executor``'s rule.

On moto, a size whose projected time (from the previous size's measured
MB/s) exceeds ``--moto-budget`` seconds is skipped and the JSON says why.
"""

from __future__ import annotations

import argparse
import io
import math
import os
import resource
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from rich.console import Console
from rich.table import Table

from benchmarks.common import (
    EVENTS_SCHEMA,
    MB,
    Backend,
    finish_run,
    load_average,
    make_rows,
    open_store,
    split,
    timed,
)
from engine.executors.base import AUTO_SPARK_BYTES, decide_executor
from engine.executors.local import DEFAULT_THREADS
from engine.executors.task import worker_name
from engine.pipeline import RewriteTask
from engine.restore.job import restore_tenant
from engine.restore.journal import finished_results
from engine.restore.plan import plan_restore
from tenants.objects.codec import ROW_GROUP_ROWS
from tenants.objects.record import sort_by_key_and_ts
from tenants.schema import TS
from tenants.store import TableStore

NAME = "bench_cluster"
DATABASE = "db"
SNAPSHOT = "s"
BYTES_PER_ROW = 27  # Parquet+zstd bytes of a make_rows row (bench_restore)
EXECUTOR_NAMES = ("local", "local_spark", "cluster")
TABLE_BYTES = 96 * MB  # per table before compaction: bounds compaction's memory
OBJECT_BYTES = 48 * MB  # compaction target: straddling objects of at most ~48 MB
BATCHES = 8
CLUSTER_CORES = 2
SPARK_CONF = {  # tenants.spark.session's defaults for a session Rewind creates
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "32",
    "spark.python.worker.reuse": "true",
}

console = Console() if sys.stdout.isatty() else Console(width=170)


# memory ------------------------------------------------------------------------

_PAGE = os.sysconf("SC_PAGE_SIZE")


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def tree_rss() -> tuple[int, int]:
    """(this process's RSS, RSS of it and all its descendants: Spark JVMs, Python
    workers, the cluster's daemons and executors)."""
    tree, total, todo = _children(), 0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += _rss(pid)
        todo += tree.get(pid, [])
    return _rss(os.getpid()), total


@contextmanager
def rss_sampler(interval_s: float = 0.25) -> Iterator[dict[str, float]]:
    """Peak RSS (MB) of this process and of its process tree while the body runs."""
    peaks = {"self_peak_mb": 0.0, "tree_peak_mb": 0.0}
    stop = threading.Event()

    def sample() -> None:
        while True:
            own, total = tree_rss()
            peaks["self_peak_mb"] = max(peaks["self_peak_mb"], own / MB)
            peaks["tree_peak_mb"] = max(peaks["tree_peak_mb"], total / MB)
            if stop.wait(interval_s):
                return

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield peaks
    finally:
        stop.set()
        thread.join()
        peaks["ru_maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / MB


# the tenant ------------------------------------------------------------------------


def build_tenant(store: TableStore, tenant: str, size: int, seed: int) -> dict[str, Any]:
    """``size`` bytes of straddling objects: tables of at most ``TABLE_BYTES``.

    Per table: 95% of the rows in ``BATCHES`` commits, snapshot S (one for the
    tenant, after every table's loads), updates of 5% of the keys, then
    compaction into objects of at most ``OBJECT_BYTES`` (``size / 8`` for
    small sizes, so every size has several tasks), each spanning S.
    """
    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    store.create_tenant(tenant)
    tables = max(1, math.ceil(size / TABLE_BYTES))
    per_table = size / tables
    target = int(min(OBJECT_BYTES, max(MB, size / BATCHES)))
    names = [f"t{i:02d}" for i in range(tables)]
    all_keys = []
    for name in names:
        store.create_table(tenant, f"{DATABASE}.{name}", EVENTS_SCHEMA)
        rows = max(BATCHES * 10, int(per_table * 0.95 / BYTES_PER_ROW))
        keys = rng.permutation(rows).astype(np.int64)
        for part in split(keys, BATCHES):
            store.write(tenant, f"{DATABASE}.{name}", upserts=make_rows(part, rng))
        all_keys.append(keys)
    store.create_snapshot(tenant, SNAPSHOT)
    for name, keys in zip(names, all_keys, strict=True):
        updates = np.sort(rng.choice(keys, max(1, len(keys) // 20), replace=False))
        store.write(tenant, f"{DATABASE}.{name}", upserts=make_rows(updates, rng, version=1))
    write_s = time.perf_counter() - started
    for name in names:
        store.compact(tenant, f"{DATABASE}.{name}", target_bytes=target)
    plan = plan_restore(store.catalog, tenant, SNAPSHOT, to="probe")
    totals = plan.totals()
    sizes = [t.input.bytes for t in plan.tasks]
    return {
        "tables": tables,
        "compaction_target_bytes": target,
        "straddle_objects": totals["rewrite"][0],
        "straddle_bytes": totals["rewrite"][1],
        "reused_objects": totals["reuse"][0],
        "largest_object_bytes": max(sizes) if sizes else 0,
        "write_s": write_s,
        "build_s": time.perf_counter() - started,
    }


def _drop_outputs(store: TableStore, tenant: str) -> None:
    """Delete a clone's objects (its catalog rows stay; nothing reads them again)."""
    store.objects.delete_many(record.key for _, record in store.objects_of(tenant))


# runs ---------------------------------------------------------------------------------


def restore_run(store: TableStore, tenant: str, executor: str, to: str) -> dict[str, Any]:
    """One clone restore with ``executor`` (local or spark on the active session)."""
    with rss_sampler() as rss:
        outcome, wall_s = timed(
            lambda: restore_tenant(
                store, tenant, SNAPSHOT, to=to, executor=executor, verify="none",
                method="physical",
            )
        )  # fmt: skip
    expected = outcome.plan.totals()["rewrite"][0]
    if outcome.executor != executor or outcome.rewritten != expected:
        raise RuntimeError(f"restore of {tenant} with {executor}: unexpected outcome {outcome}")
    workers = sorted({r.worker for r in finished_results(store.catalog, outcome.job_id)})
    _drop_outputs(store, to)
    return {
        "rewrite_s": outcome.seconds["rewrite"],
        "restore_s": wall_s,
        "steps": dict(outcome.seconds),
        "bytes_written": outcome.bytes_written,
        "executor_reason": outcome.executor_reason,
        "worker_processes": len(workers),
        "driver_is_a_worker": worker_name() in workers,
        "rss": rss,
    }


def _bare_rewrite(store: TableStore, task: RewriteTask, prefix: str) -> int:
    """Read, filter ``__ts <= S``, sort (pk, ts), write zstd Parquet, put: nothing else."""
    rows = pq.read_table(pa.BufferReader(store.objects.get(task.input.key)))
    kept = sort_by_key_and_ts(
        rows.filter(pc.less_equal(rows.column(TS), task.as_of)), task.primary_key
    )
    sink = io.BytesIO()
    pq.write_table(kept, sink, compression="zstd", row_group_size=ROW_GROUP_ROWS)
    data = sink.getvalue()
    store.objects.put(f"{prefix}/{task.input.id}.parquet", data)
    return len(data)


def pyarrow_run(store: TableStore, tenant: str, rep: int) -> dict[str, Any]:
    """The bare baseline over the tenant's straddling objects, ``DEFAULT_THREADS`` threads."""
    tasks = plan_restore(store.catalog, tenant, SNAPSHOT, to="probe").tasks
    prefix = f"bench-baseline/{tenant}-{rep}"
    with rss_sampler() as rss, ThreadPoolExecutor(DEFAULT_THREADS) as pool:
        written, seconds = timed(
            lambda: sum(pool.map(lambda t: _bare_rewrite(store, t, prefix), tasks))
        )
    store.objects.delete_many(f"{prefix}/{t.input.id}.parquet" for t in tasks)
    return {"rewrite_s": seconds, "restore_s": seconds, "bytes_written": written, "rss": rss}


def _best(runs: list[dict[str, Any]], straddle_bytes: int) -> dict[str, Any]:
    best = min(runs, key=lambda r: r["rewrite_s"])
    return {
        "runs": runs,
        "rewrite_s": best["rewrite_s"],
        "restore_s": best["restore_s"],
        "mb_per_s": straddle_bytes / MB / best["rewrite_s"],
        "self_peak_mb": max(r["rss"]["self_peak_mb"] for r in runs),
        "tree_peak_mb": max(r["rss"]["tree_peak_mb"] for r in runs),
    }


# Spark start costs -------------------------------------------------------------


def _python_job(spark: Any) -> int:
    return int(sum(spark.sparkContext.parallelize(range(4), 2).map(lambda x: x + 1).collect()))


def start_local_spark() -> tuple[Any, dict[str, float]]:
    """A ``local[2]`` session (tenants.spark.session.get_spark) and what starting it cost."""
    from tenants.spark.session import get_spark

    spark, session_s = timed(lambda: get_spark("local[2]"))
    _, jvm_job_s = timed(lambda: spark.range(1000).count())
    _, python_job_s = timed(lambda: _python_job(spark))
    _, warm_job_s = timed(lambda: _python_job(spark))
    return spark, {
        "session_s": session_s,  # includes launching the driver JVM
        "first_jvm_job_s": jvm_job_s,
        "first_python_job_s": python_job_s,
        "warm_python_job_s": warm_job_s,
        "total_s": session_s + jvm_job_s + python_job_s,
    }


def _executors(spark: Any) -> int:
    """Executors registered with the driver (the driver's own block manager excluded)."""
    return int(spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()) - 1


def start_cluster_spark(workdir: Path) -> tuple[Any, Any, dict[str, float]]:
    """Start the standalone cluster and a session on it in this process.

    The worker's environment carries the AWS variables (moto's, exported by
    benchmarks.common); executors run a Python without Rewind, so Rewind
    reaches them only as tenants.spark.session.prepare ships it.
    """
    from pyspark.sql import SparkSession

    from tenants.spark.session import get_spark, prepare
    from tests.helpers.spark_cluster import start_cluster, worker_python

    aws = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    cluster, daemons_s = timed(
        lambda: start_cluster(workdir / "cluster", worker_env=aws, cores=CLUSTER_CORES)
    )
    python = worker_python(workdir / "worker-python")
    os.environ["PYSPARK_PYTHON"] = str(python)  # read when the SparkContext starts
    builder = SparkSession.builder.master(cluster.master_url).appName("rewind")
    for key, value in {
        **SPARK_CONF,
        "spark.pyspark.python": str(python),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
    }.items():
        builder = builder.config(key, value)
    spark, session_s = timed(builder.getOrCreate)
    spark.sparkContext.setLogLevel("ERROR")

    def wait_executor() -> None:
        deadline = time.monotonic() + 120
        while _executors(spark) < 1:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no executor registered with {cluster.master_url}")
            time.sleep(0.05)

    _, register_s = timed(wait_executor)
    _, jvm_job_s = timed(lambda: spark.range(1000).count())
    _, python_job_s = timed(lambda: _python_job(spark))
    _, prepare_s = timed(lambda: prepare(spark))
    _, warm_job_s = timed(lambda: _python_job(spark))
    if get_spark() is not spark:
        raise RuntimeError("get_spark() does not return the cluster session")
    return (
        spark,
        cluster,
        {
            "daemons_s": daemons_s,  # master + worker JVMs until the worker is ALIVE
            "session_s": session_s,  # the driver JVM was already running (local phase)
            "executor_registration_s": register_s,
            "first_jvm_job_s": jvm_job_s,
            "first_python_job_s": python_job_s,
            "prepare_s": prepare_s,  # package zip + addPyFile + worker probe job
            "warm_python_job_s": warm_job_s,
            "total_s": daemons_s + session_s + register_s + jvm_job_s + python_job_s + prepare_s,
            "session_to_ready_s": session_s + register_s + jvm_job_s + python_job_s + prepare_s,
        },
    )


# crossover -----------------------------------------------------------------------


def _fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares (intercept s, seconds per byte); exact through two points."""
    slope, intercept = np.polyfit(np.array(xs), np.array(ys), 1)
    return float(intercept), float(slope)


def _mbps(seconds_per_byte: float) -> float | None:
    return 1 / (seconds_per_byte * MB) if seconds_per_byte > 0 else None


def crossover(cases: list[dict[str, Any]], start: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Per executor a fitted line; where each Spark line drops below the local one."""
    xs = [float(c["tenant"]["straddle_bytes"]) for c in cases]
    if len(xs) < 2:
        return {"why": "needs two sizes"}
    fits: dict[str, dict[str, Any]] = {}
    for name in (*EXECUTOR_NAMES, "pyarrow"):
        ys = [c["runs"][name]["rewrite_s"] for c in cases if name in c["runs"]]
        if len(ys) == len(xs):
            a, b = _fit(xs, ys)
            fits[name] = {"intercept_s": a, "s_per_mb": b * MB, "mb_per_s": _mbps(b)}
    out: dict[str, Any] = {"fits": fits}
    if "local" not in fits:
        return out
    la, lb = fits["local"]["intercept_s"], fits["local"]["s_per_mb"] / MB
    for name, start_key in (("local_spark", "local_spark"), ("cluster", "cluster")):
        if name not in fits:
            continue
        sa, sb = fits[name]["intercept_s"], fits[name]["s_per_mb"] / MB
        wins = [
            c["tenant"]["straddle_bytes"]
            for c in cases
            if c["runs"][name]["rewrite_s"] < c["runs"]["local"]["rewrite_s"]
        ]
        entry: dict[str, Any] = {"wins_at_measured_bytes": wins}
        cost = start.get(start_key, {}).get(
            "session_to_ready_s", start.get(start_key, {}).get("total_s")
        )
        if sb < lb:
            entry["rewrite_only_bytes"] = max(0.0, (sa - la) / (lb - sb))
            if cost is not None:
                entry["with_session_start_bytes"] = max(0.0, (sa + cost - la) / (lb - sb))
            entry["why"] = f"{name}'s per-byte cost is lower; it wins beyond this size"
        else:
            entry["rewrite_only_bytes"] = None
            entry["why"] = f"{name}'s per-byte cost is not lower than local's: it never catches up"
        out[name] = entry
    return out


# main ------------------------------------------------------------------------------


def _project_moto(done: list[dict[str, Any]], size: int, budget_s: float) -> dict[str, Any] | None:
    """Why ``size`` is skipped on moto (None: run it), projected from the last size's MB/s."""
    if not done:
        return None
    last = done[-1]
    mb = last["tenant"]["straddle_bytes"] / MB
    build_mbps = mb / last["tenant"]["build_s"]
    local = last["runs"]["local"]
    # Build, local + pyarrow runs (measured), two Spark runs (about twice local's time each).
    per_mb = (
        last["tenant"]["build_s"]
        + sum(r["restore_s"] for r in local["runs"])
        + sum(r["restore_s"] for r in last["runs"]["pyarrow"]["runs"])
        + 4 * local["restore_s"]
    ) / mb
    projected = per_mb * size / MB
    if projected <= budget_s:
        return None
    return {
        "target_mb": size / MB,
        "projected_s": projected,
        "budget_s": budget_s,
        "from_mb": mb,
        "measured_build_mb_per_s": build_mbps,
        "measured_local_rewrite_mb_per_s": local["mb_per_s"],
        "reason": (
            f"projected {projected:.0f} s > {budget_s:.0f} s from the {mb:.0f} MB case "
            f"(build {build_mbps:.1f} MB/s through moto, local rewrite {local['mb_per_s']:.1f} MB/s)"
        ),
    }


def run(args: argparse.Namespace, sizes: dict[Backend, list[int]]) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="rewind-bench-cluster-"))
    cases: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    decisions: dict[str, Any] = {}
    start: dict[str, dict[str, float]] = {}
    tenants: list[tuple[TableStore, dict[str, Any]]] = []
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, workdir, True)
        # Phase 1, no Spark in the process: build, local threads, bare pyarrow.
        for backend, backend_sizes in sizes.items():
            if not backend_sizes:
                continue
            store = stack.enter_context(open_store(backend))
            done: list[dict[str, Any]] = []
            for i, size in enumerate(backend_sizes):
                if backend == "moto":
                    skip = _project_moto(done, size, args.moto_budget)
                    if skip:
                        console.print(f"  moto {size / MB:g} MB skipped: {skip['reason']}")
                        skipped.append({"backend": backend, **skip})
                        continue
                tenant = f"c{i}"
                console.print(f"1. {backend} {size / MB:g} MB: building ...")
                built = build_tenant(store, tenant, size, args.seed + i)
                straddle = built["straddle_bytes"]
                console.print(
                    f"   {straddle / MB:.1f} MB in {built['straddle_objects']} objects, "
                    f"built in {built['build_s']:.0f} s; local and pyarrow runs ..."
                )
                reps = args.repeats if size <= 100 * MB else 1
                local = [
                    restore_run(store, tenant, "local", f"{tenant}-local-{r}") for r in range(reps)
                ]
                bare = [pyarrow_run(store, tenant, r) for r in range(reps)]
                case: dict[str, Any] = {
                    "backend": backend,
                    "target_mb": size / MB,
                    "tenant_index": i,
                    "repeats": reps,
                    "tenant": built,
                    "runs": {"local": _best(local, straddle), "pyarrow": _best(bare, straddle)},
                }
                console.print(
                    f"   local {case['runs']['local']['rewrite_s']:.2f} s, "
                    f"pyarrow {case['runs']['pyarrow']['rewrite_s']:.2f} s"
                )
                cases.append(case)
                done.append(case)
                tenants.append((store, case))
        decisions["no_session"] = _decisions(cases)

        # Phase 2: local[2].
        console.print("2. local[2] session ...")
        spark, start["local_spark"] = start_local_spark()
        console.print(f"   start {start['local_spark']}")
        decisions["local_session"] = _decisions(cases)
        _spark_phase(tenants, "local_spark", start["local_spark"])
        spark.stop()

        # Phase 3: the standalone cluster, a session on its master in this process.
        console.print("3. standalone cluster (1 worker, 2 cores) ...")
        spark, cluster, start["cluster"] = start_cluster_spark(workdir)
        stack.callback(cluster.stop)
        console.print(f"   start {start['cluster']}")
        decisions["cluster_session"] = _decisions(cases)
        _spark_phase(tenants, "cluster", start["cluster"])
        spark.stop()
    return {
        "cases": cases,
        "skipped": skipped,
        "start_costs": start,
        "auto_decisions": decisions,
        "crossover": {
            backend: crossover([c for c in cases if c["backend"] == backend], start)
            for backend in sizes
        },
    }


def _spark_phase(
    tenants: list[tuple[TableStore, dict[str, Any]]], name: str, start: dict[str, float]
) -> None:
    """Every tenant restored with ``executor="spark"`` on the active session; the
    first restore of the session (the smallest tenant, Python workers importing
    Rewind) is a warm-up reported in ``start``."""
    if not tenants:
        return
    first_store, first = tenants[0]
    warm = restore_run(first_store, "c0", "spark", f"c0-{name}-warmup")
    start["first_restore_rewrite_s"] = warm["rewrite_s"]
    start["first_restore_mb"] = first["tenant"]["straddle_bytes"] / MB
    for store, case in tenants:
        tenant = f"c{_index(case)}"
        console.print(f"   {name}: {case['backend']} {case['target_mb']:g} MB ...")
        runs = [
            restore_run(store, tenant, "spark", f"{tenant}-{name}-{r}")
            for r in range(case["repeats"])
        ]
        case["runs"][name] = _best(runs, case["tenant"]["straddle_bytes"])
        case["runs"][name]["worker_processes"] = max(r["worker_processes"] for r in runs)
        case["runs"][name]["driver_is_a_worker"] = any(r["driver_is_a_worker"] for r in runs)
        console.print(f"   {case['runs'][name]['rewrite_s']:.2f} s")


def _index(case: dict[str, Any]) -> int:
    return int(case["tenant_index"])


def _decisions(cases: list[dict[str, Any]]) -> dict[str, str]:
    """What ``--executor auto`` picks right now for each measured size (and why)."""
    from tenants.spark.session import effective_master

    out = {"effective_master": effective_master().describe()}
    for case in cases:
        choice = decide_executor("auto", case["tenant"]["straddle_bytes"])
        out[f"{case['backend']} {case['target_mb']:g} MB"] = choice.describe()
    return out


# report ------------------------------------------------------------------------------


def print_report(payload: dict[str, Any]) -> None:
    t = Table(title="Rewrite step (s, MB/s = straddling MB ÷ rewrite s); ratio = ÷ local threads")
    for c in (
        "warehouse", "straddle MB", "objs", "local s", "MB/s", "local[2] s", "MB/s", "cluster s",
        "MB/s", "pyarrow s", "MB/s", "local[2]÷local", "cluster÷local", "local÷pyarrow",
        "restore s (l/ls/c)", "peak RSS MB (self/tree)",
    ):  # fmt: skip
        t.add_column(c, justify="right")
    for case in payload["cases"]:
        r = case["runs"]

        def cell(name: str, key: str, fmt: str, runs: dict[str, Any] = r) -> str:
            return format(runs[name][key], fmt) if name in runs else "—"

        def ratio(a: str, b: str, runs: dict[str, Any] = r) -> str:
            if a not in runs or b not in runs:
                return "—"
            return f"{runs[a]['rewrite_s'] / runs[b]['rewrite_s']:.2f}x"

        t.add_row(
            case["backend"],
            f"{case['tenant']['straddle_bytes'] / MB:,.1f}",
            str(case["tenant"]["straddle_objects"]),
            cell("local", "rewrite_s", ".2f"),
            cell("local", "mb_per_s", ".1f"),
            cell("local_spark", "rewrite_s", ".2f"),
            cell("local_spark", "mb_per_s", ".1f"),
            cell("cluster", "rewrite_s", ".2f"),
            cell("cluster", "mb_per_s", ".1f"),
            cell("pyarrow", "rewrite_s", ".2f"),
            cell("pyarrow", "mb_per_s", ".1f"),
            ratio("local_spark", "local"),
            ratio("cluster", "local"),
            ratio("local", "pyarrow"),
            "/".join(cell(n, "restore_s", ".1f") for n in EXECUTOR_NAMES),
            f"{max(x['self_peak_mb'] for x in r.values()):,.0f}/"
            f"{max(x['tree_peak_mb'] for x in r.values()):,.0f}",
        )
    console.print(t)
    for skip in payload["skipped"]:
        console.print(f"  skipped {skip['backend']} {skip['target_mb']:g} MB: {skip['reason']}")
    for name, costs in payload["start_costs"].items():
        console.print(f"  start {name}: " + ", ".join(f"{k} {v:.2f}" for k, v in costs.items()))
    for backend, x in payload["crossover"].items():
        for name, fit in x.get("fits", {}).items():
            console.print(
                f"  {backend} fit {name}: {fit['intercept_s']:.2f} s + {fit['s_per_mb']:.4f} s/MB"
            )
        for name in ("local_spark", "cluster"):
            if name in x:
                console.print(f"  {backend} {name}: {x[name]}")
    console.print(f"  verdict: {payload['verdict']}")


def verdict(payload: dict[str, Any]) -> str:
    wins = [
        f"{b} {n} at {w / MB:.0f} MB"
        for b, x in payload["crossover"].items()
        for n in ("local_spark", "cluster")
        for w in x.get(n, {}).get("wins_at_measured_bytes", [])
    ]
    current = f"AUTO_SPARK_BYTES = {AUTO_SPARK_BYTES / 1024**3:g} GiB"
    if wins:
        return (
            f"Spark beat local threads at: {', '.join(wins)}; compare with {current} and auto's "
            "rule (Spark whenever the effective master is a cluster)"
        )
    return (
        "neither local Spark nor the 1-worker cluster beat local threads at any measured size "
        f"on {os.cpu_count()} cores; auto picks local on a local master (consistent) and Spark "
        f"on any cluster master (not supported by a 2-core single-machine cluster; {current})"
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_cluster",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="10 and 100 MB on file, 10 MB on moto")
    parser.add_argument("--sizes", nargs="+", type=float, help="straddling MB, e.g. 10 100 500")
    parser.add_argument("--backends", default=None, help="comma-separated: file,moto")
    parser.add_argument("--repeats", type=int, default=2, help="runs per size up to 100 MB (best)")
    parser.add_argument("--moto-budget", type=float, default=600.0, help="seconds per moto size")
    parser.add_argument("--seed", type=int, default=23)
    parser.add_argument("--name", help="result file name (default bench_cluster[_quick])")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    backends: list[Backend] = (
        [b for b in ("file", "moto") if b in args.backends.split(",")]  # type: ignore[misc]
        if args.backends
        else ["file", "moto"]
    )
    if args.sizes:
        chosen = [int(s * MB) for s in args.sizes]
        sizes: dict[Backend, list[int]] = {b: chosen for b in backends}
    elif args.quick:
        sizes = {"file": [10 * MB, 100 * MB], "moto": [10 * MB]}
        sizes = {b: sizes[b] for b in backends}
        args.repeats = 1
    else:
        sizes = {b: [10 * MB, 100 * MB, 500 * MB, 2000 * MB] for b in backends}
    name = args.name or (
        f"{NAME}_quick"
        if args.quick and not args.sizes
        else NAME
        if not args.sizes
        else f"{NAME}_custom"
    )
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"  # before the driver JVM starts
    load_start = load_average()
    started = time.perf_counter()
    console.print(f"[bold]{NAME}[/]: sizes {sizes}, load average {load_start}")
    payload: dict[str, Any] = {
        "quick": bool(args.quick),
        "load_average_at_start": load_start,
        "sizes_mb": {b: [s / MB for s in v] for b, v in sizes.items()},
        "local_threads": DEFAULT_THREADS,
        "cluster": {"workers": 1, "cores": CLUSTER_CORES, "executor_python": "venv minus Rewind"},
        "auto_spark_bytes": AUTO_SPARK_BYTES,
    }
    payload |= run(args, sizes)
    payload["verdict"] = verdict(payload)
    return finish_run(
        payload,
        name=name,
        started=started,
        console=console,
        report=print_report,
    )


if __name__ == "__main__":
    main()
