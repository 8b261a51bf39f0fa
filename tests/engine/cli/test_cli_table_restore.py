"""``rewind restore-table``, ``restore-database``, ``table undrop`` and ``history
--commits`` as a user runs them: find the bad commit, restore just before it."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from tests.helpers.cli import as_json, ok

# Not the catalog's behaviour: on SQLite alone (conftest.py, one_catalog).
pytestmark = pytest.mark.one_catalog

Rewind = Callable[..., Result]


def rows_of(rewind: Rewind, tenant: str, table: str) -> list[dict[str, Any]]:
    return as_json(rewind("--json", "query", tenant, table))  # type: ignore[no-any-return]


@pytest.fixture
def shop(rewind: Rewind, tmp_path: Path) -> Path:
    """``acme`` (PITR 72h) with shop.orders and shop.users; a bad delete on orders."""
    ok(rewind("tenant", "create", "acme"))
    ok(rewind("pitr", "set", "acme", "72h"))
    for table in ("shop.orders", "shop.users"):
        ok(rewind("table", "create", "acme", table, "-c", "id:int64", "-c", "v:string", "-k", "id"))
        (tmp_path / "rows.csv").write_text("id,v\n1,a\n2,b\n3,c\n")
        ok(rewind("load", "acme", table, tmp_path / "rows.csv"))
    ok(rewind("snapshot", "create", "acme", "mon"))
    (tmp_path / "bad.csv").write_text("id\n1\n2\n")
    ok(rewind("delete", "acme", "shop.orders", "--keys", tmp_path / "bad.csv"))
    (tmp_path / "more.csv").write_text("id,v\n4,d\n")
    ok(rewind("load", "acme", "shop.users", tmp_path / "more.csv"))
    return tmp_path


def test_find_the_bad_commit_and_restore_the_table_to_just_before_it(
    rewind: Rewind, shop: Path
) -> None:
    commits = as_json(rewind("history", "acme", "--commits", "--table", "shop.orders", "--json"))
    bad = next(c for c in commits if c["rows_deleted"])
    assert bad["table"] == "shop.orders" and bad["rows_deleted"] == 2
    plan = as_json(
        rewind("restore-table", "acme", "shop.orders", "--before", bad["ts"], "--dry-run", "--json")
    )
    assert plan["scope"] == "table" and plan["totals"]["reuse"]["objects"] >= 1
    done = as_json(
        rewind("restore-table", "acme", "shop.orders", "--before", bad["ts"], "--json", "--yes")
    )
    assert done["scope"] == "table" and done["tables"] == ["shop.orders"]
    assert [r["id"] for r in rows_of(rewind, "acme", "shop.orders")] == [1, 2, 3]
    assert [r["id"] for r in rows_of(rewind, "acme", "shop.users")] == [1, 2, 3, 4]
    kinds = [c["kind"] for c in as_json(rewind("history", "acme", "--commits", "--json"))[:2]]
    assert sorted(kinds) == ["replace", "restore"]
    jobs = as_json(rewind("--json", "history", "acme"))["jobs"]
    assert jobs[0]["scope"] == "table" and jobs[0]["state"] == "done"
    # undo: just before the restore's own commit (the PITR window covers it)
    undo = as_json(rewind("history", "acme", "--commits", "--json"))[0]["ts"]
    ok(rewind("restore-table", "acme", "shop.orders", "--before", undo, "--yes"))
    assert [r["id"] for r in rows_of(rewind, "acme", "shop.orders")] == [3]


def test_to_and_to_tenant_and_relative_times(rewind: Rewind, shop: Path) -> None:
    ok(
        rewind(
            "restore-table", "acme", "shop.orders", "--snapshot", "mon", "--to", "shop.orders_mon"
        )
    )
    assert [r["id"] for r in rows_of(rewind, "acme", "shop.orders_mon")] == [1, 2, 3]
    assert [r["id"] for r in rows_of(rewind, "acme", "shop.orders")] == [3]
    ok(rewind("tenant", "create", "scratch"))
    ok(rewind("restore-database", "acme", "shop", "--at", "now", "--to-tenant", "scratch", "--yes"))
    assert [r["id"] for r in rows_of(rewind, "scratch", "shop.users")] == [1, 2, 3, 4]


def test_a_drop_says_whether_the_table_can_be_undropped(rewind: Rewind, tmp_path: Path) -> None:
    ok(rewind("tenant", "create", "bare"))
    ok(rewind("table", "create", "bare", "db.t", "-c", "id:int64", "-k", "id"))
    result = ok(rewind("table", "drop", "bare", "db.t"))
    assert "warning: tenant bare has no snapshot or PITR window" in result.stderr
    result = rewind("table", "undrop", "bare", "db.t")
    assert result.exit_code == 1 and "no longer retained" in result.stderr


def test_undrop_a_table(rewind: Rewind, shop: Path) -> None:
    result = ok(rewind("table", "drop", "acme", "shop.users"))
    assert "rewind table undrop acme shop.users" in result.stdout
    result = ok(rewind("table", "undrop", "acme", "shop.users"))
    assert "shop.users" in result.stdout
    assert [r["id"] for r in rows_of(rewind, "acme", "shop.users")] == [1, 2, 3, 4]


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (
            ("restore-table", "acme", "shop.orders"),
            r"exactly one of --snapshot NAME, --at TIME or --before",
        ),
        (("restore-table", "acme", "shop.orders", "--before", "x"), r"invalid --before 'x'"),
        (
            ("restore-table", "acme", "shop.orders", "--before", "1795600800000000"),
            r"has no commit at ts 1795600800000000",
        ),
        (("restore-table", "acme", "shop", "--snapshot", "mon"), r"expected DB.TABLE"),
        (("restore-table", "acme", "shop.nope", "--snapshot", "mon"), r"did not exist"),
        (("restore-table", "acme", "shop.orders", "--snapshot", "-1h"), r"for a time use --at"),
        (
            ("restore-table", "acme", "shop.orders", "--snapshot", "mon", "--to", "shop.users"),
            r"already exists",
        ),
        (("restore-database", "acme", "nodb", "--snapshot", "mon"), r"database nodb did not exist"),
        (("table", "undrop", "acme", "shop.orders"), r"no dropped table shop.orders"),
        (("history", "acme", "--table", "shop.orders"), r"--table goes with --commits"),
    ],
)
def test_bad_input_is_one_line_and_changes_nothing(
    rewind: Rewind, shop: Path, args: tuple[str, ...], match: str
) -> None:
    before = rows_of(rewind, "acme", "shop.orders")
    result = rewind(*args)
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and re.search(match, lines[0]), lines
    assert rows_of(rewind, "acme", "shop.orders") == before
