"""Diff and revert (issue 36): the rows one commit changed, read from the change log, and undone.

A table ``db.t`` of N rows, 8 columns (``id`` int64 key, ``user_id`` int64,
``qty`` int32, ``price`` double, ``score`` float, ``name`` string,
``category`` string of 16 values, ``created_at`` timestamp; ~97 Arrow bytes a
row), written as N / 100,000 appending commits of 100,000 rows of increasing
keys: disjoint, key-sorted objects of 10^5 rows, the layout of a compacted
table (1,000 objects at 10^8). Rows are generated a commit at a time, never
the whole table in memory. On ``file://`` (a temp dir, SQLite catalog) for
every size, and on the embedded moto S3 for the smaller ones
(``--moto-sizes``). Then the tenant's PITR window goes on (7 days) and, per
*case* (a key layout and a change size C), ``--repeats`` cycles (3; fewer when
a cycle is slow, ``--cheap-s``) of:

1. a snapshot: time A;
2. the change, one commit of C keys: **clustered** (a runaway delete of a
   contiguous key range) or **random** (updates of C uniformly random keys);
3. ``TableStore.diff(tenant, "db.t", A)`` read to the end (wall seconds; the
   counts per kind must be C deletes or C updates);
4. in the first cycle only, the same diff in a **fresh process**
   (``--child diff``): its seconds and its peak RSS (``VmHWM`` after
   ``/proc/self/clear_refs``, as bench_memory measures; baseline = RSS after
   imports and opening the store);
5. ``TableStore.revert(tenant, "db.t", change_ts)`` (wall seconds; it must
   upsert C rows, delete none and report no conflict), then the check that the
   table reads as at A: the changed keys read at A and now are equal (a key-set
   read, not the diff), a diff from A to now is empty (timed too), and up to
   ``--full-check-rows`` (10^6) whole reads at A and now are equal.

Beside them, per size and warehouse: the read the diff avoids, a bare pyarrow
full read of the table's objects (``pq.read_table`` of each, summed; best of 3
up to 10^7 rows, else one).

Curves: table size N in ``--sizes`` (10^6, 10^7, 10^8) at C = 1,000, and change
size C in ``--changes`` (10^2..10^5) at the largest N run. The 10^8 set-up runs
only if the 10^7 one took under ``--max-build-s`` (6 min) and the disk has room;
otherwise the run stops at 10^7 and says so (``skipped``).

**Smaller row groups.** The random layout at the largest N once more in a child
process with ``REWIND_ROW_GROUP_ROWS`` (``--small-groups``, 16 Ki rows) in its
environment: the object writer reads it at import, and commit objects are
written by that writer, so the child's table has 16 Ki-row groups (the
default is 128 Ki, i.e. one group per 10^5-row object). Library defaults are
not changed. **Where the time goes**: one extra random diff at C = 1,000 under
cProfile (not timed with the others), the point-read threads profiled too: its
steps (``breakdown``) and top functions in the JSON (``profile``).

``python -m benchmarks.bench_diff [--quick]``; ``--quick`` (CI, < 1 minute):
10^4 rows in 10 commits, C = 100, both warehouses, 256-row groups in the child.
The JSON goes to ``benchmarks/results/bench_diff[_quick].json`` and the picture
to ``<name>_curves.png`` beside it.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from rich.console import Console
from rich.table import Table

from benchmarks.common import (
    MB,
    RESULTS_DIR,
    ROOT,
    Backend,
    finish_run,
    load_average,
    open_store,
    parse_sizes,
    portable,
    timed,
)
from benchmarks.plots import draw_beside
from tenants.changes.revert import RevertResult
from tenants.reads.key_range import KeySet
from tenants.reads.visible import stream_visible
from tenants.schema import TableSchema
from tenants.store import TableStore

NAME = "bench_diff"
TENANT = "t"
TABLE = "db.t"
SCHEMA = TableSchema.of(
    [
        ("id", "int64"),
        ("user_id", "int64"),
        ("qty", "int32"),
        ("price", "double"),
        ("score", "float"),
        ("name", "string"),
        ("category", "string"),
        ("created_at", "timestamp[us, tz=UTC]"),
    ],
    ["id"],
)
COMMIT_ROWS = 100_000  # rows per set-up commit: one object of 10^5 rows
PITR_US = 7 * 24 * 3600 * 1_000_000
LAYOUTS = ("clustered", "random")
CURVE_CHANGE = 1_000  # the change size of the N curve
CHECKED_KEYS = 1_000  # changed keys read at A and now after a revert (a sample above)
GOALS = {"rows": 10**8, "change_rows": 1_000, "diff_s": 1.0, "diff_rss_mib": 300, "revert_s": 2.0}
CATEGORIES = pa.array([f"department-{i % 4:02d}/category-{i:02d}" for i in range(16)])
EPOCH_2024_US = 1_704_067_200_000_000
YEAR_US = 365 * 24 * 3600 * 1_000_000
MiB = 1024 * 1024
RESULT_MARK = "BENCH_DIFF_RESULT "
ROW_GROUP_ENV = "REWIND_ROW_GROUP_ROWS"
console = Console() if sys.stdout.isatty() else Console(width=170)


# the table ------------------------------------------------------------------------------------


def rows(keys: np.ndarray, rng: np.random.Generator, version: int = 0) -> pa.Table:
    """Rows of :data:`SCHEMA` for ``keys``; ``version`` goes into ``name``
    (``customer-name-<id>-v<version>``), so an update changes every row it touches."""
    n = len(keys)
    key_array = pa.array(keys, pa.int64())
    name = pc.binary_join_element_wise(
        "customer-name-", pc.cast(key_array, pa.string()), f"-v{version}", ""
    )
    created = pa.array(EPOCH_2024_US + rng.integers(0, YEAR_US, n), pa.int64())
    return pa.table(
        {
            "id": key_array,
            "user_id": pa.array(rng.integers(0, 10_000_000, n), pa.int64()),
            "qty": pa.array(rng.integers(1, 1_000, n, dtype=np.int32), pa.int32()),
            "price": pa.array(np.round(rng.normal(100.0, 40.0, n), 2), pa.float64()),
            "score": pa.array(rng.random(n, dtype=np.float32), pa.float32()),
            "name": name,
            "category": CATEGORIES.take(pa.array(rng.integers(0, len(CATEGORIES), n))),
            "created_at": created.cast(pa.timestamp("us", tz="UTC")),
        }
    )


def commit_rows(n: int) -> int:
    """Rows per set-up commit: 10^5, or a tenth of a small table (--quick)."""
    return min(COMMIT_ROWS, max(1, n // 10))


def build(store: TableStore, n: int, seed: int) -> dict[str, Any]:
    """The table of ``n`` rows in appending commits of increasing keys, then the PITR window."""
    rng = np.random.default_rng(seed)
    store.create_tenant(TENANT)
    store.create_table(TENANT, TABLE, SCHEMA)
    per_commit = commit_rows(n)
    arrow_bytes = 0
    commit_s: list[float] = []
    started = time.perf_counter()
    for start in range(0, n, per_commit):
        batch = rows(np.arange(start, min(n, start + per_commit), dtype=np.int64), rng)
        arrow_bytes += batch.nbytes
        _, seconds = timed(partial(store.write, TENANT, TABLE, upserts=batch))
        commit_s.append(seconds)
    build_s = time.perf_counter() - started
    store.set_pitr(TENANT, PITR_US)
    objects = base_objects(store)
    with store.objects.open_input(objects[0].key) as source:
        metadata = pq.ParquetFile(source).metadata
        groups, group_rows = metadata.num_row_groups, metadata.row_group(0).num_rows
    stored = sum(o.bytes for o in objects)
    return {
        "rows": n,
        "commits": len(commit_s),
        "rows_per_commit": per_commit,
        "objects": len(objects),
        "bytes": stored,
        "arrow_bytes_per_row": arrow_bytes / n,
        "stored_bytes_per_row": stored / n,
        "row_groups_per_object": groups,
        "rows_per_row_group": group_rows,
        "build_s": build_s,
        "rows_per_s": n / build_s,
        "commit_s_first_tenth": statistics.median(commit_s[: max(1, len(commit_s) // 10)]),
        "commit_s_last_tenth": statistics.median(commit_s[-max(1, len(commit_s) // 10) :]),
    }


def base_objects(store: TableStore) -> list[Any]:
    """The table's objects now (before any change: the set-up's commit objects)."""
    return list(store.plan_read(TENANT, TABLE).objects)


def bare_read(store: TableStore, repeats: int) -> dict[str, Any]:
    """What the diff avoids: every object of the table read whole by pyarrow alone,
    one after another (``pq.read_table`` of each, summed; best of ``repeats``)."""
    objects = base_objects(store)
    runs = []
    for _ in range(repeats):
        read = 0
        started = time.perf_counter()
        for record in objects:
            with store.objects.open_input(record.key) as source:
                read += pq.read_table(source).num_rows
        runs.append(time.perf_counter() - started)
        if read != sum(o.rows for o in objects):
            raise RuntimeError(f"the bare read found {read:,} rows in {len(objects)} objects")
    return {
        "objects": len(objects),
        "bytes": sum(o.bytes for o in objects),
        "runs_s": runs,
        "seconds": min(runs),
        "mb_per_s": sum(o.bytes for o in objects) / MB / min(runs),
    }


# the API under test -------------------------------------------------------------------------


def diff_counts(store: TableStore, from_ts: int, to_ts: int | None = None) -> dict[str, Any]:
    """``TableStore.diff`` from ``from_ts`` read to the end: rows per ``__change``."""
    counts: dict[str, int] = {}
    total = 0
    for batch in store.diff(TENANT, TABLE, from_ts, to_ts):
        total += batch.num_rows
        if batch.num_rows:
            for item in pc.value_counts(batch.column("__change")).to_pylist():
                counts[item["values"]] = counts.get(item["values"], 0) + item["counts"]
    return {"rows": total, "kinds": counts}


def revert(store: TableStore, commit_ts: int) -> RevertResult:
    """``TableStore.revert`` of one commit (the PITR window protects ``commit_ts - 1``)."""
    return store.revert(TENANT, TABLE, commit_ts)


# one case -----------------------------------------------------------------------------------


def choose_keys(layout: str, c: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """C keys of the table: a contiguous range (clustered) or uniformly random ones."""
    if layout == "clustered":
        start = int(rng.integers(0, n - c + 1))
        return np.arange(start, start + c, dtype=np.int64)
    return np.sort(rng.choice(n, size=c, replace=False)).astype(np.int64)


def change(
    store: TableStore, layout: str, keys: np.ndarray, rng: np.random.Generator, version: int
) -> int:
    """The change commit: delete ``keys`` (clustered) or update them (random); its ts."""
    if layout == "clustered":
        done = store.write(TENANT, TABLE, deletes=pa.table({"id": pa.array(keys, pa.int64())}))
    else:
        done = store.write(TENANT, TABLE, upserts=rows(keys, rng, version))
    return done.ts


def touched(keys: np.ndarray, built: dict[str, Any]) -> dict[str, int]:
    """Set-up objects and row groups holding ``keys`` (object i holds keys
    [i * rows_per_commit, (i + 1) * rows_per_commit), its groups equal runs of them):
    what a point read at one time must open and decode, at the least."""
    per_object, per_group = built["rows_per_commit"], built["rows_per_row_group"]
    objects = keys // per_object
    groups = objects * built["row_groups_per_object"] + (keys % per_object) // per_group
    return {"objects": len(np.unique(objects)), "row_groups": len(np.unique(groups)),
            "rows_per_group": per_group}  # fmt: skip


def keyed(store: TableStore, as_of: int | None, keys: np.ndarray) -> pa.Table:
    """The rows of ``keys`` at ``as_of``: a key-set read, independent of the diff."""
    plan = store.plan_read(TENANT, TABLE, as_of)
    wanted = KeySet.of(pa.table({"id": pa.array(keys, pa.int64())}), ["id"])
    parts = list(stream_visible(store.objects, plan, keys=wanted))
    return pa.concat_tables(parts) if parts else plan.table.schema.arrow().empty_table()


def check_reverted(
    store: TableStore, at_a: int, keys: np.ndarray, full: bool, rng: np.random.Generator
) -> dict[str, Any]:
    """After the revert the table reads as at A: the changed keys (at most
    :data:`CHECKED_KEYS` of them, with the first and the last), a diff from A
    (it must be empty), and with ``full`` every row."""
    if len(keys) > CHECKED_KEYS:
        inner = rng.choice(keys[1:-1], CHECKED_KEYS - 2, replace=False)
        keys = np.sort(np.concatenate([keys[:1], inner, keys[-1:]]))
    before, now = keyed(store, at_a, keys), keyed(store, None, keys)
    if before.num_rows != len(keys) or not before.equals(now):
        raise RuntimeError(
            f"after the revert the {len(keys):,} changed keys read {now.num_rows:,} rows, "
            f"at A {before.num_rows:,}, and differ"
        )
    empty, seconds = timed(lambda: diff_counts(store, at_a))
    if empty["rows"]:
        raise RuntimeError(f"after the revert a diff from A finds {empty}")
    out: dict[str, Any] = {"keys_checked": len(keys), "diff_after_revert_s": seconds}
    if full:
        whole_a, whole_now = store.read(TENANT, TABLE, at_a), store.read(TENANT, TABLE)
        if not whole_a.equals(whole_now):
            raise RuntimeError("after the revert the table does not read as at A")
        out["full_check_rows"] = whole_now.num_rows
    return out


def measure_case(
    store: TableStore,
    built: dict[str, Any],
    layout: str,
    c: int,
    *,
    rng: np.random.Generator,
    repeats: int,
    cheap_s: float,
    full_check_rows: int,
    rss: bool,
    first_version: int,
) -> dict[str, Any]:
    """``repeats`` cycles of change, diff, (a fresh-process diff), revert, check."""
    n = built["rows"]
    expected = {"delete" if layout == "clustered" else "update": c}
    cycles: list[dict[str, Any]] = []
    child: dict[str, Any] | None = None
    for rep in range(repeats):
        version = first_version + rep
        at_a = store.create_snapshot(TENANT, f"a{version}").ts
        keys = choose_keys(layout, c, n, rng)
        change_ts, write_s = timed(partial(change, store, layout, keys, rng, version))
        plan_objects = len(store.plan_read(TENANT, TABLE, at_a).objects)
        found, diff_s = timed(partial(diff_counts, store, at_a))
        if found["kinds"] != expected:
            raise RuntimeError(f"{layout} change of {c:,} rows: the diff found {found}")
        if rss and rep == 0:
            child = child_diff(store, at_a, expected)
        done, revert_s = timed(partial(revert, store, change_ts))
        if (done.upserted, done.deleted, done.conflicts.num_rows) != (c, 0, 0):
            raise RuntimeError(f"the revert of a {layout} change of {c:,} rows did {done}")
        check = check_reverted(store, at_a, keys, n <= full_check_rows, rng)
        cycles.append(
            {
                "from_ts": at_a,
                "change_ts": change_ts,
                "change_write_s": write_s,
                "objects_at_a": plan_objects,
                "touched": touched(keys, built),
                "diff_s": diff_s,
                "revert_s": revert_s,
                "revert_ts": done.ts,
                **check,
            }
        )
        if diff_s + revert_s > cheap_s:
            break
    diffs = [c["diff_s"] for c in cycles]
    reverts = [c["revert_s"] for c in cycles]
    return {
        "layout": layout,
        "change_rows": c,
        "repeats": len(cycles),
        "diff_s": statistics.median(diffs),
        "diff_best_s": min(diffs),
        "revert_s": statistics.median(reverts),
        "revert_best_s": min(reverts),
        "diff_after_revert_s": statistics.median(c["diff_after_revert_s"] for c in cycles),
        "touched": cycles[0]["touched"],
        "fresh_process": child,
        "cycles": cycles,
    }


# the fresh process ----------------------------------------------------------------------------


def _status(pid: int | str = "self") -> dict[str, int]:
    """VmRSS / VmHWM of a process in bytes."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1]) * 1024
    return out


