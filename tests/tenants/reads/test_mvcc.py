"""Unit tests of ``tenants.mvcc``: visibility at a time T and projection."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from tenants.mvcc import project, resolve
from tenants.schema import TS, Column, TableSchema

SIMPLE = TableSchema.of([("k", "int64"), ("v", "string")], ["k"])
COMPOSITE = TableSchema.of(
    [("id", "int64"), ("region", "string"), ("v", "double")], ["id", "region"]
)


def data(schema: TableSchema, rows: list[dict[str, Any]]) -> pa.Table:
    """A projected data object: the schema's columns plus ``__ts``."""
    return pa.Table.from_pylist(rows, schema=schema.data_arrow())


def tombs(schema: TableSchema, rows: list[dict[str, Any]]) -> pa.Table:
    """A projected tombstone object: the key columns plus ``__ts``."""
    return pa.Table.from_pylist(rows, schema=schema.tomb_arrow())


def visible(
    schema: TableSchema, as_of: int, data_objects: list[pa.Table], tomb_objects: list[pa.Table]
) -> list[dict[str, Any]]:
    result = resolve(data_objects, tomb_objects, schema, as_of)
    assert result.schema == schema.arrow()
    return result.to_pylist()


def test_newest_version_wins_and_later_versions_are_invisible() -> None:
    objects = [
        data(SIMPLE, [{"k": 1, "v": "a", TS: 10}]),
        data(SIMPLE, [{"k": 1, "v": "b", TS: 20}]),
    ]
    assert visible(SIMPLE, 9, objects, []) == []
    assert visible(SIMPLE, 10, objects, []) == [{"k": 1, "v": "a"}]
    assert visible(SIMPLE, 19, objects, []) == [{"k": 1, "v": "a"}]
    assert visible(SIMPLE, 20, objects, []) == [{"k": 1, "v": "b"}]


def test_tombstone_hides_older_versions_from_its_ts_on() -> None:
    objects = [data(SIMPLE, [{"k": 1, "v": "a", TS: 10}, {"k": 2, "v": "x", TS: 10}])]
    deleted = [tombs(SIMPLE, [{"k": 1, TS: 20}])]
    assert visible(SIMPLE, 19, objects, deleted) == [{"k": 1, "v": "a"}, {"k": 2, "v": "x"}]
    assert visible(SIMPLE, 20, objects, deleted) == [{"k": 2, "v": "x"}]
    assert visible(SIMPLE, 10**15, objects, deleted) == [{"k": 2, "v": "x"}]


def test_tombstone_of_a_key_never_written_changes_nothing() -> None:
    objects = [data(SIMPLE, [{"k": 1, "v": "a", TS: 10}])]
    assert visible(SIMPLE, 30, objects, [tombs(SIMPLE, [{"k": 7, TS: 20}])]) == [{"k": 1, "v": "a"}]


def test_only_tombstones_at_or_before_t_give_an_empty_table() -> None:
    # A table whose first commit deletes a key it never had, read at that commit,
    # or data written only after T: the events at T are tombstones alone.
    later = [data(SIMPLE, [{"k": 7, "v": "a", TS: 30}])]
    assert visible(SIMPLE, 20, [], [tombs(SIMPLE, [{"k": 7, TS: 20}])]) == []
    assert visible(SIMPLE, 25, later, [tombs(SIMPLE, [{"k": 7, TS: 20}])]) == []


def test_version_at_same_ts_as_tombstone_wins() -> None:
    # An update at 20 is a tombstone and a version, both at 20.
    objects = [
        data(SIMPLE, [{"k": 1, "v": "old", TS: 10}]),
        data(SIMPLE, [{"k": 1, "v": "new", TS: 20}]),
    ]
    update = [tombs(SIMPLE, [{"k": 1, TS: 20}])]
    assert visible(SIMPLE, 19, objects, update) == [{"k": 1, "v": "old"}]
    assert visible(SIMPLE, 20, objects, update) == [{"k": 1, "v": "new"}]
    # Order of the objects in the inputs does not matter.
    assert visible(SIMPLE, 20, objects[::-1], update) == [{"k": 1, "v": "new"}]


def test_reinsert_after_delete_is_visible_with_new_values() -> None:
    objects = [
        data(SIMPLE, [{"k": 1, "v": "first", TS: 10}]),
        data(SIMPLE, [{"k": 1, "v": "again", TS: 30}]),
    ]
    deleted = [tombs(SIMPLE, [{"k": 1, TS: 20}])]
    assert visible(SIMPLE, 10, objects, deleted) == [{"k": 1, "v": "first"}]
    assert visible(SIMPLE, 25, objects, deleted) == []
    assert visible(SIMPLE, 30, objects, deleted) == [{"k": 1, "v": "again"}]


def test_delete_after_reinsert_hides_the_key_again() -> None:
    objects = [data(SIMPLE, [{"k": 1, "v": "a", TS: 10}, {"k": 1, "v": "b", TS: 30}])]
    deleted = [tombs(SIMPLE, [{"k": 1, TS: 20}, {"k": 1, TS: 40}])]
    assert [visible(SIMPLE, t, objects, deleted) for t in (10, 20, 30, 40)] == [
        [{"k": 1, "v": "a"}],
        [],
        [{"k": 1, "v": "b"}],
        [],
    ]


