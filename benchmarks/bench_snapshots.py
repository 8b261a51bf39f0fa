"""Snapshots: creation cost as a tenant grows, and reads at a snapshot around full compaction.

1. **Creation.** A snapshot is one catalog row (docs/design.md, "Snapshots and
   PITR"), so creating one should cost the same for a tenant of 10 objects as
   for one of 100,000. The tenant is grown to each size by registering catalog
   rows directly (object records and memberships pointing at keys that were
   never uploaded: creating a snapshot never touches objects), and
   ``create_snapshot`` is timed ~20 times per size, at "now" and at a past
   time inside the PITR window (which also computes the tenant's protection).
   The ratio of the median at the largest size to the median at the smallest
   should be about 1 ("flat"). The catalog is the same SQLite file for either
   warehouse, so this part runs on ``file://`` only.
2. **Reads at a snapshot, before and after full compaction.** A table of ~1e6
   rows (1e5 with ``--quick``) is loaded in many commits, then updated (and
   some keys deleted) in rounds, with a snapshot half-way through the rounds.
   The snapshot is read with the local reader, the table is fully compacted
   (``full=True``: only the snapshot and "now" are protected, no PITR window),
   and the snapshot is read again; both reads must return the same rows as a
   model predicts. Reported: objects and stored rows before/after, rows/s and
   MB/s (bytes of the objects the read plan fetched) and the after/before
   ratio, on a moto S3 bucket and a ``file://`` warehouse.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from benchmarks.common import (
    BACKENDS,
    EVENTS_SCHEMA,
    MB,
    Backend,
    finish_run,
    fmt_rate,
    key_table,
    load_average,
    make_rows,
    open_store,
    parse_sizes,
    rate,
    repeat,
    split,
    timed,
)
from tenants.objects.record import ObjectRecord, add_member, insert_object, object_key
from tenants.store import TableStore
from tenants.tenancy import TableRecord, new_id
from tenants.times import US

NAME = "bench_snapshots"
TENANT = "bench"
DATABASE = "db"

CREATE_SIZES = (10, 100, 1_000, 10_000, 100_000)
CREATE_RUNS = 20
QUICK_CREATE_RUNS = 10
CREATE_TABLES = 4  # the fake objects are spread over a few tables
PITR_WINDOW_US = 72 * US["h"]

READ_ROWS = 1_000_000
QUICK_READ_ROWS = 100_000
LOAD_COMMITS = 40
UPDATE_ROUNDS = 10
UPDATE_FRACTION = 0.10
DELETE_FRACTION = 0.01
SNAPSHOT_AFTER_ROUND = UPDATE_ROUNDS // 2
SNAPSHOT = "mid-updates"

console = Console() if sys.stdout.isatty() else Console(width=150)


# 1. creation cost --------------------------------------------------------------


def _register_fake_objects(
    store: TableStore, tables: list[TableRecord], start: int, count: int
) -> int:
    """Register ``count`` object records (never uploaded) as live members; return the commit ts."""
    with store.catalog.transaction() as tx:
        ts = tx.commit_ts()
        for i in range(start, start + count):
            table = tables[i % len(tables)]
            object_id = new_id()
            insert_object(
                tx,
                ObjectRecord(
                    id=object_id,
                    key=object_key(table.tenant_id, table.id, "data", object_id),
                    kind="data",
                    fingerprint=table.schema.fingerprint,
                    rows=1_000,
                    bytes=40_000,
                    min_ts=ts,
                    max_ts=ts,
                    min_pk=json.dumps([i * 1_000]),
                    max_pk=json.dumps([i * 1_000 + 999]),
                    sorted=True,
                    checksum="0" * 64,
                    created_ts=ts,
                ),
            )
            add_member(tx, table.id, object_id, ts)
    # A later change, so ``ts`` is a past time that only the PITR window protects.
    with store.catalog.transaction() as tx:
        tx.execute(
            "UPDATE tenants SET last_change_ts = ? WHERE id = ?",
            (tx.commit_ts(), tables[0].tenant_id),
        )
    return ts


def run_creation(sizes: Sequence[int], runs: int) -> dict[str, Any]:
    """Median ``create_snapshot`` time per tenant size, at "now" and at a past time."""
    points = []
    with open_store("file") as store:
        store.create_tenant(TENANT)
        store.set_pitr(TENANT, PITR_WINDOW_US)
        tables = [
            store.create_table(TENANT, f"{DATABASE}.t{i}", EVENTS_SCHEMA)
            for i in range(CREATE_TABLES)
        ]
        have = 0
        counter = iter(range(10**9))
        for size in sorted(sizes):
            (past_ts, register_s) = timed(
                lambda s=size, h=have: _register_fake_objects(store, tables, h, s - h)
            )
            have = size
            # Each size starts with no snapshots, so only the tenant's size changes.
            store.drop_snapshots(TENANT, kind="manual")
            live = len(store.objects_of(TENANT))
            if live != size:
                raise RuntimeError(f"tenant has {live} live objects, expected {size}")
            _, now_timing = repeat(
                lambda: store.create_snapshot(TENANT, f"now-{next(counter)}"), runs
            )
            _, past_timing = repeat(
                lambda t=past_ts: store.create_snapshot(TENANT, f"past-{next(counter)}", at=t),
                runs,
            )
            points.append(
                {
                    "objects": size,
                    "register_s": register_s,
                    "at_now": now_timing.to_json(),
                    "at_past_ts": past_timing.to_json(),
                }
            )
    small, large = points[0], points[-1]
    return {
        "runs_per_size": runs,
        "tables": CREATE_TABLES,
        "points": points,
        "ratio_largest_over_smallest": {
            "at_now": large["at_now"]["median_s"] / small["at_now"]["median_s"],
            "at_past_ts": large["at_past_ts"]["median_s"] / small["at_past_ts"]["median_s"],
        },
    }


# 2. reads at a snapshot around full compaction ------------------------------------


def _stored(store: TableStore) -> dict[str, int]:
    records = [r for q, r in store.objects_of(TENANT) if q == f"{DATABASE}.events"]
    return {
        "objects": len(records),
        "data_objects": sum(1 for r in records if r.kind == "data"),
        "tomb_objects": sum(1 for r in records if r.kind == "tomb"),
        "rows": sum(r.rows for r in records),
        "bytes": sum(r.bytes for r in records),
    }


def _read_at_snapshot(store: TableStore, expected: int, warm: int) -> tuple[Any, dict[str, Any]]:
    plan = store.plan_read(TENANT, f"{DATABASE}.events", SNAPSHOT)
    plan_bytes = sum(o.bytes for o in plan.objects)
    result, timing = repeat(lambda: store.read(TENANT, f"{DATABASE}.events", SNAPSHOT), warm)
    if result.num_rows != expected:
        raise RuntimeError(
            f"read at {SNAPSHOT} returned {result.num_rows} rows, expected {expected}"
        )
    return result, {
        "rows": result.num_rows,
        "plan_objects": len(plan.objects),
        "scanned_rows": sum(o.rows for o in plan.objects),
        "bytes": plan_bytes,
        **timing.to_json(),
        "rows_per_s": rate(result.num_rows, timing.steady_s),
        "mb_per_s": rate(plan_bytes / MB, timing.steady_s),
    }


def run_read_case(backend: Backend, n: int, *, warm: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    keys = rng.permutation(n).astype(np.int64)
    with open_store(backend) as store:
        store.create_tenant(TENANT)
        store.set_pitr(TENANT, None)  # only the snapshot and "now" are protected
        store.create_table(TENANT, f"{DATABASE}.events", EVENTS_SCHEMA)
        start = time.perf_counter()
        for part in split(keys, LOAD_COMMITS):
            store.write(TENANT, f"{DATABASE}.events", upserts=make_rows(part, rng))
        load_s = time.perf_counter() - start
        alive = np.ones(n, dtype=bool)
        expected_at_snapshot = -1
        start = time.perf_counter()
        for version in range(1, UPDATE_ROUNDS + 1):
            chosen = rng.choice(n, size=int(n * (UPDATE_FRACTION + DELETE_FRACTION)), replace=False)
            updates = np.sort(chosen[: int(n * UPDATE_FRACTION)])
            deletes = np.sort(chosen[int(n * UPDATE_FRACTION) :])
            store.write(
                TENANT,
                f"{DATABASE}.events",
                upserts=make_rows(updates, rng, version),
                deletes=key_table(deletes),
            )
            alive[updates] = True
            alive[deletes] = False
            if version == SNAPSHOT_AFTER_ROUND:
                store.create_snapshot(TENANT, SNAPSHOT)
                expected_at_snapshot = int(alive.sum())
        update_s = time.perf_counter() - start
        before_stored = _stored(store)
        before_rows, before = _read_at_snapshot(store, expected_at_snapshot, warm)
        results, compact_s = timed(lambda: store.compact(TENANT, f"{DATABASE}.events", full=True))
        after_stored = _stored(store)
        after_rows, after = _read_at_snapshot(store, expected_at_snapshot, warm)
        if not before_rows.equals(after_rows):
            raise RuntimeError(f"{backend}: the read at {SNAPSHOT} changed with full compaction")
    (compaction,) = results
    return {
        "backend": backend,
        "rows": n,
        "load_commits": LOAD_COMMITS,
        "update_rounds": UPDATE_ROUNDS,
        "snapshot_after_round": SNAPSHOT_AFTER_ROUND,
        "load_s": load_s,
        "update_s": update_s,
        "visible_at_snapshot": expected_at_snapshot,
        "visible_now": int(alive.sum()),
        "stored_before": before_stored,
        "stored_after": after_stored,
        "compaction": {
            "seconds": compact_s,
            "inputs": compaction.inputs,
            "outputs": compaction.outputs,
            "rows_kept": compaction.rows,
            "bytes_in": compaction.bytes_in,
            "bytes_out": compaction.bytes_out,
        },
        "read_before": before,
        "read_after": after,
        "after_over_before_rows_per_s": after["rows_per_s"] / before["rows_per_s"],
    }


# report ---------------------------------------------------------------------------


def print_report(creation: dict[str, Any], reads: list[dict[str, Any]]) -> None:
    table = Table(
        title=f"create_snapshot (median of {creation['runs_per_size']} runs; catalog rows only)",
        title_justify="left",
    )
    for column in ("objects", "register s", "at now ms", "at now best ms", "at past ts ms"):
        table.add_column(column, justify="right")
    for p in creation["points"]:
        table.add_row(
            f"{p['objects']:,}",
            f"{p['register_s']:.2f}",
            f"{p['at_now']['median_s'] * 1e3:.2f}",
            f"{p['at_now']['steady_s'] * 1e3:.2f}",
            f"{p['at_past_ts']['median_s'] * 1e3:.2f}",
        )
    console.print(table)
    ratio = creation["ratio_largest_over_smallest"]
    console.print(
        f"largest ÷ smallest tenant: {ratio['at_now']:.2f}x at now, "
        f"{ratio['at_past_ts']:.2f}x at a past ts (≈1 = flat)"
    )

    table = Table(
        title=f"Read at snapshot {SNAPSHOT!r}, local reader (best of the warm reads)",
        title_justify="left",
    )
    for column in (
        "backend",
        "visible rows",
        "layout",
        "objects",
        "stored rows",
        "plan objs",
        "scanned rows",
        "MB read",
        "read s",
        "rows/s",
        "MB/s",
    ):
        table.add_column(column, justify="right")
    for case in reads:
        for layout, stored, read in (
            ("as written", case["stored_before"], case["read_before"]),
            ("full-compacted", case["stored_after"], case["read_after"]),
        ):
            table.add_row(
                case["backend"],
                f"{case['visible_at_snapshot']:,}",
                layout,
                str(stored["objects"]),
                f"{stored['rows']:,}",
                str(read["plan_objects"]),
                f"{read['scanned_rows']:,}",
                f"{read['bytes'] / MB:.1f}",
                f"{read['steady_s']:.3f}",
                fmt_rate(read["rows_per_s"]),
                f"{read['mb_per_s']:.1f}",
            )
    console.print(table)
    for case in reads:
        c = case["compaction"]
        console.print(
            f"{case['backend']}: full compaction {c['seconds']:.2f} s "
            f"({c['inputs']}→{c['outputs']} objects); read at snapshot after ÷ before: "
            f"{case['after_over_before_rows_per_s']:.2f}x rows/s"
        )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_snapshots",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK_CREATE_RUNS} runs per size, a 1e5-row table (default "
        f"{CREATE_RUNS} runs, 1e6 rows)",
    )
    parser.add_argument(
        "--sizes", nargs="+", help="tenant sizes in objects for part 1, e.g. 10 1e5"
    )
    parser.add_argument("--rows", help="table rows for part 2 (overrides --quick)")
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--warm", type=int, default=3, help="warm reads after the cold one")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--name", help="result file name (default bench_snapshots[_quick])")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    sizes = parse_sizes(args.sizes) if args.sizes else list(CREATE_SIZES)
    runs = QUICK_CREATE_RUNS if args.quick else CREATE_RUNS
    rows = int(float(args.rows)) if args.rows else (QUICK_READ_ROWS if args.quick else READ_ROWS)
    custom = args.sizes or args.rows
    name = args.name or (f"{NAME}_custom" if custom else f"{NAME}_quick" if args.quick else NAME)
    load_at_start = load_average()
    started = time.perf_counter()

    console.print(
        f"[bold]{NAME}[/]: snapshot creation at {', '.join(f'{s:,}' for s in sizes)} objects ..."
    )
    creation, seconds = timed(lambda: run_creation(sizes, runs))
    creation["seconds"] = seconds
    reads = []
    for backend in args.backends:
        console.print(f"[bold]{NAME}[/]: {backend}, read at snapshot, {rows:,} rows ...")
        case, seconds = timed(
            lambda b=backend: run_read_case(b, rows, warm=args.warm, seed=args.seed)
        )
        case["case_seconds"] = seconds
        reads.append(case)
    payload = {
        "quick": bool(args.quick),
        "warm_calls": args.warm,
        "load_average_at_start": load_at_start,
        "creation": creation,
        "reads": reads,
    }
    return finish_run(
        payload,
        name=name,
        started=started,
        console=console,
        report=lambda p: print_report(p["creation"], p["reads"]),
    )


if __name__ == "__main__":
    main()
