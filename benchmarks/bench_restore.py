"""Physical restore: what reusing objects saves, which executor to use, metadata cost.

Four measurements, each in one run (``--only`` picks some):

1. **Physical vs logical** on a generated tenant (default: 50 tables, ~2,000
   objects, ~1 GB on file://, ~300 MB on moto, whose S3 server writes at
   about 10-20 MB/s), about 5% of its bytes straddling the snapshot S: most
   batches are written, S is taken, more batches (updates and deletes) follow,
   then a few tables are compacted so their large objects span S. The tenant is
   restored as a clone at S physically (reuse, rewrite the straddlers) and
   logically (dump at S, reload through the write path), on the same store.
   Ratios: physical ÷ logical time, bytes written ÷ tenant size.
2. **Local vs Spark executor** for the rewrite step only
   (``outcome.seconds["rewrite"]``) across sizes of straddling bytes, on one
   table whose compacted objects all straddle S. The Spark session is started
   once beforehand and its start (and the first job's Python worker start) is
   reported apart. A least-squares line per executor gives the size where
   Spark would win, compared with ``AUTO_SPARK_BYTES``.
3. **Plan and install cost** for tenants of 10^3..10^5 objects with no
   straddler (a metadata-only restore): the objects are registered straight in
   the catalog (fake keys, ``verify="none"``: nothing is read), so the figure
   is the planner, journal and install transaction alone.
4. **Straddling sweep**: the tenant of part 1 (smaller: default 20 tables,
   600 commits, 200 MB on file://) built afresh at each ``--fractions`` value
   of ``straddle_fraction`` (0, 5%, 25%, 50%, 100% of its bytes) and restored
   physically and logically at each as in part 1, best of 2 (``--quick``: 50
   MB, 10 tables, one run), so the curves show what reusing objects saves as
   less of the tenant can be reused. The x axis is the fraction measured by the
   plan (rewrite bytes ÷ tenant bytes), not the one asked for.

After the JSON, ``benchmarks.plots`` draws ``<name>_straddle.png`` (part 4)
and ``<name>_executors.png`` (part 2) beside it when matplotlib is installed.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from benchmarks.common import (
    EVENTS_SCHEMA,
    MB,
    RESULTS_DIR,
    Backend,
    CatalogBackend,
    finish_run,
    key_table,
    load_average,
    make_rows,
    open_store,
    spark_session,
    split,
    timed,
)
from benchmarks.plots import draw_beside
from engine.executors.base import AUTO_SPARK_BYTES
from engine.restore.job import RestoreOutcome, restore_tenant
from engine.restore.plan import plan_restore
from tenants.catalog.objects import insert_members
from tenants.objects.record import ObjectRecord, object_key
from tenants.store import TableStore

NAME = "bench_restore"
TENANT = "acme"
DATABASE = "db"
SNAPSHOT = "s"
# Parquet+zstd bytes of one make_rows row in objects of ~5k-50k rows (measured).
BYTES_PER_ROW = 27
DELETE_FRACTION = 0.02  # of a batch's rows, in the batches that also delete

console = Console() if sys.stdout.isatty() else Console(width=170)


# the generated tenant ----------------------------------------------------------


@dataclass(frozen=True)
class TenantSpec:
    """Shape of a generated tenant; bytes are Parquet bytes as stored."""

    tables: int
    objects: int  # commits before compaction, about one object each
    total_bytes: int  # every object written, before and after S
    straddle_fraction: float = 0.05  # of total_bytes, in tables compacted across S
    after_fraction: float = 0.10  # of each table's commits, made after S


def build_tenant(
    store: TableStore, spec: TenantSpec, *, seed: int, tenant: str = TENANT
) -> dict[str, Any]:
    """Write ``spec``'s tenant and take snapshot :data:`SNAPSHOT` part-way.

    Per table: ``before`` commits of fresh, interleaved keys (the last also
    deletes a few keys, so S has tombstones to reuse), snapshot S, then
    ``after`` commits updating and deleting random existing keys. The first
    ``k`` tables (``straddle_fraction`` of the bytes) are then compacted, so
    each becomes one or a few large objects spanning S: the straddlers.
    Commits go round-robin over the tables, like a live tenant's.
    """
    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    store.create_tenant(tenant)
    compacted = max(1, round(spec.straddle_fraction * spec.tables)) if spec.straddle_fraction else 0
    compacted = min(compacted, spec.tables - 1)  # at least one table is not compacted
    straddle_bytes = spec.straddle_fraction * spec.total_bytes if compacted else 0.0
    budgets = [straddle_bytes / max(1, compacted)] * compacted + [
        (spec.total_bytes - straddle_bytes) / (spec.tables - compacted)
    ] * (spec.tables - compacted)
    commits = max(2, round(spec.objects / spec.tables))
    after = max(1, round(commits * spec.after_fraction))
    before = commits - after
    names = [f"t{i:03d}" for i in range(spec.tables)]
    batch_rows = [max(10, int(b / commits / BYTES_PER_ROW)) for b in budgets]
    keys = [rng.permutation(n * before).astype(np.int64) for n in batch_rows]
    parts = [split(k, before) for k in keys]
    for name in names:
        store.create_table(tenant, f"{DATABASE}.{name}", EVENTS_SCHEMA)
    rows_written = 0
    for step in range(before):
        for t, name in enumerate(names):
            deletes = None
            if step == before - 1 and before > 1:
                # Delete keys written earlier (not in this batch: one commit per key).
                earlier = parts[t][0]
                deletes = key_table(np.sort(rng.choice(earlier, _deletes(batch_rows[t]), False)))
            upserts = make_rows(parts[t][step], rng)
            store.write(tenant, f"{DATABASE}.{name}", upserts=upserts, deletes=deletes)
            rows_written += upserts.num_rows
    snapshot = store.create_snapshot(tenant, SNAPSHOT)
    for step in range(after):
        for t, name in enumerate(names):
            chosen = rng.choice(len(keys[t]), batch_rows[t] + _deletes(batch_rows[t]), False)
            updates = np.sort(keys[t][chosen[: batch_rows[t]]])
            deleted = np.sort(keys[t][chosen[batch_rows[t] :]])
            upserts = make_rows(updates, rng, version=step + 1)
            store.write(tenant, f"{DATABASE}.{name}", upserts=upserts, deletes=key_table(deleted))
            rows_written += upserts.num_rows
    written_s = time.perf_counter() - started
    compact_s = 0.0
    for name in names[:compacted]:
        _, seconds = timed(lambda n=name: store.compact(tenant, f"{DATABASE}.{n}"))
        compact_s += seconds
    objects = [record for _, record in store.objects_of(tenant)]
    totals = plan_restore(store.catalog, tenant, SNAPSHOT, to="probe").totals()
    return {
        "spec": asdict(spec),
        "tables": spec.tables,
        "compacted_tables": compacted,
        "commits_per_table": {"before_s": before, "after_s": after},
        "rows_written": rows_written,
        "objects": len(objects),
        "bytes": sum(o.bytes for o in objects),
        "snapshot_ts": snapshot.ts,
        "plan": {a: {"objects": c, "bytes": b} for a, (c, b) in totals.items()},
        "bytes_at_s": totals["reuse"][1] + totals["rewrite"][1],
        "straddle_bytes": totals["rewrite"][1],
        "write_s": written_s,
        "compact_s": compact_s,
        "build_s": time.perf_counter() - started,
    }


def _deletes(batch_rows: int) -> int:
    return max(1, int(batch_rows * DELETE_FRACTION))


def _outcome(outcome: RestoreOutcome, wall_s: float, store: TableStore) -> dict[str, Any]:
    """A restore's figures; a logical restore writes the dump and then the reloaded objects."""
    installed = [r for _, r in store.objects_of(outcome.tenant.ref)]
    out: dict[str, Any] = {
        "method": outcome.method,
        "executor": outcome.executor,
        "seconds": wall_s,
        "steps": dict(outcome.seconds),
        "objects_installed": len(installed),
        "rewritten_objects": outcome.rewritten,
    }
    out["bytes_written"] = outcome.bytes_written
    if outcome.method == "logical":  # bytes_written counts the dump and the reloaded objects
        reloaded = sum(r.bytes for r in installed)
        out |= {"dump_bytes": outcome.bytes_written - reloaded, "reload_bytes": reloaded}
    return out


