"""Which library should the catalog talk SQL through? (issue 12, item 1)

The same catalog work runs through each library, on a SQLite file and on a
throwaway PostgreSQL database, in one run:

- ``sqlite3``: the stdlib driver, connected exactly as today's catalog connects
  (``tenants.catalog.sqlite.connect``: WAL, ``synchronous=NORMAL``, foreign
  keys on, ``BEGIN IMMEDIATE`` for writes); the SQLite baseline.
- ``psycopg``: psycopg 3 (binary), ``autocommit=True`` plus ``conn.transaction()``
  blocks; the PostgreSQL baseline. Bulk inserts also run through ``COPY``.
- ``sqlalchemy_text``: SQLAlchemy Core 2 executing today's SQL as ``text()``
  with named parameters, on one held ``Connection``; on SQLite the engine's
  connections come from ``tenants.catalog.sqlite.connect`` and a ``begin``
  event issues ``BEGIN IMMEDIATE`` (SQLAlchemy's documented recipe).
- ``sqlalchemy_core``: the same statements as Core constructs (``update``,
  ``insert``, ``insert().from_select``, ``select`` with ``case``) on typed
  ``Table`` objects, built per call as a Core layer would.

Operations (full sizes; ``--quick``: 2,000 transactions, 5·10^4 bulk rows, 10^5 planned and
10^4 read members):

a) 10^4 small write transactions: BEGIN; a compare-and-set on the clock row
   (``UPDATE clock SET last_ts = ? WHERE id = 1 AND last_ts < ?``, rowcount
   checked, as pyiceberg's SQL catalog checks its commits); INSERT one object
   record (``tenants.objects.record.insert_object``'s statement); COMMIT. Run in
   rounds with the libraries interleaved; the figure is the best round. On
   PostgreSQL also with ``synchronous_commit = off``, which is what SQLite's
   ``synchronous=NORMAL`` promises (no fsync per commit), so the library's own
   cost is not hidden behind the disk.
b) 10^6 membership rows into a fresh copy of the ``membership`` table (its DDL,
   keys, indexes and foreign keys taken from the migrations): ``executemany``
   (and ``COPY`` on PostgreSQL); then the install statement
   (``engine/restore/install.py``: ``INSERT ... SELECT`` from ``job_pins``) of
   10^6 pins into another fresh copy.
c) The restore planner's classification (``engine/restore/plan.py``,
   ``_classify``) over one table of 10^6 live members: grouped counts, bytes
   and unknown fingerprints. SQLite keeps ``INDEXED BY objects_plan``; the
   PostgreSQL text drops it. SQLAlchemy's SQLite dialect renders no table hints
   at all (``with_hint`` is silently ignored), so the construct variant uses a
   compiler subclass that renders it; the stock rendering is timed too, as
   ``sqlalchemy_core (hint dropped)``, to show what a Core layer would lose.
d) Reading 10^5 members as tuples and building ``ObjectRecord`` values
   (``tenants.objects.record.live_objects``' query and ``record_from_tuple``).

Setup (not part of the comparison): the catalog schema from
``tenants.catalog.migrations`` on both backends, 10^6 object records, 10^6 live
members of the planned table, 10^5 of the read table, 10^6 pins; loaded with
the raw driver (COPY on PostgreSQL), then ``VACUUM ANALYZE`` on PostgreSQL
(autovacuum's steady state; SQLite's catalog never runs ANALYZE today, which is
why its hot queries carry ``INDEXED BY``).

Every library must return the same plan counts and the same records.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import sqlalchemy as sa
from rich.console import Console
from rich.table import Table

from benchmarks.catalog_clients import (
    INSERT_MEMBER,
    INSERT_OBJECT,
    OBJECT_COLUMNS,
    Backend,
    Client,
    PsycopgRaw,
    SqlalchemyCore,
    SqlalchemyText,
    SqliteRaw,
    membership_ddl,
    postgres_sql,
    sqlalchemy_engine,
)
from benchmarks.common import finish_run, fmt_rate, load_average, rate, timed
from tenants.catalog.migrations import MIGRATIONS
from tenants.catalog.sqlite import connect as sqlite_connect

NAME = "bench_catalog_driver"
BACKENDS: tuple[Backend, ...] = ("sqlite", "postgresql")
RAW: dict[Backend, str] = {"sqlite": "sqlite3", "postgresql": "psycopg"}
PG_ADMIN = os.environ.get("REWIND_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")

console = Console() if sys.stdout.isatty() else Console(width=150)


@dataclass(frozen=True)
class Sizes:
    txns: int  # a) write transactions per library
    rounds: int  # a) the transactions split into this many interleaved rounds
    bulk: int  # b) rows per bulk insert and per INSERT ... SELECT
    plan: int  # c) live members of the planned table (and object records in all)
    read: int  # d) members read as records
    warm: int  # c), d) warm calls after the first


FULL = Sizes(txns=10_000, rounds=5, bulk=1_000_000, plan=1_000_000, read=100_000, warm=5)
QUICK = Sizes(txns=2_000, rounds=4, bulk=50_000, plan=100_000, read=10_000, warm=4)

# ids of the generated tenant (fixed, so results are comparable between runs)
TENANT_ID, DATABASE_ID = "7e" * 16, "db" * 16
PLAN_TABLE, READ_TABLE, BULK_TABLE = "a1" * 16, "b2" * 16, "c3" * 16
JOB_ID = "f0" * 16
FINGERPRINTS = ("5a" * 32, "6b" * 32)  # both schema versions of the planned table
SPACING_US = 1_000  # objects' min_ts step; each spans up to 5 steps

# ---------------------------------------------------------------------------
# Data


@dataclass(frozen=True)
class Dataset:
    objects: list[tuple[Any, ...]]  # in OBJECT_COLUMNS order, sorted by id
    ids: list[str]
    at_ts: int  # the planned point: ~80% reuse, a few straddle, the rest skip


def make_dataset(count: int, seed: int) -> Dataset:
    rng = np.random.default_rng(seed)
    raw = rng.bytes(16 * count).hex()
    ids = sorted(raw[32 * i : 32 * (i + 1)] for i in range(count))
    min_ts = (rng.permutation(count) * SPACING_US + SPACING_US).tolist()
    span = rng.integers(0, 5 * SPACING_US, count).tolist()
    rows = rng.integers(1, 100_000, count).tolist()
    size = rng.integers(1_000, 10_000_000, count).tolist()
    tomb = (rng.random(count) < 0.1).tolist()
    second = (rng.random(count) < 0.3).tolist()
    objects = [
        (
            object_id,
            f"tenants/{TENANT_ID}/{PLAN_TABLE}/{'tomb' if tomb[i] else 'data'}/{object_id}.parquet",
            "tomb" if tomb[i] else "data",
            FINGERPRINTS[second[i]],
            rows[i],
            size[i],
            min_ts[i],
            min_ts[i] + span[i],
            f"[{i * 100}]",
            f"[{i * 100 + 99}]",
            1,
            f"{i:064x}",
            min_ts[i],
        )
        for i, object_id in enumerate(ids)
    ]
    return Dataset(objects, ids, at_ts=int(0.8 * count) * SPACING_US)


def fixed_rows() -> dict[str, list[tuple[Any, ...]]]:
    """Tenant, database, tables and schema versions, keyed by INSERT statement."""
    table = (
        "INSERT INTO tables (id, tenant_id, database_id, name, created_ts) VALUES (?, ?, ?, ?, 0)"
    )
    return {
        "INSERT INTO tenants (id, name, state, created_ts, last_change_ts) "
        "VALUES (?, ?, 'active', 0, 0)": [(TENANT_ID, "bench")],
        "INSERT INTO databases (id, tenant_id, name, created_ts) VALUES (?, ?, ?, 0)": [
            (DATABASE_ID, TENANT_ID, "db")
        ],
        table: [
            (PLAN_TABLE, TENANT_ID, DATABASE_ID, "planned"),
            (READ_TABLE, TENANT_ID, DATABASE_ID, "read"),
            (BULK_TABLE, TENANT_ID, DATABASE_ID, "bulk"),
        ],
        "INSERT INTO schema_versions (table_id, valid_from_ts, columns_json, primary_key_json, "
        "fingerprint) VALUES (?, ?, '[]', '[\"id\"]', ?)": [
            (PLAN_TABLE, 0, FINGERPRINTS[0]),
            (PLAN_TABLE, 1, FINGERPRINTS[1]),
            (READ_TABLE, 0, FINGERPRINTS[0]),
        ],
    }


def txn_object(serial: int) -> tuple[Any, ...]:
    """The object record small write transaction number ``serial`` inserts."""
    object_id = f"ee{serial:030x}"  # generated ids are random hex: these never collide in practice
    key = f"tenants/{TENANT_ID}/txn/data/{object_id}.parquet"
    return (object_id, key, "data", FINGERPRINTS[0], 100, 4096, 1, 1, "[0]", "[99]", 1, "0" * 64, 1)


# ---------------------------------------------------------------------------
# PostgreSQL: a throwaway database per run


def ensure_postgres() -> None:
    """Fail clearly when no server answers; start the local cluster once if there is one."""
    try:
        psycopg.connect(PG_ADMIN, connect_timeout=5).close()
        return
    except psycopg.OperationalError as first:
        versions = sorted(os.listdir("/etc/postgresql")) if os.path.isdir("/etc/postgresql") else []
        if not versions:
            raise SystemExit(
                f"no PostgreSQL answers at {PG_ADMIN} and none is installed: {first}"
            ) from first
        console.print(f"PostgreSQL not answering ({first}); starting cluster {versions[-1]}/main")
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", versions[-1], "main", "start"],
            check=True,
        )
    for _ in range(30):
        try:
            psycopg.connect(PG_ADMIN, connect_timeout=5).close()
            return
        except psycopg.OperationalError:
            time.sleep(1)
    raise SystemExit(f"PostgreSQL at {PG_ADMIN} did not come up")


@contextmanager
def throwaway_database() -> Iterator[tuple[str, str]]:
    """(database name, DSN) of a fresh ``rewind_bench_<random>`` database, dropped on exit."""
    name = f"rewind_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield name, sa.make_url(PG_ADMIN).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


# ---------------------------------------------------------------------------
# Setup


def member_rows(data: Dataset, table_id: str, count: int) -> Iterator[tuple[str, str, int]]:
    """Live membership of the first ``count`` objects in ``table_id``, added at their min_ts."""
    return ((table_id, o[0], o[6]) for o in data.objects[:count])


def load_sqlite(path: str, data: Dataset, sizes: Sizes) -> dict[str, float]:
    conn = sqlite_connect(path)
    started = time.perf_counter()
    conn.execute("BEGIN IMMEDIATE")
    for _, statements in MIGRATIONS:
        for statement in statements:
            conn.execute(statement)
    for sql, rows in fixed_rows().items():
        conn.executemany(sql, rows)
    conn.executemany(INSERT_OBJECT, data.objects)
    for table, count in ((PLAN_TABLE, sizes.plan), (READ_TABLE, sizes.read)):
        conn.executemany(INSERT_MEMBER.format(table="membership"), member_rows(data, table, count))
    conn.executemany(
        "INSERT INTO job_pins (job_id, table_id, object_id, action) VALUES (?, ?, ?, 'reuse')",
        ((JOB_ID, PLAN_TABLE, object_id) for object_id in data.ids[: sizes.bulk]),
    )
    conn.execute("COMMIT")
    conn.close()
    return {"load_s": time.perf_counter() - started, "bytes": os.path.getsize(path)}


def load_postgres(dsn: str, data: Dataset, sizes: Sizes) -> dict[str, float]:
    started = time.perf_counter()
    with psycopg.connect(dsn) as conn, conn.cursor() as cursor:
        for _, statements in MIGRATIONS:
            for statement in statements:
                cursor.execute(statement)
        for sql, rows in fixed_rows().items():
            cursor.executemany(postgres_sql(sql), rows)
        members = "membership (table_id, object_id, added_ts)"
        copies: list[tuple[str, Iterable[tuple[Any, ...]]]] = [
            (f"objects ({', '.join(OBJECT_COLUMNS)})", data.objects),
            (members, member_rows(data, PLAN_TABLE, sizes.plan)),
            (members, member_rows(data, READ_TABLE, sizes.read)),
            (
                "job_pins (job_id, table_id, object_id, action)",
                ((JOB_ID, PLAN_TABLE, i, "reuse") for i in data.ids[: sizes.bulk]),
            ),
        ]
        for target, source in copies:
            with cursor.copy(f"COPY {target} FROM STDIN") as copy:
                for row in source:
                    copy.write_row(row)
    loaded = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        size = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    return {
        "load_s": loaded - started,
        "vacuum_analyze_s": time.perf_counter() - loaded,
        "bytes": int(size[0]) if size else 0,
    }


# ---------------------------------------------------------------------------
# Measurements. Results are dicts: op, library, a figure, rows/s; vs_raw added after.

RATIO_BASE = {"copy": "executemany"}  # COPY is compared with the raw driver's executemany


def with_ratios(results: list[dict[str, Any]], raw: str, key: str = "seconds") -> None:
    """Each result's ``key`` ÷ the raw driver's for the same op (> 1: slower than raw)."""
    base = {r["op"]: r[key] for r in results if r["library"] == raw}
    for r in results:
        reference = base.get(RATIO_BASE.get(r["op"], r["op"]))
        r["vs_raw"] = r[key] / reference if reference else None


def measure_txns(
    clients: list[Client], sizes: Sizes, serial: Iterator[int]
) -> list[dict[str, Any]]:
    """a) Rounds of small write transactions, the libraries' order rotated each round."""
    per_round = sizes.txns // sizes.rounds
    rounds: dict[str, list[float]] = {c.library: [] for c in clients}
    for r in range(sizes.rounds):
        for k in range(len(clients)):
            client = clients[(k + r) % len(clients)]
            rows = [txn_object(next(serial)) for _ in range(per_round)]
            stamps = [next(serial) for _ in range(per_round)]  # strictly increasing commit ts
            start = time.perf_counter()
            for ts, row in zip(stamps, rows, strict=True):
                client.write_txn(ts, row)
            rounds[client.library].append(time.perf_counter() - start)
    results = [
        {
            "op": "write_txn",
            "library": library,
            "transactions": per_round * sizes.rounds,
            "rounds_s": seconds,
            "us_per_txn": min(seconds) / per_round * 1e6,
            "median_us_per_txn": statistics.median(seconds) / per_round * 1e6,
            "txn_per_s": rate(per_round, min(seconds)),
        }
        for library, seconds in rounds.items()
    ]
    with_ratios(results, clients[0].library, "us_per_txn")
    return results


