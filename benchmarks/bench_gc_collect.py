"""GC's object collection at scale (issue 37): the decision, the deletes, the memory.

Three parts, each run on the code on ``PYTHONPATH`` (run it on a checkout of
the code before a change for the "before" figures: every call it makes exists
in both):

1. **decision**: 1,000 garbage objects among 10^4, 10^5, 10^6 catalog objects,
   on SQLite and PostgreSQL. Objects and memberships are registered straight
   into the catalog (``insert_members``, 50,000 a transaction; 4 tables), a
   first ``collect`` runs with nothing to collect (timed: after a bulk load
   the queue holds every new object), PostgreSQL's statistics are taken
   (``ANALYZE``, as autovacuum would by then), then 1,000 memberships are ended, as
   ``bench_gc`` does. Timed: the decision query alone (``unreferenced_objects``
   before, ``record_garbage`` after) in a transaction rolled back,
   ``collect(dry_run=True)`` (the whole decision transaction), best of 3 each,
   and one real ``collect`` (its keys are not in the ``file://`` warehouse:
   deleting a missing key is fine).
2. **deletes**: every object garbage, 10^4 and 10^5 of them, each a real
   16-byte object; ``collect(dry_run=False)`` end to end, with the time spent
   in ``delete_many`` summed apart, then a bare ``delete_many`` of as many other
   keys. On ``file://`` and on moto. The moto server runs in a process of its
   own (this module's ``--serve-moto``, which fills the bucket itself): in the
   benchmark's process it would share one interpreter lock with the requests
   it serves, and parallel requests could not show.
3. **rss**: the peak RSS of ``collect(dry_run=False)`` in a fresh process
   (``--child-rss``; VmHWM reset after a warm-up collection with nothing to
   do, as tests/helpers/memory_job.py does) over a SQLite catalog of N
   objects of which G are garbage, keys absent from the warehouse.

Nothing here asserts on time; the run checks that each collection found and
deleted exactly the garbage.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from benchmarks.common import (
    EVENTS_SCHEMA,
    ROOT,
    CatalogBackend,
    finish_run,
    fmt_rate,
    load_average,
    new_catalog_uri,
    rate,
    timed,
)
from engine.gc.collect import collect
from tenants.objects.record import ObjectRecord, object_key
from tenants.store import TableStore
from tenants.tenancy import TableRecord, new_id

NAME = "bench_gc_collect"
TENANT = "bench"
TABLES = 4
PAYLOAD = b"rewind-gc-bench\n"  # 16 bytes
REGISTER_CHUNK = 50_000  # objects registered per transaction
SQL_CHUNK = 500  # parameters per statement
DECISION_GARBAGE = 1_000
DECISION_SIZES = (10_000, 100_000, 1_000_000)
QUICK_DECISION_SIZES = (10_000, 100_000)
DELETE_SIZES = (10_000, 100_000)
QUICK_DELETE_SIZES = (10_000,)
RSS_CASES = ((100_000, 100_000), (1_000_000, 1_000), (1_000_000, 1_000_000))
QUICK_RSS_CASES = ((20_000, 20_000), (100_000, 100_000))
NEVER = 100 * 365 * 24 * 3600 * 1_000_000  # a grace nothing outlives: a collection doing nothing

console = Console() if sys.stdout.isatty() else Console(width=150)


# the catalog ----------------------------------------------------------------------


def _tables(store: TableStore) -> list[TableRecord]:
    store.create_tenant(TENANT)
    return [store.create_table(TENANT, f"db.t{i}", EVENTS_SCHEMA) for i in range(TABLES)]


def register(
    store: TableStore, tables: list[TableRecord], n: int, keys: list[str] | None = None
) -> list[str]:
    """``n`` objects, each a live member of one of ``tables``, at ``keys`` (by
    default keys under their tables); their ids."""
    from tenants.catalog.objects import insert_members

    ids = [new_id() for _ in range(n)]
    if keys is None:
        keys = [
            object_key(tables[i % TABLES].tenant_id, tables[i % TABLES].id, "data", object_id)
            for i, object_id in enumerate(ids)
        ]
    for start in range(0, n, REGISTER_CHUNK):
        with store.catalog.transaction() as tx:
            ts = tx.commit_ts()
            members = []
            for i in range(start, min(n, start + REGISTER_CHUNK)):
                table = tables[i % TABLES]
                record = ObjectRecord(
                    id=ids[i],
                    key=keys[i],
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
                )
                members.append((table.id, record))
            insert_members(tx, members, ts)
    return ids


def end_memberships(store: TableStore, ids: list[str]) -> None:
    """Make ``ids`` garbage: their memberships end at the current ts (grace 0 follows)."""
    with store.catalog.transaction() as tx:
        ts = tx.commit_ts()
        for start in range(0, len(ids), SQL_CHUNK):
            chunk = ids[start : start + SQL_CHUNK]
            marks = ", ".join("?" for _ in chunk)
            tx.execute(
                f"UPDATE membership SET removed_ts = ? WHERE object_id IN ({marks})",
                [ts, *chunk],
            )


def catalog_objects(store: TableStore) -> int:
    with store.catalog.snapshot() as tx:
        return int(tx.scalar("SELECT COUNT(*) FROM objects"))


def found(report: Any) -> int:
    """Candidates a report decided (counted, or listed by the code before counts)."""
    count = getattr(report, "candidate_count", None)
    return len(report.candidates) if count is None else int(count)


def decision_query_s(store: TableStore) -> float:
    """The decision's query alone, in a transaction rolled back."""
    import tenants.catalog.engine.gc as catalog_gc

    with store.catalog.transaction(rollback=True) as tx:
        start = time.perf_counter()
        if hasattr(catalog_gc, "record_garbage"):
            catalog_gc.record_garbage(tx, aged_before=None, decided_ts=0, sample=1000)
        else:
            catalog_gc.unreferenced_objects(tx)  # type: ignore[attr-defined]
        return time.perf_counter() - start