def compare_restores(
    backend: Backend, spec: TenantSpec, *, seed: int, verify: str = "objects", repeats: int = 1
) -> dict[str, Any]:
    """Build the tenant on a fresh ``backend`` store; restore it physically and logically.

    With ``repeats`` > 1 each restore runs that many times (new clones of the
    same tenant, physical and logical alternating) and the fastest of each is
    reported, with every run's seconds in ``runs_s``: on a shared machine one
    run measures the neighbours as much as the restore.
    """
    runs: dict[str, list[dict[str, Any]]] = {"physical": [], "logical": []}
    with open_store(backend) as store:
        built = build_tenant(store, spec, seed=seed)
        for rep in range(repeats):
            suffix = f"-{rep}" if rep else ""
            physical, physical_s = timed(
                partial(
                    restore_tenant,
                    store,
                    TENANT,
                    SNAPSHOT,
                    to=f"physical{suffix}",
                    executor="local",
                    verify=verify,
                    method="physical",
                )
            )
            logical, logical_s = timed(
                partial(
                    restore_tenant,
                    store,
                    TENANT,
                    SNAPSHOT,
                    to=f"logical{suffix}",
                    executor="local",
                    method="logical",
                )
            )
            runs["physical"].append(_outcome(physical, physical_s, store))
            runs["logical"].append(_outcome(logical, logical_s, store))
    phys, logi = (min(runs[m], key=lambda r: r["seconds"]) for m in ("physical", "logical"))
    if repeats > 1:
        for best, method in ((phys, "physical"), (logi, "logical")):
            best["runs_s"] = [r["seconds"] for r in runs[method]]
    return {
        "backend": backend,
        "tenant": built,
        "verify": verify,
        "physical": phys,
        "logical": logi,
        "ratios": {
            "time_physical_over_logical": phys["seconds"] / logi["seconds"],
            "physical_bytes_over_tenant": phys["bytes_written"] / built["bytes"],
            "logical_bytes_over_tenant": logi["bytes_written"] / built["bytes"],
            "physical_bytes_over_logical": phys["bytes_written"] / logi["bytes_written"],
        },
    }