def measure_bulk(
    clients: list[Client], raw: SqliteRaw | PsycopgRaw, sizes: Sizes, data: Dataset
) -> list[dict[str, Any]]:
    """b) executemany (and COPY) of membership rows, then INSERT ... SELECT from pins,
    each into a fresh copy of ``membership`` (dropped after, so no run inherits a
    bigger index from the one before)."""
    rows = [(BULK_TABLE, object_id, 1) for object_id in data.ids[: sizes.bulk]]
    install = (BULK_TABLE, 1, JOB_ID, PLAN_TABLE)
    results: list[dict[str, Any]] = []

    def one(op: str, library: str, run: Callable[[str], Any]) -> None:
        scratch = f"bench_{op}_{library}"
        raw.run_ddl(membership_ddl(scratch))
        try:
            _, seconds = timed(lambda: run(scratch))
            inserted = raw.count(scratch)
        finally:
            raw.run_ddl([f"DROP TABLE {scratch}"])
        if inserted != sizes.bulk:
            raise RuntimeError(f"{library} {op} inserted {inserted} rows, expected {sizes.bulk}")
        results.append(
            {
                "op": op,
                "library": library,
                "rows": sizes.bulk,
                "seconds": seconds,
                "rows_per_s": rate(sizes.bulk, seconds),
            }
        )
        console.print(f"  {op:<13} {library:<16} {seconds:7.2f} s")

    for client in clients:
        one("executemany", client.library, partial(client.bulk_insert, rows=rows))
        if isinstance(client, PsycopgRaw):
            one("copy", client.library, partial(client.copy_insert, rows=rows))
    for client in clients:
        one("insert_select", client.library, partial(client.insert_select, params=install))
    with_ratios(results, raw.library)
    return results


