"""A command that only reads never creates a catalog or warehouse, and "not found" says where it looked.

Run from the wrong directory without ``REWIND_HOME``, ``rewind tenant list``
(or the README's DuckDB snippet) once created an empty catalog and warehouse
there and answered as if the data were gone. Now a read on a catalog that
does not exist fails with one line naming the catalog and warehouse it looked
at, and leaves the directory as it was; commands that create still create.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from engine.cli.app import app
from tenants.catalog import open_catalog
from tenants.errors import NotFound
from tenants.reads.interop import to_duckdb
from tenants.store import TableStore

pytestmark = pytest.mark.one_catalog

READS = [
    ("tenant", "list"),
    ("query", "acme", "shop.items"),
    ("query", "acme", "--sql", "SELECT * FROM shop.items"),
    ("history", "acme"),
    ("snapshot", "list", "acme"),
    ("pitr", "show", "acme"),
    ("table", "list", "acme"),
    ("ddl", "acme"),
    ("objects", "acme"),
    ("storage", "acme"),
    ("gc", "--dry-run"),
]


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with no Rewind in it, and no REWIND_* pointing anywhere."""
    for name in ("REWIND_HOME", "REWIND_CATALOG", "REWIND_WAREHOUSE"):
        monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "wrong-dir"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


@pytest.mark.parametrize("args", READS, ids=" ".join)
def test_a_read_from_the_wrong_directory_creates_nothing_and_names_where_it_looked(
    elsewhere: Path, args: tuple[str, ...]
) -> None:
    result = CliRunner().invoke(app, list(args))

    assert result.exit_code == 1, result.output
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1, message
    assert "catalog sqlite:///.rewind/catalog.db does not exist" in message
    assert f"(warehouse file://{elsewhere}/.rewind/warehouse)" in message
    assert "nothing was created" in message
    assert tree(elsewhere) == []


def test_a_read_under_json_reports_not_found_as_one_json_object(elsewhere: Path) -> None:
    result = CliRunner().invoke(app, ["--json", "tenant", "list"])
    assert result.exit_code == 1
    error = json.loads(result.stdout)["error"]
    assert error["type"] == "NotFound" and ".rewind/catalog.db" in error["message"]
    assert tree(elsewhere) == []


def test_a_command_that_creates_still_creates_the_store(elsewhere: Path) -> None:
    assert CliRunner().invoke(app, ["tenant", "create", "acme"]).exit_code == 0
    listed = CliRunner().invoke(app, ["--json", "tenant", "list"])
    assert [t["name"] for t in json.loads(listed.stdout)] == ["acme"]


def test_opening_for_reading_creates_no_catalog_and_no_warehouse(
    tmp_path: Path, new_pg_catalog_uri: Callable[[], str]
) -> None:
    catalog, warehouse = f"sqlite:///{tmp_path / 'a' / 'catalog.db'}", f"file://{tmp_path / 'w'}"
    with pytest.raises(NotFound, match=rf"catalog {catalog} does not exist .*warehouse file://"):
        TableStore.open(catalog, warehouse, create=False)
    with pytest.raises(NotFound, match="nothing was created"):
        to_duckdb(TableStore.open(catalog, warehouse, create=False), "acme", "shop.items")
    assert tree(tmp_path) == []

    pg = new_pg_catalog_uri()  # a schema without Rewind's tables
    with pytest.raises(NotFound, match=r"catalog postgresql://.* does not exist"):
        TableStore.open(pg, warehouse, create=False)
    with pytest.raises(NotFound, match="no Rewind tables"):
        open_catalog(pg, create=False)
    assert pg_tables(pg) == []
    assert tree(tmp_path) == []


def pg_tables(uri: str) -> list[Any]:
    """The tables in the PostgreSQL schema ``uri`` names (its search_path)."""
    import psycopg

    with psycopg.connect(uri) as conn:
        return conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchall()


def test_an_unknown_tenant_names_the_catalog_and_warehouse_it_was_looked_for_in(
    rewind: Callable[..., Any], uris: tuple[str, str]
) -> None:
    assert rewind("tenant", "create", "acme").exit_code == 0
    result = rewind("history", "nope")
    assert result.exit_code == 1
    catalog, warehouse = uris
    assert (
        f"tenant 'nope' does not exist in catalog {catalog} (warehouse {warehouse})"
        in result.stderr
    )
