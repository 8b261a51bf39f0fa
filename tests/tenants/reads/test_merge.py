"""The k-way merge behind compaction and GC measurement, and compaction in passes.

The merge is checked against a plain sort of everything; compaction under a
tiny memory budget (many passes) against reads before it. Real stores.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenants import compaction
from tenants.compaction import MergeShape, compact_table
from tenants.objects.record import ObjectKind, ObjectRecord, live_objects
from tenants.reads.merge import POS, SRC, MergeInput, merge_rounds, overlap_depth
from tenants.schema import TS, Column, TableSchema
from tenants.store import TableStore
from tenants.tenancy import find_table, find_tenant

KEY = pa.schema([("a", pa.int64()), ("b", pa.string())])


def sorted_input(rows: list[tuple[int, str, int]], chunk: int) -> pa.Table:
    rows = sorted(rows)
    return pa.table(
        {
            "a": pa.array([r[0] for r in rows], pa.int64()),
            "b": [r[1] for r in rows],
            TS: pa.array([r[2] for r in rows], pa.int64()),
            "v": [f"{r}" for r in rows],
        }
    )


keys = st.tuples(st.integers(0, 6), st.sampled_from(["", "a", "b", "ab"]))
inputs_strategy = st.lists(
    st.lists(st.tuples(keys, st.integers(1, 50)), max_size=30, unique_by=lambda x: x),
    min_size=1,
    max_size=6,
)


def lazily(table: pa.Table, chunk: int, opened: list[int], index: int):  # type: ignore[no-untyped-def]
    def open_():  # type: ignore[no-untyped-def]
        opened.append(index)
        return iter(table.to_batches(max_chunksize=chunk))

    return open_


@given(inputs_strategy, st.integers(1, 7), st.booleans())
def test_merge_rounds_are_a_sort_of_everything_cut_between_keys(raw, chunk, lazy) -> None:
    tables = [sorted_input([(k[0], k[1], ts) for k, ts in rows], chunk) for rows in raw]
    opened: list[int] = []
    sources = [
        MergeInput(
            "data" if i % 3 else "tomb",
            lazily(t, chunk, opened, i) if lazy else iter(t.to_batches(max_chunksize=chunk)),
            (t["a"][0].as_py(), t["b"][0].as_py()) if lazy and t.num_rows else None,
        )
        for i, t in enumerate(tables)
    ]
    merged: list[tuple[object, ...]] = []
    seen_keys: set[tuple[object, ...]] = set()
    for round_ in merge_rounds(sources, KEY):
        events = round_.events
        round_keys = set(zip(events["a"].to_pylist(), events["b"].to_pylist(), strict=True))
        assert not round_keys & seen_keys, "a key's events were split across rounds"
        seen_keys |= round_keys
        for src, pos in zip(events[SRC].to_pylist(), events[POS].to_pylist(), strict=True):
            taken = round_.taken[src]
            assert taken is not None
            merged.append(tuple(taken.column(c)[pos].as_py() for c in ("a", "b", TS, "v")))
    everything = sorted(
        tuple(t.column(c)[i].as_py() for c in ("a", "b", TS, "v"))
        for t in tables
        for i in range(t.num_rows)
    )
    assert [m[:3] for m in merged] == [e[:3] for e in everything]
    assert sorted(merged) == everything


INT_KEY = pa.schema([("a", pa.int64())])


@given(
    st.lists(
        st.lists(
            st.tuples(st.integers(0, 8), st.integers(1, 6)), max_size=25, unique_by=lambda x: x[0]
        ),
        min_size=2,
        max_size=6,
    ),
    st.integers(1, 5),
)
def test_an_integer_key_merges_in_key_ts_kind_order_whatever_the_input_order(raw, chunk) -> None:
    """One integer key: numpy sorts the key alone and relies on input order for
    ts; inputs here come in any ts order and kinds, so the check falls back."""
    tables = [
        pa.table({"a": pa.array(sorted(k for k, _ in rows), pa.int64()),
                  TS: pa.array([ts for _, ts in sorted(rows)], pa.int64())})
        for rows in raw
    ]  # fmt: skip
    kinds: list[ObjectKind] = ["data" if i % 2 else "tomb" for i in range(len(tables))]
    sources = [
        MergeInput(kind, iter(t.to_batches(max_chunksize=chunk)))
        for kind, t in zip(kinds, tables, strict=True)
    ]
    merged: list[tuple[Any, ...]] = []
    for round_ in merge_rounds(sources, INT_KEY):
        events = round_.events
        merged += zip(
            events["a"].to_pylist(), events[TS].to_pylist(), events["__is_data"].to_pylist(),
            events[SRC].to_pylist(), strict=True,
        )  # fmt: skip
    everything = sorted(
        (a, ts, kinds[i] == "data", i)
        for i, t in enumerate(tables)
        for a, ts in zip(t["a"].to_pylist(), t[TS].to_pylist(), strict=True)
    )
    assert merged == everything


def test_disjoint_inputs_are_opened_one_after_another() -> None:
    tables = [sorted_input([(i, "k", 1), (i, "z", 2)], 1) for i in (4, 0, 2)]
    opened: list[int] = []
    sources = [
        MergeInput("data", lazily(t, 1, opened, i), (t["a"][0].as_py(), "k"))
        for i, t in enumerate(tables)
    ]
    seen = []
    for round_ in merge_rounds(sources, KEY):
        seen.append((round_.events["a"].to_pylist(), list(opened)))
    # Each input opened only when the merge reached its first key.
    assert seen[0][1] == [1] and opened == [1, 2, 0]
    assert [a for keys, _ in seen for a in keys] == [0, 0, 2, 2, 4, 4]


def test_overlap_depth_counts_inputs_sharing_a_key() -> None:
    assert overlap_depth([((0,), (9,)), ((10,), (19,)), ((20,), (29,))]) == 1
    assert overlap_depth([((0,), (10,)), ((10,), (19,)), ((5,), (6,))]) == 2
    assert overlap_depth([((0,), (9,)), (None, (3,))]) == 2


def test_a_key_with_more_versions_than_a_batch_stays_in_one_round() -> None:
    hot = sorted_input([(1, "k", ts) for ts in range(1, 40)] + [(2, "z", 1)], 1)
    other = sorted_input([(0, "a", 5), (1, "k", 100), (3, "x", 1)], 1)
    sources = [
        MergeInput("data", iter(hot.to_batches(max_chunksize=3))),
        MergeInput("data", iter(other.to_batches(max_chunksize=1))),
    ]
    rounds = [r.events for r in merge_rounds(sources, KEY)]
    with_hot = [e for e in rounds if 1 in e["a"].to_pylist()]
    assert len(with_hot) == 1 and with_hot[0]["a"].to_pylist().count(1) == 40


def test_merge_shape_fits_the_budget() -> None:
    big = [
        ObjectRecord(str(i), "k", "data", "f", 10, 100 << 20, 1, 1, "[1]", "[2]", True, "c", 0)
        for i in range(1000)
    ]
    roomy = MergeShape.within(8 << 30, big[:10], 1)
    assert roomy.fan_in == 10 and roomy.batch_bytes == 8 << 20
    tight = MergeShape.within(256 << 20, big, 1)
    assert 2 <= tight.fan_in < 1000 and tight.batch_bytes == compaction.MERGE_MIN_BATCH_BYTES


def test_a_merge_plan_counts_a_page_per_column_read() -> None:
    """A reader holds a decompressed page per column: wide inputs merge fewer at
    once (passes) rather than overrun the budget (bench_memory: 938 MiB under
    a 512 MiB budget before pages were counted). Everything the plan counts
    fits: the process, its allocator, the outputs and each input's share."""
    inputs = [
        ObjectRecord(str(i), "k", "data", "f", 10, 200 << 20, 1, 1, "[1]", "[2]", True, "c", 0)
        for i in range(58)
    ]
    narrow = MergeShape.within(512 << 20, inputs, 2, columns=2)
    wide = MergeShape.within(512 << 20, inputs, 2, columns=5)
    assert wide.fan_in < narrow.fan_in <= 58
    for shape, columns in ((narrow, 2), (wide, 5)):
        per_input = (
            5 * shape.batch_bytes + 8 * shape.buffer_bytes + compaction.READER_BYTES
            + compaction.CHECK_BYTES + columns * compaction.PAGE_BYTES
        )  # fmt: skip
        live = shape.fan_in * per_input + 2 * compaction.WRITER_BYTES
        fixed = compaction.PROCESS_BYTES + compaction.ALLOCATOR_BYTES
        assert fixed + live * compaction.ALLOCATOR_SLACK <= 512 << 20