def test_composite_keys_are_distinct_when_any_part_differs() -> None:
    objects = [
        data(
            COMPOSITE,
            [
                {"id": 1, "region": "eu", "v": 1.0, TS: 10},
                {"id": 1, "region": "us", "v": 2.0, TS: 10},
                {"id": 2, "region": "eu", "v": 3.0, TS: 10},
            ],
        ),
        data(COMPOSITE, [{"id": 1, "region": "us", "v": 4.0, TS: 30}]),
    ]
    deleted = [
        tombs(COMPOSITE, [{"id": 1, "region": "eu", TS: 20}, {"id": 2, "region": "us", TS: 20}])
    ]
    assert visible(COMPOSITE, 20, objects, deleted) == [
        {"id": 1, "region": "us", "v": 2.0},
        {"id": 2, "region": "eu", "v": 3.0},
    ]
    assert visible(COMPOSITE, 30, objects, deleted) == [
        {"id": 1, "region": "us", "v": 4.0},
        {"id": 2, "region": "eu", "v": 3.0},
    ]


def test_result_is_sorted_by_composite_key_whatever_the_input_order() -> None:
    rows = [
        {"id": 2, "region": "a", "v": None, TS: 1},
        {"id": -5, "region": "z", "v": None, TS: 2},
        {"id": 2, "region": "", "v": 1.5, TS: 3},
        {"id": -5, "region": "b", "v": None, TS: 4},
    ]
    result = visible(COMPOSITE, 10, [data(COMPOSITE, rows[:2]), data(COMPOSITE, rows[2:])], [])
    assert [(r["id"], r["region"]) for r in result] == [(-5, "b"), (-5, "z"), (2, ""), (2, "a")]


def test_no_events_at_or_before_t_gives_an_empty_table_of_the_schema() -> None:
    objects = [data(SIMPLE, [{"k": 1, "v": "a", TS: 10}])]
    assert visible(SIMPLE, 5, objects, [tombs(SIMPLE, [{"k": 1, TS: 7}])]) == []
    assert visible(SIMPLE, 5, [], []) == []


def test_project_fills_columns_added_later_with_default_or_null() -> None:
    old = pa.table({"k": pa.array([1, 2], pa.int64()), TS: pa.array([10, 11], pa.int64())})
    schema = TableSchema(
        (
            Column("k", "int64"),
            Column("note", "string"),
            Column("score", "int32", nullable=False, default=7),
        ),
        ("k",),
    )
    projected = project(old, schema)
    assert projected.column_names == ["k", "note", "score", TS]
    assert projected.schema.field("score").type == pa.int32()
    assert projected.to_pylist() == [
        {"k": 1, "note": None, "score": 7, TS: 10},
        {"k": 2, "note": None, "score": 7, TS: 11},
    ]
    assert resolve([projected], [], schema, 11).to_pylist() == [
        {"k": 1, "note": None, "score": 7},
        {"k": 2, "note": None, "score": 7},
    ]


def test_project_drops_columns_the_schema_no_longer_has_and_casts_to_its_types() -> None:
    old = pa.table(
        {
            "k": pa.array([1], pa.int32()),
            "gone": pa.array(["x"]),
            "v": pa.array(["a"]),
            TS: pa.array([10], pa.int64()),
        }
    )
    projected = project(old, SIMPLE)
    assert projected.schema == SIMPLE.data_arrow()
    assert projected.to_pylist() == [{"k": 1, "v": "a", TS: 10}]


def test_project_keys_only_keeps_the_key_and_ts_of_a_tombstone() -> None:
    tomb = pa.table(
        {"region": ["eu"], "id": pa.array([3], pa.int64()), TS: pa.array([9], pa.int64())}
    )
    projected = project(tomb, COMPOSITE, keys_only=True)
    assert projected.column_names == ["id", "region", TS]
    assert projected.to_pylist() == [{"id": 3, "region": "eu", TS: 9}]


@pytest.mark.parametrize("as_of", [9, 10, 15, 20, 25])
def test_resolve_on_projected_old_and_new_objects_matches_the_rules(as_of: int) -> None:
    """Objects written before and after a column existed resolve together."""
    schema = TableSchema.of([("k", "int64"), ("v", "string"), ("extra", "int64")], ["k"])
    before = project(pa.table({"k": [1, 2], "v": ["a", "b"], TS: [10, 10]}), schema)
    after = project(pa.table({"k": [2], "v": ["b2"], "extra": [5], TS: [20]}), schema)
    deleted = project(pa.table({"k": [1], TS: [15]}), schema, keys_only=True)
    expected = {
        9: [],
        10: [{"k": 1, "v": "a", "extra": None}, {"k": 2, "v": "b", "extra": None}],
        15: [{"k": 2, "v": "b", "extra": None}],
        20: [{"k": 2, "v": "b2", "extra": 5}],
        25: [{"k": 2, "v": "b2", "extra": 5}],
    }
    assert resolve([before, after], [deleted], schema, as_of).to_pylist() == expected[as_of]
