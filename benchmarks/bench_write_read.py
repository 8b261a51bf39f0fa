"""Write and read-at-T throughput of the tenant store, on moto S3 and file://.

For each size and backend, on a fresh warehouse and catalog:

1. **write** the table once as a single commit (table ``db.single``) and once
   in ``--batches`` commits of random, interleaved keys (table ``db.events``);
   bytes are the object bytes the catalog records (``store.objects_of``);
2. **mutate** ``db.events`` in three commits, each updating 10% and deleting
   2% of the keys, so MVCC resolution has versions and tombstones to resolve;
   a snapshot taken right after the first round protects that time;
3. **read** ``db.events`` at the latest ts and at that snapshot (time
   travel: later versions must be ignored), with the local reader and
   the Spark reader, one cold call and ``--warm`` warm calls each;
4. **compact** ``db.events`` and read again (few large objects spanning every
   ts, the layout restores meet).

Read rows/s counts the rows returned; read MB/s counts the bytes of the
objects the read plan fetched. The Spark session's start-up is timed once
per process and reported apart from the reads. The local and Spark results
are checked to be equal and to have the row count a model predicts.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from rich.console import Console
from rich.table import Table

from benchmarks.common import (
    BACKENDS,
    EVENTS_SCHEMA,
    MB,
    Backend,
    Timing,
    finish_run,
    fmt_rate,
    key_table,
    load_average,
    make_rows,
    open_store,
    parse_sizes,
    rate,
    repeat,
    spark_session,
    split,
    timed,
)
from tenants.store import Reader, TableStore

NAME = "bench_write_read"
TENANT = "bench"
DATABASE = "db"
FULL_SIZES = (100_000, 1_000_000)
QUICK_SIZES = (10_000, 100_000)
MUTATION_ROUNDS = 3
UPDATE_FRACTION = 0.10
DELETE_FRACTION = 0.02
SNAPSHOT = "after-round-1"

# Rich wraps at 80 columns when stdout is not a terminal; the read table needs more.
console = Console() if sys.stdout.isatty() else Console(width=170)


@dataclass
class Mutations:
    """Expected visible keys after the load and after each mutation round."""

    alive_after_round: list[int]
    round_ts: list[int]
    seconds: float
    snapshot: str  # taken right after the first round: the time-travel point


def _write_figure(
    rows: int, byte_count: int, objects: int, commits: int, seconds: float
) -> dict[str, Any]:
    return {
        "rows": rows,
        "bytes": byte_count,
        "objects": objects,
        "commits": commits,
        "seconds": seconds,
        "rows_per_s": rate(rows, seconds),
        "mb_per_s": rate(byte_count / MB, seconds),
    }


def _table_objects(store: TableStore, table: str) -> tuple[int, int]:
    """(objects, bytes) of a table's live members."""
    records = [r for qualified, r in store.objects_of(TENANT) if qualified == f"{DATABASE}.{table}"]
    return len(records), sum(r.bytes for r in records)


def _write_single(store: TableStore, keys: np.ndarray, rng: np.random.Generator) -> dict[str, Any]:
    store.create_table(TENANT, f"{DATABASE}.single", EVENTS_SCHEMA)
    rows = make_rows(keys, rng)
    _, seconds = timed(lambda: store.write(TENANT, f"{DATABASE}.single", upserts=rows))
    objects, byte_count = _table_objects(store, "single")
    return _write_figure(rows.num_rows, byte_count, objects, 1, seconds)


def _write_batched(
    store: TableStore, keys: np.ndarray, rng: np.random.Generator, batches: int
) -> dict[str, Any]:
    store.create_table(TENANT, f"{DATABASE}.events", EVENTS_SCHEMA)
    parts = [make_rows(part, rng) for part in split(keys, batches)]
    start = time.perf_counter()
    for part in parts:
        store.write(TENANT, f"{DATABASE}.events", upserts=part)
    seconds = time.perf_counter() - start
    objects, byte_count = _table_objects(store, "events")
    return _write_figure(len(keys), byte_count, objects, len(parts), seconds)


def _mutate(store: TableStore, n: int, rng: np.random.Generator) -> Mutations:
    """Rounds of updates and deletes on disjoint random keys; a deleted key may come back."""
    alive = np.ones(n, dtype=bool)
    counts, stamps = [], []
    seconds = 0.0
    for version in range(1, MUTATION_ROUNDS + 1):
        chosen = rng.choice(n, size=int(n * (UPDATE_FRACTION + DELETE_FRACTION)), replace=False)
        updates = np.sort(chosen[: int(n * UPDATE_FRACTION)])
        deletes = np.sort(chosen[int(n * UPDATE_FRACTION) :])
        upserts = make_rows(updates, rng, version)
        result, elapsed = timed(
            lambda u=upserts, d=deletes: store.write(
                TENANT, f"{DATABASE}.events", upserts=u, deletes=key_table(d)
            )
        )
        seconds += elapsed
        alive[updates] = True
        alive[deletes] = False
        counts.append(int(alive.sum()))
        stamps.append(result.ts)
        if version == 1:
            # Reads are allowed only at protected times: a snapshot protects this one.
            store.create_snapshot(TENANT, SNAPSHOT)
    return Mutations(counts, stamps, seconds, SNAPSHOT)


