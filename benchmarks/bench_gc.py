"""Garbage collection: how long a GC pass takes for 1e4 and 1e5 objects, 10% garbage.

Writing 1e5 real objects through the write path would take most of the run,
so each object here is 16 bytes put straight into the warehouse (into the
in-process moto server's bucket, or a file write for ``file://``) and
registered in the catalog as one table member (object records and
memberships, one transaction). Then 10% of the memberships are ended at an
old ts (``UPDATE membership SET removed_ts = ...``), which makes those
objects garbage, and

    run_gc(store, dry_run=..., grace_us=0, allow_short_grace=True,
           compact=False, orphan_grace_us=0)

runs twice: a dry run, then the real run. The catalog and the object store
are traced (transactions, snapshots, ``delete_many``, ``list``) so a pass
splits into: the prefix check, the catalog decision (the transaction that
records ``gc_pending``), the object store deletes (1,000 keys per
DeleteObjects request on S3, several in flight), the catalog cleanup (both
summed over the batches of 5,000 decisions collect finishes), and the orphan sweep (of
which: listing the whole warehouse). Keys deleted per second are reported for
the delete phase alone and for the whole pass. Both runs are checked: the dry
run finds exactly the garbage and deletes nothing, the real run deletes
exactly it, and its sweep lists exactly the survivors, all in the catalog.

moto is one Python process serving HTTP on 127.0.0.1, and its figures are
moto's more than Rewind's: each ListObjectsV2 page filters and sorts every key
of the bucket, so listing n keys costs O(n² log n / 1000) there (~130 s for
1e5 keys on two busy cores) where real S3 serves 1,000 keys per request in
tens of ms; a DeleteObjects request of 1,000 keys also costs moto far more
than S3 (S3 takes ~3,500 deletes/s per prefix).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from benchmarks.common import (
    BACKENDS,
    EVENTS_SCHEMA,
    Backend,
    finish_run,
    fmt_rate,
    load_average,
    moto_server,
    open_store,
    parse_sizes,
    rate,
    timed,
)
from engine.gc.collect import FINISH_BATCH
from engine.gc.run import GcReport, run_gc
from tenants.objects.record import ObjectRecord, add_member, insert_object, object_key
from tenants.objectstore.base import ObjectInfo
from tenants.store import TableStore
from tenants.tenancy import TableRecord, new_id

NAME = "bench_gc"
TENANT = "bench"
DATABASE = "db"
FULL_SIZES = (10_000, 100_000)
QUICK_SIZES = (1_000, 10_000)
GARBAGE_FRACTION = 0.10
TABLES = 4
PAYLOAD = b"rewind-gc-bench\n"  # 16 bytes: GC never reads an object
PUT_THREADS = 16
CHUNK = 500  # SQL parameters per statement

console = Console() if sys.stdout.isatty() else Console(width=150)


# tracing ------------------------------------------------------------------------


@dataclass
class Trace:
    """Durations of the catalog and object-store calls made during one GC pass."""

    events: list[tuple[str, float, int]] = field(default_factory=list)  # (call, seconds, items)

    def seconds(self, call: str) -> list[float]:
        return [s for c, s, _ in self.events if c == call]

    def items(self, call: str) -> list[int]:
        return [n for c, _, n in self.events if c == call]


@contextmanager
def traced(store: TableStore) -> Iterator[Trace]:
    """Shadow the store's catalog and object-store methods with timing wrappers."""
    trace = Trace()
    catalog, objects = store.catalog, store.objects
    original = {
        "transaction": catalog.transaction,
        "snapshot": catalog.snapshot,
        "delete_many": objects.delete_many,
        "list": objects.list,
    }

    def timed_cm(
        call: str, opener: Callable[..., AbstractContextManager[Any]]
    ) -> Callable[..., AbstractContextManager[Any]]:
        @contextmanager
        def wrapper(*args: Any, **kwargs: Any) -> Iterator[Any]:
            start = time.perf_counter()
            try:
                with opener(*args, **kwargs) as tx:
                    yield tx
            finally:
                trace.events.append((call, time.perf_counter() - start, 0))

        return wrapper

    def delete_many(keys: Any) -> int:
        start = time.perf_counter()
        deleted = original["delete_many"](keys)
        trace.events.append(("delete_many", time.perf_counter() - start, deleted))
        return int(deleted)

    def listing(prefix: str) -> Iterator[ObjectInfo]:
        inner = original["list"](prefix)
        spent, count = 0.0, 0
        try:
            while True:
                start = time.perf_counter()
                try:
                    info = next(inner)
                except StopIteration:
                    spent += time.perf_counter() - start
                    return
                spent += time.perf_counter() - start
                count += 1
                yield info
        finally:
            trace.events.append(("list", spent, count))

    catalog.transaction = timed_cm("transaction", original["transaction"])  # type: ignore[method-assign]
    catalog.snapshot = timed_cm("snapshot", original["snapshot"])  # type: ignore[method-assign]
    objects.delete_many = delete_many  # type: ignore[method-assign]
    objects.list = listing  # type: ignore[method-assign]
    try:
        yield trace
    finally:
        for attribute in original:
            target = catalog if attribute in ("transaction", "snapshot") else objects
            delattr(target, attribute)


