"""Where an export may go: never a catalog that vanishes or is Rewind's own, and
every ``s3://`` place reached with the one set of S3 settings the edge built.

Real parts: the moto server (its endpoint reaches a ``file://`` warehouse's
process only through ``AWS_ENDPOINT_URL``, which the ``s3_server`` fixture
exports), SQLite and PostgreSQL catalogs, pyiceberg's SQL catalog.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest
from typer.testing import CliRunner

from engine.cli.app import app
from engine.export.iceberg_catalog import open_iceberg_catalog
from tenants.errors import InvalidArgument
from tenants.objectstore.embedded import EmbeddedS3
from tests.helpers.cli import as_json, catalog_and_bucket, items_tenant

# How exports are refused and where they land, not the catalog's behaviour.
pytestmark = pytest.mark.one_catalog

VANISHING = [
    "sqlite://",
    "sqlite:///",
    "sqlite:///:memory:",
    "sqlite:///file::memory:?cache=shared",
    "sqlite:///file:ice?mode=memory&cache=shared&uri=true",
]


def _export_iceberg(rewind: Callable[..., Any], to: str, catalog: str) -> Any:
    return rewind(
        "export", "acme", "shop.items", "--snapshot", "mon", "--format", "iceberg",
        "--iceberg-catalog", catalog, "--to", to,
    )  # fmt: skip


def _refused(result: Any, match: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 1, result.output
    assert len(lines) == 1 and match in lines[0], result.stderr


@pytest.mark.parametrize("catalog", VANISHING)
def test_an_iceberg_catalog_that_vanishes_with_the_process_is_refused_before_anything_is_written(
    rewind: Callable[..., Any],
    uris: tuple[str, str],
    s3_server: EmbeddedS3,
    bucket: str,
    tmp_path: Path,
    catalog: str,
) -> None:
    items_tenant(rewind, tmp_path)
    before = catalog_and_bucket(uris[0], s3_server, bucket)
    _refused(_export_iceberg(rewind, f"file://{tmp_path}/lake", catalog), "would vanish")
    assert not (tmp_path / "lake").exists()
    assert catalog_and_bucket(uris[0], s3_server, bucket) == before


def test_rewinds_own_catalog_database_is_refused_as_an_iceberg_catalog_however_it_is_named(
    rewind: Callable[..., Any],
    uris: tuple[str, str],
    s3_server: EmbeddedS3,
    bucket: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    items_tenant(rewind, tmp_path)
    own = Path(uris[0].removeprefix("sqlite:///"))
    (tmp_path / "link.db").symlink_to(own)
    monkeypatch.chdir(own.parent)
    before = catalog_and_bucket(uris[0], s3_server, bucket)
    for named in (uris[0], f"sqlite:///{tmp_path}/link.db", f"sqlite:///{own.name}"):
        result = _export_iceberg(rewind, f"file://{tmp_path}/lake", named)
        _refused(result, "is Rewind's own catalog")
    assert not (tmp_path / "lake").exists()
    assert catalog_and_bucket(uris[0], s3_server, bucket) == before
    ok_catalog = f"sqlite:///{tmp_path}/iceberg.db"  # another file is fine
    assert as_json(rewind("--json", *_iceberg_args(f"file://{tmp_path}/lake", ok_catalog)))


def _iceberg_args(to: str, catalog: str) -> list[str]:
    return [
        "export", "acme", "shop.items", "--snapshot", "mon", "--format", "iceberg",
        "--iceberg-catalog", catalog, "--to", to,
    ]  # fmt: skip


def test_a_postgresql_iceberg_catalog_is_rewinds_own_when_host_port_database_and_schema_match(
    new_pg_catalog_uri: Callable[[], str], tmp_path: Path
) -> None:
    own = new_pg_catalog_uri()  # postgresql://postgres@127.0.0.1:5432/db?options=-csearch_path%3Ds
    rest = own.removeprefix("postgresql://postgres@127.0.0.1:5432/")
    for same in (
        own,
        f"postgres://postgres:pw@localhost/{rest}",
        f"postgresql://other@127.0.0.1:5432/{rest}",
    ):
        with pytest.raises(InvalidArgument, match="is Rewind's own catalog"):
            open_iceberg_catalog(same, s3=None, warehouse=f"file://{tmp_path}", own=own)
    other_schema = new_pg_catalog_uri()  # the same database, another schema: a catalog apart
    opened = open_iceberg_catalog(other_schema, s3=None, warehouse=f"file://{tmp_path}", own=own)
    close = getattr(opened, "close", None)
    if callable(close):
        close()


@pytest.fixture
def file_warehouse_cli(tmp_path: Path) -> Callable[..., Any]:
    """``rewind`` on a SQLite catalog and a ``file://`` warehouse: S3 is reached
    only through the environment (AWS_ENDPOINT_URL: the moto server)."""
    runner = CliRunner()
    catalog = f"sqlite:///{tmp_path}/catalog.db"
    warehouse = f"file://{tmp_path}/wh"

    def run(*args: str | Path) -> Any:
        return runner.invoke(app, ["--catalog", catalog, "--warehouse", warehouse, *map(str, args)])

    return run


def _keys(s3_server: EmbeddedS3, bucket: str) -> list[str]:
    client = boto3.client("s3", **s3_server.settings.to_boto3())
    return [o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", [])]


@pytest.mark.parametrize("fmt", ["parquet", "iceberg"])
def test_an_export_to_s3_from_a_file_warehouse_honours_aws_endpoint_url(
    file_warehouse_cli: Callable[..., Any],
    s3_server: EmbeddedS3,
    tmp_path: Path,
    fmt: str,
) -> None:
    assert os.environ["AWS_ENDPOINT_URL"] == s3_server.endpoint_url  # the fixture's
    lake = f"rewind-lake-{uuid.uuid4().hex[:12]}"
    s3_server.create_bucket(lake)
    items_tenant(file_warehouse_cli, tmp_path)
    extra = ["--iceberg-catalog", f"sqlite:///{tmp_path}/iceberg.db"] if fmt == "iceberg" else []
    result = file_warehouse_cli(
        "--json", "export", "acme", "shop.items", "--snapshot", "mon",
        "--format", fmt, *extra, "--to", f"s3://{lake}/x",
    )  # fmt: skip
    exported = as_json(result)
    assert exported["rows"] == 2
    keys = _keys(s3_server, lake)
    assert any(k.startswith("x/") and k.endswith(".parquet") for k in keys), keys
    if fmt == "iceberg":  # the table's metadata, written by pyiceberg's FileIO, too
        assert any(k.endswith(".metadata.json") for k in keys), keys
