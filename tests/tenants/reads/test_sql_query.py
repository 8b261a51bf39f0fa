"""``rewind query TENANT --sql QUERY`` (tenants.reads.interop.duckdb_sql): DuckDB over the
tenant's tables, each ``db.table`` the rows visible at one time.

The store is the suite's real one (moto S3, SQLite or PostgreSQL catalog).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tenants.errors import InvalidArgument, NotFound
from tenants.reads.interop import duckdb_sql, sql_tables
from tenants.schema import TableSchema
from tenants.store import TableStore
from tests.helpers.cli import as_json, ok

# Not the catalog's behaviour: on SQLite alone (conftest.py, one_catalog).
pytestmark = pytest.mark.one_catalog

ITEMS = TableSchema.of([("id", "int64"), ("name", "string")], ["id"])
ORDERS = TableSchema.of([("id", "int64"), ("item", "int64"), ("qty", "int32")], ["id"])


def shop(store: TableStore) -> None:
    """shop.items and shop.orders; at ``mon`` order 2 is deleted and order 3's
    qty updated; after ``mon`` more orders and a renamed item."""
    store.create_tenant("acme")
    store.create_table("acme", "shop.items", ITEMS)
    store.create_table("acme", "shop.orders", ORDERS)
    store.write("acme", "shop.items", upserts=pa.table({"id": [1, 2], "name": ["apple", "pear"]}))
    store.write(
        "acme",
        "shop.orders",
        upserts=pa.Table.from_pylist(
            [{"id": i, "item": 1 + i % 2, "qty": i} for i in range(1, 6)], schema=ORDERS.arrow()
        ),
    )
    store.write("acme", "shop.orders", deletes=pa.table({"id": [2]}))
    store.write(
        "acme",
        "shop.orders",
        upserts=pa.Table.from_pylist([{"id": 3, "item": 2, "qty": 30}], schema=ORDERS.arrow()),
    )
    store.create_snapshot("acme", "mon")
    store.write(
        "acme",
        "shop.orders",
        upserts=pa.Table.from_pylist([{"id": 9, "item": 1, "qty": 99}], schema=ORDERS.arrow()),
    )
    store.write("acme", "shop.items", upserts=pa.table({"id": [1], "name": ["apricot"]}))


JOIN = (
    "SELECT i.name, sum(o.qty) AS qty FROM shop.orders o JOIN shop.items i ON o.item = i.id "
    "GROUP BY i.name ORDER BY i.name"
)


def test_a_query_joins_the_visible_rows_of_every_table_it_names_at_one_time(
    store: TableStore,
) -> None:
    shop(store)
    expected = {}
    for when in ("mon", None):
        items = {
            r["id"]: r["name"] for r in store.read("acme", "shop.items", as_of=when).to_pylist()
        }
        totals: dict[str, int] = {}
        for order in store.read("acme", "shop.orders", as_of=when).to_pylist():
            name = items[order["item"]]
            totals[name] = totals.get(name, 0) + order["qty"]
        expected[when] = sorted(totals.items())
    assert duckdb_sql(store, "acme", JOIN, as_of="mon").fetchall() == expected["mon"]
    assert duckdb_sql(store, "acme", JOIN).fetchall() == expected[None]
    assert expected["mon"] == [("apple", 4), ("pear", 1 + 30 + 5)]  # 2 deleted, 3 updated
    relation = duckdb_sql(store, "acme", "SELECT count(*) FROM shop.orders", as_of="mon")
    assert relation.fetchall() == relation.fetchall() == [(4,)]  # each query a new stream


def test_the_tables_of_a_query_are_the_names_it_reads_as_database_table() -> None:
    assert sql_tables(JOIN) == [("shop", "items"), ("shop", "orders")]
    quoted = 'SELECT * FROM "shop"."orders" AS x WHERE x.id IN (SELECT id FROM crm.people)'
    assert sql_tables(quoted) == [("crm", "people"), ("shop", "orders")]
    with pytest.raises(InvalidArgument, match="names no table"):
        sql_tables("SELECT 1")
    with pytest.raises(InvalidArgument, match="does not parse"):
        sql_tables("SELEC 1")


def test_a_query_naming_a_table_the_tenant_lacks_at_that_time_is_not_found(
    store: TableStore,
) -> None:
    shop(store)
    with pytest.raises(NotFound, match="shop.nope"):
        duckdb_sql(store, "acme", "SELECT * FROM shop.nope", as_of="mon")
    with pytest.raises(NotFound, match="no snapshot 'sun'"):
        duckdb_sql(store, "acme", JOIN, as_of="sun")


def test_rewind_query_sql_prints_a_table_or_json_and_refuses_what_it_cannot_mean(
    rewind: Callable[..., Any], tmp_path: Path
) -> None:
    from tests.helpers.cli import items_tenant

    items_tenant(rewind, tmp_path)  # acme/shop.items: (1, a), (2, b); snapshot mon
    (tmp_path / "more.csv").write_text("id,v\n3,c\n")
    ok(rewind("load", "acme", "shop.items", tmp_path / "more.csv"))
    count = "SELECT count(*) AS n, max(v) AS last FROM shop.items"
    shown = ok(rewind("query", "acme", "--snapshot", "mon", "--sql", count))
    assert "2" in shown.stdout and "b" in shown.stdout and "1 row," in shown.stdout
    assert as_json(rewind("--json", "query", "acme", "--sql", count)) == [{"n": 3, "last": "c"}]
    assert as_json(rewind("--json", "query", "acme", "--as-of", "mon", "--sql", count)) == [
        {"n": 2, "last": "b"}
    ]
    limited = as_json(
        rewind(
            "--json",
            "query",
            "acme",
            "--sql",
            "SELECT id FROM shop.items ORDER BY id",
            "--limit",
            "1",
        )
    )
    assert limited == [{"id": 1}]

    def refused(*args: str, match: str) -> None:
        done = rewind(*args)
        assert done.exit_code == 1, done.output
        assert len(done.stderr.strip().splitlines()) == 1 and match in done.stderr, done.stderr
        failed = rewind("--json", *args)
        assert match in json.loads(failed.stdout)["error"]["message"]

    refused("query", "acme", "--sql", "SELECT * FROM shop.nope", match="shop.nope")
    refused("query", "acme", "--sql", "SELEC 1", match="does not parse")
    refused("query", "acme", "shop.items", "--sql", count, match="not both")
    refused("query", "acme", match="DB.TABLE, or --sql")
    refused("query", "acme", "--sql", count, "--from", "1", match="leave out --from")
    refused(
        "query", "acme", "--sql", count, "--as-of", "mon", "--at", "now", match="one of --as-of"
    )
    refused("query", "acme", "--sql", count, "--snapshot", "sun", match="'sun'")
    # --snapshot and --at work for a table too.
    rows = as_json(rewind("--json", "query", "acme", "shop.items", "--snapshot", "mon"))
    assert rows == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