# setup --------------------------------------------------------------------------


def _upload(store: TableStore, backend: Backend, keys: list[str]) -> str:
    """Put a tiny object at every key; how it was done (setup only, not measured as GC).

    moto: straight into the bucket of the in-process moto server (its HTTP PUT
    path manages ~130 PUT/s on two busy cores, too slow for 1e5 objects); the
    objects are then real to every S3 call GC makes. file: one write per file.
    """
    warehouse = store.objects.warehouse
    if backend == "moto":
        try:
            from moto.core import DEFAULT_ACCOUNT_ID
            from moto.s3.models import s3_backends

            bucket = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
            for key in keys:
                bucket.put_object(warehouse.bucket, warehouse.key(key), PAYLOAD)
            return "moto backend put_object (in process)"
        except (ImportError, KeyError):
            pass  # moto changed its internals: go through HTTP
        import boto3
        from botocore.config import Config

        client = boto3.client(
            "s3",
            config=Config(max_pool_connections=PUT_THREADS),
            **moto_server().settings.to_boto3(),
        )
        with ThreadPoolExecutor(max_workers=PUT_THREADS) as pool:
            for _ in pool.map(
                lambda k: client.put_object(
                    Bucket=warehouse.bucket, Key=warehouse.key(k), Body=PAYLOAD
                ),
                keys,
                chunksize=64,
            ):
                pass
        return "boto3 put_object, 16 threads"
    root = Path(warehouse.prefix)
    for directory in {root / key.rsplit("/", 1)[0] for key in keys}:
        directory.mkdir(parents=True, exist_ok=True)
    for key in keys:
        (root / key).write_bytes(PAYLOAD)
    return "file write"