def _read(
    store: TableStore,
    *,
    phase: str,
    at_label: str,
    as_of: str | None,
    expected_rows: int,
    warm: int,
) -> list[dict[str, Any]]:
    """Time the local and the Spark reader on the same read; check they agree."""
    plan = store.plan_read(TENANT, f"{DATABASE}.events", as_of)
    plan_bytes = sum(o.bytes for o in plan.objects)
    scanned = sum(o.rows for o in plan.objects)
    figures = []
    results: dict[str, pa.Table] = {}
    reader: Reader
    for reader in ("local", "spark"):
        result, timing = repeat(
            lambda r=reader: store.read(TENANT, f"{DATABASE}.events", as_of, reader=r), warm
        )
        if result.num_rows != expected_rows:
            raise RuntimeError(
                f"{reader} read at {at_label} ({phase}) returned {result.num_rows} rows, "
                f"expected {expected_rows}"
            )
        results[reader] = result
        figures.append(
            _read_figure(
                phase,
                at_label,
                plan.as_of,
                reader,
                result.num_rows,
                scanned,
                len(plan.objects),
                plan_bytes,
                timing,
            )
        )
    if not results["local"].equals(results["spark"]):
        raise RuntimeError(f"local and Spark reads at {at_label} ({phase}) differ")
    return figures


def _read_figure(
    phase: str,
    at_label: str,
    as_of_ts: int,
    reader: str,
    rows: int,
    scanned: int,
    objects: int,
    byte_count: int,
    timing: Timing,
) -> dict[str, Any]:
    return {
        "phase": phase,
        "at": at_label,
        "as_of_ts": as_of_ts,
        "reader": reader,
        "rows": rows,
        "scanned_rows": scanned,
        "objects": objects,
        "bytes": byte_count,
        **timing.to_json(),
        "rows_per_s": rate(rows, timing.steady_s),
        "mb_per_s": rate(byte_count / MB, timing.steady_s),
    }


def _read_all(
    store: TableStore, phase: str, mutations: Mutations, warm: int
) -> list[dict[str, Any]]:
    return _read(
        store,
        phase=phase,
        at_label="latest",
        as_of=None,
        expected_rows=mutations.alive_after_round[-1],
        warm=warm,
    ) + _read(
        store,
        phase=phase,
        at_label="earlier",
        as_of=mutations.snapshot,
        expected_rows=mutations.alive_after_round[0],
        warm=warm,
    )


def run_case(backend: Backend, n: int, *, batches: int, warm: int, seed: int) -> dict[str, Any]:
    """Every measurement for one (backend, size) on a fresh warehouse."""
    rng = np.random.default_rng(seed)
    keys = rng.permutation(n).astype(np.int64)
    with open_store(backend) as store:
        store.create_tenant(TENANT)
        single = _write_single(store, keys, rng)
        batched = _write_batched(store, keys, rng, batches)
        mutations = _mutate(store, n, rng)
        reads = _read_all(store, "before_compaction", mutations, warm)
        results, compact_s = timed(lambda: store.compact(TENANT, f"{DATABASE}.events"))
        reads += _read_all(store, "after_compaction", mutations, warm)
    (compaction,) = results
    return {
        "backend": backend,
        "rows": n,
        "write": {"single": single, "batched": batched},
        "mutations": {
            "rounds": MUTATION_ROUNDS,
            "updates_per_round": int(n * UPDATE_FRACTION),
            "deletes_per_round": int(n * DELETE_FRACTION),
            "seconds": mutations.seconds,
            "visible_rows_after_round": mutations.alive_after_round,
        },
        "compaction": {
            "seconds": compact_s,
            "inputs": compaction.inputs,
            "outputs": compaction.outputs,
            "rows": compaction.rows,
            "bytes_in": compaction.bytes_in,
            "bytes_out": compaction.bytes_out,
        },
        "reads": reads,
        "ratios": _ratios(reads),
    }


