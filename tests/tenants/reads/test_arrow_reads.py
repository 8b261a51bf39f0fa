"""Arrow at a snapshot (tenants.reads.arrow, tenants.reads.interop): the rows ``store.read``
returns, streamed, for DuckDB and polars; filters never run before visibility;
every bad request refused before any object is read; a missing object is an error.

Stores are the suite's real ones: the moto S3 server (and a ``file://``
warehouse where the object store's path matters) with a SQLite or PostgreSQL
catalog (``store`` runs on both).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tenants.errors import (
    InvalidArgument,
    InvalidName,
    MissingDependency,
    NotFound,
    ObjectMissing,
    UnprotectedTime,
)
from tenants.objects.reader import ObjectReader
from tenants.objectstore import ObjectStore
from tenants.reads.arrow import plan_arrow_read, read_arrow
from tenants.reads.interop import to_duckdb, to_polars
from tenants.reads.key_range import KeyRange
from tenants.schema import Column, TableSchema
from tenants.store import TableStore

# Not the catalog's behaviour: on SQLite alone (conftest.py, one_catalog).
pytestmark = pytest.mark.one_catalog

ORDERS = TableSchema(
    (
        Column("id", "int64"),
        Column("region", "string"),
        Column("qty", "int32", nullable=False),
        Column("note", "string"),
    ),
    ("id", "region"),
)


def orders(rows: list[tuple[int, str, int, str | None]]) -> pa.Table:
    return pa.Table.from_pylist(
        [{"id": i, "region": r, "qty": q, "note": n} for i, r, q, n in rows],
        schema=ORDERS.arrow(),
    )


def keys_of(rows: list[tuple[int, str]]) -> pa.Table:
    return pa.Table.from_pylist(
        [{"id": i, "region": r} for i, r in rows], schema=ORDERS.key_arrow()
    )


class ReadCounter:
    """The real object store, recording each object key a read touches (a whole
    fetch, a stream, a ranged reader or an in-place path)."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.warehouse = inner.warehouse
        self.touched: list[str] = []

    def get(self, key: str) -> bytes:
        self.touched.append(key)
        return self.inner.get(key)

    def stream(self, key: str, chunk_bytes: int) -> Iterator[bytes]:
        self.touched.append(key)
        return self.inner.stream(key, chunk_bytes)

    def open_input(self, key: str) -> pa.NativeFile:
        self.touched.append(key)
        return self.inner.open_input(key)

    def local_file(self, key: str) -> str | None:
        self.touched.append(key)
        return self.inner.local_file(key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def objects_read(self) -> int:
        return len(set(self.touched))


def counting(store: TableStore) -> tuple[Any, ReadCounter]:
    """A store-like value whose reads go through a :class:`ReadCounter`."""
    counter = ReadCounter(store.objects)
    return SimpleNamespace(catalog=store.catalog, objects=counter), counter


@pytest.fixture
def history(store: TableStore) -> dict[str, int]:
    """acme/shop.orders through inserts, an update, deletes, a column added, a
    compaction and two snapshots; returns the ts of each step by name."""
    store.create_tenant("acme")
    store.set_pitr("acme", 86_400_000_000)
    store.create_table("acme", "shop.orders", ORDERS)
    ts: dict[str, int] = {}
    ts["load"] = store.write(
        "acme",
        "shop.orders",
        upserts=orders([(i, r, i * 10, None) for i in range(6) for r in ("eu", "us")]),
    ).ts
    store.create_snapshot("acme", "mon")
    ts["update"] = store.write(
        "acme",
        "shop.orders",
        upserts=orders([(1, "eu", 1, "cut"), (9, "us", 90, None)]),
        deletes=keys_of([(1, "eu"), (2, "us"), (7, "eu")]),
    ).ts
    store.compact("acme", "shop.orders", target_bytes=1_500)
    ts["compacted"] = store.now()
    record = store.alter_table("acme", "shop.orders", add=[Column("day", "int32", default=7)])
    ts["altered"] = record.schema_from_ts
    ts["late"] = store.write(
        "acme",
        "shop.orders",
        upserts=pa.Table.from_pylist(
            [{"id": 3, "region": "eu", "qty": 33, "note": "late", "day": 1}],
            schema=record.schema.arrow(),
        ),
    ).ts
    store.create_snapshot("acme", "tue")
    return ts


# --- the rows ----------------------------------------------------------------------------


def test_read_arrow_streams_exactly_the_rows_a_read_returns_at_every_time(
    store: TableStore, history: dict[str, int]
) -> None:
    times: list[dict[str, Any]] = [{"as_of": t} for t in history.values()]
    times += [{"as_of": t - 1} for t in history.values() if t - 1 >= history["load"]]
    times += [{"as_of": "mon"}, {"as_of": "tue"}, {}, {"as_of": "now"}]
    for when in times:
        point = when.get("as_of")
        expected = store.read("acme", "shop.orders", point)
        reader = read_arrow(store, "acme", "shop.orders", batch_rows=3, **when)
        assert reader.schema == expected.schema, when  # the columns as of then, no __ts
        batches = list(reader)
        assert all(b.num_rows == 3 for b in batches[:-1]), when
        got = pa.Table.from_batches(batches, expected.schema)
        assert got.equals(expected), when
        assert store.read_arrow("acme", "shop.orders", **when).read_all().equals(expected)


def test_a_column_added_later_reads_as_its_default_in_older_objects(
    store: TableStore, history: dict[str, int]
) -> None:
    got = read_arrow(store, "acme", "shop.orders", columns=["day", "id"]).read_all()
    assert got.column_names == ["day", "id"]
    assert got.to_pylist() == [
        {"day": 1 if r["id"] == 3 and r["region"] == "eu" else 7, "id": r["id"]}
        for r in store.read("acme", "shop.orders").to_pylist()
    ]
    with pytest.raises(NotFound, match=r"shop\.orders of tenant 'acme' has no column 'day'"):
        read_arrow(store, "acme", "shop.orders", as_of="mon", columns=["day"])


def test_selected_columns_are_the_only_ones_decoded_beside_the_key_and_ts(
    store: TableStore, history: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = store.read("acme", "shop.orders")["qty"].to_pylist()
    asked: list[list[str] | None] = []
    batches = ObjectReader.batches

    def spy(self: ObjectReader, columns: Any = None, **kwargs: Any) -> Any:
        asked.append(None if columns is None else list(columns))
        return batches(self, columns, **kwargs)

    monkeypatch.setattr(ObjectReader, "batches", spy)
    got = read_arrow(store, "acme", "shop.orders", columns=["qty"]).read_all()
    assert got.column_names == ["qty"]
    assert got.column("qty").to_pylist() == expected
    assert asked and all(a is not None for a in asked)
    # Data objects: the key, qty, __ts; tombstones: the key and __ts.
    assert {tuple(a) for a in asked if a is not None} <= {
        ("id", "region", "qty", "__ts"),
        ("id", "region", "__ts"),
    }


def test_a_snapshot_after_an_in_place_restore_reads_the_retired_tenant(
    store: TableStore, history: dict[str, int]
) -> None:
    """After acme is restored in place to mon, tue lives in the retired tenant:
    read_arrow follows the name's lineage there, as every read does."""
    from engine.restore.job import restore_tenant

    at_tue = store.read("acme", "shop.orders", "tue")
    at_mon = store.read("acme", "shop.orders", "mon")
    restore_tenant(store, "acme", "mon", executor="local")
    assert read_arrow(store, "acme", "shop.orders", as_of="tue").read_all().equals(at_tue)
    assert read_arrow(store, "acme", "shop.orders", as_of=history["late"]).read_all().equals(at_tue)
    assert read_arrow(store, "acme", "shop.orders").read_all().equals(at_mon)


# --- filters: after visibility, never before -----------------------------------------------


def test_a_non_key_filter_never_brings_back_a_version_a_newer_one_replaced(
    store: TableStore,
) -> None:
    """Key (1, eu) had qty 10, then qty 1. ``qty > 5`` now must not show it: a
    filter on events before resolution would drop the newer version and leave
    the old one looking newest. Same after both versions share one object."""
    store.create_tenant("acme")
    store.set_pitr("acme", 86_400_000_000)
    store.create_table("acme", "shop.orders", ORDERS)
    first = store.write(
        "acme", "shop.orders", upserts=orders([(1, "eu", 10, None), (2, "eu", 20, None)])
    ).ts
    store.write("acme", "shop.orders", upserts=orders([(1, "eu", 1, None)]))
    store.write("acme", "shop.orders", deletes=keys_of([(2, "eu")]))
    big = pc.field("qty") > 5
    for compacted in (False, True):
        if compacted:
            store.compact("acme", "shop.orders")
            assert len(store.objects_of("acme")) <= 2
        assert read_arrow(store, "acme", "shop.orders", filter=big).read_all().num_rows == 0
        then = read_arrow(store, "acme", "shop.orders", as_of=first, filter=big).read_all()
        assert then.column("id").to_pylist() == [1, 2]
        assert to_duckdb(store, "acme", "shop.orders").filter("qty > 5").fetchall() == []
        assert to_duckdb(store, "acme", "shop.orders", filter=big).fetchall() == []
        lazy = to_polars(store, "acme", "shop.orders")
        assert isinstance(lazy, pl.LazyFrame)
        assert lazy.filter(pl.col("qty") > 5).collect().height == 0
        assert lazy.filter(pl.col("qty") < 5).select("qty").collect()["qty"].to_list() == [1]


def test_a_filter_may_use_columns_it_does_not_show(
    store: TableStore, history: dict[str, int]
) -> None:
    everything = store.read("acme", "shop.orders")
    got = read_arrow(
        store,
        "acme",
        "shop.orders",
        columns=["note", "id"],
        filter=(pc.field("region") == "eu") & (pc.field("qty") >= 20),
    ).read_all()
    expected = [
        {"note": r["note"], "id": r["id"]}
        for r in everything.to_pylist()
        if r["region"] == "eu" and r["qty"] >= 20
    ]
    assert got.column_names == ["note", "id"]
    assert got.to_pylist() == expected


def test_a_key_range_prunes_objects_and_keeps_every_key_inside_it(
    store: TableStore, history: dict[str, int]
) -> None:
    everything = store.read("acme", "shop.orders").to_pylist()

    def inside(low: tuple[Any, ...] | None, high: tuple[Any, ...] | None) -> list[dict[str, Any]]:
        def key(r: dict[str, Any]) -> tuple[Any, ...]:
            return (r["id"], r["region"])

        return [
            r
            for r in everything
            if (low is None or key(r)[: len(low)] >= low)
            and (high is None or key(r)[: len(high)] <= high)
        ]

    cases: list[tuple[Any, tuple[Any, ...] | None, tuple[Any, ...] | None]] = [
        ((2, 4), (2,), (4,)),
        (((1, "us"), (3, "eu")), (1, "us"), (3, "eu")),
        ((None, 1), None, (1,)),
        ((5, None), (5,), None),
        (KeyRange((3,), (3,)), (3,), (3,)),  # a prefix: every region of id 3
        ((7, 8), (7,), (8,)),  # only deleted keys
    ]
    for keys, low, high in cases:
        got = read_arrow(store, "acme", "shop.orders", keys=keys).read_all().to_pylist()
        assert got == inside(low, high), keys
    view, counter = counting(store)
    read_arrow(view, "acme", "shop.orders", keys=(0, 0)).read_all()
    assert counter.objects_read < len(store.objects_of("acme"))


# --- DuckDB and polars ----------------------------------------------------------------


def test_duckdb_sees_the_rows_at_a_snapshot_as_often_as_it_asks(
    store: TableStore, history: dict[str, int]
) -> None:
    expected = store.read("acme", "shop.orders", "mon")
    rows = [tuple(r.values()) for r in expected.to_pylist()]
    connection = duckdb.connect()
    relation = to_duckdb(
        store, "acme", "shop.orders", as_of="mon", connection=connection, name="orders_mon"
    )
    for _ in range(2):  # each query reads the plan anew, never a drained stream
        assert relation.order("id, region").fetchall() == rows
        assert connection.sql("SELECT * FROM orders_mon ORDER BY id, region").fetchall() == rows
    assert connection.sql("SELECT sum(qty) FROM orders_mon").fetchall() == [
        (sum(expected["qty"].to_pylist()),)
    ]
    narrow = to_duckdb(store, "acme", "shop.orders", columns=["qty"], connection=connection)
    assert narrow.columns == ["qty"]


def test_polars_lazy_frames_push_columns_and_limits_down_and_collect_again(
    store: TableStore, history: dict[str, int]
) -> None:
    expected = store.read("acme", "shop.orders", "tue")
    lazy = to_polars(store, "acme", "shop.orders", as_of="tue")
    assert isinstance(lazy, pl.LazyFrame)
    for _ in range(2):
        assert lazy.collect().to_arrow().equals(pl.from_arrow(expected).to_arrow())  # type: ignore[union-attr]
    assert lazy.head(3).collect()["id"].to_list() == expected["id"].to_pylist()[:3]
    assert lazy.select(pl.len()).collect().item() == expected.num_rows
    assert lazy.filter(pl.col("note").is_not_null()).select("note").collect()["note"].to_list() == [
        n for n in expected["note"].to_pylist() if n is not None
    ]
    eager = to_polars(store, "acme", "shop.orders", as_of="tue", lazy=False)
    assert isinstance(eager, pl.DataFrame) and eager.height == expected.num_rows


@pytest.mark.parametrize(
    ("module", "call"),
    [("duckdb", to_duckdb), ("polars", to_polars)],
)
def test_a_missing_engine_says_how_to_install_it(
    store: TableStore,
    history: dict[str, int],
    monkeypatch: pytest.MonkeyPatch,
    module: str,
    call: Any,
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # import raises ImportError
    with pytest.raises(
        MissingDependency, match=rf"needs {module}: pip install 'rewind-tables\[engines\]'"
    ):
        call(store, "acme", "shop.orders")


# --- bad requests: refused at the call, before any object is read ------------------------


BAD_REQUESTS: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"tenant": "nobody"}, NotFound, "tenant 'nobody' does not exist"),
    (
        {"table": "shop.nothing"},
        NotFound,
        r"table shop\.nothing does not exist in tenant 'acme'",
    ),
    ({"table": "orders"}, InvalidName, "expected DB.TABLE"),
    ({"as_of": "sun"}, NotFound, "tenant 'acme' has no snapshot 'sun'"),
    ({"as_of": "bad name"}, InvalidArgument, "invalid time or snapshot 'bad name'"),
    ({"as_of": 1}, UnprotectedTime, "is not protected for tenant 'acme'"),
    ({"as_of": "2001-01-01T00:00:00Z"}, UnprotectedTime, "is not protected for tenant 'acme'"),
    ({"as_of": "-yesterday"}, InvalidArgument, "invalid"),
    ({"as_of": "1"}, InvalidArgument, "2000-01-01"),
    ({"as_of": 1.5}, InvalidArgument, "time 1.5 for tenant 'acme': give text"),
    ({"as_of": True}, InvalidArgument, "time True for tenant 'acme': give text"),
    (
        {"columns": ["id", "nope"]},
        NotFound,
        r"shop\.orders of tenant 'acme' has no column 'nope'",
    ),
    ({"columns": ["__ts"]}, NotFound, "has no column '__ts'"),
    ({"columns": []}, InvalidArgument, "one or more of id, region"),
    ({"columns": ["qty", "qty"]}, InvalidArgument, "'qty' is named twice"),
    ({"keys": ("a", None)}, InvalidArgument, "'a' is not a int64 for key column 'id'"),
    ({"keys": ((1, "eu", 3), None)}, InvalidArgument, r"up to 2 value\(s\) for \(id, region\)"),
    ({"keys": (1, 2, 3)}, InvalidArgument, r"give \(low, high\)"),
    ({"filter": pc.field("nope") > 1}, InvalidArgument, r"FieldRef\.Name\(nope\).*its columns"),
    ({"filter": pc.field("note") > 1}, InvalidArgument, "cannot run on acme/shop.orders"),
    ({"filter": "qty > 1"}, InvalidArgument, "give a pyarrow.compute.Expression"),
    ({"limit": -1}, InvalidArgument, "invalid limit"),
    ({"batch_rows": 0}, InvalidArgument, "invalid batch_rows"),
]


