"""Assertions shared by the CLI tests."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
from typer.testing import Result

from tenants.catalog import open_catalog
from tenants.objectstore.embedded import EmbeddedS3


def ok(result: Result) -> Result:
    """Assert the command succeeded, showing its output if not."""
    assert result.exit_code == 0, f"exit {result.exit_code}\n{result.output}\n{result.exception!r}"
    return result


def fails(result: Result, match: str) -> str:
    """Assert one ``error:`` line matching ``match``, exit 1 and no traceback."""
    assert result.exit_code == 1, f"exit {result.exit_code}\n{result.output}\n{result.exception!r}"
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert re.search(match, lines[0]), lines[0]
    return lines[0]


def as_json(result: Result) -> Any:
    return json.loads(ok(result).stdout)


def catalog_and_bucket(catalog_uri: str, s3_server: EmbeddedS3, bucket: str) -> Any:
    """What a command could have changed: every catalog row, every key of ``bucket``."""
    catalog = open_catalog(catalog_uri)
    try:
        with catalog.snapshot() as tx:
            rows = {
                name: sorted(map(repr, tx.tuples(f'SELECT * FROM "{name}"')))
                for name in catalog.dialect.table_names(tx)
            }
    finally:
        catalog.close()
    client = boto3.client("s3", **s3_server.settings.to_boto3())
    keys = sorted(
        item["Key"]
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for item in page.get("Contents", [])
    )
    return rows, keys


def items_tenant(rewind: Callable[..., Result], folder: Path) -> None:
    """Tenant ``acme`` with ``shop.items`` (id, v), two rows and snapshot ``mon``."""
    ok(rewind("tenant", "create", "acme"))
    ok(
        rewind(
            "table", "create", "acme", "shop.items", "-c", "id:int64", "-c", "v:string", "-k", "id"
        )
    )
    (folder / "rows.csv").write_text("id,v\n1,a\n2,b\n")
    ok(rewind("load", "acme", "shop.items", folder / "rows.csv"))
    ok(rewind("snapshot", "create", "acme", "mon"))