def _ratios(reads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """local ÷ Spark throughput (= Spark steady time ÷ local steady time) per read."""
    by_key = {(r["phase"], r["at"], r["reader"]): r for r in reads}
    out = []
    for (phase, at_label, reader), local in by_key.items():
        if reader != "local":
            continue
        spark = by_key[(phase, at_label, "spark")]
        out.append(
            {
                "phase": phase,
                "at": at_label,
                "local_steady_s": local["steady_s"],
                "spark_steady_s": spark["steady_s"],
                "local_over_spark": spark["steady_s"] / local["steady_s"],
            }
        )
    return out


def print_report(
    cases: list[dict[str, Any]], spark_start_s: float, first_spark_read_s: float
) -> None:
    writes = Table(title="Writes (rows/s, MB/s of object bytes)", title_justify="left")
    for column in (
        "backend",
        "rows",
        "batched rows/s",
        "batched MB/s",
        "objects",
        "single rows/s",
        "single MB/s",
        "MB stored",
    ):
        writes.add_column(column, justify="right")
    for case in cases:
        b, s = case["write"]["batched"], case["write"]["single"]
        writes.add_row(
            case["backend"],
            f"{case['rows']:,}",
            fmt_rate(b["rows_per_s"]),
            f"{b['mb_per_s']:.1f}",
            str(b["objects"]),
            fmt_rate(s["rows_per_s"]),
            f"{s['mb_per_s']:.1f}",
            f"{s['bytes'] / MB:.1f}",
        )
    console.print(writes)

    reads = Table(
        title="Reads of db.events (s = best of the warm calls; "
        "local÷spark = Spark time ÷ local time)",
        title_justify="left",
    )
    for column in (
        "backend",
        "rows",
        "layout",
        "at",
        "objs",
        "MB",
        "local s",
        "local rows/s",
        "local MB/s",
        "spark 1st s",
        "spark s",
        "spark rows/s",
        "local÷spark",
    ):
        reads.add_column(column, justify="right")
    for case in cases:
        by_key = {(r["phase"], r["at"], r["reader"]): r for r in case["reads"]}
        for ratio in case["ratios"]:
            local = by_key[(ratio["phase"], ratio["at"], "local")]
            spark = by_key[(ratio["phase"], ratio["at"], "spark")]
            reads.add_row(
                case["backend"],
                f"{case['rows']:,}",
                "compacted" if ratio["phase"] == "after_compaction" else "as written",
                ratio["at"],
                str(local["objects"]),
                f"{local['bytes'] / MB:.1f}",
                f"{local['steady_s']:.3f}",
                fmt_rate(local["rows_per_s"]),
                f"{local['mb_per_s']:.1f}",
                f"{spark['first_s']:.2f}",
                f"{spark['steady_s']:.3f}",
                fmt_rate(spark["rows_per_s"]),
                f"{ratio['local_over_spark']:.2f}x",
            )
    console.print(reads)

    other = Table(title="Other", title_justify="left")
    for column in ("backend", "rows", "mutations s", "compaction s", "objs in→out", "MB in→out"):
        other.add_column(column, justify="right")
    for case in cases:
        c = case["compaction"]
        other.add_row(
            case["backend"],
            f"{case['rows']:,}",
            f"{case['mutations']['seconds']:.2f}",
            f"{c['seconds']:.2f}",
            f"{c['inputs']}→{c['outputs']}",
            f"{c['bytes_in'] / MB:.1f}→{c['bytes_out'] / MB:.1f}",
        )
    console.print(other)
    console.print(
        f"Spark session start: {spark_start_s:.2f} s; first Spark read of the run "
        f"(Python workers start): {first_spark_read_s:.2f} s"
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_write_read",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--quick", action="store_true", help="sizes 1e4 and 1e5 (default 1e5 and 1e6)"
    )
    parser.add_argument("--sizes", nargs="+", help="row counts, e.g. 1e5 1e6 (overrides --quick)")
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--batches", type=int, default=10, help="commits of the batched write")
    parser.add_argument(
        "--warm", type=int, default=2, help="warm calls per read after the cold one"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--name", help="result file name (default bench_write_read[_quick])")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    default_sizes = QUICK_SIZES if args.quick else FULL_SIZES
    sizes = parse_sizes(args.sizes) if args.sizes else list(default_sizes)
    default_name = f"{NAME}_quick" if args.quick else NAME
    name = args.name or (f"{NAME}_custom" if args.sizes else default_name)
    load_at_start = load_average()
    started = time.perf_counter()
    _, spark_start_s = spark_session()
    cases = []
    first_spark_read_s: float | None = None
    for n in sizes:
        for backend in args.backends:
            console.print(f"[bold]{NAME}[/]: {backend}, {n:,} rows ...")
            case, seconds = timed(
                lambda b=backend, n=n: run_case(
                    b, n, batches=args.batches, warm=args.warm, seed=args.seed
                )
            )
            case["case_seconds"] = seconds
            if first_spark_read_s is None:
                first_spark_read_s = next(
                    r["first_s"] for r in case["reads"] if r["reader"] == "spark"
                )
            console.print(f"  done in {seconds:.1f} s")
            cases.append(case)
    assert first_spark_read_s is not None
    payload = {
        "quick": bool(args.quick),
        "sizes": sizes,
        "batches": args.batches,
        "warm_calls": args.warm,
        "spark": {"session_start_s": spark_start_s, "first_read_of_run_s": first_spark_read_s},
        "load_average_at_start": load_at_start,
        "cases": cases,
    }
    return finish_run(
        payload,
        name=name,
        started=started,
        console=console,
        report=lambda p: print_report(p["cases"], spark_start_s, first_spark_read_s),
    )


if __name__ == "__main__":
    main()
