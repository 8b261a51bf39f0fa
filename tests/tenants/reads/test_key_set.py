"""Point reads by whole keys (tenants.reads.key_range.KeySet): exactly the rows a
full read holds for those keys, at any protected time, from few objects and
few row groups.

The tables are the suite's real ones (moto S3, a SQLite catalog), written in
several commits with updates and deletes, then compacted into several objects
of small row groups, so every level of pruning has something to skip.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tenants.objects.writer as object_writer
import tenants.reads.visible as visible
from tenants.errors import InvalidArgument
from tenants.objects.reader import ObjectReader
from tenants.objects.record import ObjectRecord
from tenants.objectstore import ObjectStore
from tenants.reads.key_range import KeyRange, KeySet
from tenants.reads.visible import ReadPlan, stream_visible
from tenants.schema import Column, TableSchema
from tenants.store import TableStore

# Not the catalog's behaviour: on SQLite alone (conftest.py, one_catalog).
pytestmark = pytest.mark.one_catalog

ROWS = 300
SCHEMAS = {
    "int": TableSchema((Column("k", "int64"), Column("v", "string")), ("k",)),
    "pair": TableSchema(
        (Column("a", "int64"), Column("b", "string"), Column("v", "string")), ("a", "b")
    ),
    "text": TableSchema((Column("k", "string"), Column("v", "string")), ("k",)),
}
# Row i's key, per kind: ints, (int, text) pairs, texts (zero-padded: sorted as i).
KEY_OF: dict[str, Callable[[int], dict[str, Any]]] = {
    "int": lambda i: {"k": i},
    "pair": lambda i: {"a": i // 10, "b": f"b{i % 10}"},
    "text": lambda i: {"k": f"k{i:04d}"},
}


def rows_of(kind: str, numbers: range | list[int], value: str) -> pa.Table:
    rows = [{**KEY_OF[kind](i), "v": f"{value}-{i}"} for i in numbers]
    return pa.Table.from_pylist(rows, schema=SCHEMAS[kind].arrow())


def keys_of(kind: str, numbers: list[int]) -> pa.Table:
    schema = SCHEMAS[kind]
    return rows_of(kind, numbers, "").select(list(schema.primary_key))


@pytest.fixture(autouse=True)
def small_row_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Row groups of 10 rows, whatever REWIND_ROW_GROUP_ROWS says: an object spans many."""
    monkeypatch.setattr(object_writer, "ROW_GROUP_ROWS", 10)


def history(store: TableStore, kind: str) -> None:
    """Table ``acme/db.t``: three commits, snapshot ``snap``, a compaction into
    several objects, then a commit of updates, deletes and new keys on top."""
    store.create_tenant("acme")
    store.create_table("acme", "db.t", SCHEMAS[kind])
    store.write("acme", "db.t", upserts=rows_of(kind, range(ROWS), "v1"))
    store.write("acme", "db.t", upserts=rows_of(kind, range(0, ROWS, 7), "v2"))
    store.write("acme", "db.t", deletes=keys_of(kind, list(range(3, ROWS, 11))))
    store.create_snapshot("acme", "snap")
    store.compact("acme", "db.t", target_bytes=1_500)
    store.write(
        "acme",
        "db.t",
        upserts=rows_of(kind, [*range(0, ROWS, 13), *range(ROWS, ROWS + 20)], "v3"),
        deletes=keys_of(kind, list(range(5, ROWS, 17))),
    )


def by_keys(store: TableStore, plan: ReadPlan, keys: KeySet) -> list[dict[str, Any]]:
    tables = list(stream_visible(store.objects, plan, keys=keys))
    return [row for t in tables for row in t.to_pylist()]


def filtered(
    store: TableStore, plan: ReadPlan, kind: str, numbers: list[int]
) -> list[dict[str, Any]]:
    """The full read, filtered in Python to the keys of ``numbers``."""
    pk = SCHEMAS[kind].primary_key
    wanted = {tuple(KEY_OF[kind](i)[k] for k in pk) for i in numbers}
    full = visible.read_local(store.objects, plan).to_pylist()
    return [row for row in full if tuple(row[k] for k in pk) in wanted]


# Present (0 updated twice, 7 once), absent (999), deleted before the snapshot
# (3), deleted after it (5: visible at the snapshot), new after it (305), given
# twice and out of order.
NUMBERS = [150, 0, 7, 999, 3, 5, 305, 299, 7, 1]