def test_a_bad_request_is_refused_when_made_naming_what_is_wrong(
    store: TableStore, history: dict[str, int]
) -> None:
    """Each of :data:`BAD_REQUESTS`, through read_arrow, to_duckdb and to_polars
    (one history for all: building it is most of the cost)."""
    view, counter = counting(store)
    for arguments, error, message in BAD_REQUESTS:
        call = {"tenant": "acme", "table": "shop.orders"} | arguments
        tenant, table = call.pop("tenant"), call.pop("table")
        with pytest.raises(error, match=message):
            read_arrow(view, tenant, table, **call)
        engine_call = {k: v for k, v in call.items() if k not in ("limit", "batch_rows")}
        if engine_call == call:
            with pytest.raises(error, match=message):
                to_duckdb(view, tenant, table, connection=duckdb.connect(), **engine_call)
            with pytest.raises(error, match=message):
                to_polars(view, tenant, table, **engine_call)
    assert counter.touched == []


# --- streaming and a long read's objects ---------------------------------------------------


@pytest.fixture
def wide_history(store: TableStore) -> TableStore:
    """Twenty commits of key-disjoint rows: twenty objects, read one after another."""
    store.create_tenant("acme")
    store.create_table("acme", "shop.orders", ORDERS)
    for start in range(0, 400, 20):
        store.write(
            "acme",
            "shop.orders",
            upserts=orders([(i, "eu", i, None) for i in range(start, start + 20)]),
        )
    return store


