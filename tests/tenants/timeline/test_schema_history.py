"""Schema history: ALTER as new schema versions, and DDL as of a protected time.

A read at T uses the schema valid at T, so history before a change reads as
it was; ``store.tables(tenant, as_of)`` lists the tables that existed at T.
"""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pytest

from tenants.errors import (
    AlreadyExists,
    InvalidArgument,
    InvalidName,
    NotFound,
    SchemaMismatch,
    UnprotectedTime,
)
from tenants.schema import Column, TableSchema
from tenants.store import TableStore
from tenants.times import US, parse_instant
from tests.helpers.item_rows import SCHEMA

H = US["h"]
M = US["m"]
T0 = parse_instant("2026-01-05T00:30:00Z")


def items(**columns: list[Any]) -> pa.Table:
    return pa.table(columns)


def read(store: TableStore, tenant: str, table: str = "items", as_of=None) -> list[dict]:
    return store.read(tenant, f"db.{table}", as_of).to_pylist()


def schema_now(store: TableStore, tenant: str, table: str = "items") -> TableSchema:
    [record] = [t for t in store.tables(tenant) if t.name == table]
    return record.schema


@pytest.fixture
def tenant(store: TableStore, clock) -> str:
    """A tenant whose ``db.items`` (id, v) holds two rows written at T0 + 1m."""
    clock.fixed = T0
    name = f"t-{uuid.uuid4().hex[:10]}"
    store.create_tenant(name)
    store.create_table(name, "db.items", SCHEMA)
    clock.fixed = T0 + M
    store.write(name, "db.items", upserts=items(id=[1, 2], v=["a", "b"]))
    clock.fixed = T0 + 2 * M
    store.create_snapshot(name, "before")
    return name


def test_added_nullable_column_reads_null_for_old_rows_and_old_times_keep_old_schema(
    store, clock, tenant
):
    clock.fixed = T0 + H
    altered = store.alter_table(tenant, "db.items", add=[Column("note", "string")])
    assert altered.schema.names == ["id", "v", "note"]
    assert altered.schema.fingerprint != SCHEMA.fingerprint
    store.write(tenant, "db.items", upserts=items(id=[3], v=["c"], note=["new"]))

    assert read(store, tenant) == [
        {"id": 1, "v": "a", "note": None},
        {"id": 2, "v": "b", "note": None},
        {"id": 3, "v": "c", "note": "new"},
    ]
    assert read(store, tenant, as_of="before") == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
    assert store.read(tenant, "db.items", "before").schema == SCHEMA.arrow()


def test_added_column_with_default_reads_the_default_for_old_rows(store, clock, tenant):
    clock.fixed = T0 + H
    store.alter_table(tenant, "db.items", add=[Column("qty", "int64", nullable=False, default=7)])
    store.write(tenant, "db.items", upserts=items(id=[2, 3], v=["b2", "c"], qty=[1, 2]))

    assert read(store, tenant) == [
        {"id": 1, "v": "a", "qty": 7},
        {"id": 2, "v": "b2", "qty": 1},
        {"id": 3, "v": "c", "qty": 2},
    ]
    assert read(store, tenant, as_of="before") == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
    with pytest.raises(SchemaMismatch, match="'qty' .* is NOT NULL but has nulls"):
        store.write(tenant, "db.items", upserts=items(id=[4], v=["d"], qty=[None]))


def test_dropped_column_is_gone_now_and_present_at_times_before_the_drop(store, clock, tenant):
    clock.fixed = T0 + H
    altered = store.alter_table(tenant, "db.items", drop=["v"])
    assert altered.schema.names == ["id"]
    store.write(tenant, "db.items", upserts=items(id=[3]))
    with pytest.raises(SchemaMismatch, match=r"unexpected columns \['v'\]"):
        store.write(tenant, "db.items", upserts=items(id=[4], v=["d"]))

    assert read(store, tenant) == [{"id": 1}, {"id": 2}, {"id": 3}]
    assert read(store, tenant, as_of="before") == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
    [then] = store.tables(tenant, "before")
    assert then.schema == SCHEMA and then.schema_from_ts == then.created_ts


def test_readding_a_dropped_column_name_is_refused_so_old_values_never_resurrect(
    store, clock, tenant
):
    # Objects written before the drop still hold "v"; a new column of that name
    # would show those values again, so names are never reused (docs/decisions.md).
    clock.fixed = T0 + H
    store.alter_table(tenant, "db.items", drop=["v"])
    clock.fixed = T0 + 2 * H
    before = store.tables(tenant)[0].schema
    with pytest.raises(SchemaMismatch, match="column name 'v' was used before"):
        store.alter_table(tenant, "db.items", add=[Column("v", "string")])
    assert store.tables(tenant)[0].schema == before
    assert read(store, tenant) == [{"id": 1}, {"id": 2}]
    assert read(store, tenant, as_of="before") == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]