def measure_reads(
    clients: list[Client], sizes: Sizes, data: Dataset
) -> tuple[list[dict[str, Any]], list[tuple[Any, ...]]]:
    """c) plan counts of the planned table, d) records of the read table; each library
    in turn, one cold call and ``warm`` warm calls each. Every library must agree."""
    calls: dict[str, Callable[[Client], Any]] = {
        "plan_counts": lambda c: sorted(c.plan_counts(PLAN_TABLE, data.at_ts)),
        "read_records": lambda c: sorted(c.read_records(READ_TABLE), key=lambda o: o.id),
    }
    amount = {"plan_counts": sizes.plan, "read_records": sizes.read}
    timings: dict[tuple[str, str], list[float]] = {}
    answers: dict[tuple[str, str], Any] = {}
    for _ in range(1 + sizes.warm):
        for op, call in calls.items():
            for client in clients:
                answers[(op, client.library)], spent = timed(partial(call, client))
                timings.setdefault((op, client.library), []).append(spent)
    reference = clients[0].library
    for (op, library), answer in answers.items():
        if answer != answers[(op, reference)]:
            raise RuntimeError(f"{library} answers {op} unlike {reference}")
    plan = answers[("plan_counts", reference)]
    if sum(int(r[1]) for r in plan) != sizes.plan or any(int(r[3]) for r in plan):
        raise RuntimeError(f"plan counts {plan} do not add up to {sizes.plan} known objects")
    if len(answers[("read_records", reference)]) != sizes.read:
        raise RuntimeError(f"read_records did not return {sizes.read} records")
    results = []
    for (op, library), calls_s in timings.items():
        best = min(calls_s[1:] or calls_s)
        results.append(
            {
                "op": op,
                "library": library,
                "rows": amount[op],
                "first_s": calls_s[0],
                "warm_s": calls_s[1:],
                "seconds": best,
                "rows_per_s": rate(amount[op], best),
            }
        )
    with_ratios(results, reference)
    return results, plan