# --- compaction in passes ----------------------------------------------------------------


@pytest.fixture
def store(new_catalog_uri, tmp_path: Path) -> TableStore:
    return TableStore.open(new_catalog_uri(), f"file://{tmp_path / 'warehouse'}")


@pytest.mark.parametrize("full", [False, True], ids=["partial", "full"])
def test_a_table_beyond_one_merge_is_compacted_in_passes(
    store: TableStore, full: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = TableSchema((Column("id", "int64", nullable=False), Column("v", "string")), ("id",))
    store.create_tenant("acme")
    store.create_table("acme", "db.t", schema)
    rng = random.Random(5)
    for commit in range(30):
        ids = rng.sample(range(200), 25)
        store.write(
            "acme",
            "db.t",
            upserts=pa.table({"id": pa.array(ids, pa.int64()), "v": [f"{commit}" for _ in ids]}),
            deletes=pa.table({"id": pa.array(rng.sample(range(200), 3), pa.int64())}),
        )
    before = store.read("acme", "db.t")
    # A budget for 4 inputs at a time: 60 objects need passes.
    monkeypatch.setattr(
        compaction.MergeShape,
        "within",
        classmethod(
            lambda cls, memory, inputs, groups, depth=None, columns=8: cls(
                min(4, len(inputs)), 1 << 18, 1 << 16
            )
        ),
    )
    with store.catalog.snapshot() as tx:
        table = find_table(tx, find_tenant(tx, "acme"), "db", "t", tx.last_ts())
    result = compact_table(store.catalog, store.objects, table, full=full)

    assert store.read("acme", "db.t").equals(before)
    with store.catalog.snapshot() as tx:
        live = live_objects(tx, table.id)
    assert len(live) <= 4 and result.outputs == len(live)
    assert result.inputs == 60  # every original object, counted once
