"""The catalog: its timestamp oracle and its migrations."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import ManualClock

from tenants.catalog.base import Catalog, open_catalog, wall_clock_us
from tenants.catalog.migrations import LATEST_VERSION, MIGRATIONS, ddl_fingerprint
from tenants.catalog.sqlite import connect
from tenants.errors import CatalogVersionError, InvalidArgument, SchemaMismatch
from tenants.schema import TableSchema
from tenants.store import TableStore
from tenants.tenancy import find_tenant

SCHEMA = TableSchema.of([("k", "int64"), ("v", "string")], ["k"])


def batch(*keys: int) -> pa.Table:
    return pa.table({"k": pa.array(keys, pa.int64()), "v": [f"v{k}" for k in keys]})


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
    table_ts = store.create_table("acme", "db", "t", SCHEMA).created_ts
    stamps = [store.write("acme", "db", "t", upserts=batch(k)).ts for k in range(5)]
    assert [table_ts, *stamps] == [created + 1 + i for i in range(6)]
    assert store.now() == stamps[-1]
    clock.fixed = ahead + 1_000  # and forward again
    assert store.write("acme", "db", "t", upserts=batch(9)).ts == ahead + 1_000


def test_commit_ts_is_allocated_once_per_transaction(store: TableStore, clock: ManualClock) -> None:
    with store.catalog.transaction() as tx:
        first = tx.commit_ts()
        clock.fixed = first + 1_000_000
        assert tx.commit_ts() == first
    assert store.now() == first


def test_rolled_back_transaction_does_not_advance_the_clock(store: TableStore, clock: ManualClock) -> None:
    store.create_tenant("acme")
    store.create_table("acme", "db", "t", SCHEMA)
    last = store.now()
    clock.fixed = last - 1_000  # behind: the next ts is exactly last + 1
    with pytest.raises(RuntimeError, match="abort"), store.catalog.transaction() as tx:
        assert tx.commit_ts() == last + 1
        raise RuntimeError("abort")
    assert store.now() == last
    # A write rejected after its ts was allocated (the batch is checked inside the
    # transaction) does not consume the ts either.
    with pytest.raises(SchemaMismatch):
        store.write("acme", "db", "t", upserts=pa.table({"k": [1]}))
    assert store.now() == last
    assert store.write("acme", "db", "t", upserts=batch(1)).ts == last + 1


def test_concurrent_commits_get_distinct_ts_in_commit_order(store: TableStore) -> None:
    """Reads at each commit ts see exactly the commits with ts <= it."""
    store.create_tenant("acme")
    store.set_pitr("acme", 86_400_000_000)
    store.create_table("acme", "db", "t", SCHEMA)
    results: dict[int, int] = {}
    errors: list[BaseException] = []

    def writer(base: int) -> None:
        try:
            for k in range(base, base + 4):
                results[k] = store.write("acme", "db", "t", upserts=batch(k)).ts
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
        visible = [r["k"] for r in store.read("acme", "db", "t", ts).to_pylist()]
        assert visible == sorted(k for k, written in results.items() if written <= ts)


# ---------------------------------------------------------------------------
# Migrations


class UnmigratedCatalog(Catalog):
    """A catalog that does not migrate itself on open, to build older versions."""

    def _migrate(self) -> None:
        pass


def build_catalog_at(path: Path, version: int) -> None:
    """A catalog file at ``version`` (0: an empty file), with data where tables exist."""
    if version == 0:
        path.touch()
        return
    catalog = UnmigratedCatalog(connect(str(path)), f"sqlite:///{path}")
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


def ddl(path: Path) -> list[tuple[str, str, str]]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name"
        ).fetchall()
    finally:
        conn.close()
    return [(t, n, " ".join((s or "").split())) for t, n, s in rows]


def meta(path: Path) -> dict[str, str]:
    conn = sqlite3.connect(path)
    try:
        return dict(conn.execute("SELECT key, value FROM meta").fetchall())
    finally:
        conn.close()


def set_meta(path: Path, key: str, value: str) -> None:
    conn = sqlite3.connect(path)
    try:
        with conn:
            conn.execute("UPDATE meta SET value = ? WHERE key = ?", (value, key))
    finally:
        conn.close()


def test_migration_steps_are_consistent() -> None:
    assert LATEST_VERSION == len(MIGRATIONS) >= 1
    fingerprints = [ddl_fingerprint(v) for v in range(LATEST_VERSION + 1)]
    assert len(set(fingerprints)) == len(fingerprints)


@pytest.mark.parametrize("version", range(0, LATEST_VERSION))
def test_older_catalog_migrates_to_latest_keeping_its_data(tmp_path: Path, version: int) -> None:
    fresh = tmp_path / "fresh.db"
    open_catalog(f"sqlite:///{fresh}").close()
    old = tmp_path / "old.db"
    build_catalog_at(old, version)

    catalog = open_catalog(f"sqlite:///{old}")
    try:
        assert catalog.schema_version == LATEST_VERSION
        if version:
            with catalog.snapshot() as tx:
                assert tx.last_ts() == 12345
                tenant = find_tenant(tx, "old")
            assert (tenant.id, tenant.state, tenant.created_ts) == ("0ld", "active", 100)
            if version >= 3:
                pins = tx.tuples("SELECT job_id, table_id, object_id, action FROM job_pins")
                assert pins == ([("j0b", "", "0bj", "legacy")] if version < 6 else [])
    finally:
        catalog.close()
    assert meta(old) == {"schema_version": str(LATEST_VERSION), "ddl_fingerprint": ddl_fingerprint(LATEST_VERSION)}
    assert ddl(old) == ddl(fresh)

    # Reopening a migrated catalog changes nothing.
    migrated = ddl(old)
    open_catalog(f"sqlite:///{old}").close()
    assert ddl(old) == migrated
    assert meta(old)["schema_version"] == str(LATEST_VERSION)


def test_reopening_a_catalog_keeps_its_clock_and_data(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'c.db'}"
    store = TableStore.open(uri, f"file://{tmp_path / 'wh'}")
    store.create_tenant("acme")
    store.create_table("acme", "db", "t", SCHEMA)
    ts = store.write("acme", "db", "t", upserts=batch(1, 2)).ts
    store.close()
    reopened = TableStore.open(uri, f"file://{tmp_path / 'wh'}")
    try:
        assert reopened.now() == ts
        assert reopened.read("acme", "db", "t").to_pylist() == [{"k": 1, "v": "v1"}, {"k": 2, "v": "v2"}]
    finally:
        reopened.close()


def test_catalog_from_a_newer_rewind_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    open_catalog(f"sqlite:///{path}").close()
    set_meta(path, "schema_version", str(LATEST_VERSION + 1))
    before = ddl(path)
    with pytest.raises(CatalogVersionError, match=rf"schema version {LATEST_VERSION + 1}.*upgrade Rewind"):
        open_catalog(f"sqlite:///{path}")
    assert meta(path)["schema_version"] == str(LATEST_VERSION + 1)
    assert ddl(path) == before


@pytest.mark.parametrize("version", range(1, LATEST_VERSION + 1))
def test_catalog_with_a_tampered_ddl_fingerprint_is_refused_untouched(tmp_path: Path, version: int) -> None:
    path = tmp_path / "c.db"
    build_catalog_at(path, version)
    set_meta(path, "ddl_fingerprint", "0" * 64)
    before = ddl(path)
    with pytest.raises(CatalogVersionError, match=rf"schema version {version} has DDL fingerprint 0{{64}}"):
        open_catalog(f"sqlite:///{path}")
    assert ddl(path) == before
    assert meta(path) == {"schema_version": str(version), "ddl_fingerprint": "0" * 64}


def test_two_processes_opening_a_new_catalog_at_once_both_succeed(tmp_path: Path) -> None:
    """Another opener migrates between this opener's version check and its first step.

    Two CLI invocations on a fresh catalog (or two workers sharing one) race
    like this; each step must notice it was already applied.
    """
    path = tmp_path / "c.db"
    uri = f"sqlite:///{path}"
    raced: list[int] = []

    class RacedCatalog(Catalog):
        def apply_migration(self, version: int) -> None:
            if not raced:
                raced.append(version)
                open_catalog(uri).close()  # the other process wins the race
            super().apply_migration(version)

    catalog = RacedCatalog(connect(str(path)), uri)
    try:
        assert raced == [1]
        assert catalog.schema_version == LATEST_VERSION
    finally:
        catalog.close()


@pytest.mark.parametrize("uri", ["postgresql://localhost/rewind", "mysql://x", "catalog.db"])
def test_unsupported_catalog_uri_is_refused(uri: str) -> None:
    with pytest.raises(InvalidArgument, match="unsupported catalog"):
        open_catalog(uri)