def test_a_reader_reads_objects_only_as_its_batches_are_asked_for(wide_history: TableStore) -> None:
    view, counter = counting(wide_history)
    reader = read_arrow(view, "acme", "shop.orders", batch_rows=10)
    assert counter.touched == []  # planned, nothing read
    first = reader.read_next_batch()
    assert first.column("id").to_pylist() == list(range(10))
    assert counter.objects_read == 1  # of 20
    rest = reader.read_all()
    assert rest.num_rows == 390 and counter.objects_read == 20


def test_an_object_gone_in_the_middle_of_a_read_is_an_error_naming_it(
    wide_history: TableStore,
) -> None:
    """As if GC had collected an object after the read was planned (its time no
    longer protected, the grace passed): never a read with rows missing."""
    live = sorted((o for _, o in wide_history.objects_of("acme")), key=lambda o: o.min_pk)
    for columns in (None, ["qty"]):  # a whole read (checksummed) and a partial one
        reader = read_arrow(wide_history, "acme", "shop.orders", columns=columns, batch_rows=10)
        assert reader.read_next_batch().num_rows == 10
        gone = live[5]
        data = wide_history.objects.get(gone.key)
        wide_history.objects.delete_many([gone.key])
        try:
            with pytest.raises(
                ObjectMissing, match=rf"{gone.key} is missing, reading acme/shop\.orders"
            ):
                reader.read_all()
        finally:
            wide_history.objects.put(gone.key, data)


def test_a_file_warehouse_reads_the_same_and_names_a_missing_object(
    tmp_path: Path, new_catalog_uri: Any
) -> None:
    store = TableStore.open(new_catalog_uri(), f"file://{tmp_path / 'warehouse'}")
    try:
        store.create_tenant("acme")
        store.create_table("acme", "shop.orders", ORDERS)
        store.write("acme", "shop.orders", upserts=orders([(1, "eu", 1, None), (2, "us", 2, "x")]))
        store.write("acme", "shop.orders", deletes=keys_of([(1, "eu")]))
        assert (
            read_arrow(store, "acme", "shop.orders")
            .read_all()
            .equals(store.read("acme", "shop.orders"))
        )
        read = plan_arrow_read(store, "acme", "shop.orders")
        [key] = [o.key for _, o in store.objects_of("acme") if o.kind == "tomb"]
        store.objects.delete_many([key])
        with pytest.raises(ObjectMissing, match=key):
            read.reader().read_all()
    finally:
        store.close()
