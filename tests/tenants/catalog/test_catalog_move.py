"""After ``rewind catalog copy`` exactly one catalog writes to, and collects from, the warehouse.

The copy keeps the catalog's id, so the warehouse's owner marker names both.
Before the move was marked, a GC on the old SQLite file saw the objects loaded
through the PostgreSQL copy as orphans and, once the orphan grace passed,
deleted live data. Now the old catalog is marked moved, names its successor,
and refuses every write, restore and GC (dry runs too); reads still work.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest
from typer.testing import CliRunner, Result

from engine.cli.app import app
from tenants.catalog import open_catalog
from tenants.catalog.engine.copy import move_catalog
from tenants.errors import CatalogMoved, InvalidArgument
from tenants.objectstore.embedded import EmbeddedS3
from tenants.store import TableStore


def keys(s3: EmbeddedS3, bucket: str) -> list[str]:
    client = boto3.client("s3", **s3.settings.to_boto3())
    return sorted(
        item["Key"]
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for item in page.get("Contents", [])
    )


@pytest.fixture
def moved(
    tmp_path: Path, bucket: str, new_pg_catalog_uri: Callable[[], str]
) -> tuple[Callable[..., Result], Callable[..., Result], str]:
    """The README's move: a SQLite catalog with tenant ``acme``, copied to PostgreSQL."""
    old, new, warehouse = (
        f"sqlite:///{tmp_path / 'old.db'}",
        new_pg_catalog_uri(),
        f"s3://{bucket}/wh",
    )
    runner = CliRunner()

    def on(catalog: str) -> Callable[..., Result]:
        return lambda *args: runner.invoke(
            app, ["--catalog", catalog, "--warehouse", warehouse, *map(str, args)]
        )

    through_old = on(old)
    for args in (
        ("tenant", "create", "acme"),
        ("table", "create", "acme", "shop.items", "-c", "id:int64", "-c", "v:string", "-k", "id"),
        ("snapshot", "create", "acme", "mon"),
    ):
        assert through_old(*args).exit_code == 0
    copied = runner.invoke(app, ["catalog", "copy", old, new])
    assert copied.exit_code == 0, copied.output
    return through_old, on(new), str(tmp_path)


def test_gc_on_the_old_catalog_never_deletes_what_the_new_one_wrote(
    moved: tuple[Callable[..., Result], Callable[..., Result], str],
    s3_server: EmbeddedS3,
    bucket: str,
) -> None:
    old, new, folder = moved
    rows = Path(folder) / "rows.csv"
    rows.write_text("id,v\n1,a\n2,b\n")
    assert new("load", "acme", "shop.items", rows).exit_code == 0
    live = [k for k in keys(s3_server, bucket) if k.endswith(".parquet")]
    assert live

    for args in (
        ("gc", "--dry-run"),
        ("gc", "--yes", "--grace", "0", "--orphan-grace", "0", "--allow-short-grace"),
        ("load", "acme", "shop.items", rows),
        ("restore-tenant", "acme", "--snapshot", "mon", "--yes"),
        ("snapshot", "create", "acme", "tue"),
        ("tenant", "create", "other"),
    ):
        result = old(*args)
        assert result.exit_code == 1, (args, result.output)
        assert "was moved to postgresql://" in result.stderr, (args, result.stderr)
        assert "--catalog postgresql://" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    refused = old("--json", "gc", "--dry-run")
    assert json.loads(refused.stdout)["error"]["type"] == "CatalogMoved"

    assert [k for k in keys(s3_server, bucket) if k.endswith(".parquet")] == live
    assert ok_rows(new("--json", "query", "acme", "shop.items")) == [1, 2]
    assert old("tenant", "list").exit_code == 0  # reads still work on the old one
    gc = new("--json", "gc", "--yes", "--grace", "0", "--orphan-grace", "0", "--allow-short-grace")
    assert gc.exit_code == 0, gc.output  # the successor collects, and keeps what it wrote
    assert ok_rows(new("--json", "query", "acme", "shop.items")) == [1, 2]


def ok_rows(result: Result) -> list[Any]:
    assert result.exit_code == 0, result.output
    return sorted(r["id"] for r in json.loads(result.stdout))


def test_a_moved_catalog_refuses_writes_through_the_api_and_names_its_successor(
    tmp_path: Path, bucket: str, s3_server: EmbeddedS3
) -> None:
    old, new = f"sqlite:///{tmp_path / 'old.db'}", f"sqlite:///{tmp_path / 'new.db'}"
    store = TableStore.open(old, f"s3://{bucket}/wh", s3=s3_server.settings)
    try:
        store.create_tenant("acme")
        with open_catalog(old) as a, open_catalog(new) as b:
            assert all(c.verified for c in move_catalog(a, b))
        with pytest.raises(CatalogMoved, match=rf"moved to {new} .* refuses writes"):
            store.create_tenant("other")  # an open store sees the move at its next write
        assert [t.name for t in store.tenants()] == ["acme"]
    finally:
        store.close()
    third = f"sqlite:///{tmp_path / 'third.db'}"
    with open_catalog(old) as a, open_catalog(third) as c:
        with pytest.raises(CatalogMoved, match="refuses another copy"):
            move_catalog(a, c)  # a catalog moves once
    with open_catalog(old) as a, open_catalog(new) as b:
        with pytest.raises(InvalidArgument, match="already holds the copy"):
            move_catalog(a, b)  # a rerun after the copy committed says so


def test_a_copy_that_fails_leaves_the_source_writable(tmp_path: Path) -> None:
    old, new = f"sqlite:///{tmp_path / 'old.db'}", f"sqlite:///{tmp_path / 'new.db'}"
    with open_catalog(new) as b, b.transaction() as tx:
        tx.commit_ts()  # not empty: the copy is refused before it writes
    with open_catalog(old) as a, open_catalog(new) as b:
        with pytest.raises(InvalidArgument, match="not empty"):
            move_catalog(a, b)
        with a.transaction() as tx:  # not moved: it still takes writes
            tx.commit_ts()