def _reset_peak() -> bool:
    """Reset this process's VmHWM to its RSS now (Linux >= 4.0)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def child_diff(store: TableStore, at_a: int, expected: dict[str, int]) -> dict[str, Any]:
    """The diff from ``at_a`` to now in a fresh interpreter: its seconds and peak RSS."""
    job = {
        "catalog": store.catalog.uri,
        "warehouse": store.objects.warehouse.uri,
        "from_ts": at_a,
    }
    result = run_child("diff", job, os.environ)
    if result["kinds"] != expected:
        raise RuntimeError(f"the diff in a fresh process found {result}")
    return {
        "seconds": result["seconds"],
        "open_s": result["open_s"],
        "peak_rss_mib": result["peak_rss_bytes"] / MiB,
        "baseline_rss_mib": result["baseline_rss_bytes"] / MiB,
        "growth_mib": (result["peak_rss_bytes"] - result["baseline_rss_bytes"]) / MiB,
        "peak_reset": result["peak_reset"],
    }


def run_child(what: str, job: dict[str, Any], env: Any, timeout_s: float = 7200) -> dict[str, Any]:
    """``python -m benchmarks.bench_diff --child WHAT JOB`` on this tree; its result line."""
    env = dict(env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    command = [sys.executable, "-m", "benchmarks.bench_diff", "--child", what, json.dumps(job)]
    done = subprocess.run(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, timeout=timeout_s,
        check=False,
    )  # fmt: skip
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(RESULT_MARK)]
    if done.returncode or not lines:
        raise RuntimeError(f"bench_diff --child {what} failed (exit {done.returncode})")
    result: dict[str, Any] = json.loads(lines[-1][len(RESULT_MARK) :])
    return result


def child_main(what: str, raw: str) -> None:
    """In the child: one job, one result line on stdout."""
    job = json.loads(raw)
    if what == "diff":
        out = _child_diff(job)
    elif what == "groups":
        out = _child_groups(job)
    else:
        raise SystemExit(f"unknown child {what!r}")
    sys.stdout.write(RESULT_MARK + json.dumps(out) + "\n")
    sys.stdout.flush()


def _child_diff(job: dict[str, Any]) -> dict[str, Any]:
    opened = time.perf_counter()
    store = TableStore.open(job["catalog"], job["warehouse"], create=False)
    open_s = time.perf_counter() - opened
    try:
        gc.collect()
        baseline = _status().get("VmRSS", 0)
        reset = _reset_peak()
        found, seconds = timed(lambda: diff_counts(store, job["from_ts"]))
        status = _status()
    finally:
        store.close()
    return found | {
        "seconds": seconds,
        "open_s": open_s,
        "baseline_rss_bytes": baseline,
        "peak_rss_bytes": status.get("VmHWM", 0),
        "peak_reset": reset,
    }


def _child_groups(job: dict[str, Any]) -> dict[str, Any]:
    """The random layout at one size with the row groups this process's env sets."""
    from tenants.objects import writer

    if writer.ROW_GROUP_ROWS != job["row_group_rows"]:
        raise RuntimeError(
            f"{ROW_GROUP_ENV} did not take: the writer uses {writer.ROW_GROUP_ROWS} rows"
        )
    plan = Plan(**job["plan"])
    return run_size("file", job["rows"], plan, ("random",), job["changes"],
                    curve_change=job["curve_change"], profile=True)  # fmt: skip


