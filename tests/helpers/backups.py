"""A source tenant with a known history, and observers, for the dump and backup tests.

``build_source`` writes a history whose every interesting state is known by
hand: snapshot ``sun``, then snapshot ``mon`` (the S most tests restore), then
writes after S, a compaction that merges objects across S (so a physical
backup must rewrite a straddler), a column added after S, a table dropped
after S and one created after S. ``AT_SUN`` and ``AT_MON`` are what a read at
those snapshots must return, written out rather than read back from the store.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pyarrow as pa

from tenants.objectstore import ObjectStore
from tenants.objectstore.embedded import EmbeddedS3
from tenants.schema import Column, TableSchema
from tenants.store import TableStore
from tests.helpers.restores import SimulatedCrash, catalog_rows, reads

DB = "shop"
ITEMS = TableSchema.of([("id", "int64"), ("v", "string")], ["id"])
ORDERS = TableSchema(
    (Column("id", "int64"), Column("region", "string"), Column("qty", "int32", nullable=False)),
    ("id", "region"),
)
EMPTY = TableSchema.of([("id", "int64"), ("note", "string")], ["id"])
GONE = TableSchema.of([("id", "int64")], ["id"])
TABLES_AT_S = ["shop.empty", "shop.gone", "shop.items", "shop.orders"]


def new_bucket(s3: EmbeddedS3, prefix: str) -> str:
    """A new plain bucket on ``s3`` named ``prefix-<random>``."""
    name = f"{prefix}-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(name)
    return name


def items(
    ids: range | list[int], value: Callable[[int], str | None] = lambda i: f"v{i}"
) -> pa.Table:
    ids = list(ids)
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "v": pa.array([value(i) for i in ids], pa.string())}
    )


def items_now(ids: list[int]) -> pa.Table:
    """Rows for items after S, when it has the added ``note`` column."""
    return items(ids).append_column("note", pa.array([None] * len(ids), pa.string()))


def item_keys(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64())})


def orders(rows: list[tuple[int, str, int]]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "region": pa.array([r[1] for r in rows], pa.string()),
            "qty": pa.array([r[2] for r in rows], pa.int32()),
        },
        schema=ORDERS.arrow(),
    )


def order_keys(keys: list[tuple[int, str]]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([k[0] for k in keys], pa.int64()),
            "region": pa.array([k[1] for k in keys], pa.string()),
        }
    )


ITEMS_AT_SUN = [{"id": i, "v": f"v{i}"} for i in range(30)]
ORDERS_AT_SUN = [
    {"id": 1, "region": "eu", "qty": 10},
    {"id": 1, "region": "us", "qty": 11},
    {"id": 2, "region": "eu", "qty": -5},
    {"id": 3, "region": "us", "qty": 2**31 - 1},
]
GONE_AT_SUN = [{"id": 7}, {"id": 8}]
AT_SUN: dict[str, list[dict[str, Any]]] = {
    "shop.empty": [],
    "shop.gone": GONE_AT_SUN,
    "shop.items": ITEMS_AT_SUN,
    "shop.orders": ORDERS_AT_SUN,
}
ITEMS_AT_MON = [
    {"id": i, "v": "three" if i == 3 else None if i == 6 else f"v{i}"}
    for i in range(40)
    if i not in (4, 5)
]
ORDERS_AT_MON = [
    {"id": 1, "region": "eu", "qty": 12},
    {"id": 2, "region": "eu", "qty": -5},
    {"id": 3, "region": "us", "qty": 2**31 - 1},
    {"id": 4, "region": "eu", "qty": 0},
]
AT_MON: dict[str, list[dict[str, Any]]] = {
    "shop.empty": [],
    "shop.gone": GONE_AT_SUN,
    "shop.items": ITEMS_AT_MON,
    "shop.orders": ORDERS_AT_MON,
}


@dataclass(frozen=True)
class Source:
    name: str
    sun: int  # ts of snapshot "sun"
    mon: int  # ts of snapshot "mon": the S of most tests
    now_reads: dict[str, list[dict[str, Any]]]


def build_source(store: TableStore, name: str = "acme", *, compact: bool = True) -> Source:
    """The tenant described in the module docstring."""
    store.create_tenant(name)
    for table, schema in (("items", ITEMS), ("orders", ORDERS), ("empty", EMPTY), ("gone", GONE)):
        store.create_table(name, f"{DB}.{table}", schema)
    store.write(name, f"{DB}.items", upserts=items(range(30)))
    store.write(
        name,
        f"{DB}.orders",
        upserts=orders([(1, "eu", 10), (1, "us", 11), (2, "eu", -5), (3, "us", 2**31 - 1)]),
    )
    store.write(name, f"{DB}.gone", upserts=pa.table({"id": pa.array([7, 8], pa.int64())}))
    sun = store.create_snapshot(name, "sun").ts
    store.write(
        name,
        f"{DB}.items",
        upserts=items([3, 6], lambda i: "three" if i == 3 else None),
        deletes=item_keys([4, 5]),
    )
    store.write(name, f"{DB}.items", upserts=items(range(30, 40)))
    store.write(
        name,
        f"{DB}.orders",
        upserts=orders([(1, "eu", 12), (4, "eu", 0)]),
        deletes=order_keys([(1, "us")]),
    )
    mon = store.create_snapshot(name, "mon").ts
    # After S: more history that no restore to S may show.
    store.write(
        name, f"{DB}.items", upserts=items([11], lambda i: "after"), deletes=item_keys([0, 1])
    )
    store.write(name, f"{DB}.orders", deletes=order_keys([(2, "eu")]))
    if compact:
        # Merges objects written before and after S: they straddle "mon".
        store.compact(name, f"{DB}.items")
        store.compact(name, f"{DB}.orders")
    store.alter_table(name, f"{DB}.items", add=[Column("note", "string")])
    store.drop_table(name, f"{DB}.gone")
    store.create_table(name, f"{DB}.later", GONE)
    store.write(name, f"{DB}.later", upserts=pa.table({"id": pa.array([1], pa.int64())}))
    return Source(name, sun, mon, reads(store, name))


# --- observing ----------------------------------------------------------------------------


def schema_of(store: TableStore, tenant: str, as_of: int | str | None = None) -> dict[str, Any]:
    """Table → (columns, primary key): the DDL without creation times."""
    return {
        t.qualified: (t.schema.columns, t.schema.primary_key) for t in store.tables(tenant, as_of)
    }


def tenant_rows(store: TableStore) -> list[tuple[str, str, str]]:
    """(name, id, state) of every tenant row, staging ones included."""
    return [
        (r["name"], r["id"], r["state"])
        for r in catalog_rows(store, "SELECT name, id, state FROM tenants ORDER BY name, id")
    ]


def catalog_counts(store: TableStore) -> dict[str, int]:
    """Rows per catalog table that a load would add to."""
    return {
        table: int(catalog_rows(store, f"SELECT COUNT(*) AS n FROM {table}")[0]["n"])
        for table in ("tenants", "databases", "tables", "schema_versions", "objects", "membership")
    }


def warehouse_keys(store: TableStore, prefix: str = "") -> dict[str, int]:
    return {info.key: info.size for info in store.objects.list(prefix)}


def dest_keys(dest: ObjectStore, prefix: str = "") -> dict[str, int]:
    return {info.key: info.size for info in dest.list(prefix)}


# --- buckets ------------------------------------------------------------------------------


def s3_client(s3: EmbeddedS3) -> Any:
    return boto3.client("s3", **s3.settings.to_boto3())


def empty_bucket(s3: EmbeddedS3, bucket: str) -> int:
    """Delete every key of ``bucket`` with plain boto3: the bucket is lost. Returns the count."""
    client = s3_client(s3)
    deleted = 0
    while True:
        page = client.list_objects_v2(Bucket=bucket)
        keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
        if not keys:
            return deleted
        client.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
        deleted += len(keys)


def bucket_key_count(s3: EmbeddedS3, bucket: str) -> int:
    return int(s3_client(s3).list_objects_v2(Bucket=bucket).get("KeyCount", 0))


# --- fault injection ----------------------------------------------------------------------


class FailPutWhere:
    """The real object store, whose puts of keys matching ``predicate`` crash instead."""

    def __init__(self, inner: ObjectStore, predicate: Callable[[str], bool]) -> None:
        self.inner = inner
        self.warehouse = inner.warehouse
        self.predicate = predicate
        self.failed: list[str] = []

    def put(self, key: str, data: bytes) -> None:
        if self.predicate(key):
            self.failed.append(key)
            raise SimulatedCrash(f"crash at put {key}")
        self.inner.put(key, data)

    def open_output(self, key: str) -> Any:
        if self.predicate(key):
            self.failed.append(key)
            raise SimulatedCrash(f"crash at put {key}")
        return self.inner.open_output(key)

    def list(self, prefix: str) -> Iterator[Any]:
        return self.inner.list(prefix)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