# ---------------------------------------------------------------------------
# One backend


@contextmanager
def backend_target(backend: Backend) -> Iterator[tuple[str, str]]:
    """(SQLite path or PostgreSQL database name, PostgreSQL DSN or "")."""
    if backend == "postgresql":
        with throwaway_database() as (name, dsn):
            yield name, dsn
        return
    workdir = Path(tempfile.mkdtemp(prefix="rewind-bench-catalog-"))
    try:
        yield str(workdir / "catalog.db"), ""
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def run_backend(backend: Backend, sizes: Sizes, data: Dataset) -> dict[str, Any]:
    out: dict[str, Any] = {"backend": backend}
    serial = iter(range(10**15, 10**17))  # txn object ids and commit timestamps
    with backend_target(backend) as (target, dsn):
        console.print(f"[bold]{NAME}[/]: {backend}: schema, {len(data.objects):,} objects ...")
        raw: SqliteRaw | PsycopgRaw
        if backend == "sqlite":
            out["setup"] = load_sqlite(target, data, sizes)
            raw = SqliteRaw(target)
            out["sqlite_version"] = sqlite3.sqlite_version
        else:
            out["setup"] = load_postgres(dsn, data, sizes)
            raw = PsycopgRaw(dsn)
            out["server_version"] = raw.conn.info.server_version
            setting = raw.conn.execute("SHOW synchronous_commit").fetchone()
            out["synchronous_commit"] = setting[0] if setting else None
        console.print(f"  setup {out['setup']}")
        engine = sqlalchemy_engine(dsn or target)
        stock = sqlalchemy_engine(target, hints=False) if backend == "sqlite" else None
        clients: list[Client] = [raw, SqlalchemyText(engine, backend), SqlalchemyCore(engine)]
        extra: list[Client] = (
            [SqlalchemyCore(stock, "sqlalchemy_core (hint dropped)")] if stock else []
        )
        try:
            console.print(
                f"[bold]{NAME}[/]: {backend}: c) plan {sizes.plan:,} members, "
                f"d) read {sizes.read:,} records ..."
            )
            out["reads"], out["plan_answer"] = measure_reads(clients + extra, sizes, data)
            console.print(
                f"[bold]{NAME}[/]: {backend}: a) {sizes.txns:,} write transactions each ..."
            )
            out["txns"] = measure_txns(clients, sizes, serial)
            if isinstance(raw, PsycopgRaw):
                # SQLite's synchronous=NORMAL does not fsync each commit; this is PostgreSQL's same promise.
                for client in clients:
                    client.set_synchronous_commit("off")  # type: ignore[union-attr]
                out["txns_sync_off"] = measure_txns(clients, sizes, serial)
                for client in clients:
                    client.set_synchronous_commit("DEFAULT")  # type: ignore[union-attr]
            console.print(
                f"[bold]{NAME}[/]: {backend}: b) {sizes.bulk:,} rows: executemany, "
                "INSERT ... SELECT ..."
            )
            out["bulk"] = measure_bulk(clients, raw, sizes, data)
        finally:
            for client in clients + extra:
                client.close()
            engine.dispose()
            if stock is not None:
                stock.dispose()
    return out