# 4. the straddling sweep ------------------------------------------------------

DEFAULT_FRACTIONS = (0.0, 0.05, 0.25, 0.5, 1.0)


def straddle_sweep(
    backend: Backend, base: TenantSpec, fractions: Sequence[float], *, seed: int, repeats: int
) -> dict[str, Any]:
    """Part 1 at each straddling fraction: a fresh tenant, then both restores,
    best of ``repeats``.

    The fraction is how much of the tenant was compacted across S while it
    was built, so each fraction needs its own store and tenant; the same seed
    keeps everything else alike.
    """
    points = []
    for fraction in fractions:
        spec = replace(base, straddle_fraction=fraction)
        console.print(f"4. {backend}, straddle_fraction {fraction:g} ...")
        case, seconds = timed(partial(compare_restores, backend, spec, seed=seed, repeats=repeats))
        tenant = case["tenant"]
        points.append(
            {
                "fraction_asked": fraction,
                # What the plan will rewrite: the figure the x axis shows.
                "straddle_fraction": tenant["straddle_bytes"] / tenant["bytes"],
                "tenant_bytes": tenant["bytes"],
                "straddle_bytes": tenant["straddle_bytes"],
                "physical_s": case["physical"]["seconds"],
                "logical_s": case["logical"]["seconds"],
                "physical_bytes_written": case["physical"]["bytes_written"],
                "logical_bytes_written": case["logical"]["bytes_written"],
                "physical_over_logical": case["ratios"]["time_physical_over_logical"],
                "case_seconds": seconds,
                "case": case,
            }
        )
    return {
        "backend": backend,
        "spec": asdict(base),
        "fractions": list(fractions),
        "repeats": repeats,
        "points": points,
    }


# 2. local vs Spark rewrite -----------------------------------------------------

REWRITE_BATCHES = 8