# one size on one warehouse --------------------------------------------------------------------


class Plan:
    """The knobs a size's run takes (also sent to the row-group child as JSON)."""

    def __init__(
        self, *, seed: int, repeats: int, cheap_s: float, full_check_rows: int,
        bare_repeats_max_rows: int, rss: bool,
    ) -> None:  # fmt: skip
        self.seed = seed
        self.repeats = repeats
        self.cheap_s = cheap_s
        self.full_check_rows = full_check_rows
        self.bare_repeats_max_rows = bare_repeats_max_rows
        self.rss = rss

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


def run_size(
    backend: Backend,
    n: int,
    plan: Plan,
    layouts: Sequence[str],
    changes: Sequence[int],
    *,
    curve_change: int = CURVE_CHANGE,
    next_rows: int | None = None,
    max_build_s: float = float("inf"),
    profile: bool = False,
) -> dict[str, Any]:
    """Build ``n`` rows on ``backend``, read them bare, then the cases.

    With ``next_rows`` (a larger size to come) only ``curve_change`` runs, unless
    :func:`feasible` says the larger size should not be built: then this is the
    largest size and every change size runs here (``stop`` says why)."""
    tag = f"{backend} {n:,}"
    load_start = load_average()
    with open_store(backend) as store:
        console.print(f"[bold]{tag}[/]: building ...")
        built = build(store, n, plan.seed)
        console.print(
            f"  {built['objects']:,} objects, {built['bytes'] / MB:,.0f} MB, "
            f"{built['row_groups_per_object']} row group(s) each, built in {built['build_s']:.0f} s "
            f"({built['rows_per_s'] / 1e6:.2f} M rows/s)"
        )
        out: dict[str, Any] = {"backend": backend, "rows": n, "build": built}
        if next_rows is not None:
            stop = feasible(built, next_rows, max_build_s)
            if stop is None:
                changes, profile = [curve_change], False
            else:
                console.print(f"  [yellow]{stop}; the change-size curve runs at {n:,}[/]")
                out["stop"] = stop
        out["bare"] = bare_read(store, 3 if n <= plan.bare_repeats_max_rows else 1)
        console.print(f"  bare pyarrow full read: {out['bare']['seconds']:.2f} s")
        rng = np.random.default_rng(plan.seed + 1)
        out["cases"] = []
        version = 1
        for c in changes:
            for layout in layouts:
                case = measure_case(
                    store, built, layout, c, rng=rng, repeats=plan.repeats, cheap_s=plan.cheap_s,
                    full_check_rows=plan.full_check_rows, rss=plan.rss, first_version=version,
                )  # fmt: skip
                version += case["repeats"]
                fresh = case["fresh_process"] or {}
                console.print(
                    f"  {layout} C={c:,}: diff {case['diff_s']:.3f} s (fresh process "
                    f"{fresh.get('seconds', float('nan')):.3f} s, peak "
                    f"{fresh.get('peak_rss_mib', float('nan')):,.0f} MiB), revert "
                    f"{case['revert_s']:.3f} s, x{case['repeats']}"
                )
                out["cases"].append(case)
        if profile and "random" in layouts:
            out["profile"] = profile_diff(store, built, rng, version, curve_change)
    out["load_average"] = {"start": load_start, "end": load_average()}
    return out


