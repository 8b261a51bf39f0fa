"""Logical dump-and-reload: throughput, local vs Spark reader, and cost vs physical.

1. **Dump and reload** a generated tenant (10 tables, ~200 commits, about 5%
   of bytes straddling the snapshot S; ~100 MB and ~500 MB; with --quick 4
   tables, ~80 commits, ~10 and ~40 MB) on moto S3 and on file://. The dump at S runs once with the local reader and once with
   the Spark reader (``dump_tenant(..., reader=...)``) into the same
   warehouse; both dumps must agree table by table (rows and content hash).
   The local dump is then reloaded as a new tenant (``reload_dump``: the write
   path, then a verifying read). Dump MB/s counts the bytes of the objects
   the dump reads (every member at S); reload MB/s counts the dump's bytes;
   rows/s counts the rows at S.
2. **Logical vs physical restore** of a restore-benchmark-like tenant
   (``bench_restore``'s builder, default 20 tables / 600 objects / 200 MB), as
   clones at S on the same store: time and bytes written, and their ratios.

The Spark session's start and the first Spark job (Python workers start) are
timed apart from the dumps.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks.bench_restore import (
    SNAPSHOT,
    TENANT,
    TenantSpec,
    _mb,
    build_tenant,
    compare_restores,
)
from benchmarks.common import (
    BACKENDS,
    MB,
    Backend,
    finish_run,
    load_average,
    open_store,
    spark_session,
    timed,
)
from engine.logical.dump import DumpResult, Reader, dump_tenant
from engine.logical.reload import reload_dump
from tenants.store import TableStore

NAME = "bench_logical"
READERS: tuple[Reader, ...] = ("local", "spark")

console = Console() if sys.stdout.isatty() else Console(width=170)


def _dump(store: TableStore, reader: Reader, root: str) -> tuple[DumpResult, float]:
    return timed(lambda: dump_tenant(store, TENANT, SNAPSHOT, store.objects, root, reader=reader))


def throughput_case(backend: Backend, spec: TenantSpec, *, seed: int) -> dict[str, Any]:
    """Build, dump with each reader, check the dumps agree, reload the local one."""
    with open_store(backend) as store:
        built = build_tenant(store, spec, seed=seed)
        read_bytes = built["bytes_at_s"]
        dumps: dict[str, dict[str, Any]] = {}
        manifests = {}
        for reader in READERS:
            result, seconds = _dump(store, reader, f"dumps/{reader}")
            m = result.manifest
            manifests[reader] = m
            dumps[reader] = {
                "seconds": seconds,
                "rows": m.rows,
                "tables": len(m.tables),
                "files": sum(len(t.files) for t in m.tables),
                "read_bytes": read_bytes,
                "dump_bytes": m.bytes,
                "mb_per_s": read_bytes / MB / seconds,
                "rows_per_s": m.rows / seconds,
            }
        local, spark = manifests["local"], manifests["spark"]
        same = [(t.qualified, t.rows, t.content_hash) for t in local.tables] == [
            (t.qualified, t.rows, t.content_hash) for t in spark.tables
        ]
        if not same:
            raise RuntimeError(f"{backend}: the local and the Spark dump differ")
        reloaded, reload_s = timed(
            lambda: reload_dump(store, store.objects, "dumps/local", target_name="reloaded")
        )
        if reloaded.rows != local.rows:
            raise RuntimeError(f"{backend}: reloaded {reloaded.rows} rows of {local.rows}")
        written = sum(r.bytes for _, r in store.objects_of("reloaded"))
    return {
        "backend": backend,
        "tenant": built,
        "dump": dumps,
        "reload": {
            "seconds": reload_s,
            "rows": reloaded.rows,
            "dump_bytes": local.bytes,
            "bytes_written": written,
            "mb_per_s": local.bytes / MB / reload_s,
            "rows_per_s": reloaded.rows / reload_s,
        },
        "ratios": {
            "spark_dump_over_local_dump_time": dumps["spark"]["seconds"]
            / dumps["local"]["seconds"],
            "dump_bytes_over_read_bytes": local.bytes / read_bytes,
        },
    }


def _warm_spark() -> float:
    """The first Spark job of the process (Python workers start), on a tiny dump."""
    with open_store("file") as store:
        build_tenant(store, TenantSpec(tables=1, objects=4, total_bytes=MB), seed=1)
        _, seconds = _dump(store, "spark", "dumps/warmup")
    return seconds


def print_report(payload: dict[str, Any]) -> None:
    t = Table(title="1. Dump at S (local vs Spark reader) and reload (write path + verify)")
    for c in (
        "backend",
        "tenant MB",
        "MB at S",
        "rows at S",
        "local dump s",
        "MB/s",
        "rows/s",
        "spark dump s",
        "MB/s",
        "rows/s",
        "spark÷local",
        "dump MB",
        "reload s",
        "MB/s",
        "rows/s",
    ):
        t.add_column(c, justify="right")
    for case in payload["throughput"]:
        b, lo, sp, re = case["tenant"], case["dump"]["local"], case["dump"]["spark"], case["reload"]
        t.add_row(
            case["backend"],
            _mb(b["bytes"]),
            _mb(b["bytes_at_s"]),
            f"{lo['rows']:,}",
            f"{lo['seconds']:.1f}",
            f"{lo['mb_per_s']:.1f}",
            f"{lo['rows_per_s'] / 1e3:,.0f}k",
            f"{sp['seconds']:.1f}",
            f"{sp['mb_per_s']:.1f}",
            f"{sp['rows_per_s'] / 1e3:,.0f}k",
            f"{case['ratios']['spark_dump_over_local_dump_time']:.2f}x",
            _mb(lo["dump_bytes"]),
            f"{re['seconds']:.1f}",
            f"{re['mb_per_s']:.1f}",
            f"{re['rows_per_s'] / 1e3:,.0f}k",
        )
    console.print(t)
    console.print(
        f"  Spark session start {payload['spark']['session_start_s']:.1f} s; first Spark job "
        f"(workers start) {payload['spark']['first_job_s']:.1f} s"
    )

    t = Table(title="2. Logical vs physical restore (clone at S, same store)")
    for c in (
        "backend",
        "tenant MB",
        "objs",
        "straddle MB",
        "phys s",
        "phys MB wr",
        "logical s",
        "logical MB wr",
        "logical÷phys time",
        "logical÷phys bytes",
        "logical wr÷tenant",
    ):
        t.add_column(c, justify="right")
    for case in payload["restore"]:
        b, p, lo = case["tenant"], case["physical"], case["logical"]
        t.add_row(
            case["backend"],
            _mb(b["bytes"]),
            f"{b['objects']:,}",
            _mb(b["straddle_bytes"]),
            f"{p['seconds']:.2f}",
            _mb(p["bytes_written"]),
            f"{lo['seconds']:.2f}",
            _mb(lo["bytes_written"]),
            f"{lo['seconds'] / p['seconds']:.1f}x",
            f"{lo['bytes_written'] / max(1, p['bytes_written']):.0f}x",
            f"{case['ratios']['logical_bytes_over_tenant']:.2f}",
        )
    console.print(t)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_logical",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="small sizes (about 2 minutes)")
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--name", help="result file name (default bench_logical[_quick])")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.quick:
        tables, sizes = 4, [10 * MB, 40 * MB]
        restore_spec = TenantSpec(tables=10, objects=200, total_bytes=20 * MB)
    else:
        tables, sizes = 10, [100 * MB, 500 * MB]
        restore_spec = TenantSpec(tables=20, objects=600, total_bytes=200 * MB)
    load_start = load_average()
    started = time.perf_counter()
    console.print(f"[bold]{NAME}[/]: load average {load_start}; starting Spark ...")
    _, spark_start_s = spark_session()
    first_job_s = _warm_spark()

    cases = []
    for size in sizes:
        for backend in args.backends:
            spec = TenantSpec(tables=tables, objects=20 * tables, total_bytes=size)
            console.print(f"1. {backend}, {_mb(size)} MB ...")
            case, seconds = timed(lambda b=backend, s=spec: throughput_case(b, s, seed=args.seed))
            case["case_seconds"] = seconds
            console.print(f"   done in {seconds:.0f} s")
            cases.append(case)

    restores = []
    for backend in args.backends:
        console.print(f"2. {backend}: {restore_spec} ...")
        case, seconds = timed(lambda b=backend: compare_restores(b, restore_spec, seed=args.seed))
        case["case_seconds"] = seconds
        restores.append(case)

    payload = {
        "quick": bool(args.quick),
        "load_average_at_start": load_start,
        "spark": {"session_start_s": spark_start_s, "first_job_s": first_job_s},
        "sizes": sizes,
        "throughput": cases,
        "restore": restores,
    }
    return finish_run(
        payload,
        name=args.name or (f"{NAME}_quick" if args.quick else NAME),
        started=started,
        console=console,
        report=print_report,
    )


if __name__ == "__main__":
    main()
