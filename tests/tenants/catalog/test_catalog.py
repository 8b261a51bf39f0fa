"""The catalog: its timestamp oracle and its migrations, on both backends.

Each test taking ``store`` or ``new_catalog_uri`` runs once on SQLite and once on
PostgreSQL (tests/conftest.py); the few that probe a SQLite file say so.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tenants.catalog import postgres
from tenants.catalog.base import Catalog, open_catalog, wall_clock_us
from tenants.catalog.migrations import LATEST_VERSION, MIGRATIONS, ddl_fingerprint
from tenants.catalog.sqlite import connect, sqlite_path
from tenants.errors import CatalogVersionError, InvalidArgument, SchemaMismatch, StorageError
from tenants.objectstore.embedded import EmbeddedS3
from tenants.schema import TableSchema
from tenants.store import TableStore
from tenants.tenancy import find_tenant
from tests.conftest import ManualClock

SCHEMA = TableSchema.of([("k", "int64"), ("v", "string")], ["k"])


def batch(*keys: int) -> pa.Table:
    return pa.table({"k": pa.array(keys, pa.int64()), "v": [f"v{k}" for k in keys]})


@pytest.fixture
def store(
    s3_server: EmbeddedS3, bucket: str, new_catalog_uri: Callable[[], str], clock: ManualClock
) -> Iterator[TableStore]:
    """conftest's ``store``, on each backend in turn."""
    table_store = TableStore.open(
        new_catalog_uri(), f"s3://{bucket}/warehouse", s3=s3_server.settings, clock=clock
    )
    yield table_store
    table_store.close()


# ---------------------------------------------------------------------------
# The timestamp oracle


def test_commit_ts_is_strictly_increasing_even_when_the_clock_goes_backwards(
    store: TableStore, clock: ManualClock
) -> None:
    ahead = wall_clock_us() + 3_600_000_000
    clock.fixed = ahead
    created = store.create_tenant("acme").created_ts
    assert created == ahead  # a clock ahead of every commit is used as is
    clock.fixed = ahead - 86_400_000_000  # the clock steps back a day
    table_ts = store.create_table("acme", "db.t", SCHEMA).created_ts
    stamps = [store.write("acme", "db.t", upserts=batch(k)).ts for k in range(5)]
    assert [table_ts, *stamps] == [created + 1 + i for i in range(6)]
    assert store.now() == stamps[-1]
    clock.fixed = ahead + 1_000  # and forward again
    assert store.write("acme", "db.t", upserts=batch(9)).ts == ahead + 1_000


def test_commit_ts_is_allocated_once_per_transaction(store: TableStore, clock: ManualClock) -> None:
    with store.catalog.transaction() as tx:
        first = tx.commit_ts()
        clock.fixed = first + 1_000_000
        assert tx.commit_ts() == first
    assert store.now() == first


def test_rolled_back_transaction_does_not_advance_the_clock(
    store: TableStore, clock: ManualClock
) -> None:
    store.create_tenant("acme")
    store.create_table("acme", "db.t", SCHEMA)
    last = store.now()
    clock.fixed = last - 1_000  # behind: the next ts is exactly last + 1
    with pytest.raises(RuntimeError, match="abort"), store.catalog.transaction() as tx:
        assert tx.commit_ts() == last + 1
        raise RuntimeError("abort")
    assert store.now() == last
    # A write rejected after its ts was allocated (the batch is checked inside the
    # transaction) does not consume the ts either.
    with pytest.raises(
        SchemaMismatch,
        match=r"batch for acme/db\.t does not match the table schema: missing columns \['v'\]",
    ):
        store.write("acme", "db.t", upserts=pa.table({"k": [1]}))
    assert store.now() == last
    assert store.write("acme", "db.t", upserts=batch(1)).ts == last + 1