@contextmanager
def file_store(catalog: CatalogBackend) -> Iterator[tuple[TableStore, str, str]]:
    """A store on a fresh catalog and ``file://`` warehouse; its catalog and warehouse URIs."""
    workdir = Path(tempfile.mkdtemp(prefix="rewind-bench-"))
    catalog_uri, warehouse = new_catalog_uri(catalog, workdir), f"file://{workdir / 'warehouse'}"
    store = TableStore.open(catalog_uri, warehouse)
    try:
        yield store, catalog_uri, warehouse
    finally:
        store.close()
        subprocess.run(["rm", "-rf", str(workdir)], check=False)


# 1. the decision ------------------------------------------------------------------


def decision_case(catalog: CatalogBackend, n: int, *, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    with file_store(catalog) as (store, _, _):
        tables = _tables(store)
        ids, register_s = timed(lambda: register(store, tables, n))
        # A GC with nothing to collect first: the steady state, where the queue
        # (after) holds what changed since the last run, not the bulk load.
        first = timed(lambda: collect(store.catalog, store.objects, grace_us=0, dry_run=False))
        settle_s = first[1]
        if catalog == "postgresql":
            # What autovacuum will have done by the next run: statistics of the
            # bulk load (without them the planner believes the tables small).
            with store.catalog.transaction() as tx:
                tx.execute("ANALYZE")
        garbage = [ids[i] for i in sorted(rng.choice(n, size=DECISION_GARBAGE, replace=False))]
        end_s = timed(lambda: end_memberships(store, garbage))[1]
        query = [decision_query_s(store) for _ in range(3)]
        dry = []
        for _ in range(3):
            report, seconds = timed(lambda: collect(store.catalog, store.objects, grace_us=0))
            if found(report) != DECISION_GARBAGE:
                raise RuntimeError(f"{catalog} {n}: the dry run found {found(report)} candidates")
            dry.append(seconds)
        real, real_s = timed(
            lambda: collect(store.catalog, store.objects, grace_us=0, dry_run=False)
        )
        if real.deleted_objects != DECISION_GARBAGE or catalog_objects(store) != n - len(garbage):
            raise RuntimeError(f"{catalog} {n}: collect deleted {real.deleted_objects}")
    return {
        "catalog": catalog,
        "objects": n,
        "garbage": DECISION_GARBAGE,
        "register_s": register_s,
        "end_memberships_s": end_s,
        "first_collect_s": settle_s,
        "query_s": min(query),
        "query_all_s": query,
        "dry_run_s": min(dry),
        "dry_run_all_s": dry,
        "collect_s": real_s,
    }


# 2. the deletes -------------------------------------------------------------------


def serve_moto(port: int, bucket: str, keys_file: str) -> None:
    """The moto server of part 2, in this process: fill ``bucket`` with every key of
    ``keys_file`` (through moto's backend, not HTTP: setup is not measured), say
    ``ready``, serve until terminated."""
    import logging

    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    backend.create_bucket(bucket, "us-east-1")
    for key in Path(keys_file).read_text().split():
        backend.put_object(bucket, key, PAYLOAD)
    print("ready", flush=True)
    while True:
        time.sleep(3600)


@contextmanager
def moto_process(bucket: str, full_keys: list[str]) -> Iterator[Any]:
    """A moto server in a child process holding ``full_keys``; its S3 settings."""
    from tenants.config import S3Settings
    from tenants.objectstore.embedded import PLACEHOLDER_KEY, free_port

    port = free_port()
    with tempfile.NamedTemporaryFile("w", suffix=".keys", delete=False) as listing:
        listing.write("\n".join(full_keys))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.bench_gc_collect", "--serve-moto", str(port), bucket]
        + [listing.name],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=str(Path(__file__).resolve().parent.parent),
    )
    try:
        assert child.stdout is not None
        if child.stdout.readline().strip() != "ready":
            raise RuntimeError("the moto server process did not start")
        yield S3Settings(
            endpoint_url=f"http://127.0.0.1:{port}",
            region="us-east-1",
            access_key_id=PLACEHOLDER_KEY,
            secret_access_key=PLACEHOLDER_KEY,
        )
    finally:
        child.terminate()
        child.wait(timeout=30)
        os.unlink(listing.name)


