"""The core story on a PostgreSQL catalog and a moto warehouse.

Tenant, table, writes, a snapshot, a read as of it, a clone and a physical
restore in place, a GC dry run, and bad inputs that change nothing: the path
every user walks, on the shared backend (tests/tenants/catalog/test_catalog.py runs the
catalog's own tests on both backends).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest

from engine.gc.run import run_gc
from engine.restore.job import restore_tenant
from tenants.catalog import postgres
from tenants.catalog.dialect import to_pyformat
from tenants.errors import AlreadyExists, CatalogBusy, NotFound
from tenants.objectstore.embedded import EmbeddedS3
from tenants.schema import TableSchema
from tenants.store import TableStore
from tests.conftest import ManualClock
from tests.helpers.gc import bucket_listing
from tests.helpers.paths import ROOT

SCHEMA = TableSchema.of([("k", "int64"), ("v", "string")], ["k"])
TABLES = (
    "meta", "clock", "tenants", "databases", "tables", "schema_versions", "objects",
    "membership", "membership_bases", "member_totals", "snapshots", "snapshot_schedules", "pitr_windows", "restore_jobs",
    "restore_plans", "restore_tasks", "job_pins", "gc_pending", "commits",
)  # fmt: skip


def batch(*keys: int, tag: str = "v") -> pa.Table:
    return pa.table({"k": pa.array(keys, pa.int64()), "v": [f"{tag}{k}" for k in keys]})


def keys(table: pa.Table) -> list[int]:
    return sorted(r["k"] for r in table.to_pylist())


@pytest.fixture
def pg_uri(new_pg_catalog_uri: Callable[[], str]) -> str:
    return new_pg_catalog_uri()


@pytest.fixture
def pg_store(
    s3_server: EmbeddedS3, bucket: str, pg_uri: str, clock: ManualClock
) -> Iterator[TableStore]:
    store = TableStore.open(pg_uri, f"s3://{bucket}/warehouse", s3=s3_server.settings, clock=clock)
    yield store
    store.close()


def catalog_rows(store: TableStore) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every catalog table, sorted: what "changed nothing" compares."""
    with store.catalog.snapshot() as tx:
        return {t: sorted(tx.tuples(f"SELECT * FROM {t}"), key=repr) for t in TABLES}


def test_core_story_runs_end_to_end_on_a_postgres_catalog(pg_store: TableStore) -> None:
    store = pg_store
    assert store.catalog.dialect.name == "postgresql"
    store.create_tenant("acme")
    store.create_table("acme", "db.t", SCHEMA)
    store.write("acme", "db.t", upserts=batch(1, 2, 3))
    store.write("acme", "db.t", upserts=batch(4))
    mon = store.create_snapshot("acme", "mon")
    store.write("acme", "db.t", upserts=batch(2, tag="w"), deletes=pa.table({"k": [1]}))
    store.write("acme", "db.t", upserts=batch(5))

    at_mon = [{"k": k, "v": f"v{k}"} for k in (1, 2, 3, 4)]
    assert sorted(store.read("acme", "db.t", "mon").to_pylist(), key=str) == sorted(at_mon, key=str)
    assert store.read("acme", "db.t", mon.ts).num_rows == 4
    assert keys(store.read("acme", "db.t")) == [2, 3, 4, 5]
    assert [s.name for s in store.snapshots("acme")] == ["mon"]

    clone = restore_tenant(store, "acme", "mon", to="acme_copy", executor="local")
    assert clone.tenant.name == "acme_copy"
    assert keys(store.read("acme_copy", "db.t")) == [1, 2, 3, 4]
    assert keys(store.read("acme", "db.t")) == [2, 3, 4, 5]  # the source is untouched

    before = store.tenant("acme")
    in_place = restore_tenant(store, "acme", "mon", executor="local", method="physical")
    assert in_place.method == "physical"
    restored = store.tenant("acme")
    assert restored.id != before.id and restored.source_tenant_id == before.id
    assert sorted(store.read("acme", "db.t").to_pylist(), key=str) == sorted(at_mon, key=str)
    assert [t.state for t in store.tenants(include_dropped=True) if t.id == before.id] == [
        "dropped"
    ]

    listing = bucket_listing(store)
    rows = catalog_rows(store)
    report = run_gc(store, dry_run=True)
    assert report.dry_run
    assert {r.tenant for r in report.reclaimable} >= {"acme"}
    assert bucket_listing(store) == listing
    assert catalog_rows(store) == rows


def test_bad_inputs_change_nothing_on_a_postgres_catalog(pg_store: TableStore) -> None:
    store = pg_store
    store.create_tenant("acme")
    store.create_table("acme", "db.t", SCHEMA)
    store.write("acme", "db.t", upserts=batch(1, 2))
    store.create_snapshot("acme", "mon")
    rows, listing = catalog_rows(store), bucket_listing(store)

    with pytest.raises(AlreadyExists, match="tenant 'acme' already exists"):
        store.create_tenant("acme")
    with pytest.raises(AlreadyExists, match="tenant 'acme' already has a snapshot named 'mon'"):
        store.create_snapshot("acme", "mon")
    with pytest.raises(NotFound, match="tenant 'acme' has no snapshot 'no-such-snapshot'"):
        restore_tenant(store, "acme", "no-such-snapshot", executor="local")
    with pytest.raises(NotFound, match="tenant 'nobody' does not exist"):
        restore_tenant(store, "nobody", "mon", executor="local")
    with pytest.raises(NotFound, match=r"table db\.nope does not exist in tenant 'acme'"):
        store.read("acme", "db.nope")
    assert catalog_rows(store) == rows
    assert bucket_listing(store) == listing
    # The catalog's connection is usable after each failed transaction.
    store.write("acme", "db.t", upserts=batch(3))
    assert keys(store.read("acme", "db.t")) == [1, 2, 3]