def _register(store: TableStore, tables: list[TableRecord], ids: list[str], keys: list[str]) -> int:
    """One live membership per object, in one transaction; the commit ts."""
    with store.catalog.transaction() as tx:
        ts = tx.commit_ts()
        for i, (object_id, key) in enumerate(zip(ids, keys, strict=True)):
            table = tables[i % len(tables)]
            insert_object(
                tx,
                ObjectRecord(
                    id=object_id,
                    key=key,
                    kind="data",
                    fingerprint=table.schema.fingerprint,
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
            add_member(tx, table.id, object_id, ts)
    return ts


def _make_garbage(store: TableStore, ids: list[str], removed_ts: int) -> None:
    with store.catalog.transaction() as tx:
        for start in range(0, len(ids), CHUNK):
            chunk = ids[start : start + CHUNK]
            marks = ", ".join("?" for _ in chunk)
            tx.execute(
                f"UPDATE membership SET removed_ts = ? WHERE object_id IN ({marks})",
                [removed_ts, *chunk],
            )


def _catalog_objects(store: TableStore) -> int:
    with store.catalog.snapshot() as tx:
        return int(tx.scalar("SELECT COUNT(*) FROM objects"))


# measuring ----------------------------------------------------------------------


def _gc(store: TableStore, *, dry_run: bool) -> tuple[GcReport, float, Trace]:
    with traced(store) as trace:
        report, seconds = timed(
            lambda: run_gc(
                store,
                dry_run=dry_run,
                grace_us=0,
                allow_short_grace=True,
                compact=False,
                orphan_grace_us=0,
            )
        )
    return report, seconds, trace


def _phases(report: GcReport, total_s: float, trace: Trace) -> dict[str, Any]:
    """Split a pass into prefix check, decision, deletes, cleanup and orphan sweep."""
    transactions = trace.seconds("transaction")
    deletes = trace.seconds("delete_many")
    lists = trace.seconds("list")
    collect_s = report.seconds["collect"]
    decide_s = transactions[0] if transactions else 0.0
    # collect: the decision transaction, then (not a dry run, something to do)
    # per batch of FINISH_BATCH decisions the store deletes and a cleanup
    # transaction; its other calls are reads.
    batches = -(-report.collected.deleted_objects // FINISH_BATCH)
    delete_s = sum(deletes[:batches])
    cleanup_s = sum(transactions[1 : 1 + batches])
    return {
        "total_s": total_s,
        "prefix_check_s": total_s - sum(report.seconds.values()),
        "collect_s": collect_s,
        "decide_s": decide_s,
        "delete_s": delete_s,
        "cleanup_s": cleanup_s,
        "collect_other_s": collect_s - decide_s - delete_s - cleanup_s,
        "orphans_s": report.seconds["orphans"],
        "list_s": lists[-1] if lists else 0.0,
        "listed_keys": report.orphans.listed,
        "candidates": report.collected.candidate_count,
        "deleted": report.collected.deleted_objects,
        "orphans_found": len(report.orphans.orphans),
        "deleted_per_s_delete_phase": rate(report.collected.deleted_objects, delete_s)
        if delete_s
        else None,
        "deleted_per_s_pass": rate(report.collected.deleted_objects, total_s),
        "calls": [list(e) for e in trace.events],
    }


def run_case(backend: Backend, n: int, *, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    garbage_count = int(n * GARBAGE_FRACTION)
    with open_store(backend) as store:
        store.create_tenant(TENANT)
        tables = [
            store.create_table(TENANT, f"{DATABASE}.t{i}", EVENTS_SCHEMA) for i in range(TABLES)
        ]
        ids = [new_id() for _ in range(n)]
        keys = [
            object_key(tables[i % TABLES].tenant_id, tables[i % TABLES].id, "data", object_id)
            for i, object_id in enumerate(ids)
        ]
        how, upload_s = timed(lambda: _upload(store, backend, keys))
        registered_ts, register_s = timed(lambda: _register(store, tables, ids, keys))
        garbage = [ids[i] for i in sorted(rng.choice(n, size=garbage_count, replace=False))]
        _make_garbage(store, garbage, registered_ts)
        store.objects.head(keys[0])  # the store's client exists before anything is timed

        dry, dry_s, dry_trace = _gc(store, dry_run=True)
        if dry.collected.deleted_objects or dry.collected.candidate_count != garbage_count:
            raise RuntimeError(
                f"{backend} dry run: {dry.collected.candidate_count} candidates, "
                f"{dry.collected.deleted_objects} deleted; expected {garbage_count} and 0"
            )
        real, real_s, real_trace = _gc(store, dry_run=False)
        if real.collected.deleted_objects != garbage_count or real.orphans.orphans:
            raise RuntimeError(
                f"{backend} GC deleted {real.collected.deleted_objects} objects and found "
                f"{len(real.orphans.orphans)} orphans; expected {garbage_count} and 0"
            )
        # The sweep after the deletes listed the warehouse: exactly the survivors.
        survivors = n - garbage_count
        in_catalog = _catalog_objects(store)
        if real.orphans.listed != survivors or in_catalog != survivors:
            raise RuntimeError(
                f"{backend}: {real.orphans.listed} keys listed and {in_catalog} objects in the "
                f"catalog after GC; expected {survivors}"
            )
        if backend == "moto":
            # Untimed: open_store would list the bucket to empty it, slow in moto.
            survivor_ids = set(ids) - set(garbage)
            store.objects.delete_many(
                k for i, k in zip(ids, keys, strict=True) if i in survivor_ids
            )
    return {
        "backend": backend,
        "objects": n,
        "garbage": garbage_count,
        "object_bytes": len(PAYLOAD),
        "upload": how,
        "upload_s": upload_s,
        "upload_per_s": rate(n, upload_s),
        "register_s": register_s,
        "dry_run": _phases(dry, dry_s, dry_trace),
        "real_run": _phases(real, real_s, real_trace),
    }


# report -------------------------------------------------------------------------


def print_report(cases: list[dict[str, Any]]) -> None:
    table = Table(
        title="GC pass, 10% garbage (seconds; grace 0, no compaction)",
        title_justify="left",
    )
    for column in (
        "backend",
        "objects",
        "pass",
        "total",
        "prefix chk",
        "decide",
        "S3 delete",
        "cleanup",
        "orphan sweep",
        "(list)",
        "deleted",
        "del keys/s",
        "pass keys/s",
    ):
        table.add_column(column, justify="right")
    for case in cases:
        for label, key in (("dry run", "dry_run"), ("real", "real_run")):
            p = case[key]
            per_s = p["deleted_per_s_delete_phase"]
            table.add_row(
                case["backend"],
                f"{case['objects']:,}",
                label,
                f"{p['total_s']:.2f}",
                f"{p['prefix_check_s']:.2f}",
                f"{p['decide_s']:.2f}",
                f"{p['delete_s']:.2f}" if p["deleted"] else "-",
                f"{p['cleanup_s']:.2f}" if p["deleted"] else "-",
                f"{p['orphans_s']:.2f}",
                f"{p['list_s']:.2f}",
                f"{p['deleted']:,}",
                fmt_rate(per_s) if per_s else "-",
                fmt_rate(p["deleted_per_s_pass"]) if p["deleted"] else "-",
            )
    console.print(table)
    setup = Table(title="Setup (not GC)", title_justify="left")
    for column in ("backend", "objects", "upload", "upload s", "objects/s", "register s"):
        setup.add_column(column, justify="right")
    for case in cases:
        setup.add_row(
            case["backend"],
            f"{case['objects']:,}",
            case["upload"],
            f"{case['upload_s']:.2f}",
            fmt_rate(case["upload_per_s"]),
            f"{case['register_s']:.2f}",
        )
    console.print(setup)
    by_backend: dict[str, list[dict[str, Any]]] = {}
    for case in cases:
        by_backend.setdefault(case["backend"], []).append(case)
    for backend, rows in by_backend.items():
        if len(rows) < 2:
            continue
        small, large = rows[0], rows[-1]
        growth = large["objects"] / small["objects"]
        console.print(
            f"{backend}: {growth:.0f}x the objects → real pass "
            f"{large['real_run']['total_s'] / small['real_run']['total_s']:.1f}x, dry run "
            f"{large['dry_run']['total_s'] / small['dry_run']['total_s']:.1f}x, "
            f"decision {large['real_run']['decide_s'] / small['real_run']['decide_s']:.1f}x, "
            f"list {large['real_run']['list_s'] / max(small['real_run']['list_s'], 1e-9):.1f}x "
            "(≈ the object ratio = linear)"
        )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_gc",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--quick", action="store_true", help="1e3 and 1e4 objects (default 1e4 and 1e5)"
    )
    parser.add_argument(
        "--sizes", nargs="+", help="object counts, e.g. 1e4 1e5 (overrides --quick)"
    )
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--name", help="result file name (default bench_gc[_quick])")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    sizes = (
        parse_sizes(args.sizes) if args.sizes else list(QUICK_SIZES if args.quick else FULL_SIZES)
    )
    name = args.name or (
        f"{NAME}_custom" if args.sizes else f"{NAME}_quick" if args.quick else NAME
    )
    load_at_start = load_average()
    started = time.perf_counter()
    cases = []
    for n in sizes:
        for backend in args.backends:
            console.print(f"[bold]{NAME}[/]: {backend}, {n:,} objects ...")
            case, seconds = timed(lambda b=backend, n=n: run_case(b, n, seed=args.seed))
            case["case_seconds"] = seconds
            cases.append(case)
    payload = {
        "quick": bool(args.quick),
        "sizes": sizes,
        "garbage_fraction": GARBAGE_FRACTION,
        "load_average_at_start": load_at_start,
        "cases": cases,
    }
    return finish_run(
        payload,
        name=name,
        started=started,
        console=console,
        report=lambda p: print_report(p["cases"]),
    )


if __name__ == "__main__":
    main()