@contextmanager
def delete_store(backend: str, keys: list[str]) -> Iterator[TableStore]:
    """A store (SQLite catalog) whose warehouse holds ``keys``, each 16 bytes."""
    workdir = Path(tempfile.mkdtemp(prefix="rewind-bench-"))
    catalog = new_catalog_uri("sqlite", workdir)
    try:
        if backend == "file":
            root = workdir / "warehouse"
            for directory in {(root / k).parent for k in keys}:
                directory.mkdir(parents=True, exist_ok=True)
            for key in keys:
                (root / key).write_bytes(PAYLOAD)
            store = TableStore.open(catalog, f"file://{root}", adopt_warehouse=True)
            try:
                yield store
            finally:
                store.close()
        else:
            bucket = f"rewind-bench-{uuid.uuid4().hex[:12]}"
            with moto_process(bucket, [f"warehouse/{k}" for k in keys]) as settings:
                store = TableStore.open(
                    catalog, f"s3://{bucket}/warehouse", s3=settings, adopt_warehouse=True
                )
                try:
                    yield store
                finally:
                    store.close()
    finally:
        subprocess.run(["rm", "-rf", str(workdir)], check=False)


def delete_case(backend: str, n: int) -> dict[str, Any]:
    """``n`` garbage objects collected end to end, then ``n`` other keys deleted bare."""
    tenant, table = new_id(), new_id()
    keys = [object_key(tenant, table, "data", new_id()) for _ in range(n)]
    bare = [f"bare/{i:07d}" for i in range(n)]
    with delete_store(backend, keys + bare) as store:
        end_memberships(store, register(store, _tables(store), n, keys))
        store.objects.head(keys[0])  # the client exists before anything is timed

        spent: list[float] = []
        inner = store.objects.delete_many

        def delete_many(batch: Any) -> int:
            start = time.perf_counter()
            try:
                return int(inner(batch))
            finally:
                spent.append(time.perf_counter() - start)

        store.objects.delete_many = delete_many  # type: ignore[method-assign,assignment]
        report, total_s = timed(
            lambda: collect(store.catalog, store.objects, grace_us=0, dry_run=False)
        )
        del store.objects.delete_many
        left = sum(1 for _ in store.objects.list("tenants/"))
        if report.deleted_objects != n or left or catalog_objects(store):
            raise RuntimeError(
                f"{backend}: deleted {report.deleted_objects} of {n}, {left} keys left"
            )
        bare_s = timed(lambda: store.objects.delete_many(iter(bare)))[1]
        if any(True for _ in store.objects.list("bare/")):
            raise RuntimeError(f"{backend}: the bare delete left keys")
    delete_s = sum(spent)
    return {
        "backend": backend,
        "garbage": n,
        "collect_s": total_s,
        "delete_s": delete_s,
        "delete_calls": len(spent),
        "catalog_s": total_s - delete_s,
        "deleted_per_s": rate(n, total_s),
        "deleted_per_s_delete_phase": rate(n, delete_s),
        "bare_delete_s": bare_s,
        "bare_deleted_per_s": rate(n, bare_s),
    }


