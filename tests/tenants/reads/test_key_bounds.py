"""A key bound is the value it says, or it is refused: never rounded into another.

``read_arrow(keys=(1.5, 2))`` on an int64 key once read from 1 (pyarrow
truncated the bound). Every API that takes a key range (read_arrow, to_duckdb,
to_polars, ``rewind query --from/--to``) now refuses a bound that does not fit
the key column exactly, naming the column, its type and the bound; any other
bound gives exactly the rows a Python filter on the model gives.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenants.errors import InvalidArgument
from tenants.reads.arrow import read_arrow
from tenants.reads.interop import to_duckdb, to_polars
from tenants.schema import Column, TableSchema
from tenants.store import TableStore
from tests.helpers.cli import as_json, items_tenant

pytestmark = pytest.mark.one_catalog

SCHEMAS = {
    "i64": TableSchema((Column("k", "int64"), Column("v", "string")), ("k",)),
    "i32": TableSchema((Column("k", "int32"), Column("v", "string")), ("k",)),
    "i16": TableSchema((Column("k", "int16"), Column("v", "string")), ("k",)),
    "f32": TableSchema((Column("k", "float32"), Column("v", "string")), ("k",)),
    "f64": TableSchema((Column("k", "float64"), Column("v", "string")), ("k",)),
    "txt": TableSchema((Column("k", "string"), Column("v", "string")), ("k",)),
}
KEYS: dict[str, list[Any]] = {
    "i64": [-(2**40), -3, 0, 1, 2, 3, 2**40],
    "i32": [-(2**31), -3, 0, 1, 2, 3, 2**31 - 1],
    "i16": [-(2**15), -1, 0, 1, 2, 2**15 - 1],
    "f32": [-1.5, 0.0, 0.5, 1.0, 2.25, 1e30],
    "f64": [-1.5, 0.0, 0.1, 1.0, 2.5, 1e300],
    "txt": ["", "a", "b", "ba", "z"],
}


@pytest.fixture
def keyed(store: TableStore) -> TableStore:
    """Tenant ``acme`` with one table ``db.<kind>`` per key type above, holding KEYS."""
    store.create_tenant("acme")
    for kind, schema in SCHEMAS.items():
        store.create_table("acme", f"db.{kind}", schema)
        rows = pa.Table.from_pylist(
            [{"k": k, "v": str(k)} for k in KEYS[kind]], schema=schema.arrow()
        )
        store.write("acme", f"db.{kind}", upserts=rows)
    return store


def by_read_arrow(store: TableStore, table: str, keys: Any) -> list[Any]:
    return read_arrow(store, "acme", table, keys=keys).read_all().column("k").to_pylist()


def by_duckdb(store: TableStore, table: str, keys: Any) -> list[Any]:
    relation = to_duckdb(store, "acme", table, keys=keys, connection=duckdb.connect())
    return [row[0] for row in relation.order("k").fetchall()]


def by_polars(store: TableStore, table: str, keys: Any) -> list[Any]:
    import polars as pl

    frame = to_polars(store, "acme", table, keys=keys)
    assert isinstance(frame, pl.LazyFrame)  # lazy=True, the default
    return frame.collect()["k"].to_list()


READERS = [by_read_arrow, by_duckdb, by_polars]


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize(
    ("table", "keys", "message"),
    [
        (
            "db.i64",
            (1.5, 2),
            r"key bound 1\.5 of acme/db\.i64: 1\.5 is not a whole number for key column 'k' \(int64\)",
        ),
        ("db.i64", (None, 2.5), r"2\.5 is not a whole number.*'k' \(int64\)"),
        ("db.i64", ("1", None), r"'1' is not a int64 for key column 'k' \(int64\)"),
        ("db.i64", (True, None), r"True is not a int64 for key column 'k' \(int64\)"),
        ("db.f64", (math.nan, None), r"nan is NaN.*'k' \(double\)"),
        ("db.f64", (None, True), r"True is not a double.*'k' \(double\)"),
        ("db.f32", (0.1, None), r"0\.1 does not fit a float exactly.*'k' \(float\)"),
        ("db.i32", (2**31, None), r"2147483648 is not a int32.*'k' \(int32\)"),
        ("db.i16", (None, 70000), r"70000 is not a int16.*'k' \(int16\)"),
        ("db.i16", (-(2**15) - 1, None), r"-32769 is not a int16.*'k' \(int16\)"),
        ("db.txt", (1, None), r"1 is not a string for key column 'k' \(string\)"),
        ("db.txt", (None, 1.5), r"1\.5 is not a string.*'k' \(string\)"),
    ],
)
def test_a_bound_that_is_not_exactly_a_key_value_is_refused_by_every_reader(
    keyed: TableStore, reader: Callable[..., list[Any]], table: str, keys: Any, message: str
) -> None:
    with pytest.raises(InvalidArgument, match=message):
        reader(keyed, table, keys)


def test_a_whole_float_bound_on_an_int_key_is_that_int(keyed: TableStore) -> None:
    assert by_read_arrow(keyed, "db.i64", (1.0, 2.0)) == [1, 2]


def test_query_from_to_refuses_a_bound_the_key_cannot_hold_exactly(
    rewind: Callable[..., Any], tmp_path: Path
) -> None:
    items_tenant(rewind, tmp_path)  # shop.items keyed by id int64: rows 1 and 2
    for bound, why in [
        ("1.5", "1.5 is not a whole number"),
        ("true", "True is not a int64"),
        ("NaN", "nan is NaN"),
        ("x", "'x' is not a int64"),
    ]:
        result = rewind("query", "acme", "shop.items", "--from", bound)
        assert result.exit_code == 1, result.output
        assert why in result.stderr and "'id' (int64)" in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    rows = as_json(rewind("--json", "query", "acme", "shop.items", "--from", "2.0"))
    assert [r["id"] for r in rows] == [2]


def _python_filter(values: list[Any], low: Any, high: Any) -> list[Any]:
    return sorted(v for v in values if (low is None or v >= low) and (high is None or v <= high))


BOUNDS = st.one_of(
    st.none(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.sampled_from([-(2**31) - 1, -(2**31), 2**31 - 1, 2**31, 2**15, -(2**15) - 1, 2**63]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-4, max_value=4).map(lambda f: round(f * 4) / 4),  # exact in float32
    st.booleans(),
    st.text(max_size=3),
)


@given(kind=st.sampled_from(sorted(SCHEMAS)), low=BOUNDS, high=BOUNDS)
def test_any_bound_is_refused_or_gives_exactly_the_rows_a_python_filter_gives(
    keyed: TableStore, kind: str, low: Any, high: Any
) -> None:
    try:
        got = by_read_arrow(keyed, f"db.{kind}", (low, high))
    except InvalidArgument as e:
        assert "'k' (" in e.message  # names the column and its type
        return
    values = KEYS[kind]
    if kind == "f32":  # what the column holds: the float32 values, read back
        values = pa.array(values, pa.float32()).to_pylist()
    for bound in (low, high):
        # Anything accepted is of the key's kind, so it orders against every key.
        assert bound is None or not isinstance(bound, bool)
        assert not (isinstance(bound, float) and math.isnan(bound))
    assert sorted(got) == _python_filter(values, low, high)