def profile_diff(
    store: TableStore,
    built: dict[str, Any],
    rng: np.random.Generator,
    version: int,
    c: int,
    top: int = 25,
) -> dict[str, Any]:
    """One random change of ``c`` rows, its diff under cProfile (not timed with the
    others); the top functions by own and by cumulative time."""
    at_a = store.create_snapshot(TENANT, f"a{version}").ts
    n = built["rows"]
    keys = choose_keys("random", c, n, rng)
    change_ts = change(store, "random", keys, rng, version)
    from tenants.reads import visible

    profiler = cProfile.Profile()
    _ProfiledPool.profiles = []
    pool, visible.ThreadPoolExecutor = visible.ThreadPoolExecutor, _ProfiledPool  # type: ignore[misc]
    try:
        started = time.perf_counter()
        profiler.enable()
        diff_counts(store, at_a)
        profiler.disable()
        seconds = time.perf_counter() - started
    finally:
        visible.ThreadPoolExecutor = pool  # type: ignore[misc]
    revert(store, change_ts)
    stats = pstats.Stats(profiler, stream=io.StringIO())
    for thread in _ProfiledPool.profiles:
        stats.add(thread)

    def rows_by(key: int) -> list[dict[str, Any]]:
        entries = sorted(stats.stats.items(), key=lambda kv: kv[1][key], reverse=True)  # type: ignore[attr-defined]
        return [
            {
                "function": f"{Path(file).name}:{line}:{name}" if line else name,
                "calls": calls,
                "own_s": own,
                "cumulative_s": cumulative,
            }
            for (file, line, name), (_, calls, own, cumulative, _) in entries[:top]
        ]

    return {"rows": n, "change_rows": c, "profiled_s": seconds, "touched": touched(keys, built),
            "breakdown": breakdown(stats, seconds),
            "by_own": rows_by(2), "by_cumulative": rows_by(3)}  # fmt: skip