# ---------------------------------------------------------------------------
# Report


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}x"


def print_report(payload: dict[str, Any]) -> None:
    txns = Table(title="a) small write transactions (BEGIN; clock CAS; INSERT object; COMMIT)")
    for column in ("backend", "library", "µs/txn (best round)", "median", "txn/s", "s", "÷ raw"):
        txns.add_column(column, justify="left" if column in ("backend", "library") else "right")
    bulk = Table(title=f"b) {payload['sizes']['bulk']:,} membership rows")
    reads = Table(title="c) plan counts, d) read records")
    for table in (bulk, reads):
        for column in ("backend", "op", "library", "s", "rows/s", "÷ raw"):
            table.add_column(
                column, justify="right" if column in ("s", "rows/s", "÷ raw") else "left"
            )
    for result in payload["backends"]:
        backend = result["backend"]
        for label, key in ((backend, "txns"), (f"{backend}, sync off", "txns_sync_off")):
            for r in result.get(key, []):
                txns.add_row(
                    label,
                    r["library"],
                    f"{r['us_per_txn']:.0f}",
                    f"{r['median_us_per_txn']:.0f}",
                    fmt_rate(r["txn_per_s"]),
                    f"{sum(r['rounds_s']):.2f}",
                    _ratio(r["vs_raw"]),
                )
        for table, key in ((bulk, "bulk"), (reads, "reads")):
            for r in result.get(key, []):
                table.add_row(
                    backend,
                    r["op"],
                    r["library"],
                    f"{r['seconds']:.3f}",
                    fmt_rate(r["rows_per_s"]),
                    _ratio(r["vs_raw"]),
                )
    for table in (txns, bulk, reads):
        console.print(table)


# ---------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_catalog_driver",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes (under a minute)")
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--name", help="result file name (default by mode)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    sizes = QUICK if args.quick else FULL
    name = args.name or (f"{NAME}_quick" if args.quick else NAME)
    load_at_start = load_average()
    started = time.perf_counter()
    if "postgresql" in args.backends:
        ensure_postgres()
    count = max(sizes.plan, sizes.bulk, sizes.read)
    data, seconds = timed(lambda: make_dataset(count, args.seed))
    console.print(f"[bold]{NAME}[/]: {count:,} object records generated in {seconds:.1f} s")
    payload: dict[str, Any] = {
        "quick": bool(args.quick),
        "sizes": vars(sizes),
        "libraries": {
            "sqlalchemy": sa.__version__,
            "psycopg": psycopg.__version__,
            "psycopg_impl": psycopg.pq.__impl__,
            "libpq": psycopg.pq.version(),
            "sqlite": sqlite3.sqlite_version,
        },
        "load_average_at_start": load_at_start,
        "backends": [run_backend(backend, sizes, data) for backend in args.backends],
    }
    return finish_run(payload, name=name, started=started, console=console, report=print_report)


if __name__ == "__main__":
    main()
