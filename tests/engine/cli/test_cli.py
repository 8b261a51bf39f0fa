"""The ``rewind`` CLI end to end: a real SQLite catalog file and a real moto S3 warehouse.

Every command runs in-process through ``typer.testing.CliRunner``; state is
checked through the CLI's own ``--json`` output, so these tests also pin the
machine-readable format.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import Result

from engine.cli.app import main
from engine.cli.render_layout import local_time
from tenants.errors import InvalidArgument, NotFound
from tenants.objectstore.embedded import EmbeddedS3
from tenants.store import TableStore
from tenants.times import format_ts, parse_duration
from tests.helpers.cli import as_json, ok

# Not the catalog's behaviour: on SQLite alone (conftest.py, one_catalog).
pytestmark = pytest.mark.one_catalog

Rewind = Callable[..., Result]

ORDERS_COLUMNS = [
    "--column",
    "customer_id:int64",
    "--column",
    "order_no:int32",
    "--column",
    "item:string",
    "--column",
    "amount:double",
]


@pytest.fixture
def api(uris: tuple[str, str], s3_server: EmbeddedS3) -> Iterator[TableStore]:
    """The same catalog and warehouse through the API (for what the CLI does not do yet)."""
    table_store = TableStore.open(*uris)
    yield table_store
    table_store.close()


def write_csv(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.fixture
def orders(rewind: Rewind) -> str:
    """Tenant ``acme`` with ``sales.orders`` keyed by (customer_id, order_no)."""
    ok(rewind("tenant", "create", "acme"))
    ok(
        rewind(
            "table",
            "create",
            "acme",
            "sales.orders",
            *ORDERS_COLUMNS,
            "--key",
            "customer_id",
            "--key",
            "order_no",
        )
    )
    return "sales.orders"


@pytest.fixture
def loaded(rewind: Rewind, orders: str, tmp_path: Path) -> str:
    """``orders`` with three rows from a CSV file."""
    csv = write_csv(
        tmp_path / "o.csv",
        "customer_id,order_no,item,amount\n1,1,007,12.5\n1,2,widget,3.1\n2,1,gadget,99.99\n",
    )
    ok(rewind("load", "acme", orders, csv))
    return orders


def query_rows(rewind: Rewind, *args: str) -> list[dict[str, Any]]:
    return list(as_json(rewind("--json", "query", "acme", "sales.orders", *args)))


def state_of(rewind: Rewind) -> dict[str, Any]:
    """Everything a failed command must leave unchanged."""
    state: dict[str, Any] = {"tenants": as_json(rewind("--json", "tenant", "list", "--all"))}
    if any(t["name"] == "acme" and t["state"] == "active" for t in state["tenants"]):
        state["objects"] = as_json(rewind("--json", "objects", "acme"))
        state["rows"] = query_rows(rewind)
    return state


def test_tenant_create_list_and_drop_round_trip(rewind: Rewind) -> None:
    assert "created tenant acme" in ok(rewind("tenant", "create", "acme")).stdout
    ok(rewind("tenant", "create", "globex"))
    listed = as_json(rewind("--json", "tenant", "list"))
    assert [(t["name"], t["state"], t["dropped"]) for t in listed] == [
        ("acme", "active", None),
        ("globex", "active", None),
    ]
    assert listed[0]["created"] == format_ts(listed[0]["created_ts"])

    ok(rewind("tenant", "drop", "globex", "--yes"))
    assert [t["name"] for t in as_json(rewind("--json", "tenant", "list"))] == ["acme"]
    everything = as_json(rewind("--json", "tenant", "list", "--all"))
    dropped = next(t for t in everything if t["name"] == "globex")
    assert dropped["state"] == "dropped" and dropped["dropped"] == format_ts(dropped["dropped_ts"])
    # People see the drop time in the local zone; --wide keeps each row on one line.
    text = ok(rewind("--wide", "tenant", "list", "--all")).stdout
    (row,) = [line for line in text.splitlines() if f"globex@{dropped['id']}" in line]
    assert "dropped" in row and local_time(dropped["dropped_ts"]) in row


def test_table_create_records_columns_and_composite_key(rewind: Rewind, orders: str) -> None:
    (table,) = as_json(rewind("--json", "table", "list", "acme"))
    assert table["table"] == orders
    assert table["primary_key"] == ["customer_id", "order_no"]
    assert [(c["name"], c["type"]) for c in table["columns"]] == [
        ("customer_id", "int64"),
        ("order_no", "int32"),
        ("item", "string"),
        ("amount", "double"),
    ]
    ok(rewind("table", "drop", "acme", orders))
    assert as_json(rewind("--json", "table", "list", "acme")) == []


def test_load_csv_and_parquet_then_query_returns_every_row_sorted_by_key(
    rewind: Rewind, loaded: str, tmp_path: Path
) -> None:
    parquet = tmp_path / "more.parquet"
    pq.write_table(
        pa.table(
            {
                "customer_id": [0, 1],
                "order_no": [5, 2],
                "item": ["first", "updated"],
                "amount": [1.0, 4.0],
            }
        ),
        parquet,
    )
    assert "loaded 2 rows" in ok(rewind("load", "acme", loaded, parquet)).stdout
    assert query_rows(rewind) == [
        {"customer_id": 0, "order_no": 5, "item": "first", "amount": 1.0},
        {"customer_id": 1, "order_no": 1, "item": "007", "amount": 12.5},  # text kept verbatim
        {"customer_id": 1, "order_no": 2, "item": "updated", "amount": 4.0},
        {"customer_id": 2, "order_no": 1, "item": "gadget", "amount": 99.99},
    ]


def test_query_table_view_shows_rows_and_honours_limit(rewind: Rewind, loaded: str) -> None:
    text = ok(rewind("query", "acme", loaded, "--limit", "2")).stdout
    assert "widget" in text and "gadget" not in text and "first 2 rows, more follow" in text
    assert len(query_rows(rewind, "--limit", "1")) == 1


def test_query_of_a_key_range_shows_only_those_keys(rewind: Rewind, loaded: str) -> None:
    everything = query_rows(rewind)
    ranged = query_rows(rewind, "--from", "[1, 2]", "--to", "2")
    assert ranged == [
        r
        for r in everything
        if (r["customer_id"], r["order_no"]) >= (1, 2) and r["customer_id"] <= 2
    ]
    assert ranged and len(ranged) < len(everything)
    bad = rewind("query", "acme", loaded, "--from", "x")
    assert bad.exit_code != 0 and "not a int64 for key column 'customer_id'" in bad.stderr


def test_delete_hides_rows_now_and_as_of_an_earlier_time_still_shows_them(
    rewind: Rewind, orders: str, api: TableStore, tmp_path: Path
) -> None:
    api.set_pitr("acme", parse_duration("1h"))  # protects the earlier times we read
    csv = write_csv(
        tmp_path / "o.csv", "customer_id,order_no,item,amount\n1,1,a,1\n1,2,b,2\n2,1,c,3\n"
    )
    before = as_json(rewind("--json", "load", "acme", orders, csv))["ts"]
    api.create_snapshot("acme", "before_delete")
    keys = write_csv(tmp_path / "k.csv", "order_no,customer_id\n2,1\n1,2\n")
    deleted = as_json(rewind("--json", "delete", "acme", orders, "--keys", keys))
    assert deleted["deleted"] == 2 and deleted["ts"] > before

    assert [(r["customer_id"], r["order_no"]) for r in query_rows(rewind)] == [(1, 1)]
    for as_of in (str(before), format_ts(before), "before_delete"):
        rows = query_rows(rewind, "--as-of", as_of)
        assert [(r["customer_id"], r["order_no"]) for r in rows] == [(1, 1), (1, 2), (2, 1)], as_of


def test_compact_merges_objects_and_objects_lists_the_new_layout(
    rewind: Rewind, loaded: str, tmp_path: Path
) -> None:
    ok(
        rewind(
            "load",
            "acme",
            loaded,
            write_csv(tmp_path / "b.csv", "customer_id,order_no,item,amount\n3,1,x,1\n"),
        )
    )
    ok(
        rewind(
            "delete",
            "acme",
            loaded,
            "--keys",
            write_csv(tmp_path / "k.csv", "customer_id,order_no\n1,2\n"),
        )
    )
    ok(
        rewind(
            "delete",
            "acme",
            loaded,
            "--keys",
            write_csv(tmp_path / "k2.csv", "customer_id,order_no\n2,1\n"),
        )
    )
    before = as_json(rewind("--json", "objects", "acme"))
    assert sorted(o["kind"] for o in before) == ["data", "data", "tomb", "tomb"]
    rows_before = query_rows(rewind)

    results = as_json(rewind("--json", "compact", "acme", loaded, "--target-mb", "1"))
    assert results == [
        {
            "table": loaded,
            "inputs": 4,
            "outputs": 2,
            "rows": 6,
            "bytes_in": results[0]["bytes_in"],
            "bytes_out": results[0]["bytes_out"],
        }
    ]
    after = as_json(rewind("--json", "objects", "acme"))
    assert [(o["table"], o["kind"], o["rows"], o["sorted"]) for o in after] == [
        (loaded, "data", 4, True),
        (loaded, "tomb", 2, True),
    ]
    assert min(o["min_ts"] for o in after) == min(o["min_ts"] for o in before)
    assert query_rows(rewind) == rows_before
    text = ok(rewind("--wide", "objects", "acme")).stdout  # every key whole, on one line
    assert all(o["key"] in text for o in after) and "2 object(s), 6 rows" in text


def test_bad_name_is_rejected_before_the_catalog_is_created(rewind: Rewind, tmp_path: Path) -> None:
    result = rewind("tenant", "create", "Bad!")
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "error: invalid tenant name 'Bad!': use 1-63 characters, a lowercase letter first, "
        "then lowercase letters, digits, '_' or '-'"
    )
    assert not (tmp_path / "c.db").exists()


BAD_INPUTS: dict[str, tuple[list[str], str]] = {
    "invalid_tenant_name": (["tenant", "create", "Acme Corp"], "invalid tenant name 'Acme Corp'"),
    "invalid_table_name": (
        ["load", "acme", "sales.or-ders", "{good}"],
        "invalid table name 'or-ders'",
    ),
    "unknown_tenant": (
        ["load", "ghost", "sales.orders", "{good}"],
        "tenant 'ghost' does not exist",
    ),
    "unknown_table": (["load", "acme", "sales.nope", "{good}"], "table sales.nope does not exist"),
    "schema_mismatched_csv": (
        ["load", "acme", "sales.orders", "{mismatched}"],
        "missing columns ['item', 'amount'], unexpected columns ['colour']",
    ),
    "unparsable_value": (
        ["load", "acme", "sales.orders", "{unparsable}"],
        "column 'customer_id' of acme/sales.orders has type string",
    ),
    "duplicate_key": (["load", "acme", "sales.orders", "{duplicate}"], "duplicate key"),
    "keys_file_with_extra_column": (
        ["delete", "acme", "sales.orders", "--keys", "{good}"],
        "must have exactly the key columns",
    ),
    "unknown_file_format": (["load", "acme", "sales.orders", "{text}"], "cannot tell the format"),
    "bad_column_spec": (
        ["table", "create", "acme", "a.b", "--column", "x", "--key", "x"],
        "invalid --column 'x'",
    ),
    "unknown_type": (
        ["table", "create", "acme", "a.b", "--column", "x:blob", "--key", "x"],
        "unsupported column type 'blob'",
    ),
    "unknown_snapshot": (
        ["query", "acme", "sales.orders", "--as-of", "yesterday"],
        "no snapshot 'yesterday'",
    ),
    "unprotected_time": (
        ["query", "acme", "sales.orders", "--as-of", "2020-01-01T00:00:00Z"],
        "is not protected for tenant 'acme'",
    ),
    "zero_target_size": (["compact", "acme", "--target-mb", "0"], "invalid --target-mb"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_exits_1_with_one_line_message_and_changes_nothing(
    rewind: Rewind, loaded: str, tmp_path: Path, case: str
) -> None:
    files = {
        "good": write_csv(tmp_path / "good.csv", "customer_id,order_no,item,amount\n7,7,new,1\n"),
        "mismatched": write_csv(
            tmp_path / "mismatched.csv", "customer_id,order_no,colour\n7,7,red\n"
        ),
        "unparsable": write_csv(
            tmp_path / "unparsable.csv", "customer_id,order_no,item,amount\nabc,7,x,1\n"
        ),
        "duplicate": write_csv(
            tmp_path / "dup.csv", "customer_id,order_no,item,amount\n7,7,x,1\n7,7,y,2\n"
        ),
        "text": write_csv(tmp_path / "rows.txt", "customer_id,order_no,item,amount\n7,7,x,1\n"),
    }
    args, expected = BAD_INPUTS[case]
    args = [a.format(**{k: str(v) for k, v in files.items()}) for a in args]
    before = state_of(rewind)

    result = rewind(*args)

    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], (
        result.stderr
    )
    assert "Traceback" not in result.output
    assert state_of(rewind) == before


def test_usage_errors_keep_typers_exit_code_2(rewind: Rewind) -> None:
    assert rewind("tenant", "create").exit_code == 2
    assert rewind("load", "acme", "sales.orders", "/no/such/file.csv").exit_code == 2
    assert rewind("query", "acme", "sales.orders", "--reader", "gpu").exit_code == 2


def test_verbose_adds_the_traceback_before_the_message(rewind: Rewind) -> None:
    ok(rewind("tenant", "create", "acme"))
    result = rewind("--verbose", "tenant", "drop", "ghost", "--yes")
    assert result.exit_code == 1
    assert "Traceback" in result.stderr and "NotFound" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: tenant 'ghost' does not exist")


def test_main_entry_point_exits_1_on_a_rewind_error(
    uris: tuple[str, str], s3_server: EmbeddedS3, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog, warehouse = uris
    TableStore.open(catalog, warehouse, s3=s3_server.settings).close()  # a store, no ghost
    with pytest.raises(SystemExit) as exit_info:
        main(["--catalog", catalog, "--warehouse", warehouse, "tenant", "drop", "ghost", "--yes"])
    assert exit_info.value.code == 1
    assert capsys.readouterr().err.startswith("error: tenant 'ghost' does not exist")


def test_resolve_time_accepts_snapshot_names_instants_and_raw_ts(api: TableStore) -> None:
    api.create_tenant("acme")
    api.set_pitr("acme", parse_duration("1h"))
    snap = api.create_snapshot("acme", "monday")
    assert api.resolve_time("acme", "monday") == snap.ts
    assert api.resolve_time("acme", str(snap.ts)) == snap.ts
    assert api.resolve_time("acme", format_ts(snap.ts)) == snap.ts
    with pytest.raises(NotFound, match="no snapshot 'tuesday'"):
        api.resolve_time("acme", "tuesday")
    with pytest.raises(InvalidArgument, match="in the future"):
        api.resolve_time("acme", "2999-01-01T00:00:00Z")


def test_spark_reader_returns_the_same_rows_as_the_local_reader(
    rewind: Rewind, loaded: str, spark: Any
) -> None:
    assert query_rows(rewind, "--reader", "spark") == query_rows(rewind, "--reader", "local")
