"""Model-based test of Arrow at a snapshot: random histories against ``tests/helpers/oracle.py``.

The histories are those of ``test_model_restore`` (writes, updates as delete
+ upsert, deletes of present and absent keys, partial and full compactions
with small targets, snapshots created and dropped, a column added and maybe
dropped). At every standing snapshot and at now, each table read through
:func:`read_arrow`, DuckDB (``to_duckdb``) and polars (``to_polars``) must be
the oracle's visible rows with the schema of that time; so must a random
column subset, a random primary-key range (bounds of one column or two, a
prefix) and a random filter on a non-key column, which the oracle applies
after resolving visibility, as DESIGN.md's reads must.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import duckdb
import polars as pl
import pyarrow.compute as pc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenants.objectstore.embedded import EmbeddedS3
from tenants.reads.arrow import read_arrow
from tenants.reads.interop import to_duckdb, to_polars
from tenants.times import format_ts
from tests.engine.restore.test_model_restore import (
    DB,
    PRIMARY_KEYS,
    TENANT,
    Model,
    Op,
    histories,
    model,
)
from tests.helpers.oracle import Row

# Not the catalog's behaviour: on SQLite alone (conftest.py, one_catalog).
pytestmark = pytest.mark.one_catalog

TABLES = ("items", "orders")
REGIONS = ("eu", "us")


def key_of(table: str, row: Row) -> tuple[Any, ...]:
    return tuple(row[k] for k in PRIMARY_KEYS[table])


def inside(key: tuple[Any, ...], low: Any, high: Any) -> bool:
    """Whether ``key`` lies in [low, high]: bounds as tuples, compared as prefixes."""
    return (low is None or key[: len(low)] >= low) and (high is None or key[: len(high)] <= high)


def bounds(table: str) -> st.SearchStrategy[tuple[Any, ...] | None]:
    ids = st.integers(-1, 6)
    if table == "items":
        return st.none() | st.tuples(ids)
    return st.none() | st.tuples(ids) | st.tuples(ids, st.sampled_from(REGIONS))


Draw = Callable[[st.SearchStrategy[Any]], Any]


def row_filter(table: str, draw: Draw) -> tuple[pc.Expression, pl.Expr, str, Callable[[Row], bool]]:
    """A predicate on a non-key column, as Arrow, polars, SQL and the oracle's test
    (a null compares as unknown: the row is left out, as SQL's WHERE does)."""
    if table == "orders":
        qty = draw(st.integers(-(2**31), 2**31 - 1) | st.integers(-5, 5))
        return (
            pc.field("qty") > qty,
            pl.col("qty") > qty,
            f"qty > {qty}",
            lambda r: r["qty"] > qty,
        )
    text = draw(st.sampled_from(["", "a", "m", "é"]))
    quoted = text.replace("'", "''")
    return (
        pc.field("v") >= text,
        pl.col("v") >= text,
        f"v >= '{quoted}'",
        lambda r: r["v"] is not None and r["v"] >= text,
    )


def check_point(m: Model, table: str, when: dict[str, Any], at_ts: int, draw: Draw) -> None:
    store = m.store
    expected = m.expected(table, at_ts)
    names = m.schema_at(table, at_ts).names
    pk = ", ".join(PRIMARY_KEYS[table])
    where = f"{table} at {when}"
    qualified = f"{DB}.{table}"

    got = read_arrow(store, TENANT, qualified, **when).read_all()
    assert got.column_names == names, where
    assert got.to_pylist() == expected, where
    connection = duckdb.connect()
    relation = to_duckdb(store, TENANT, qualified, connection=connection, **when)
    assert relation.order(pk).fetchall() == [tuple(r.values()) for r in expected], where
    eager = to_polars(store, TENANT, qualified, lazy=False, **when)
    assert isinstance(eager, pl.DataFrame)
    assert eager.to_dicts() == expected, where

    columns = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
    low, high = draw(bounds(table)), draw(bounds(table))
    arrow_filter, polars_filter, sql_filter, keep = row_filter(table, draw)
    in_range = [r for r in expected if inside(key_of(table, r), low, high)]
    filtered = [r for r in in_range if keep(r)]

    def shown(rows: list[Row]) -> list[Row]:
        return [{c: r[c] for c in columns} for r in rows]

    subset = read_arrow(store, TENANT, qualified, columns=columns, **when).read_all()
    assert subset.to_pylist() == shown(expected), (where, columns)
    ranged = read_arrow(store, TENANT, qualified, keys=(low, high), **when).read_all()
    assert ranged.to_pylist() == in_range, (where, low, high)
    both = read_arrow(
        store,
        TENANT,
        qualified,
        columns=columns,
        keys=(low, high),
        filter=arrow_filter,
        **when,
    ).read_all()
    assert both.to_pylist() == shown(filtered), (where, columns, low, high, sql_filter)

    relation = to_duckdb(store, TENANT, qualified, keys=(low, high), connection=connection, **when)
    sql = relation.filter(sql_filter).order(pk).fetchall()
    assert sql == [tuple(r.values()) for r in filtered], (where, low, high, sql_filter)
    lazy = to_polars(store, TENANT, qualified, keys=(low, high), **when)
    assert isinstance(lazy, pl.LazyFrame)
    frame = lazy.filter(polars_filter).select(columns).collect()
    assert frame.to_dicts() == shown(filtered), (where, columns, low, high, sql_filter)


@given(history=histories(), data=st.data())
def test_arrow_reads_at_every_protected_time_equal_the_oracle_after_resolution(
    s3_server: EmbeddedS3,
    new_catalog_uri: Callable[[], str],
    history: list[Op],
    data: st.DataObject,
) -> None:
    with model(s3_server, new_catalog_uri()) as m:
        for op in history:
            m.apply(op)
        now = m.store.now()
        points: list[tuple[dict[str, Any], int]] = [({}, now)]
        for name, ts in sorted(m.snapshots.items()):
            # A snapshot's time may be named by the snapshot, its ts, or as an instant.
            forms = [{"as_of": name}, {"as_of": ts}, {"as_of": format_ts(ts)}]
            points.append((data.draw(st.sampled_from(forms)), ts))
        for when, at_ts in points:
            for table in TABLES:
                check_point(m, table, when, at_ts, data.draw)