# 3. peak RSS ----------------------------------------------------------------------


def child_rss(catalog: str, warehouse: str) -> None:
    """The measured process of part 3: one JSON line on stdout."""

    def status_kib(field: str) -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
        raise RuntimeError(f"no {field} in /proc/self/status")

    store = TableStore.open(catalog, warehouse)
    collect(store.catalog, store.objects, grace_us=NEVER, dry_run=False)  # warm, nothing to do
    Path("/proc/self/clear_refs").write_text("5")
    baseline = status_kib("VmRSS")
    report, seconds = timed(
        lambda: collect(store.catalog, store.objects, grace_us=0, dry_run=False)
    )
    peak = status_kib("VmHWM")
    print(
        json.dumps(
            {
                "baseline_kib": baseline,
                "peak_kib": peak,
                "deleted": report.deleted_objects,
                "seconds": seconds,
            }
        )
    )


def rss_case(n: int, garbage_count: int, *, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    with file_store("sqlite") as (store, catalog, warehouse):
        tables = _tables(store)
        ids, register_s = timed(lambda: register(store, tables, n))
        picked = rng.choice(n, size=garbage_count, replace=False) if garbage_count < n else None
        ending = ids if picked is None else [ids[i] for i in sorted(picked)]
        end_s = timed(lambda: end_memberships(store, ending))[1]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.bench_gc_collect", "--child-rss", catalog]
            + [warehouse],
            capture_output=True,
            text=True,
            env=env,
            cwd=str(Path(__file__).resolve().parent.parent),
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"the measured process failed: {done.stderr[-3000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["deleted"] != garbage_count:
        raise RuntimeError(f"rss {n}/{garbage_count}: deleted {result['deleted']}")
    return {
        "objects": n,
        "garbage": garbage_count,
        "baseline_mib": result["baseline_kib"] / 1024,
        "peak_mib": result["peak_kib"] / 1024,
        "growth_mib": (result["peak_kib"] - result["baseline_kib"]) / 1024,
        "collect_s": result["seconds"],
        # setup, timed: what the catalog's writes cost (the queue's triggers, after)
        "register_s": register_s,
        "end_memberships_s": end_s,
    }


# report ---------------------------------------------------------------------------


def print_report(payload: dict[str, Any]) -> None:
    if payload.get("decision"):
        table = Table(
            title=f"Decision: {DECISION_GARBAGE:,} garbage objects among N (seconds, best of 3)",
            title_justify="left",
        )
        for column in (
            "catalog",
            "objects",
            "query",
            "dry run",
            "collect (real)",
            "first collect",
            "register",
            "end 1k",
        ):
            table.add_column(column, justify="right")
        for case in payload["decision"]:
            first = case.get("first_collect_s")
            end = case.get("end_memberships_s")
            table.add_row(
                case["catalog"],
                f"{case['objects']:,}",
                f"{case['query_s']:.3f}",
                f"{case['dry_run_s']:.3f}",
                f"{case['collect_s']:.3f}",
                "-" if first is None else f"{first:.2f}",
                f"{case['register_s']:.1f}",
                "-" if end is None else f"{end:.3f}",
            )
        console.print(table)
    if payload.get("deletes"):
        table = Table(title="Deletes: every object garbage", title_justify="left")
        for column in (
            "backend",
            "garbage",
            "collect s",
            "in delete_many s",
            "catalog s",
            "deleted/s (collect)",
            "deleted/s (delete phase)",
            "bare delete_many/s",
        ):
            table.add_column(column, justify="right")
        for case in payload["deletes"]:
            table.add_row(
                case["backend"],
                f"{case['garbage']:,}",
                f"{case['collect_s']:.2f}",
                f"{case['delete_s']:.2f}",
                f"{case['catalog_s']:.2f}",
                fmt_rate(case["deleted_per_s"]),
                fmt_rate(case["deleted_per_s_delete_phase"]),
                fmt_rate(case["bare_deleted_per_s"]),
            )
        console.print(table)
    if payload.get("rss"):
        table = Table(title="Peak RSS of collect (SQLite, file://)", title_justify="left")
        for column in (
            "objects",
            "garbage",
            "baseline MiB",
            "peak MiB",
            "growth MiB",
            "collect s",
            "register s",
            "end s",
        ):
            table.add_column(column, justify="right")
        for case in payload["rss"]:
            table.add_row(
                f"{case['objects']:,}",
                f"{case['garbage']:,}",
                f"{case['baseline_mib']:.0f}",
                f"{case['peak_mib']:.0f}",
                f"{case['growth_mib']:.1f}",
                f"{case['collect_s']:.1f}",
                f"{case.get('register_s', 0):.1f}",
                f"{case.get('end_memberships_s', 0):.1f}",
            )
        console.print(table)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_gc_collect",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes (~2 min)")
    parser.add_argument(
        "--only", nargs="+", choices=("decision", "deletes", "rss"), help="run only these parts"
    )
    parser.add_argument(
        "--catalogs", nargs="+", choices=("sqlite", "postgresql"), default=["sqlite", "postgresql"]
    )
    parser.add_argument("--backends", nargs="+", choices=("moto", "file"), default=["moto", "file"])
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--name", help="result file name (default bench_gc_collect[_quick])")
    parser.add_argument(
        "--serve-moto", nargs=3, metavar=("PORT", "BUCKET", "KEYS"), help=argparse.SUPPRESS
    )
    parser.add_argument(
        "--child-rss", nargs=2, metavar=("CATALOG", "WAREHOUSE"), help=argparse.SUPPRESS
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.serve_moto:
        port, bucket, keys_file = args.serve_moto
        serve_moto(int(port), bucket, keys_file)
        return {}
    if args.child_rss:
        child_rss(*args.child_rss)
        return {}
    parts = set(args.only or ("decision", "deletes", "rss"))
    name = args.name or (f"{NAME}_quick" if args.quick else NAME)
    load_at_start = load_average()
    started = time.perf_counter()
    payload: dict[str, Any] = {
        "quick": bool(args.quick),
        "load_average_at_start": load_at_start,
        "code_root": str(ROOT),
    }
    if "decision" in parts:
        payload["decision"] = []
        for n in QUICK_DECISION_SIZES if args.quick else DECISION_SIZES:
            for catalog in args.catalogs:
                console.print(f"[bold]{NAME}[/]: decision, {catalog}, {n:,} objects ...")
                payload["decision"].append(decision_case(catalog, n, seed=args.seed))
    if "deletes" in parts:
        payload["deletes"] = []
        for n in QUICK_DELETE_SIZES if args.quick else DELETE_SIZES:
            for backend in args.backends:
                console.print(f"[bold]{NAME}[/]: deletes, {backend}, {n:,} objects ...")
                payload["deletes"].append(delete_case(backend, n))
    if "rss" in parts:
        payload["rss"] = []
        for n, garbage in QUICK_RSS_CASES if args.quick else RSS_CASES:
            console.print(f"[bold]{NAME}[/]: rss, {n:,} objects, {garbage:,} garbage ...")
            payload["rss"].append(rss_case(n, garbage, seed=args.seed))
    return finish_run(payload, name=name, started=started, console=console, report=print_report)


if __name__ == "__main__":
    main()