# Where a diff's time goes (tenants/changes/diff.py): a chunk of keys is read at A
# from the table and at B from the change log's objects (read_keys of each side),
# each object in a thread of its own (up to 8), then MVCC over the rows kept.
# (what, module file, function, "own" or "cumulative" seconds)
WALL_STEPS = (
    ("plan: catalog, both read plans, the change log's rows", "diff.py", "plan_diff", "cumulative"),
    ("changed keys: the change objects' keys merged", "diff.py", "changed_keys", "cumulative"),
    ("point reads: A from the table, B from the log", "visible.py", "read_keys", "cumulative"),
    ("match A and B, compare values", "diff.py", "_classify", "cumulative"),
)
MVCC_STEP = ("MVCC over the rows kept", "mvcc.py", "resolve", "cumulative")
THREAD_TOTAL = (
    "per object, wall seconds summed over the threads (8 threads share 2 cores)",
    "visible.py",
    "events",
    "cumulative",
)
THREAD_STEPS = (
    ("Parquet: fetch and decode the touched row groups", "reader.py", "batches", "own"),
    ("KeySet.mask: is_in of the rows decoded", "key_range.py", "mask", "cumulative"),
    ("KeySet.row_groups: pruning by statistics", "key_range.py", "row_groups", "cumulative"),
    ("opening objects (footers)", "reader.py", "open_object", "cumulative"),
)