@pytest.mark.parametrize("kind", sorted(SCHEMAS))
@pytest.mark.parametrize("as_of", [None, "snap"])
def test_a_key_set_read_is_the_full_read_filtered_to_those_keys(
    store: TableStore, kind: str, as_of: str | None
) -> None:
    history(store, kind)
    plan = store.plan_read("acme", "db.t", as_of)
    assert len(plan.objects) >= 4
    got = by_keys(store, plan, KeySet.of(keys_of(kind, NUMBERS), SCHEMAS[kind].primary_key))
    expected = filtered(store, plan, kind, NUMBERS)
    assert got == expected
    shown = {row["v"] for row in got}
    if as_of is None:
        assert shown == {"v3-0", "v2-7", "v1-150", "v3-305", "v3-299", "v1-1"}
    else:
        assert shown == {"v2-0", "v2-7", "v1-150", "v1-5", "v1-299", "v1-1"}


def test_an_empty_key_set_reads_nothing(store: TableStore) -> None:
    history(store, "int")
    plan = store.plan_read("acme", "db.t")
    assert by_keys(store, plan, KeySet.of(keys_of("int", []), ("k",))) == []


@contextmanager
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """Objects opened by reads.visible, and row groups its readers read (of how many)."""
    counts = {"objects": 0, "groups": 0, "of": 0}
    open_object = visible.open_object
    batches = ObjectReader.batches

    def opening(objects: ObjectStore, record: ObjectRecord, **kwargs: Any) -> Any:
        counts["objects"] += 1
        return open_object(objects, record, **kwargs)

    def reading(reader: ObjectReader, *args: Any, **kwargs: Any) -> Any:
        total = reader.parquet.metadata.num_row_groups
        groups = kwargs.get("row_groups")
        counts["groups"] += total if groups is None else len(groups)
        counts["of"] += total
        return batches(reader, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(visible, "open_object", opening)
        patch.setattr(ObjectReader, "batches", reading)
        yield counts


def test_a_few_clustered_keys_open_one_object_and_read_few_row_groups(
    store: TableStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.create_tenant("acme")
    store.create_table("acme", "db.t", SCHEMAS["int"])
    for value, numbers in [
        ("v1", range(ROWS)),
        ("v2", range(0, ROWS, 3)),
        ("v3", range(1, ROWS, 5)),
    ]:
        store.write("acme", "db.t", upserts=rows_of("int", numbers, value))
    store.compact("acme", "db.t", target_bytes=1_500)
    plan = store.plan_read("acme", "db.t")
    assert len(plan.objects) >= 4
    keys = KeySet.of(keys_of("int", [120, 121, 123]), ("k",))
    with counted(monkeypatch) as counts:
        got = by_keys(store, plan, keys)
    assert [row["v"] for row in got] == ["v2-120", "v3-121", "v2-123"]
    assert counts["objects"] == 1
    assert counts["groups"] <= 2 < counts["of"]


def test_a_key_set_needs_every_key_column() -> None:
    with pytest.raises(InvalidArgument, match=r"key column\(s\) a, b; it has a"):
        KeySet.of(pa.table({"a": [1]}), ("a", "b"))


def test_a_key_range_still_reads_exactly_its_range(store: TableStore) -> None:
    history(store, "int")
    plan = store.plan_read("acme", "db.t")
    tables = stream_visible(store.objects, plan, keys=KeyRange((10,), (16,)))
    got = [row for t in tables for row in t.to_pylist()]
    assert got == filtered(store, plan, "int", list(range(10, 17)))
    assert [row["k"] for row in got] == [10, 11, 12, 13, 15, 16]  # 14: deleted


# Small domains so that rows and set overlap often; None for a null key column.
INTS = st.one_of(st.none(), st.integers(-3, 3))
TEXTS = st.one_of(st.none(), st.sampled_from(["", "a", "b", "é"]))
KINDS: dict[str, tuple[pa.Schema, st.SearchStrategy[tuple[Any, ...]]]] = {
    "int": (pa.schema([("k", pa.int64())]), st.tuples(INTS)),
    "text": (pa.schema([("k", pa.string())]), st.tuples(TEXTS)),
    "pair": (pa.schema([("a", pa.int32()), ("b", pa.string())]), st.tuples(INTS, TEXTS)),
}


@given(data=st.data(), kind=st.sampled_from(sorted(KINDS)))
def test_a_key_set_mask_is_python_membership(data: st.DataObject, kind: str) -> None:
    schema, key = KINDS[kind]
    in_set = data.draw(st.lists(key, max_size=8))
    in_rows = data.draw(st.lists(key, max_size=20))

    def table(keys: list[tuple[Any, ...]]) -> pa.Table:
        return pa.Table.from_pylist(
            [dict(zip(schema.names, k, strict=True)) for k in keys], schema=schema
        )

    keys = KeySet.of(table(in_set), schema.names)
    mask = keys.mask(table(in_rows), schema.names).to_pylist()
    members = {k for k in in_set if None not in k}
    assert mask == [k in members for k in in_rows]
    assert len(keys) == len(members)
