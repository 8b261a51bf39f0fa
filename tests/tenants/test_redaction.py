"""No password Rewind is given is ever printed (docs/promises.md, "Secrets").

The unit tests pin the rule of :func:`tenants.redaction.redact`; the CLI tests
drive the real ``rewind`` with URIs that carry ``hunter2`` and fail, in human,
``--json`` and ``--verbose`` output, and look for it in everything printed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from engine.cli.app import app
from tenants.config import S3Settings
from tenants.redaction import redact
from tests.helpers.cli import items_tenant, ok

# How the CLI words its errors, not the catalog's behaviour: on SQLite alone.
pytestmark = pytest.mark.one_catalog

SECRET = "hunter2"
MODES: tuple[list[str], ...] = ([], ["--json"], ["--verbose"])


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("postgresql://u:hunter2@db:5432/x", "postgresql://u:***@db:5432/x"),
        ("postgresql://u@db/x?sslmode=require&password=hunter2", "postgresql://u@db/x?sslmode=require&password=***"),
        ("sqlite:///a.db?PassWord=hunter2", "sqlite:///a.db?PassWord=***"),
        ("https://cat/v1?token=hunter2&warehouse=w", "https://cat/v1?token=***&warehouse=w"),
        ("https://h/x?key=hunter2", "https://h/x?key=***"),
        ("https://b.s3/k?X-Amz-Signature=hunter2&X-Amz-Credential=AK", "https://b.s3/k?X-Amz-Signature=***&X-Amz-Credential=***"),
        ("host=db password='hunter 2' user=u", "host=db password='***' user=u"),
        ("aws_secret_access_key='hunter2', region='x'", "aws_secret_access_key='***', region='x'"),
        ("{'s3.secret-access-key': 'hunter2', 's3.region': 'x'}", "{'s3.secret-access-key': '***', 's3.region': 'x'}"),
        ("error in 'sqlite:///x.db?sslpassword=hunter2': no", "error in 'sqlite:///x.db?sslpassword=***': no"),
        ("unsupported column type '//u:hunter2@127.0.0.1:1/x'", "unsupported column type '//u:***@127.0.0.1:1/x'"),
    ],
)  # fmt: skip
def test_redact_hides_every_secret_form_and_keeps_the_rest(text: str, shown: str) -> None:
    assert redact(text) == shown
    assert redact(shown) == shown  # idempotent


@pytest.mark.parametrize(
    "text",
    [
        "s3://bucket/prefix/key=1/part.parquet",  # a Hive-style path: not a query
        "the table shop.orders has primary key id; key=id",
        "file:///srv/exports/acme",
        "postgresql://rewind@db.internal:5432/rewind",
    ],
)
def test_redact_leaves_text_without_secrets_alone(text: str) -> None:
    assert redact(text) == text


def test_s3_settings_repr_shows_no_key() -> None:
    settings = S3Settings("http://s3:9000", "eu-west-1", "AKIAEXAMPLE", SECRET, SECRET + "tok")
    assert SECRET not in repr(settings)
    assert SECRET not in redact(repr(settings.to_boto3()))
    assert SECRET not in redact(repr(settings.to_pyiceberg()))


def _printed(result: Any) -> str:
    return f"{result.stdout}\n{result.stderr}\n{result.output}"


def _refused_without_secret(result: Any, mode: list[str]) -> None:
    assert result.exit_code == 1, _printed(result)
    assert SECRET not in _printed(result), _printed(result)
    if "--verbose" not in mode:  # one line: the error (on stdout under --json)
        out = result.stdout if "--json" in mode else result.stderr
        assert len(out.strip().splitlines()) == 1, _printed(result)


@pytest.mark.parametrize("mode", MODES, ids=["human", "json", "verbose"])
@pytest.mark.parametrize(
    "iceberg",
    [
        "sqlite:///{tmp}/ice.db?password=hunter2",
        "sqlite:///{tmp}/no/such/dir/ice.db?password=hunter2",
        "postgresql://u:hunter2@127.0.0.1:1/x",
        "postgresql://u@127.0.0.1:1/x?password=hunter2",
        "postgres://u:hunter2@127.0.0.1:1/x?sslpassword=hunter2",
    ],
)
def test_no_output_shows_the_password_of_an_iceberg_catalog_uri(
    rewind: Callable[..., Any], tmp_path: Path, iceberg: str, mode: list[str]
) -> None:
    items_tenant(rewind, tmp_path)
    result = rewind(
        *mode, "export", "acme", "shop.items", "--snapshot", "mon", "--format", "iceberg",
        "--iceberg-catalog", iceberg.format(tmp=tmp_path), "--to", f"file://{tmp_path}/lake",
    )  # fmt: skip
    _refused_without_secret(result, mode)


CATALOGS = [
    "postgresql://postgres:hunter2@127.0.0.1:5432/nonexistent",
    "postgresql://postgres@127.0.0.1:5432/nonexistent?password=hunter2",
    "postgresql://postgres:hunter2@127.0.0.1:1/x",
    "sqlite:///{tmp}/catalog.db?password=hunter2",
    "sqlite://u:hunter2@host/catalog.db",
]


@pytest.mark.parametrize("mode", MODES, ids=["human", "json", "verbose"])
@pytest.mark.parametrize("catalog", CATALOGS)
@pytest.mark.parametrize("source", ["--catalog", "REWIND_CATALOG"])
def test_no_output_shows_the_password_of_a_catalog_uri(
    tmp_path: Path,
    bucket: str,
    catalog: str,
    source: str,
    mode: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    uri = catalog.format(tmp=tmp_path)
    args = ["--warehouse", f"s3://{bucket}/wh", *mode, "tenant", "list"]
    if source == "REWIND_CATALOG":
        monkeypatch.setenv("REWIND_CATALOG", uri)
    else:
        args = ["--catalog", uri, *args]
    _refused_without_secret(CliRunner().invoke(app, args), mode)


@pytest.mark.parametrize("mode", MODES, ids=["human", "json", "verbose"])
def test_no_output_shows_a_password_in_a_destination_uri(
    rewind: Callable[..., Any], tmp_path: Path, mode: list[str]
) -> None:
    ok(rewind("tenant", "create", "acme"))
    for args in (
        ["backup", "list", "s3://u:hunter2@bucket/backups"],
        ["export", "acme", "--all", "--at", "now", "--to", "s3://u:hunter2@bucket/x"],
        ["export", "acme", "--all", "--at", "now", "--to", "file:///x?token=hunter2"],
    ):
        _refused_without_secret(rewind(*mode, *args), mode)