def breakdown(stats: pstats.Stats, seconds: float) -> list[dict[str, Any]]:
    """The diff's ``seconds`` by step (wall: :data:`WALL_STEPS`, their share of the
    whole), the point reads split into MVCC and the object reads' wall, and the
    object reads' thread-seconds by part (:data:`THREAD_STEPS`, their share of
    the threads' total). Generators are resumed once per item: a cumulative
    time is that of every resume (cProfile's own accounting)."""
    table = stats.stats  # type: ignore[attr-defined]

    def spent(step: tuple[str, str, str, str]) -> float:
        _, file, name, kind = step
        return float(sum(
            (own if kind == "own" else cumulative)
            for (path, _, function), (_, _, own, cumulative, _) in table.items()
            if function == name and Path(path).name == file
        ))  # fmt: skip

    def row(depth: int, what: str, value: float, whole: float, unit: str = "s") -> dict[str, Any]:
        share = value / whole if whole else 0.0
        return {"depth": depth, "step": what, "seconds": value, "unit": unit, "share": share}

    out: list[dict[str, Any]] = []
    walls = [spent(step) for step in WALL_STEPS]
    for step, value in zip(WALL_STEPS, walls, strict=True):
        out.append(row(0, step[0], value, seconds))
        if step[3:] == ("cumulative",) and step[2] == "read_keys":
            mvcc = spent(MVCC_STEP)
            out.append(row(1, MVCC_STEP[0], mvcc, value))
            out.append(row(1, "reading the objects, in threads", value - mvcc, value))
            threads = spent(THREAD_TOTAL)
            out.append(row(2, THREAD_TOTAL[0], threads, threads, "thread-s"))
            parts = [spent(part) for part in THREAD_STEPS]
            for part, used in zip(THREAD_STEPS, parts, strict=True):
                out.append(row(3, part[0], used, threads, "thread-s"))
            out.append(row(3, "the rest: filters by ts and key, projection",
                           threads - sum(parts), threads, "thread-s"))  # fmt: skip
    out.append(row(0, "the rest: the batches out, chunking", seconds - sum(walls), seconds))
    return out


class _ProfiledPool(ThreadPoolExecutor):
    """A thread pool whose tasks each run under a cProfile of their own
    (cProfile sees one thread only), collected in ``profiles``."""

    profiles: list[cProfile.Profile] = []

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        def profiled() -> Any:
            profile = cProfile.Profile()
            profile.enable()
            try:
                return fn(*args, **kwargs)
            finally:
                profile.disable()
                _ProfiledPool.profiles.append(profile)

        return super().submit(profiled)


def small_groups(
    n: int, plan: Plan, changes: Sequence[int], curve_change: int, group_rows: int
) -> dict[str, Any]:
    """:func:`run_size` of the random layout in a child with ``group_rows``-row groups."""
    console.print(f"[bold]file {n:,}, {ROW_GROUP_ENV}={group_rows}[/] (a child process) ...")
    env = dict(os.environ)
    env[ROW_GROUP_ENV] = str(group_rows)
    job = {"rows": n, "changes": list(changes), "curve_change": curve_change,
           "row_group_rows": group_rows,
           "plan": plan.to_json()}  # fmt: skip
    started = time.perf_counter()
    result = run_child("groups", job, env)
    result["row_group_rows"] = group_rows
    result["process_s"] = time.perf_counter() - started
    for case in result["cases"]:
        console.print(
            f"  random C={case['change_rows']:,}: diff {case['diff_s']:.3f} s, revert "
            f"{case['revert_s']:.3f} s"
        )
    return result


# summary ------------------------------------------------------------------------------------


def slope(points: Sequence[tuple[float, float]]) -> float | None:
    """The log-log slope through ``points`` (0: flat, 1: linear)."""
    if len(points) < 2:
        return None
    xs, ys = zip(*points, strict=True)
    return float(np.polyfit(np.log10(xs), np.log10(ys), 1)[0])