def build_straddlers(store: TableStore, tenant: str, size: int, seed: int) -> dict[str, Any]:
    """One table whose objects all straddle S, ``size`` bytes of them.

    95% of the rows go in before S (``REWRITE_BATCHES`` commits), updates of 5%
    of the keys after; compaction into ~8 objects (at most 64 MB each) makes
    every object span S, so the whole table is rewritten.
    """
    rng = np.random.default_rng(seed)
    store.create_tenant(tenant)
    store.create_table(tenant, f"{DATABASE}.t", EVENTS_SCHEMA)
    rows = max(REWRITE_BATCHES * 10, int(size * 0.95 / BYTES_PER_ROW))
    keys = rng.permutation(rows).astype(np.int64)
    for part in split(keys, REWRITE_BATCHES):
        store.write(tenant, f"{DATABASE}.t", upserts=make_rows(part, rng))
    store.create_snapshot(tenant, SNAPSHOT)
    updates = np.sort(rng.choice(keys, max(1, rows // 20), replace=False))
    store.write(tenant, f"{DATABASE}.t", upserts=make_rows(updates, rng, version=1))
    target = min(64 * 1024 * 1024, max(1024 * 1024, size // REWRITE_BATCHES))
    store.compact(tenant, f"{DATABASE}.t", target_bytes=target)
    totals = plan_restore(store.catalog, tenant, SNAPSHOT, to="probe").totals()
    return {"objects": totals["rewrite"][0], "bytes": totals["rewrite"][1]}


def _rewrite_once(store: TableStore, tenant: str, executor: str, to: str) -> float:
    outcome = restore_tenant(
        store, tenant, SNAPSHOT, to=to, executor=executor, verify="none", method="physical"
    )
    if outcome.executor != executor or outcome.rewritten != outcome.plan.totals()["rewrite"][0]:
        raise RuntimeError(f"restore of {tenant} with {executor}: unexpected outcome {outcome}")
    return outcome.seconds["rewrite"]


def executor_sweep(
    backend: Backend, sizes: Sequence[int], *, repeats: int, seed: int
) -> dict[str, Any]:
    """Rewrite-step seconds per size, local and Spark alternating; best of ``repeats``."""
    rows = []
    with open_store(backend) as store:
        tenants = []
        for i, size in enumerate(sizes):
            tenant = f"rw{i}"
            built, build_s = timed(
                lambda t=tenant, s=size, k=seed + i: build_straddlers(store, t, s, k)
            )
            tenants.append((tenant, size, built, build_s))
        # The first Spark job of the process starts its Python workers: not a rewrite cost.
        first_job_s = _rewrite_once(store, tenants[0][0], "spark", "warmup")
        for tenant, size, built, build_s in tenants:
            runs: dict[str, list[float]] = {"local": [], "spark": []}
            for rep in range(repeats):
                for executor in ("local", "spark"):
                    runs[executor].append(
                        _rewrite_once(store, tenant, executor, f"{tenant}-{executor}-{rep}")
                    )
            local, spark = min(runs["local"]), min(runs["spark"])
            rows.append(
                {
                    "target_bytes": size,
                    "straddle_objects": built["objects"],
                    "straddle_bytes": built["bytes"],
                    "build_s": build_s,
                    "local_s": runs["local"],
                    "spark_s": runs["spark"],
                    "local_best_s": local,
                    "spark_best_s": spark,
                    "spark_over_local": spark / local,
                    "local_mb_per_s": built["bytes"] / MB / local,
                    "spark_mb_per_s": built["bytes"] / MB / spark,
                }
            )
    return {
        "backend": backend,
        "repeats": repeats,
        "spark_first_job_s": first_job_s,
        "sizes": rows,
        "crossover": _crossover(rows),
    }


def _fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares (intercept s, seconds per byte)."""
    slope, intercept = np.polyfit(np.array(xs), np.array(ys), 1)
    return float(intercept), float(slope)


def _crossover(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Where the fitted Spark line drops below the local one, if it ever does."""
    xs = [float(r["straddle_bytes"]) for r in rows]
    if len(xs) < 2:
        return {"bytes": None, "why": "needs two sizes"}
    local = _fit(xs, [r["local_best_s"] for r in rows])
    spark = _fit(xs, [r["spark_best_s"] for r in rows])
    wins = [r["straddle_bytes"] for r in rows if r["spark_best_s"] < r["local_best_s"]]
    out: dict[str, Any] = {
        "local_fit": {"intercept_s": local[0], "mb_per_s": _mbps(local[1])},
        "spark_fit": {"intercept_s": spark[0], "mb_per_s": _mbps(spark[1])},
        "spark_wins_at_measured_bytes": wins,
    }
    if spark[1] < local[1]:
        out["bytes"] = max(0.0, (spark[0] - local[0]) / (local[1] - spark[1]))
        out["why"] = "Spark's per-byte cost is lower; it wins beyond this size"
    else:
        out["bytes"] = None
        out["why"] = "Spark's per-byte cost is not lower than local's: it never catches up here"
    return out


def _mbps(seconds_per_byte: float) -> float:
    return 1 / (seconds_per_byte * MB) if seconds_per_byte > 0 else math.inf


# 3. metadata-only restore ------------------------------------------------------

METADATA_TABLES = 10


def register_objects(
    store: TableStore,
    tenant: str,
    count: int,
    *,
    tables: int = METADATA_TABLES,
    object_bytes: int = 20_000 * BYTES_PER_ROW,
) -> None:
    """``count`` data objects spread over ``tables`` tables (``t000``...),
    registered directly in the catalog, each recorded as ``object_bytes`` bytes.

    Keys are fake (nothing reads them with ``verify="none"``; a caller that
    verifies creates files of ``object_bytes`` at the keys); each record's ts
    range lies before the snapshot taken afterwards, so every one is reused.
    """
    store.create_tenant(tenant)
    created = [
        store.create_table(tenant, f"{DATABASE}.t{i:03d}", EVENTS_SCHEMA) for i in range(tables)
    ]
    tenant_id = store.tenant(tenant).id
    with store.catalog.transaction() as tx:
        ts = tx.commit_ts()
        for first in range(0, count, 50_000):  # batched statements, bounded memory
            members = []
            for i in range(first, min(count, first + 50_000)):
                table = created[i % len(created)]
                object_id = uuid.uuid4().hex
                record = ObjectRecord(
                    id=object_id,
                    key=object_key(tenant_id, table.id, "data", object_id),
                    kind="data",
                    fingerprint=table.schema.fingerprint,
                    rows=20_000,
                    bytes=object_bytes,
                    min_ts=ts - 1_000 - i,
                    max_ts=ts - 1,
                    min_pk=f"[{i * 20_000}]",
                    max_pk=f"[{i * 20_000 + 19_999}]",
                    sorted=True,
                    checksum="0" * 64,
                    created_ts=ts,
                )
                members.append((table.id, record))
            insert_members(tx, members, ts)
    store.create_snapshot(tenant, SNAPSHOT)


def metadata_case(count: int, repeats: int, catalog: CatalogBackend = "sqlite") -> dict[str, Any]:
    """plan_restore alone (best of 7+) and a whole restore_tenant (best of ``repeats``)."""
    with open_store("file", catalog) as store:
        _, register_s = timed(lambda: register_objects(store, TENANT, count))
        plans = []
        for _ in range(max(7, repeats)):  # cheap and read-only: best of seven at least
            plan, seconds = timed(lambda: plan_restore(store.catalog, TENANT, SNAPSHOT, to="x"))
            plans.append(seconds)
        if plan.totals()["reuse"][0] != count:
            raise RuntimeError(f"plan of {count} objects: {plan.totals()}")
        plan_json_bytes = len(plan.to_json())
        restores = []
        for rep in range(repeats):
            outcome, seconds = timed(
                lambda r=rep: restore_tenant(
                    store,
                    TENANT,
                    SNAPSHOT,
                    to=f"clone{r}",
                    executor="local",
                    verify="none",
                    method="physical",
                )
            )
            steps = dict(outcome.seconds)
            steps["journal_and_other"] = seconds - sum(steps.values())
            restores.append({"seconds": seconds, "steps": steps})
        installed = len(store.objects_of(f"clone{repeats - 1}"))
    if installed != count:
        raise RuntimeError(f"restore of {count} objects installed {installed}")
    best = min(restores, key=lambda r: r["seconds"])
    return {
        "objects": count,
        "register_s": register_s,
        "plan_s": plans,
        "plan_best_s": min(plans),
        "plan_us_per_object": min(plans) / count * 1e6,
        "plan_json_bytes": plan_json_bytes,
        "restores": restores,
        "restore_best_s": best["seconds"],
        "restore_best_steps": best["steps"],
        "restore_us_per_object": best["seconds"] / count * 1e6,
    }


def metadata_sweep(counts: Sequence[int], repeats: int) -> list[dict[str, Any]]:
    rows = []
    for count in counts:
        console.print(f"  {count:,} objects ...")
        row = metadata_case(count, repeats)
        if rows:
            prev = rows[-1]
            factor = count / prev["objects"]
            row["growth_vs_previous"] = {
                "objects_factor": factor,
                "plan_factor": row["plan_best_s"] / prev["plan_best_s"],
                "restore_factor": row["restore_best_s"] / prev["restore_best_s"],
            }
        rows.append(row)
    return rows


# report ------------------------------------------------------------------------


def _mb(n: float) -> str:
    return f"{n / MB:,.1f}"


def print_report(payload: dict[str, Any]) -> None:
    """The tables of the parts this run measured (``--only`` may skip some)."""
    for key, report in (
        ("physical_vs_logical", _report_compare),
        ("executors", _report_executors),
        ("metadata", _report_metadata),
        ("straddle_sweep", _report_straddle),
    ):
        if key in payload:
            report(payload)


def _report_compare(payload: dict[str, Any]) -> None:
    t = Table(title="1. Physical vs logical restore of the same tenant (clone at S)")
    for c in (
        "backend",
        "tenant MB",
        "objs",
        "tables",
        "straddle MB (%)",
        "phys s",
        "phys MB wr",
        "logical s",
        "logical MB wr",
        "phys÷logical time",
        "phys wr÷tenant",
        "logical wr÷tenant",
    ):
        t.add_column(c, justify="right")
    for case in payload["physical_vs_logical"]:
        b, p, lo, r = case["tenant"], case["physical"], case["logical"], case["ratios"]
        t.add_row(
            case["backend"],
            _mb(b["bytes"]),
            f"{b['objects']:,}",
            str(b["tables"]),
            f"{_mb(b['straddle_bytes'])} ({b['straddle_bytes'] / b['bytes']:.1%})",
            f"{p['seconds']:.2f}",
            _mb(p["bytes_written"]),
            f"{lo['seconds']:.2f}",
            _mb(lo["bytes_written"]),
            f"{r['time_physical_over_logical']:.3f}",
            f"{r['physical_bytes_over_tenant']:.3f}",
            f"{r['logical_bytes_over_tenant']:.3f}",
        )
    console.print(t)
    for case in payload["physical_vs_logical"]:
        steps = "; ".join(
            f"{m}: {', '.join(f'{k} {v:.2f}' for k, v in case[m]['steps'].items())}"
            for m in ("physical", "logical")
        )
        console.print(
            f"  {case['backend']}: build {case['tenant']['build_s']:.0f} s; steps (s): {steps}"
        )


def _report_executors(payload: dict[str, Any]) -> None:
    sweep = payload["executors"]
    t = Table(
        title=f"2. Rewrite step only, local vs Spark ({sweep['backend']}, best of "
        f"{sweep['repeats']}; spark÷local > 1 means local is faster)"
    )
    for c in (
        "straddle MB",
        "objs",
        "local s",
        "local MB/s",
        "spark s",
        "spark MB/s",
        "spark÷local",
    ):
        t.add_column(c, justify="right")
    for r in sweep["sizes"]:
        t.add_row(
            _mb(r["straddle_bytes"]),
            str(r["straddle_objects"]),
            f"{r['local_best_s']:.2f}",
            f"{r['local_mb_per_s']:.1f}",
            f"{r['spark_best_s']:.2f}",
            f"{r['spark_mb_per_s']:.1f}",
            f"{r['spark_over_local']:.2f}x",
        )
    console.print(t)
    x = sweep["crossover"]
    console.print(
        f"  Spark session start {payload['spark']['session_start_s']:.1f} s; first Spark job "
        f"(workers start) {sweep['spark_first_job_s']:.1f} s"
    )
    if "local_fit" in x:
        console.print(
            f"  fit: local {x['local_fit']['intercept_s']:.2f} s + "
            f"{x['local_fit']['mb_per_s']:.1f} MB/s; spark {x['spark_fit']['intercept_s']:.2f} s "
            f"+ {x['spark_fit']['mb_per_s']:.1f} MB/s"
        )
    console.print(f"  {payload['auto_spark_bytes']['verdict']}")


def _report_metadata(payload: dict[str, Any]) -> None:
    t = Table(title="3. Metadata-only restore (no straddler, verify none)")
    for c in (
        "objects",
        "plan s",
        "plan µs/obj",
        "restore s",
        "restore µs/obj",
        "plan JSON MB",
        "empty rewrite s",
        "install s",
        "journal+other s",
        "plan ×",
        "restore ×",
    ):
        t.add_column(c, justify="right")
    for r in payload["metadata"]:
        g = r.get("growth_vs_previous")
        steps = r["restore_best_steps"]
        t.add_row(
            f"{r['objects']:,}",
            f"{r['plan_best_s']:.3f}",
            f"{r['plan_us_per_object']:.0f}",
            f"{r['restore_best_s']:.3f}",
            f"{r['restore_us_per_object']:.0f}",
            _mb(r["plan_json_bytes"]),
            f"{steps['rewrite']:.3f}",
            f"{steps['install']:.3f}",
            f"{steps['journal_and_other']:.3f}",
            f"{g['plan_factor']:.1f}x / {g['objects_factor']:.0f}x" if g else "",
            f"{g['restore_factor']:.1f}x / {g['objects_factor']:.0f}x" if g else "",
        )
    console.print(t)
    console.print(
        "  empty rewrite = the rewrite step with no task: one job-state UPDATE of the "
        "restore_jobs row and a task query; install includes "
        "two more such UPDATEs; journal+other = start_job (plan JSON, pins) and the rest"
    )


def _report_straddle(payload: dict[str, Any]) -> None:
    sweep = payload["straddle_sweep"]
    spec = sweep["spec"]
    t = Table(
        title=f"4. Physical and logical restore vs straddling fraction ({sweep['backend']}, "
        f"{spec['tables']} tables, {spec['objects']:,} commits, {_mb(spec['total_bytes'])} MB asked)"
    )
    for c in (
        "asked", "straddling", "tenant MB", "straddle MB", "phys s", "phys MB wr",
        "logical s", "logical MB wr", "phys÷logical time",
    ):  # fmt: skip
        t.add_column(c, justify="right")
    for p in sweep["points"]:
        t.add_row(
            f"{p['fraction_asked']:.0%}",
            f"{p['straddle_fraction']:.1%}",
            _mb(p["tenant_bytes"]),
            _mb(p["straddle_bytes"]),
            f"{p['physical_s']:.2f}",
            _mb(p["physical_bytes_written"]),
            f"{p['logical_s']:.2f}",
            _mb(p["logical_bytes_written"]),
            f"{p['physical_over_logical']:.3f}",
        )
    console.print(t)


def _verdict(sweep: dict[str, Any]) -> dict[str, Any]:
    x = sweep["crossover"]
    wins = x.get("spark_wins_at_measured_bytes", [])
    current = f"AUTO_SPARK_BYTES = {AUTO_SPARK_BYTES / 1024**3:g} GiB"
    if wins:
        verdict = (
            f"Spark won at {', '.join(_mb(w) + ' MB' for w in wins)} on this machine; "
            f"fitted crossover {_mb(x['bytes'] or 0)} MB vs {current}"
        )
        suggested = x["bytes"]
    elif x.get("bytes") is not None:
        verdict = (
            f"Spark won at no measured size; the fitted lines cross at {_mb(x['bytes'])} MB "
            f"(extrapolated) vs {current}"
        )
        suggested = x["bytes"]
    else:
        verdict = (
            f"Spark won at no measured size and its per-byte cost is not lower, so on "
            f"{os.cpu_count()} cores local mode never pays off: {current} is a guess the "
            "measurement does not support (it only keeps Spark away from small jobs)"
        )
        suggested = None
    return {"current": AUTO_SPARK_BYTES, "suggested_bytes": suggested, "verdict": verdict}


# main --------------------------------------------------------------------------


PARTS = ("compare", "executors", "metadata", "straddle")


def _fractions(text: str) -> list[float]:
    """``"0,0.05,1"`` → ``[0.0, 0.05, 1.0]``; each a share of the tenant's bytes."""
    values = [float(v) for v in text.split(",") if v.strip()]
    if any(not 0.0 <= v <= 1.0 for v in values):
        raise argparse.ArgumentTypeError(f"fractions lie in [0, 1], got {text!r}")
    return values


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_restore",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="small sizes (about 3 minutes)")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument(
        "--rewrite-backend", choices=("file", "moto"), default="file", help="for part 2"
    )
    parser.add_argument(
        "--only", nargs="+", choices=PARTS, metavar="PART",
        help=f"run only these parts, of {', '.join(PARTS)} (1, 2, 3, 4); result name "
        "bench_restore_custom unless --name",
    )  # fmt: skip
    parser.add_argument(
        "--fractions", type=_fractions,
        default=",".join(f"{f:g}" for f in DEFAULT_FRACTIONS),
        help="part 4: straddling fractions of the tenant's bytes, comma-separated "
        "(default %(default)s; '' skips part 4)",
    )  # fmt: skip
    parser.add_argument(
        "--sweep-mb", type=float,
        help="part 4: tenant MB at each fraction (default 200; --quick 50)",
    )  # fmt: skip
    parser.add_argument(
        "--sweep-repeats", type=int,
        help="part 4: restores of each kind per fraction, best kept (default 2; --quick 1)",
    )  # fmt: skip
    parser.add_argument(
        "--sweep-backend", choices=("file", "moto"), default="file", help="for part 4"
    )
    parser.add_argument("--name", help="result file name (default bench_restore[_quick])")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    parts = set(args.only or PARTS)
    if not args.fractions:
        parts.discard("straddle")
    if args.quick:
        specs: dict[Backend, TenantSpec] = {
            "moto": TenantSpec(tables=10, objects=200, total_bytes=50 * MB),
            "file": TenantSpec(tables=10, objects=200, total_bytes=50 * MB),
        }
        sweep_spec = TenantSpec(tables=10, objects=200, total_bytes=50 * MB)
        rewrite_sizes = [1 * MB, 5 * MB, 20 * MB]
        object_counts = [1_000, 10_000]
        repeats = 1
    else:
        specs = {
            "moto": TenantSpec(tables=50, objects=2_000, total_bytes=300 * MB),
            "file": TenantSpec(tables=50, objects=2_000, total_bytes=1_000 * MB),
        }
        # Smaller than part 1's file:// tenant: five logical restores of 1 GB
        # would add five minutes to the run for the same curve.
        sweep_spec = TenantSpec(tables=20, objects=600, total_bytes=200 * MB)
        rewrite_sizes = [1 * MB, 10 * MB, 50 * MB, 200 * MB]
        object_counts = [1_000, 10_000, 100_000]
        repeats = 2
    if args.sweep_mb:
        sweep_spec = replace(sweep_spec, total_bytes=int(args.sweep_mb * MB))
    load_start = load_average()
    started = time.perf_counter()
    console.print(f"[bold]{NAME}[/]: parts {sorted(parts)}; load average {load_start}")
    payload: dict[str, Any] = {"quick": bool(args.quick), "load_average_at_start": load_start}

    if "compare" in parts:
        cases = []
        for backend, spec in specs.items():
            console.print(f"1. {backend}: {spec} ...")
            case, seconds = timed(lambda b=backend, s=spec: compare_restores(b, s, seed=args.seed))
            case["case_seconds"] = seconds
            console.print(f"   done in {seconds:.0f} s")
            cases.append(case)
        payload["physical_vs_logical"] = cases

    # Parts 4 and 3 before Spark starts: its idle JVM in this process slowed
    # the 10^5 metadata case by a third.
    if "straddle" in parts:
        straddle, seconds = timed(
            lambda: straddle_sweep(
                args.sweep_backend,
                sweep_spec,
                args.fractions,
                seed=args.seed,
                repeats=args.sweep_repeats or (1 if args.quick else 2),
            )
        )
        straddle["case_seconds"] = seconds
        payload["straddle_sweep"] = straddle

    if "metadata" in parts:
        console.print("3. metadata-only restores ...")
        payload["metadata"] = metadata_sweep(object_counts, repeats)

    if "executors" in parts:
        console.print("2. starting Spark ...")
        _, spark_start_s = spark_session()
        console.print(
            f"2. local vs Spark rewrite on {args.rewrite_backend}, sizes {rewrite_sizes} ..."
        )
        sweep, sweep_s = timed(
            lambda: executor_sweep(
                args.rewrite_backend, rewrite_sizes, repeats=repeats, seed=args.seed
            )
        )
        sweep["case_seconds"] = sweep_s
        payload["spark"] = {"session_start_s": spark_start_s}
        payload["executors"] = sweep
        payload["auto_spark_bytes"] = _verdict(sweep)

    name = args.name or (f"{NAME}_custom" if args.only else f"{NAME}_quick" if args.quick else NAME)
    result = finish_run(payload, name=name, started=started, console=console, report=print_report)
    draw_beside(RESULTS_DIR / f"{name}.json", say=console.print)
    return result


if __name__ == "__main__":
    main()