def test_postgres_catalog_rows_have_sqlite_python_types(pg_store: TableStore) -> None:
    """Sums of BIGINT columns are numeric on PostgreSQL: callers still get ints."""
    pg_store.create_tenant("acme")
    pg_store.create_table("acme", "db.t", SCHEMA)
    pg_store.write("acme", "db.t", upserts=batch(1, 2))
    with pg_store.catalog.snapshot() as tx:
        ((total, count, most, ratio),) = tx.tuples(
            "SELECT SUM(byte_size), COUNT(*), MAX(created_ts), SUM(byte_size) / 2.5 FROM objects"
        )
        row = tx.one("SELECT * FROM objects")
    assert type(total) is int and type(count) is int and type(most) is int
    assert not isinstance(ratio, int)
    assert row is not None and type(row["sorted"]) is int and type(row["object_key"]) is str


def test_a_busy_postgres_catalog_names_the_holder_and_readers_never_wait(
    pg_store: TableStore,
    pg_uri: str,
    monkeypatch: pytest.MonkeyPatch,
    s3_server: EmbeddedS3,
    bucket: str,
) -> None:
    pg_store.create_tenant("acme")
    pg_store.create_table("acme", "db.t", SCHEMA)
    pg_store.write("acme", "db.t", upserts=batch(1))
    monkeypatch.setattr(postgres, "LOCK_TIMEOUT_S", 0.5)
    other = TableStore.open(pg_uri, f"s3://{bucket}/warehouse", s3=s3_server.settings)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with pg_store.catalog.transaction() as tx:
            tx.commit_ts()
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(30)
        assert keys(other.read("acme", "db.t")) == [1]  # a reader does not wait
        with pytest.raises(
            CatalogBusy, match=rf"busy, retry: .*held by rewind pid {os.getpid()} "
        ) as busy:
            other.write("acme", "db.t", upserts=batch(2))
        assert "lock timeout" in str(busy.value)
    finally:
        release.set()
        holder.join()
    other.write("acme", "db.t", upserts=batch(2))  # the lock is free again
    assert keys(pg_store.read("acme", "db.t")) == [1, 2]
    other.close()


def test_statements_reach_postgres_with_their_literals_intact(pg_store: TableStore) -> None:
    """``?`` inside a quoted literal stays, a literal ``%`` is doubled for psycopg,
    and SQLite's ``INDEXED BY`` hint is dropped, once per statement text."""
    sql = "SELECT '?%' AS q, ? AS p, COUNT(*) AS n FROM objects o INDEXED BY objects_plan WHERE o.object_key LIKE '%x'"
    assert to_pyformat(sql) == (
        "SELECT '?%%' AS q, %s AS p, COUNT(*) AS n FROM objects o WHERE o.object_key LIKE '%%x'"
    )
    assert to_pyformat(sql) is to_pyformat(sql)  # cached
    with pg_store.catalog.snapshot() as tx:
        assert tx.one(sql, (7,)) == {"q": "?%", "p": 7, "n": 0}


def test_a_lost_connection_is_one_clear_error_and_the_next_command_reconnects(
    pg_store: TableStore, pg_uri: str
) -> None:
    import psycopg

    from tenants.errors import CatalogUnavailable

    pg_store.create_tenant("acme")
    pid = pg_store.catalog._conn.info.backend_pid
    with psycopg.connect(pg_uri, autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)
    with pytest.raises(CatalogUnavailable, match="lost the connection to catalog postgresql://"):
        pg_store.create_tenant("globex")
    assert [t.name for t in pg_store.tenants()] == ["acme"]  # reconnected; globex never landed
    pg_store.create_tenant("globex")
    assert [t.name for t in pg_store.tenants()] == ["acme", "globex"]


def test_the_spark_submit_job_restores_on_a_postgres_catalog(
    pg_store: TableStore, pg_uri: str, bucket: str, s3_server: EmbeddedS3
) -> None:
    """``spark-submit engine/submit/restore_tenant.py --catalog postgresql://...``: the
    batch job takes a PostgreSQL URI like every other entry point (a real
    spark-submit from the installed pyspark, local master, Spark executor)."""
    import subprocess
    import sys
    from pathlib import Path

    import pyspark

    pg_store.create_tenant("acme")
    pg_store.create_table("acme", "db.t", SCHEMA)
    pg_store.write("acme", "db.t", upserts=batch(1, 2, 3))
    pg_store.create_snapshot("acme", "mon")
    pg_store.write("acme", "db.t", upserts=batch(2, 4, tag="late"))
    pg_store.compact("acme", "db.t")  # one object straddles "mon": Spark rewrites it
    root = ROOT
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": str(root),
    }
    done = subprocess.run(
        [str(submit), "--master", "local[1]", str(root / "engine/submit/restore_tenant.py"),
         "--catalog", pg_uri, "--warehouse", f"s3://{bucket}/warehouse", "--json",
         "acme", "--snapshot", "mon", "--to", "acme_copy", "--executor", "spark"],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert keys(pg_store.read("acme_copy", "db.t")) == [1, 2, 3]
    assert pg_store.read("acme_copy", "db.t").column("v").to_pylist() == ["v1", "v2", "v3"]