def curves(payload: dict[str, Any]) -> dict[str, Any]:
    """Slopes of diff and revert seconds against N (at C = 1,000) and C (at the largest N)."""
    out: dict[str, Any] = {}
    runs = payload["runs"]
    for backend in ("file", "moto"):
        mine = sorted((r for r in runs if r["backend"] == backend), key=lambda r: r["rows"])
        if not mine:
            continue
        for layout in LAYOUTS:
            for what in ("diff_s", "revert_s"):
                by_n = [(r["rows"], c[what]) for r in mine for c in r["cases"]
                        if c["layout"] == layout and c["change_rows"] == payload["curve_change"]]  # fmt: skip
                by_c = [(c["change_rows"], c[what]) for c in mine[-1]["cases"]
                        if c["layout"] == layout]  # fmt: skip
                out[f"{backend} {layout} {what[:-2]}"] = {
                    "slope_vs_rows": slope(by_n),
                    "slope_vs_change": slope(by_c),
                }
    return out


def goals(payload: dict[str, Any]) -> dict[str, Any]:
    """The issue's goals at the largest ``file://`` size run (10^8 when feasible), C = 1,000."""
    runs = [r for r in payload["runs"] if r["backend"] == "file"]
    if not runs:
        return {}
    largest = max(runs, key=lambda r: r["rows"])
    out: dict[str, Any] = {
        "rows": largest["rows"],
        "at_goal_size": largest["rows"] >= GOALS["rows"],
    }
    for case in largest["cases"]:
        if case["change_rows"] != GOALS["change_rows"]:
            continue
        fresh = case["fresh_process"] or {}
        out[case["layout"]] = {
            "diff_s": case["diff_s"],
            "diff_met": case["diff_s"] < GOALS["diff_s"],
            "diff_fresh_process_s": fresh.get("seconds"),
            "diff_peak_rss_mib": fresh.get("peak_rss_mib"),
            "rss_met": fresh.get("peak_rss_mib", float("inf")) < GOALS["diff_rss_mib"],
            "revert_s": case["revert_s"],
            "revert_met": case["revert_s"] < GOALS["revert_s"],
        }
    return out


def print_report(payload: dict[str, Any]) -> None:
    t = Table(
        title="diff and revert of one commit (s: median of the cycles; fresh: another process)"
    )
    for col in ("warehouse", "rows", "objects", "layout", "C", "diff s", "fresh diff s",
                "peak RSS MiB", "revert s", "bare full read s", "bare ÷ diff", "x"):  # fmt: skip
        t.add_column(col, justify="right")
    runs = [*payload["runs"]]
    if payload.get("small_groups"):
        runs.append(payload["small_groups"])
    for run in runs:
        where = run["backend"] + (
            f" {run['row_group_rows']}-row groups" if "row_group_rows" in run else ""
        )
        for c in run["cases"]:
            fresh = c["fresh_process"] or {}
            t.add_row(
                where, f"{run['rows']:,}", f"{run['build']['objects']:,}", c["layout"],
                f"{c['change_rows']:,}", f"{c['diff_s']:.3f}",
                f"{fresh.get('seconds', float('nan')):.3f}",
                f"{fresh.get('peak_rss_mib', float('nan')):,.0f}", f"{c['revert_s']:.3f}",
                f"{run['bare']['seconds']:.2f}", f"{run['bare']['seconds'] / c['diff_s']:,.1f}x",
                str(c["repeats"]),
            )  # fmt: skip
    console.print(t)
    for run in runs:
        b = run["build"]
        console.print(
            f"set-up {run['backend']} {b['rows']:,} rows: {b['build_s']:.1f} s "
            f"({b['rows_per_s'] / 1e6:.2f} M rows/s), {b['bytes'] / MB:,.0f} MB, "
            f"{b['stored_bytes_per_row']:.1f} stored B/row ({b['arrow_bytes_per_row']:.0f} in Arrow), "
            f"{b['row_groups_per_object']} row group(s) an object"
        )
    for run in runs:
        prof = run.get("profile")
        if prof:
            groups = f", {run['row_group_rows']}-row groups" if "row_group_rows" in run else ""
            console.print(
                f"where a random diff's time goes ({run['backend']} {prof['rows']:,} rows{groups}, "
                f"C={prof['change_rows']:,}: {prof['touched']['objects']:,} objects, "
                f"{prof['touched']['row_groups']:,} row groups touched; {prof['profiled_s']:.2f} s "
                "under cProfile; each share of the step above it):"
            )
            for step in prof["breakdown"]:
                name = "  " * step["depth"] + step["step"]
                console.print(
                    f"  {name:<66} {step['seconds']:7.2f} {step['unit']:<8} {step['share']:5.0%}"
                )
    for key, value in payload["curves"].items():
        console.print(f"  {key}: log-log slope vs rows {value['slope_vs_rows']}, "
                      f"vs change {value['slope_vs_change']}")  # fmt: skip
    for note in payload.get("skipped", []):
        console.print(f"  [yellow]{note}[/]")
    console.print(f"  goals: {payload['goals']}")


# main ---------------------------------------------------------------------------------------