def test_concurrent_commits_get_distinct_ts_in_commit_order(store: TableStore) -> None:
    """Reads at each commit ts see exactly the commits with ts <= it."""
    store.create_tenant("acme")
    store.set_pitr("acme", 86_400_000_000)
    store.create_table("acme", "db.t", SCHEMA)
    results: dict[int, int] = {}
    errors: list[BaseException] = []

    def writer(base: int) -> None:
        try:
            for k in range(base, base + 4):
                results[k] = store.write("acme", "db.t", upserts=batch(k)).ts
        except BaseException as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(base,)) for base in (0, 100, 200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(set(results.values())) == len(results) == 12
    for ts in sorted(results.values()):
        visible = [r["k"] for r in store.read("acme", "db.t", ts).to_pylist()]
        assert visible == sorted(k for k, written in results.items() if written <= ts)


# ---------------------------------------------------------------------------
# Migrations


class UnmigratedCatalog(Catalog):
    """A catalog that does not migrate itself on open, to build older versions."""

    def _migrate(self) -> None:
        pass


def raw_catalog(uri: str, cls: type[Catalog] = UnmigratedCatalog) -> Any:
    """``cls`` on a plain connection to ``uri``, with the backend's dialect."""
    if postgres.is_postgres_uri(uri):
        return cls(postgres.connect(uri), uri, dialect=postgres.POSTGRES)
    return cls(connect(sqlite_path(uri)), uri)


def build_catalog_at(uri: str, version: int) -> None:
    """A catalog at ``version`` (0: an empty file or schema), with data where tables exist."""
    if version == 0:
        if not postgres.is_postgres_uri(uri):
            Path(sqlite_path(uri)).touch()
        return
    catalog = raw_catalog(uri)
    for step in range(1, version + 1):
        catalog.apply_migration(step)
    with catalog.transaction() as tx:
        # Columns of step 1 only: later steps may add columns, never remove these.
        tx.execute("UPDATE clock SET last_ts = 12345")
        tx.execute(
            "INSERT INTO tenants (id, name, state, created_ts) VALUES ('0ld', 'old', 'active', 100)"
        )
        if 3 <= version < 6:  # a pin of a job in flight, before pins named table and action
            tx.execute("INSERT INTO job_pins (job_id, object_id) VALUES ('j0b', '0bj')")
    catalog.close()


# Every column, index and constraint of the catalog's schema, schema-qualified
# names stripped so two catalogs (two schemas) compare equal.
PG_DDL = """
SELECT 'column', table_name || '.' || column_name,
       data_type || ' ' || is_nullable || ' ' || COALESCE(column_default, '') || ' '
       || COALESCE(character_maximum_length::text, '') || ' ' || ordinal_position::text
  FROM information_schema.columns WHERE table_schema = current_schema()
UNION ALL
SELECT 'index', indexname, replace(indexdef, current_schema() || '.', '')
  FROM pg_indexes WHERE schemaname = current_schema()
UNION ALL
SELECT 'constraint', conrelid::regclass::text || '.' || conname, pg_get_constraintdef(oid)
  FROM pg_constraint WHERE connamespace = current_schema()::regnamespace
ORDER BY 1, 2
"""


def ddl(uri: str) -> list[tuple[str, str, str]]:
    if postgres.is_postgres_uri(uri):
        catalog = raw_catalog(uri)
        try:
            with catalog.snapshot() as tx:
                rows = tx.tuples(PG_DDL)
        finally:
            catalog.close()
    else:
        conn = sqlite3.connect(sqlite_path(uri))
        try:
            rows = conn.execute(
                "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name"
            ).fetchall()
        finally:
            conn.close()
    return [(t, n, " ".join((s or "").split())) for t, n, s in rows]


def meta(uri: str) -> dict[str, str]:
    catalog = raw_catalog(uri)
    try:
        with catalog.snapshot() as tx:
            return {str(k): str(v) for k, v in tx.tuples("SELECT key, value FROM meta")}
    finally:
        catalog.close()


def set_meta(uri: str, key: str, value: str) -> None:
    catalog = raw_catalog(uri)
    try:
        with catalog.transaction() as tx:
            tx.execute("UPDATE meta SET value = ? WHERE key = ?", (value, key))
    finally:
        catalog.close()


def test_migration_steps_are_consistent() -> None:
    assert LATEST_VERSION == len(MIGRATIONS) >= 1
    fingerprints = [ddl_fingerprint(v) for v in range(LATEST_VERSION + 1)]
    assert len(set(fingerprints)) == len(fingerprints)


@pytest.mark.parametrize("version", range(0, LATEST_VERSION))
def test_older_catalog_migrates_to_latest_keeping_its_data(
    new_catalog_uri: Callable[[], str], version: int
) -> None:
    fresh = new_catalog_uri()
    open_catalog(fresh).close()
    old = new_catalog_uri()
    build_catalog_at(old, version)

    catalog = open_catalog(old)
    try:
        assert catalog.schema_version == LATEST_VERSION
        if version:
            with catalog.snapshot() as tx:
                assert tx.last_ts() == 12345
                tenant = find_tenant(tx, "old")
                pins = tx.tuples("SELECT job_id, table_id, object_id, action FROM job_pins")
            assert (tenant.id, tenant.state, tenant.created_ts) == ("0ld", "active", 100)
            if version >= 3:
                assert pins == ([("j0b", "", "0bj", "legacy")] if version < 6 else [])
    finally:
        catalog.close()
    # A catalog with tenants from before write intents asks GC for one deep sweep.
    intents = next(
        i for i, (what, _) in enumerate(MIGRATIONS, 1) if what.startswith("write intents")
    )
    assert meta(old) == {
        "schema_version": str(LATEST_VERSION),
        "ddl_fingerprint": ddl_fingerprint(LATEST_VERSION),
        **({"gc_needs_deep": "1"} if 0 < version < intents else {}),
    }
    assert ddl(old) == ddl(fresh)

    # Reopening a migrated catalog changes nothing.
    migrated = ddl(old)
    open_catalog(old).close()
    assert ddl(old) == migrated
    assert meta(old)["schema_version"] == str(LATEST_VERSION)


def test_reopening_a_catalog_keeps_its_clock_and_data(
    new_catalog_uri: Callable[[], str], tmp_path: Path
) -> None:
    uri = new_catalog_uri()
    store = TableStore.open(uri, f"file://{tmp_path / 'wh'}")
    store.create_tenant("acme")
    store.create_table("acme", "db.t", SCHEMA)
    ts = store.write("acme", "db.t", upserts=batch(1, 2)).ts
    store.close()
    reopened = TableStore.open(uri, f"file://{tmp_path / 'wh'}")
    try:
        assert reopened.now() == ts
        assert reopened.read("acme", "db.t").to_pylist() == [
            {"k": 1, "v": "v1"},
            {"k": 2, "v": "v2"},
        ]
    finally:
        reopened.close()


def test_catalog_from_a_newer_rewind_is_refused_untouched(
    new_catalog_uri: Callable[[], str],
) -> None:
    uri = new_catalog_uri()
    open_catalog(uri).close()
    set_meta(uri, "schema_version", str(LATEST_VERSION + 1))
    before = ddl(uri)
    with pytest.raises(
        CatalogVersionError, match=rf"schema version {LATEST_VERSION + 1}.*upgrade Rewind"
    ):
        open_catalog(uri)
    assert meta(uri)["schema_version"] == str(LATEST_VERSION + 1)
    assert ddl(uri) == before


@pytest.mark.parametrize("version", range(1, LATEST_VERSION + 1))
def test_catalog_with_a_tampered_ddl_fingerprint_is_refused_untouched(
    new_catalog_uri: Callable[[], str], version: int
) -> None:
    uri = new_catalog_uri()
    build_catalog_at(uri, version)
    set_meta(uri, "ddl_fingerprint", "0" * 64)
    before = ddl(uri)
    with pytest.raises(
        CatalogVersionError, match=rf"schema version {version} has DDL fingerprint 0{{64}}"
    ):
        open_catalog(uri)
    assert ddl(uri) == before
    assert meta(uri) == {"schema_version": str(version), "ddl_fingerprint": "0" * 64}


def test_two_processes_opening_a_new_catalog_at_once_both_succeed(
    new_catalog_uri: Callable[[], str],
) -> None:
    """Another opener migrates between this opener's version check and its first step.

    Two CLI invocations on a fresh catalog (or two workers sharing one) race
    like this; each step must notice it was already applied.
    """
    uri = new_catalog_uri()
    raced: list[int] = []

    class RacedCatalog(Catalog):
        def apply_migration(self, version: int) -> None:
            if not raced:
                raced.append(version)
                open_catalog(uri).close()  # the other process wins the race
            super().apply_migration(version)

    catalog = raw_catalog(uri, RacedCatalog)
    try:
        assert raced == [1]
        assert catalog.schema_version == LATEST_VERSION
    finally:
        catalog.close()


@pytest.mark.parametrize("uri", ["mysql://x", "catalog.db", "sqlite://host/c.db"])
def test_unsupported_catalog_uri_is_refused(uri: str) -> None:
    with pytest.raises(InvalidArgument, match="unsupported catalog|invalid catalog"):
        open_catalog(uri)


@pytest.mark.parametrize(
    "uri",
    [
        "postgresql://postgres:hunter2@127.0.0.1:1/rewind",  # nothing listens on port 1
        "postgresql://postgres:hunter2@127.0.0.1:5432/rewind_no_such_database",
    ],
)
def test_postgres_catalog_errors_never_show_the_password(uri: str) -> None:
    with pytest.raises(StorageError, match="cannot open catalog") as raised:
        open_catalog(uri)
    assert "hunter2" not in str(raised.value)
    assert "postgres:***@127.0.0.1" in str(raised.value)


def test_postgres_catalog_uri_naming_no_database_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="names no database"):
        open_catalog("postgresql://postgres:hunter2@127.0.0.1:5432")


def test_last_dropped_holder_of_a_name_ignores_tenants_never_dropped(store: TableStore) -> None:
    """``ORDER BY dropped_ts DESC`` puts NULLs last on SQLite and first on PostgreSQL:
    a staging tenant (never dropped) under the name must not hide the dropped one."""
    from tenants.catalog.engine.staging import insert_staging_tenant
    from tenants.catalog.tenants import insert_tenant, last_dropped_id, retire_tenant_row

    with store.catalog.transaction() as tx:
        ts = tx.commit_ts()
        insert_tenant(tx, "t0ld", "acme", ts)
        assert retire_tenant_row(tx, "t0ld", ts, ts + 1)
        insert_staging_tenant(tx, "t5tg", "acme", ts)
    with store.catalog.snapshot() as tx:
        assert last_dropped_id(tx, "acme") == "t0ld"
