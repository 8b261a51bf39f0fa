"""``rewind catalog copy``: SQLite to PostgreSQL and back, every row verified.

A catalog with real history (tenants, tables, writes, an altered schema, a
snapshot, a schedule, a PITR window, an in-place restore, a dropped tenant, a
GC run) is copied to PostgreSQL and back to a new SQLite file; each copy holds
the same rows as its source, opens on the same warehouse (it keeps the
catalog id the warehouse marker names) and reads the same data at the snapshot.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from engine.cli.app import app
from engine.gc.run import run_gc
from engine.restore.job import restore_tenant
from tenants.catalog import open_catalog
from tenants.catalog.engine.copy import COPY_ORDER, copy_catalog
from tenants.errors import InvalidArgument
from tenants.objectstore.embedded import EmbeddedS3
from tenants.schema import Column, TableSchema
from tenants.store import TableStore

SCHEMA = TableSchema.of([("id", "int64"), ("v", "string")], ["id"])


def rows(ids: range, value: str) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "v": [value] * len(ids)})


def catalog_rows(uri: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table (``meta`` without each catalog's own keys), sorted."""
    catalog = open_catalog(uri)
    try:
        with catalog.snapshot() as tx:
            out = {}
            for table in COPY_ORDER:
                found = [
                    tuple(sorted(r.items()))
                    for r in tx.all(f"SELECT * FROM {table}")
                    if table != "meta" or r["key"] not in ("schema_version", "ddl_fingerprint")
                ]
                out[table] = sorted(found, key=repr)
            return out
    finally:
        catalog.close()


@pytest.fixture
def source(tmp_path: Path, s3_server: EmbeddedS3, bucket: str) -> tuple[str, str]:
    uri, warehouse = f"sqlite:///{tmp_path / 'source.db'}", f"s3://{bucket}/wh"
    store = TableStore.open(uri, warehouse, s3=s3_server.settings)
    try:
        store.create_tenant("acme")
        store.create_table("acme", "db.items", SCHEMA)
        store.write("acme", "db.items", upserts=rows(range(10), "a"))
        store.create_snapshot("acme", "before")
        store.alter_table("acme", "db.items", add=[Column("note", "string")])
        store.write("acme", "db.items", deletes=pa.table({"id": pa.array([1, 2], pa.int64())}))
        store.set_pitr("acme", 3_600_000_000)
        store.set_schedule("acme", first_at_us=0, interval_us=3_600_000_000, retain_count=3)
        store.create_tenant("gone")
        store.drop_tenant("gone")
        restore_tenant(store, "acme", "before", to="acme-copy", executor="local")
        restore_tenant(store, "acme", "before", executor="local")
        run_gc(store, dry_run=False)
    finally:
        store.close()
    return uri, warehouse


def test_copy_to_postgres_and_back_keeps_every_row_and_the_warehouse(
    source: tuple[str, str],
    new_pg_catalog_uri: Callable[[], str],
    tmp_path: Path,
    s3_server: EmbeddedS3,
) -> None:
    uri, warehouse = source
    expected = catalog_rows(uri)
    pg, back = new_pg_catalog_uri(), f"sqlite:///{tmp_path / 'back.db'}"
    for src, dst in ((uri, pg), (pg, back)):
        with open_catalog(src) as a, open_catalog(dst) as b:
            copied = copy_catalog(a, b)
        assert [c.table for c in copied] == list(COPY_ORDER)
        assert all(c.verified and c.source_rows == c.copied_rows for c in copied), copied
        assert catalog_rows(dst) == expected
        # GC's queue is the destination's own: every object, examined by its first GC.
        with open_catalog(dst) as b, b.snapshot() as tx:
            assert {r[0] for r in tx.tuples("SELECT object_id FROM gc_candidates")} == {
                r[0] for r in tx.tuples("SELECT id FROM objects")
            }
    for copy in (pg, back):
        store = TableStore.open(copy, warehouse, s3=s3_server.settings)  # same catalog id
        try:
            assert store.read("acme", "db.items").column("id").to_pylist() == list(range(10))
            assert store.read("acme-copy", "db.items").num_rows == 10
            assert sorted(t.name for t in store.tenants(include_dropped=True)) == sorted(
                ["acme", "acme", "acme-copy", "gone"]
            )
            store.write("acme", "db.items", upserts=rows(range(20, 21), "new"))
            assert store.now() > max(r[0][1] for r in expected["clock"])  # the clock moved on
        finally:
            store.close()


def test_a_destination_with_anything_in_it_is_refused_untouched(
    source: tuple[str, str], new_pg_catalog_uri: Callable[[], str], s3_server: EmbeddedS3
) -> None:
    uri, warehouse = source
    pg = new_pg_catalog_uri()
    with open_catalog(pg) as catalog:
        with catalog.transaction() as tx:
            tx.commit_ts()  # one commit: the clock has run
    before = catalog_rows(pg)
    with open_catalog(uri) as a, open_catalog(pg) as b:
        with pytest.raises(InvalidArgument, match="is not empty .* never merges two catalogs"):
            copy_catalog(a, b)
    assert catalog_rows(pg) == before


def test_cli_copy_prints_one_json_document_and_refuses_the_same_uri(
    source: tuple[str, str], new_pg_catalog_uri: Callable[[], str]
) -> None:
    uri, _ = source
    runner = CliRunner()
    pg = new_pg_catalog_uri()
    result = runner.invoke(app, ["--json", "catalog", "copy", uri, pg])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["source"] == uri and report["destination"].startswith("postgresql://")
    assert {t["table"] for t in report["tables"]} == set(COPY_ORDER)
    assert all(t["verified"] for t in report["tables"])
    again = runner.invoke(app, ["--json", "catalog", "copy", uri, pg])
    assert again.exit_code == 1
    assert json.loads(again.stdout)["error"]["type"] == "InvalidArgument"
    assert again.stderr == ""
    same = runner.invoke(app, ["catalog", "copy", uri, uri])
    assert same.exit_code == 1 and "same catalog" in same.stderr