def feasible(built: dict[str, Any], next_rows: int, max_build_s: float) -> str | None:
    """Why a set-up of ``next_rows`` should not run after ``built``, or None."""
    scale = next_rows / built["rows"]
    if built["build_s"] > max_build_s:
        return (
            f"{next_rows:,} rows not run: the {built['rows']:,}-row set-up took "
            f"{built['build_s']:.0f} s (> {max_build_s:.0f} s), so {next_rows:,} would take "
            f"~{built['build_s'] * scale / 60:.0f} min"
        )
    need = built["bytes"] * scale * 1.2
    free = shutil.disk_usage(RESULTS_DIR).free
    if need > free - 10e9:
        return f"{next_rows:,} rows not run: ~{need / 1e9:.0f} GB needed, {free / 1e9:.0f} GB free"
    return None


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_diff", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="10^4 rows, C = 100 (< 1 minute)")
    parser.add_argument("--sizes", nargs="+", help="table rows on file:// (default 1e6 1e7 1e8)")
    parser.add_argument("--moto-sizes", nargs="*", help="table rows on moto (default 1e6 1e7)")
    parser.add_argument("--changes", nargs="+", help="C at the largest size (default 1e2 .. 1e5)")
    parser.add_argument("--repeats", type=int, default=3, help="cycles per case (median)")
    parser.add_argument("--cheap-s", type=float, default=20.0,
                        help="stop a case's cycles after one whose diff + revert took longer")  # fmt: skip
    parser.add_argument("--max-build-s", type=float, default=360.0,
                        help="no larger size after a set-up that took longer")  # fmt: skip
    parser.add_argument("--full-check-rows", type=float, default=1e6,
                        help="whole-table check after a revert up to this many rows")  # fmt: skip
    parser.add_argument("--small-groups", type=int,
                        help="row-group rows of the child run (default 16384; 0: none)")  # fmt: skip
    parser.add_argument("--no-rss", action="store_true", help="no fresh-process diffs")
    parser.add_argument("--seed", type=int, default=36)
    parser.add_argument("--name", help="result name (default bench_diff[_quick])")
    parser.add_argument("--child", nargs=2, metavar=("WHAT", "JSON"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.child:
        child_main(*args.child)
        return {}
    quick = bool(args.quick)
    sizes = sorted(parse_sizes(args.sizes or (["1e4"] if quick else ["1e6", "1e7", "1e8"])))
    moto_sizes = parse_sizes(
        args.moto_sizes if args.moto_sizes is not None else (["1e4"] if quick else ["1e6", "1e7"])
    )
    changes = sorted(
        parse_sizes(args.changes or (["100"] if quick else ["1e2", "1e3", "1e4", "1e5"]))
    )
    group_rows = args.small_groups if args.small_groups is not None else (256 if quick else 16384)
    plan = Plan(
        seed=args.seed, repeats=args.repeats, cheap_s=args.cheap_s,
        full_check_rows=int(args.full_check_rows), bare_repeats_max_rows=10**7, rss=not args.no_rss,
    )  # fmt: skip
    curve_change = min(changes, key=lambda c: abs(c - CURVE_CHANGE))
    load_start = load_average()
    started = time.perf_counter()
    console.print(f"[bold]{NAME}[/]: file:// {sizes}, moto {moto_sizes}, C {changes}; "
                  f"load average {load_start}")  # fmt: skip
    payload: dict[str, Any] = {
        "quick": quick,
        "load_average_at_start": load_start,
        "sizes": sizes,
        "moto_sizes": moto_sizes,
        "changes": changes,
        "curve_change": curve_change,
        "schema": {"columns": [c.name for c in SCHEMA.columns], "rows_per_commit": COMMIT_ROWS},
        "pitr_window_us": PITR_US,
        "plan": plan.to_json(),
        "goals_asked": GOALS,
        "runs": [],
        "skipped": [],
    }
    for i, n in enumerate(sizes):
        following = sizes[i + 1] if i + 1 < len(sizes) else None
        run = run_size(
            "file", n, plan, LAYOUTS, changes, curve_change=curve_change, next_rows=following,
            max_build_s=args.max_build_s, profile=True,
        )  # fmt: skip
        payload["runs"].append(run)
        if "stop" in run:
            payload["skipped"].append(run["stop"])
            break
    largest = payload["runs"][-1]["rows"]
    # Right after the default groups' run at the same size: the machine's load then is
    # likelier the same for both.
    if group_rows:
        payload["small_groups"] = small_groups(largest, plan, changes, curve_change, group_rows)
    for n in sorted(moto_sizes):
        payload["runs"].append(
            run_size("moto", n, plan, LAYOUTS, [curve_change], curve_change=curve_change)
        )
    payload["curves"] = curves(payload)
    payload["goals"] = goals(payload)
    name = args.name or (f"{NAME}_quick" if quick else NAME)
    result = finish_run(payload, name=name, started=started, console=console, report=print_report)
    draw_beside(RESULTS_DIR / f"{name}.json", say=console.print)
    return portable(result)


if __name__ == "__main__":
    main()
