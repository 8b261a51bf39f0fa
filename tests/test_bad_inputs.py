"""Every bad input gets a clear, specific error and changes nothing.

Each case runs against a store holding a live tenant with data and a dropped
tenant, and checks that afterwards the catalog (every row of every table,
including the clock's ``last_ts``) and the bucket (every key) are exactly as
before.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import boto3
import pyarrow as pa
import pytest

import tenants.catalog.sqlite as sqlite_backend
from engine.backup.api import backups, create_backup, delete_backup, restore_backup, show_backup
from tenants.errors import (
    AlreadyExists,
    CatalogBusy,
    CorruptObject,
    InvalidArgument,
    InvalidName,
    KeyViolation,
    NotFound,
    RewindError,
    SchemaMismatch,
    TenantDropped,
    TransientError,
    UnprotectedTime,
)
from tenants.objectstore import open_object_store
from tenants.objectstore.embedded import EmbeddedS3
from tenants.schema import Column, TableSchema
from tenants.store import TableStore
from tests.helpers.locks import write_lock_held

SCHEMA = TableSchema(
    (
        Column("id", "int64"),
        Column("region", "string"),
        Column("amount", "double"),
        Column("qty", "int32", nullable=False),
    ),
    ("id", "region"),
)


def rows(**columns: list[Any] | None) -> pa.Table:
    """A batch; columns not given take valid defaults for one row each; None leaves one out."""
    base: dict[str, list[Any] | None] = {"id": [1], "region": ["eu"], "amount": [1.5], "qty": [2]}
    base.update(columns)
    return pa.table({name: values for name, values in base.items() if values is not None})


def keys(**columns: list[Any] | None) -> pa.Table:
    base: dict[str, list[Any] | None] = {"id": [1], "region": ["eu"]}
    base.update(columns)
    return pa.table({name: values for name, values in base.items() if values is not None})


@dataclass(frozen=True)
class World:
    store: TableStore
    bucket: str
    s3: EmbeddedS3
    gone_ref: str  # name@id of a dropped tenant


@dataclass(frozen=True)
class State:
    catalog: dict[str, list[tuple[Any, ...]]]
    last_ts: int
    keys: tuple[str, ...]


def state(world: World) -> State:
    """Everything a failed call could have changed: every catalog row and every key."""
    with world.store.catalog.snapshot() as tx:
        tables = world.store.catalog.dialect.table_names(tx)
        catalog = {
            name: sorted((tuple(r.values()) for r in tx.all(f'SELECT * FROM "{name}"')), key=repr)
            for name in tables
        }
        last_ts = tx.last_ts()
    client = boto3.client("s3", **world.s3.settings.to_boto3())
    found: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=world.bucket):
        found += [item["Key"] for item in page.get("Contents", [])]
    return State(catalog, last_ts, tuple(sorted(found)))


@pytest.fixture
def world(store: TableStore, bucket: str, s3_server: EmbeddedS3) -> World:
    store.create_tenant("acme")
    store.create_table("acme", "db.orders", SCHEMA)
    store.write(
        "acme",
        "db.orders",
        upserts=rows(id=[1, 2], region=["eu", "us"], amount=[1.0, None], qty=[1, 2]),
    )
    store.write("acme", "db.orders", deletes=keys(id=[2], region=["us"]))
    store.create_tenant("gone")
    store.create_table("gone", "db.orders", SCHEMA)
    store.write("gone", "db.orders", upserts=rows())
    gone = store.drop_tenant("gone")
    return World(store, bucket, s3_server, gone.ref)


Call = Callable[[World], Any]


def write(tenant: str = "acme", table: Any = "db.orders", **kwargs: Any) -> Call:
    return lambda w: w.store.write(tenant, table, **kwargs)


CASES: list[tuple[str, Call, type[RewindError], str]] = [
    # names
    (
        "tenant-uppercase",
        lambda w: w.store.create_tenant("Acme"),
        InvalidName,
        r"invalid tenant name 'Acme'",
    ),
    ("tenant-empty", lambda w: w.store.create_tenant(""), InvalidName, r"invalid tenant name ''"),
    (
        "tenant-digit-first",
        lambda w: w.store.create_tenant("9lives"),
        InvalidName,
        r"invalid tenant name",
    ),
    ("tenant-too-long", lambda w: w.store.create_tenant("a" * 64), InvalidName, r"1-63 characters"),
    (
        "tenant-slash",
        lambda w: w.store.create_tenant("acme/../x"),
        InvalidName,
        r"invalid tenant name",
    ),
    (
        "tenant-at",
        lambda w: w.store.create_tenant("new@x"),
        InvalidName,
        r"invalid tenant name 'new@x'",
    ),
    (
        "database-digit-first",
        lambda w: w.store.create_table("acme", "1db.t", SCHEMA),
        InvalidName,
        r"invalid database name '1db'",
    ),
    (
        "table-dash",
        lambda w: w.store.create_table("acme", "db.bad-table", SCHEMA),
        InvalidName,
        r"invalid table name 'bad-table'",
    ),
    (
        "table-too-long",
        lambda w: w.store.create_table("acme", f"db.{'t' * 129}", SCHEMA),
        InvalidName,
        r"1-128 characters",
    ),
    (
        "column-space",
        lambda w: TableSchema.of([("bad col", "int64")], ["bad col"]),
        InvalidName,
        r"invalid column name 'bad col'",
    ),
    (
        "column-reserved",
        lambda w: TableSchema.of([("k", "int64"), ("__ts", "int64")], ["k"]),
        InvalidName,
        r"reserved",
    ),
    (
        "write-table-dot",
        write(table="db.or.ders", upserts=rows()),
        InvalidName,
        r"invalid table reference 'db\.or\.ders': expected DB\.TABLE",
    ),
    (
        "write-database-space",
        write(table="d b.orders", upserts=rows()),
        InvalidName,
        r"invalid database name 'd b'",
    ),
    (
        "write-tenant-uppercase",
        write(tenant="ACME", upserts=rows()),
        InvalidName,
        r"invalid tenant name 'ACME'",
    ),
    (
        "read-table-name",
        lambda w: w.store.read("acme", "db.x;drop"),
        InvalidName,
        r"invalid table name",
    ),
    # a table is one "db.table" string (TableStore, as read_arrow and the engine)
    (
        "read-table-without-database",
        lambda w: w.store.read("acme", "orders"),
        InvalidName,
        r"invalid table reference 'orders': expected DB\.TABLE",
    ),
    (
        "write-table-not-a-string",
        write(table=("db", "orders"), upserts=rows()),
        InvalidName,
        r"invalid table reference \('db', 'orders'\): expected DB\.TABLE",
    ),
    (
        "create-table-none",
        lambda w: w.store.create_table("acme", cast(str, None), SCHEMA),
        InvalidName,
        r"invalid table reference None: expected DB\.TABLE",
    ),
    (
        "compact-table-not-a-string",
        lambda w: w.store.compact("acme", cast(str, 7)),
        InvalidName,
        r"invalid table reference 7: expected DB\.TABLE",
    ),
    (
        "compact-database-name",
        lambda w: w.store.compact("acme", "d b.*"),
        InvalidName,
        r"invalid database name 'd b'",
    ),
    # missing things
    (
        "write-unknown-tenant",
        write(tenant="nobody", upserts=rows()),
        NotFound,
        r"tenant 'nobody' does not exist",
    ),
    (
        "write-unknown-table",
        write(table="db.nothere", upserts=rows()),
        NotFound,
        r"table db\.nothere does not exist",
    ),
    (
        "write-unknown-database",
        write(table="nodb.orders", upserts=rows()),
        NotFound,
        r"table nodb\.orders does not exist",
    ),
    (
        "read-unknown-table",
        lambda w: w.store.read("acme", "db.nothere"),
        NotFound,
        r"table db\.nothere does not exist",
    ),
    (
        "create-table-unknown-tenant",
        lambda w: w.store.create_table("nobody", "db.t", SCHEMA),
        NotFound,
        r"tenant 'nobody' does not exist",
    ),
    (
        "drop-unknown-tenant",
        lambda w: w.store.drop_tenant("nobody"),
        NotFound,
        r"tenant 'nobody' does not exist",
    ),
    (
        "drop-unknown-table",
        lambda w: w.store.drop_table("acme", "db.nothere"),
        NotFound,
        r"table db\.nothere does not exist",
    ),
    (
        "compact-unknown-tenant",
        lambda w: w.store.compact("nobody"),
        NotFound,
        r"tenant 'nobody' does not exist",
    ),
    (
        "compact-unknown-table",
        lambda w: w.store.compact("acme", "db.nothere"),
        NotFound,
        r"table db\.nothere does not exist",
    ),
    # duplicates
    (
        "duplicate-tenant",
        lambda w: w.store.create_tenant("acme"),
        AlreadyExists,
        r"tenant 'acme' already exists",
    ),
    (
        "duplicate-table",
        lambda w: w.store.create_table("acme", "db.orders", SCHEMA),
        AlreadyExists,
        r"table db\.orders already exists",
    ),
    # batches that do not fit the schema
    ("missing-column", write(upserts=rows(qty=None)), SchemaMismatch, r"missing columns \['qty'\]"),
    (
        "extra-column",
        write(upserts=rows(bonus=[1])),
        SchemaMismatch,
        r"unexpected columns \['bonus'\]",
    ),
    (
        "uncastable-string",
        write(upserts=rows(qty=["many"])),
        SchemaMismatch,
        r"column 'qty' .* cannot be stored as int32",
    ),
    (
        "out-of-range",
        write(upserts=rows(qty=[2**40])),
        SchemaMismatch,
        r"column 'qty' .* cannot be stored as int32",
    ),
    (
        "fractional-int",
        write(upserts=rows(qty=[1.5])),
        SchemaMismatch,
        r"column 'qty' .* cannot be stored as int32",
    ),
    (
        "nested-value",
        write(upserts=rows(amount=[[1.0]])),
        SchemaMismatch,
        r"column 'amount' .* cannot be stored as double",
    ),
    (
        "null-in-not-null",
        write(upserts=rows(qty=[None])),
        SchemaMismatch,
        r"column 'qty' .* NOT NULL",
    ),
    (
        "delete-extra-column",
        write(deletes=keys(qty=[1])),
        SchemaMismatch,
        r"exactly the key columns",
    ),
    (
        "delete-missing-key-column",
        write(deletes=keys(region=None)),
        SchemaMismatch,
        r"exactly the key columns",
    ),
    (
        "delete-uncastable-key",
        write(deletes=keys(id=["x"])),
        SchemaMismatch,
        r"column 'id' .* cannot be stored as int64",
    ),
    # A valid upsert with an invalid delete in the same commit: the upsert is not written either.
    (
        "good-upsert-bad-delete",
        write(upserts=rows(id=[9]), deletes=keys(id=["x"])),
        SchemaMismatch,
        r"cannot be stored as int64",
    ),
    # keys
    ("null-key-upsert", write(upserts=rows(id=[None])), KeyViolation, r"null in key column 'id'"),
    (
        "null-key-delete",
        write(deletes=keys(region=[None])),
        KeyViolation,
        r"null in key column 'region'",
    ),
    (
        "duplicate-key-upsert",
        write(upserts=rows(id=[1, 1], region=["eu", "eu"], amount=[1.0, 2.0], qty=[1, 2])),
        KeyViolation,
        r"duplicate key",
    ),
    (
        "duplicate-key-delete",
        write(deletes=keys(id=[3, 3], region=["us", "us"])),
        KeyViolation,
        r"duplicate key",
    ),
    (
        "good-delete-duplicate-upsert",
        write(
            upserts=rows(id=[5, 5], region=["a", "a"], amount=[1.0, 2.0], qty=[1, 2]),
            deletes=keys(),
        ),
        KeyViolation,
        r"duplicate key",
    ),
    # dropped tenants
    (
        "write-dropped-by-id",
        lambda w: w.store.write(w.gone_ref, "db.orders", upserts=rows()),
        TenantDropped,
        r"was dropped",
    ),
    (
        "write-dropped-by-name",
        write(tenant="gone", upserts=rows()),
        NotFound,
        r"tenant 'gone' does not exist \(a dropped tenant gone@",
    ),
    (
        "create-table-dropped",
        lambda w: w.store.create_table(w.gone_ref, "db.t2", SCHEMA),
        TenantDropped,
        r"was dropped",
    ),
    ("compact-dropped", lambda w: w.store.compact(w.gone_ref), TenantDropped, r"was dropped"),
    ("drop-dropped", lambda w: w.store.drop_tenant(w.gone_ref), TenantDropped, r"was dropped"),
    # malformed arguments
    ("empty-write", write(), InvalidArgument, r"nothing to write to db\.orders"),
    ("zero-row-upserts", write(upserts=rows().slice(0, 0)), InvalidArgument, r"nothing to write"),
    (
        "zero-row-both",
        write(upserts=rows().slice(0, 0), deletes=keys().slice(0, 0)),
        InvalidArgument,
        r"nothing to write",
    ),
    (
        "bad-tenant-id",
        write(tenant="acme@not-an-id!", upserts=rows()),
        InvalidArgument,
        r"invalid tenant id",
    ),
    (
        "unsupported-type",
        lambda w: TableSchema.of([("k", "int64"), ("v", "varchar2")], ["k"]),
        InvalidArgument,
        r"unsupported column type 'varchar2'",
    ),
    (
        "read-in-the-future",
        lambda w: w.store.read("acme", "db.orders", w.store.now() + 10**12),
        InvalidArgument,
        r"in the future",
    ),
    (
        "read-unprotected-time",
        lambda w: w.store.read("acme", "db.orders", 1),
        UnprotectedTime,
        r"is not protected",
    ),
    # times past year 9999 (or past int64) and garbage, wherever a time is parsed
    (
        "read-year-10000-iso",
        lambda w: w.store.read("acme", "db.orders", "10000-01-01"),
        InvalidArgument,
        r"times run from .* to 9999-12-31",
    ),
    (
        "read-year-10000-ts",
        lambda w: w.store.read("acme", "db.orders", "253402300800000000"),
        InvalidArgument,
        r"times run from",
    ),
    (
        "read-year-10000-int",
        lambda w: w.store.read("acme", "db.orders", 253402300800000000),
        InvalidArgument,
        r"times run from",
    ),
    (
        "read-past-int64",
        lambda w: w.store.read("acme", "db.orders", 2**64),
        InvalidArgument,
        r"times run from",
    ),
    (
        "read-offset-past-9999",
        lambda w: w.store.read("acme", "db.orders", "9999-12-31T23:59:59-01:00"),
        InvalidArgument,
        r"times run from",
    ),
    (
        "read-garbage-time",
        lambda w: w.store.read("acme", "db.orders", "g@"),
        InvalidArgument,
        r"invalid time or snapshot 'g@': use a snapshot name, an ISO-8601",
    ),
    (
        "resolve-past-int64-text",
        lambda w: w.store.resolve_time("acme", "9" * 30),
        InvalidArgument,
        r"times run from",
    ),
    (
        "snapshot-at-year-10000",
        lambda w: w.store.create_snapshot("acme", "later", at="10000-01-01T00:00:00Z"),
        InvalidArgument,
        r"times run from",
    ),
    (
        "snapshot-at-past-int64",
        lambda w: w.store.create_snapshot("acme", "later", at=2**70),
        InvalidArgument,
        r"times run from",
    ),
    (
        "tables-as-of-year-10000",
        lambda w: w.store.tables("acme", as_of=253402300800000000),
        InvalidArgument,
        r"times run from",
    ),
    # durations and counts that would overflow SQLite's int64 (or mean nothing)
    (
        "pitr-window-huge",
        lambda w: w.store.set_pitr("acme", 2**70),
        InvalidArgument,
        r"at most 365000d",
    ),
    (
        "pitr-window-past-1000-years",
        lambda w: w.store.set_pitr("acme", 365_001 * 86_400_000_000),
        InvalidArgument,
        r"at most 365000d",
    ),
    (
        "schedule-interval-huge",
        lambda w: w.store.set_schedule("acme", first_at_us=0, interval_us=2**70),
        InvalidArgument,
        r"at most 365000d",
    ),
    (
        "schedule-retain-age-huge",
        lambda w: w.store.set_schedule(
            "acme", first_at_us=0, interval_us=3_600_000_000, retain_age_us=2**70
        ),
        InvalidArgument,
        r"at most 365000d",
    ),
    (
        "schedule-retain-count-huge",
        lambda w: w.store.set_schedule(
            "acme", first_at_us=0, interval_us=3_600_000_000, retain_count=2**70
        ),
        InvalidArgument,
        r"retain count must be at most 1,000,000",
    ),
    (
        "compact-target-zero",
        lambda w: w.store.compact("acme", target_bytes=0),
        InvalidArgument,
        r"invalid compaction target 0 bytes",
    ),
    (
        "compact-target-negative",
        lambda w: w.store.compact("acme", target_bytes=-1),
        InvalidArgument,
        r"invalid compaction target",
    ),
    (
        "compact-target-huge",
        lambda w: w.store.compact("acme", target_bytes=2**70),
        InvalidArgument,
        r"invalid compaction target",
    ),
    (
        "compact-target-inf",
        # a float where an int is typed: the bad input under test
        lambda w: w.store.compact("acme", target_bytes=cast(int, float("inf"))),
        InvalidArgument,
        r"invalid compaction target inf",
    ),
    # a column named twice: which one is the value? (a KeyError from Arrow before)
    (
        "duplicate-column-upsert",
        write(
            upserts=pa.Table.from_arrays(
                [pa.array([1]), pa.array(["eu"]), pa.array([1.0]), pa.array([2]), pa.array([3])],
                names=["id", "region", "amount", "qty", "qty"],
            )
        ),
        SchemaMismatch,
        r"column\(s\) \['qty'\] more than once",
    ),
    (
        "duplicate-key-column-delete",
        write(
            deletes=pa.Table.from_arrays(
                [pa.array([1]), pa.array([1]), pa.array(["eu"])], names=["id", "id", "region"]
            )
        ),
        SchemaMismatch,
        r"column\(s\) \['id'\] more than once",
    ),
]


@pytest.mark.parametrize(
    ("call", "error", "match"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_input_raises_a_specific_error_and_changes_nothing(
    world: World, call: Call, error: type[RewindError], match: str
) -> None:
    before = state(world)
    with pytest.raises(error, match=match) as raised:
        call(world)
    assert isinstance(raised.value, RewindError)
    assert state(world) == before


def test_state_snapshot_sees_a_successful_write(world: World) -> None:
    """The check above is not vacuous: a good write changes catalog, clock and bucket."""
    before = state(world)
    world.store.write("acme", "db.orders", upserts=rows(id=[7]))
    after = state(world)
    assert after.last_ts > before.last_ts
    assert len(after.keys) == len(before.keys) + 1
    assert len(after.catalog["objects"]) == len(before.catalog["objects"]) + 1
    assert len(after.catalog["membership"]) == len(before.catalog["membership"]) + 1


def test_a_key_differing_in_one_part_is_not_a_duplicate(world: World) -> None:
    result = world.store.write(
        "acme",
        "db.orders",
        upserts=rows(id=[4, 4], region=["eu", "us"], amount=[1.0, 2.0], qty=[1, 2]),
    )
    assert result.upserted == 2
    assert [(r["id"], r["region"]) for r in world.store.read("acme", "db.orders").to_pylist()] == [
        (1, "eu"),
        (4, "eu"),
        (4, "us"),
    ]


# URIs: refused before anything is created, saying what a valid one looks like

BAD_CATALOG_URIS = [
    ("sqlite:///", r"names no file"),
    ("sqlite:///:memory:", r"in-memory catalog would vanish"),
    ("sqlite://host/catalog.db", r"three slashes"),
    ("sqlite:catalog.db", r"three slashes"),
    ("sqlite:///catalog.db?mode=ro", r"no \?query"),
    ("sqlite:///sub/", r"names a directory"),
]
BAD_WAREHOUSE_URIS = [
    ("file://relwh", r"'relwh' is a host name there, not a directory"),
    ("file://..", r"'\.\.' is a host name there"),
    ("file:///", r"filesystem root"),
    ("file:relwh", r"absolute path after three slashes"),
    ("s3://", r"'' is not a bucket name"),
    ("s3://bucket/a/../b", r"'\.' or '\.\.' segments"),
    ("s3://bucket/p?versionId=1", r"no \?query"),
    ("gs://bucket/p", r"unknown scheme 'gs'"),
]


@pytest.mark.parametrize(("uri", "match"), BAD_CATALOG_URIS, ids=[u for u, _ in BAD_CATALOG_URIS])
def test_malformed_catalog_uri_is_refused_and_creates_nothing(
    uri: str, match: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    with pytest.raises(
        InvalidArgument, match=rf"invalid catalog .*{match}.*sqlite:///relative/path"
    ):
        TableStore.open(uri, f"file://{tmp_path / 'wh'}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sub"]


@pytest.mark.parametrize(
    ("uri", "match"), BAD_WAREHOUSE_URIS, ids=[u for u, _ in BAD_WAREHOUSE_URIS]
)
def test_malformed_warehouse_uri_is_refused_before_the_catalog_is_created(
    uri: str, match: str, tmp_path: Path
) -> None:
    catalog = tmp_path / "catalog.db"
    with pytest.raises(
        InvalidArgument, match=rf"invalid warehouse .*{match}.*file:///absolute/path"
    ):
        TableStore.open(f"sqlite:///{catalog}", uri)
    assert not catalog.exists()


def test_malformed_backup_destination_is_refused_by_its_name(world: World) -> None:
    before = state(world)
    with pytest.raises(InvalidArgument, match=r"invalid backup destination 'file://relbk'"):
        create_backup(world.store, "acme", str(world.store.now()), "file://relbk")
    assert state(world) == before


# delete: the count is what was deleted; a delete of absent keys writes nothing


def test_deleting_only_absent_keys_writes_nothing_and_counts_zero(world: World) -> None:
    before = state(world)
    result = world.store.write(
        "acme", "db.orders", deletes=keys(id=[2, 99], region=["us", "eu"]), only_present=True
    )
    assert (result.deleted, result.object_ids, result.ts) == (0, (), before.last_ts)
    assert state(world) == before


def test_delete_count_is_the_keys_that_were_there(world: World) -> None:
    result = world.store.write(
        "acme",
        "db.orders",
        deletes=keys(id=[1, 2, 99], region=["eu", "us", "eu"]),
        only_present=True,
    )
    assert result.deleted == 1 and len(result.object_ids) == 1
    assert world.store.read("acme", "db.orders").num_rows == 0


# a busy catalog: one clear, retryable error naming the holder; readers never wait


@pytest.mark.parametrize("new_catalog_uri", ["sqlite"], indirect=True)  # SQLite's file lock
def test_busy_catalog_raises_catalog_busy_naming_the_holder_and_changes_nothing(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_backend, "BUSY_TIMEOUT_S", 0.3, raising=False)
    before = state(world)
    path = world.store.catalog.uri[len("sqlite:///") :]
    with write_lock_held(path) as pid:
        # Opening an up-to-date catalog and reading never wait for the writer.
        second = TableStore.open(
            world.store.catalog.uri, f"s3://{world.bucket}/warehouse", s3=world.s3.settings
        )
        try:
            assert second.read("acme", "db.orders").num_rows == 1
            with pytest.raises(
                CatalogBusy, match=rf"busy, retry: its write lock is held by pid {pid} on "
            ) as raised:
                second.write("acme", "db.orders", upserts=rows(id=[8]))
        finally:
            second.close()
    assert isinstance(raised.value, TransientError)
    assert path in raised.value.message and "HOLD" not in raised.value.message
    assert state(world) == before


# backups: one unreadable manifest does not hide the others


def test_backup_list_flags_an_unreadable_manifest_and_lists_the_rest(world: World) -> None:
    world.store.create_snapshot("acme", "mon")
    dest_bucket = f"rewind-bad-bk-{uuid.uuid4().hex[:10]}"
    world.s3.create_bucket(dest_bucket)
    uri = f"s3://{dest_bucket}/bk"
    good = create_backup(world.store, "acme", "mon", uri).backup_id
    bad = create_backup(world.store, "acme", "mon", uri).backup_id
    dest = open_object_store(uri, world.s3.settings)
    dest.put(f"backups/{bad}/manifest.json", b'{"kind": "phys')

    listed = {e.backup_id: e for e in backups(uri)}
    assert listed[good].complete and listed[good].problem is None
    assert not listed[bad].complete and listed[bad].kind is None
    assert f"backup {bad}: manifest" in (listed[bad].problem or "")
    assert "is not valid JSON" in (listed[bad].problem or "")
    with pytest.raises(CorruptObject, match=rf"backup {bad}: manifest .* is not valid JSON"):
        show_backup(uri, bad)
    with pytest.raises(CorruptObject, match=rf"rewind backup delete {uri} {bad}"):
        restore_backup(world.store, uri, bad, tenant="again")

    # Deleting the good one keeps every object: the unreadable one may use them.
    objects_before = sorted(i.key for i in dest.list("objects/"))
    delete_backup(uri, good)
    assert sorted(i.key for i in dest.list("objects/")) == objects_before
    delete_backup(uri, bad)
    assert backups(uri) == []
