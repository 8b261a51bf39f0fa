"""The full orphan sweep: today's (a list and a set) against ``gc --deep`` (a streamed merge).

Each case is one warehouse of n objects (1 tenant, 4 tables, so n/4 keys per
table directory on ``file://``), 99% of them registered in the catalog (object
rows and live memberships, ``insert_members`` in bulk) and 1% orphans: keys in
our pattern the catalog never knew. Objects are 16 bytes put straight into the
warehouse (moto's in-process backend, or a file write): the sweep never reads
one. Then each variant runs in a fresh child process
(``python -m benchmarks.bench_gc_deep --child <json>``), so each peak is its
own; the child opens the store and reads the ownership ids before the clock
starts, and reports:

- ``seconds``: wall time of the sweep alone;
- ``peak_mib``: the child's ``VmHWM`` (peak resident set, reset with
  ``/proc/self/clear_refs`` right before the sweep): the whole process,
  interpreter and imports included, which is what the issue's 256 MiB goal
  bounds; ``growth_mib`` = peak - ``VmRSS`` before the sweep.

Variants, all with no grace (every orphan is old enough):

- ``list``: ``objects.list("tenants/")`` iterated, nothing kept: the floor;
- ``today``: ``engine.gc.orphans.sweep_orphans``, dry run;
- ``deep``: ``engine.gc.deep.deep_sweep``, dry run (same report, checked);
- ``deep_real``: ``deep_sweep`` deleting the orphans (last: it changes the warehouse);
- with ``--passes``: ``pass_today`` / ``pass_deep``, a whole ``run_gc`` dry run
  without compaction, with today's sweep or ``deep=True`` (collection's
  decision query included, the same in both).

moto is one Python process serving HTTP on 127.0.0.1 (in the parent here),
and each ListObjectsV2 page filters and sorts every key of the bucket there:
listing n keys costs O(n^2 log n / 1000), ~1 min for 10^5 keys, where S3
serves 1,000 keys per request in tens of ms. Both sweeps pay it alike; moto
cases stop at 10^5 (``--max-moto``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

NAME = "bench_gc_deep"
FULL_SIZES = (10_000, 100_000, 1_000_000)
QUICK_SIZES = (1_000, 10_000)
MAX_MOTO = 100_000
ORPHAN_FRACTION = 0.01
TABLES = 4
PAYLOAD = b"rewind-gc-bench\n"  # 16 bytes: GC never reads an object
REGISTER_CHUNK = 50_000  # objects per registering transaction
VARIANTS = ("list", "today", "deep", "deep_real")
PASSES = ("pass_today", "pass_deep")
ROOT = Path(__file__).resolve().parent.parent
MIB = 1024 * 1024


# child ---------------------------------------------------------------------------


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def child(job: dict[str, Any]) -> None:
    """Run one variant in this (fresh) process and print its figures as JSON."""
    from engine.gc.deep import deep_sweep
    from engine.gc.orphans import OrphanReport, sweep_orphans
    from engine.gc.ownership import ownership
    from engine.gc.run import run_gc
    from tenants.store import TableStore

    store = TableStore.open(job["catalog"], job["warehouse"])
    owner = ownership(store.catalog, store.objects)
    what = job["what"]
    Path("/proc/self/clear_refs").write_text("5")
    baseline = _status_kib("VmRSS")
    start = time.perf_counter()
    report: OrphanReport | None = None
    listed = 0
    if what == "list":
        listed = sum(1 for _ in store.objects.list("tenants/"))
    elif what in ("today", "deep", "deep_real"):
        sweep = sweep_orphans if what == "today" else deep_sweep
        report = sweep(
            store.catalog, store.objects, grace_us=0, dry_run=what != "deep_real", owner=owner
        )
    else:
        report = run_gc(
            store,
            dry_run=True,
            grace_us=0,
            allow_short_grace=True,
            compact=False,
            orphan_grace_us=0,
            deep=what == "pass_deep",
        ).orphans
    seconds = time.perf_counter() - start
    peak = _status_kib("VmHWM")
    store.close()
    result: dict[str, Any] = {
        "seconds": seconds,
        "baseline_mib": baseline / 1024,
        "peak_mib": peak / 1024,
        "growth_mib": (peak - baseline) / 1024,
        "listed": listed,
    }
    if report is not None:
        result |= {
            "listed": report.listed,
            "known": report.known,
            "orphans": len(report.orphans),
            "report_digest": hashlib.sha256(
                repr((report.known, report.orphans, report.not_ours)).encode()
            ).hexdigest(),
        }
    print(json.dumps(result))


def run_child(job: dict[str, Any]) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REWIND_")}
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_gc_deep", "--child", json.dumps(job)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{job['what']} failed: {done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# setup ---------------------------------------------------------------------------


def build(store: Any, backend: str, n: int) -> tuple[list[str], int, dict[str, float]]:
    """Put n objects, register all but 1%; (every key, the orphan count, setup seconds)."""
    from benchmarks.common import EVENTS_SCHEMA
    from tenants.catalog.objects import insert_members
    from tenants.objects.record import ObjectRecord, object_key
    from tenants.tenancy import new_id

    store.create_tenant("bench")
    tables = [store.create_table("bench", f"db.t{i}", EVENTS_SCHEMA) for i in range(TABLES)]
    ids = [new_id() for _ in range(n)]
    keys = [
        object_key(tables[i % TABLES].tenant_id, tables[i % TABLES].id, "data", object_id)
        for i, object_id in enumerate(ids)
    ]
    orphans = int(n * ORPHAN_FRACTION)
    setup: dict[str, float] = {}
    start = time.perf_counter()
    warehouse = store.objects.warehouse
    if backend == "moto":
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        s3 = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
        for key in keys:
            s3.put_object(warehouse.bucket, warehouse.key(key), PAYLOAD)
    else:
        root = Path(warehouse.prefix)
        for table in tables:
            (root / "tenants" / table.tenant_id / table.id / "data").mkdir(parents=True)
        for key in keys:
            (root / key).write_bytes(PAYLOAD)
    setup["upload_s"] = time.perf_counter() - start
    start = time.perf_counter()
    registered = list(range(orphans, n))  # the first 1% (random ids: anywhere in order) not
    for first in range(0, len(registered), REGISTER_CHUNK):
        with store.catalog.transaction() as tx:
            ts = tx.commit_ts()
            insert_members(
                tx,
                [
                    (
                        tables[i % TABLES].id,
                        ObjectRecord(
                            id=ids[i],
                            key=keys[i],
                            kind="data",
                            fingerprint=tables[i % TABLES].schema.fingerprint,
                            rows=1,
                            bytes=len(PAYLOAD),
                            min_ts=ts,
                            max_ts=ts,
                            min_pk=json.dumps([i]),
                            max_pk=json.dumps([i]),
                            sorted=True,
                            checksum="0" * 64,
                            created_ts=ts,
                        ),
                    )
                    for i in registered[first : first + REGISTER_CHUNK]
                ],
                ts,
            )
    setup["register_s"] = time.perf_counter() - start
    return keys, orphans, setup


def run_case(backend: str, catalog: str, n: int, variants: Sequence[str]) -> dict[str, Any]:
    from benchmarks.common import open_store

    with open_store(backend, catalog) as store:  # type: ignore[arg-type]
        keys, orphans, setup = build(store, backend, n)
        # catalog.uri hides a password: the bench's catalogs have none (common.PG_ADMIN).
        job = {"catalog": store.catalog.uri, "warehouse": store.objects.warehouse.uri}
        results: dict[str, Any] = {}
        for what in variants:
            results[what] = run_child({**job, "what": what})
        _check(results, n, orphans)
        if backend == "moto":  # untimed: open_store would list the bucket to empty it
            store.objects.delete_many(keys)
    return {"backend": backend, "catalog": catalog, "objects": n, "orphans": orphans} | {
        "setup": setup,
        "variants": results,
    }


def _check(results: dict[str, Any], n: int, orphans: int) -> None:
    """Every sweep listed n keys and found exactly the orphans; the two agree."""
    for what, r in results.items():
        if what == "list":
            ok = r["listed"] == n
        else:
            ok = r["listed"] == n and r["orphans"] == orphans and r["known"] == n - orphans
        if not ok:
            raise RuntimeError(f"{what}: {r}; expected {n} listed, {orphans} orphans")
    if "today" in results and "deep" in results:
        if results["today"]["report_digest"] != results["deep"]["report_digest"]:
            raise RuntimeError("the deep sweep's report differs from today's")


# report --------------------------------------------------------------------------


def print_report(cases: list[dict[str, Any]], console: Any) -> None:
    from rich.table import Table

    table = Table(
        title="Orphan sweep: seconds, peak RSS MiB (growth) per variant; 1% orphans, grace 0",
        title_justify="left",
    )
    for column in ("backend", "catalog", "objects", "variant", "seconds", "peak MiB", "growth"):
        table.add_column(column, justify="right")
    for case in cases:
        for what, r in case["variants"].items():
            table.add_row(
                case["backend"],
                case["catalog"],
                f"{case['objects']:,}",
                what,
                f"{r['seconds']:.2f}",
                f"{r['peak_mib']:.0f}",
                f"{r['growth_mib']:.1f}",
            )
    console.print(table)
    for case in cases:
        v = case["variants"]
        if "today" in v and "deep" in v:
            console.print(
                f"{case['backend']}/{case['catalog']} {case['objects']:,}: deep "
                f"{v['today']['seconds'] / v['deep']['seconds']:.2f}x today's speed, peak "
                f"{v['deep']['peak_mib']:.0f} vs {v['today']['peak_mib']:.0f} MiB"
            )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    from benchmarks.common import BACKENDS, CATALOG_BACKENDS

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_gc_deep",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="1e3 and 1e4 objects")
    parser.add_argument("--sizes", nargs="+", help="object counts, e.g. 1e4 1e5 1e6")
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--catalogs", nargs="+", choices=CATALOG_BACKENDS, default=["sqlite"])
    parser.add_argument(
        "--max-moto", type=float, default=MAX_MOTO, help="largest size run on moto (1e5)"
    )
    parser.add_argument("--passes", action="store_true", help="also whole run_gc dry runs")
    parser.add_argument("--name", help="result file name (default bench_gc_deep[_quick])")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    from rich.console import Console

    from benchmarks.common import finish_run, load_average, parse_sizes

    args = parse_args(argv)
    console = Console() if sys.stdout.isatty() else Console(width=150)
    sizes = (
        parse_sizes(args.sizes) if args.sizes else list(QUICK_SIZES if args.quick else FULL_SIZES)
    )
    name = args.name or (
        f"{NAME}_custom" if args.sizes else f"{NAME}_quick" if args.quick else NAME
    )
    variants = [*VARIANTS[:-1], *(PASSES if args.passes else ()), VARIANTS[-1]]
    load_at_start = load_average()
    started = time.perf_counter()
    cases = []
    for n in sizes:
        for backend in args.backends:
            if backend == "moto" and n > args.max_moto:
                continue
            for catalog in args.catalogs:
                console.print(f"[bold]{NAME}[/]: {backend}, {catalog}, {n:,} objects ...")
                case_start = time.perf_counter()
                case = run_case(backend, catalog, n, variants)
                case["case_seconds"] = time.perf_counter() - case_start
                cases.append(case)
    payload = {
        "quick": bool(args.quick),
        "sizes": sizes,
        "orphan_fraction": ORPHAN_FRACTION,
        "tables": TABLES,
        "load_average_at_start": load_at_start,
        "cases": cases,
    }
    return finish_run(
        payload,
        name=name,
        started=started,
        console=console,
        report=lambda p: print_report(p["cases"], console),
    )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(json.loads(sys.argv[2]))
    else:
        main()