def test_ddl_as_of_a_protected_time_lists_the_tables_that_existed_then(store, clock, tenant):
    clock.fixed = T0 + 3 * M
    store.create_table(tenant, "db.doomed", SCHEMA)
    store.write(tenant, "db.doomed", upserts=items(id=[9], v=["z"]))
    clock.fixed = T0 + 4 * M
    store.create_snapshot(tenant, "both")
    clock.fixed = T0 + H
    store.drop_table(tenant, "db.doomed")
    store.create_table(tenant, "other.later", SCHEMA)

    assert [t.qualified for t in store.tables(tenant, "before")] == ["db.items"]
    assert [t.qualified for t in store.tables(tenant, "both")] == ["db.doomed", "db.items"]
    assert [t.qualified for t in store.tables(tenant)] == ["db.items", "other.later"]
    # A table dropped after T still reads at T; one created after T does not exist at T.
    assert read(store, tenant, "doomed", as_of="both") == [{"id": 9, "v": "z"}]
    with pytest.raises(NotFound, match="table db.doomed does not exist"):
        store.read(tenant, "db.doomed")
    with pytest.raises(NotFound, match="table other.later does not exist"):
        store.read(tenant, "other.later", "both")
    with pytest.raises(UnprotectedTime, match="is not protected"):
        store.tables(tenant, T0 + 3 * M + 1)


def test_recreated_table_reads_the_old_table_rows_at_times_before_the_drop(store, clock, tenant):
    clock.fixed = T0 + H
    old = store.drop_table(tenant, "db.items")
    new_schema = TableSchema.of([("id", "int64"), ("w", "double")], ["id"])
    clock.fixed = T0 + 2 * H
    new = store.create_table(tenant, "db.items", new_schema)
    store.write(tenant, "db.items", upserts=items(id=[5], w=[0.5]))

    assert new.id != old.id
    assert read(store, tenant) == [{"id": 5, "w": 0.5}]
    assert read(store, tenant, as_of="before") == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
    [then] = store.tables(tenant, "before")
    assert (then.id, then.schema) == (old.id, SCHEMA)


# --- bad ALTERs change nothing ------------------------------------------------------


@pytest.mark.parametrize(
    ("add", "drop", "error", "message"),
    [
        ((), ("id",), SchemaMismatch, "cannot drop key column 'id'"),
        ((), ("nope",), NotFound, "has no column 'nope'"),
        ((Column("v", "string"),), (), AlreadyExists, "already has a column 'v'"),
        ((Column("id", "int64"),), (), AlreadyExists, "already has a column 'id'"),
        (
            (Column("n", "int64", nullable=False),),
            (),
            SchemaMismatch,
            "cannot add NOT NULL column 'n' .* without a default",
        ),
        ((), (), InvalidArgument, "nothing to alter"),
        ((Column("__c", "string"),), (), InvalidName, "invalid column name '__c'"),
        ((Column("c", "varchar"),), (), InvalidArgument, "unsupported column type 'varchar'"),
        # The valid half of a mixed ALTER is not applied either.
        ((Column("ok", "string"),), ("id",), SchemaMismatch, "cannot drop key column"),
    ],
    ids=[
        "drop-key",
        "drop-unknown",
        "add-existing",
        "add-key-name",
        "not-null-no-default",
        "nothing",
        "reserved-name",
        "unknown-type",
        "mixed",
    ],
)
def test_invalid_alter_is_refused_and_changes_nothing(
    store, clock, tenant, add, drop, error, message
):
    [before] = store.tables(tenant)
    last_ts = store.now()
    clock.fixed = T0 + H

    with pytest.raises(error, match=message):
        store.alter_table(tenant, "db.items", add=add, drop=drop)

    assert store.tables(tenant) == [before]
    assert store.now() == last_ts
    assert read(store, tenant) == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]


@pytest.mark.parametrize(
    ("type_", "default"),
    [
        ("int64", "abc"),
        ("int64", 1.5),
        ("int8", 300),
        ("int64", 2**70),
        ("int64", "5"),
        ("string", 5),
        ("int64", True),
    ],
    ids=[
        "text-for-int",
        "fraction-for-int",
        "out-of-range-int8",
        "too-big-for-int64",
        "numeric-text-for-int",
        "int-for-text",
        "bool-for-int",
    ],
)
def test_default_of_the_wrong_type_is_refused_and_changes_nothing(
    store, clock, tenant, type_: str, default: Any
):
    before = schema_now(store, tenant)
    clock.fixed = T0 + H

    with pytest.raises(SchemaMismatch, match=f"default {default!r} of column 'c' is not a"):
        store.alter_table(
            tenant, "db.items", add=[Column("c", type_, nullable=False, default=default)]
        )

    assert schema_now(store, tenant) == before
    assert read(store, tenant) == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
