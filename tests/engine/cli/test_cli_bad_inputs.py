"""Every bad input on the command line: one ``error:`` line, exit 1, nothing changed.

Commands run in-process through ``typer.testing.CliRunner`` (the ``rewind``
fixture) against a real SQLite catalog file and a moto bucket. "Nothing
changed" is checked on the catalog file (every row of every table, read with
sqlite3) and the bucket (every key), as tests/test_bad_inputs.py does for the
API.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest
from typer.testing import CliRunner, Result

import tenants.catalog.sqlite as sqlite_backend
from engine.cli.app import app
from tenants.objectstore.embedded import EmbeddedS3
from tests.helpers.cli import as_json, catalog_and_bucket, fails, ok
from tests.helpers.locks import write_lock_held

# Not the catalog's behaviour: on SQLite alone (conftest.py, one_catalog).
pytestmark = pytest.mark.one_catalog

Rewind = Callable[..., Result]
YEAR_10000 = ["10000-01-01", "10000-01-01T00:00:00Z", "253402300800000000", "9" * 25]


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.fixture
def world(rewind: Rewind, tmp_path: Path) -> str:
    """Tenant ``acme`` with ``shop.items`` (id, name, score, blob), three rows and snapshot ``mon``."""
    ok(rewind("tenant", "create", "acme"))
    ok(
        rewind(
            "table", "create", "acme", "shop.items",
            "--column", "id:int64", "--column", "name:string",
            "--column", "score:double", "--column", "blob:binary",
            "--key", "id",
        )
    )  # fmt: skip
    rows = write(tmp_path / "rows.csv", "id,name,score,blob\n1,a,1.5,x\n2,b,2.5,y\n3,c,,z\n")
    ok(rewind("load", "acme", "shop.items", rows))
    ok(rewind("snapshot", "create", "acme", "mon"))
    return "shop.items"


@pytest.fixture
def snapshot_state(uris: tuple[str, str], s3_server: EmbeddedS3) -> Callable[[], Any]:
    """Everything a failed command could have changed: catalog rows and bucket keys."""
    catalog_uri, warehouse = uris
    bucket = warehouse[len("s3://") :].split("/")[0]

    def take() -> Any:  # reads only: never waits for a writer
        return catalog_and_bucket(catalog_uri, s3_server, bucket)

    return take


def strict_json(text: str) -> Any:
    """Parse as a strict parser (jq, Go, browsers) would: no NaN or Infinity tokens."""

    def refuse(token: str) -> Any:
        raise ValueError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


# times


@pytest.mark.parametrize("time", YEAR_10000)
@pytest.mark.parametrize(
    "command",
    [
        ("query", "acme", "shop.items", "--as-of"),
        ("ddl", "acme", "--as-of"),
        ("restore-tenant", "acme", "--dry-run", "--at"),
        ("snapshot", "create", "acme", "later", "--at"),
        ("backup", "create", "acme", "--to", "s3://rewind-never-made/bk", "--snapshot"),
    ],
    ids=["query", "ddl", "restore", "snapshot", "backup"],
)
def test_time_past_year_9999_is_one_clear_error_and_changes_nothing(
    rewind: Rewind,
    world: str,
    snapshot_state: Callable[[], Any],
    time: str,
    command: tuple[str, ...],
) -> None:
    before = snapshot_state()
    line = fails(rewind(*command, time), r"invalid time '.*': times run from 1970-01-01T00:00:00")
    assert "9999-12-31T23:59:59.999999Z" in line
    assert snapshot_state() == before


@pytest.mark.parametrize("time", ["g@", "mon", "yesterday"])  # `now` is a time (-0s)
def test_restore_at_takes_only_a_time_never_a_snapshot_name(
    rewind: Rewind, world: str, snapshot_state: Callable[[], Any], time: str
) -> None:
    ok(rewind("snapshot", "create", "acme", "now"))  # even a snapshot of that name
    before = snapshot_state()
    fails(
        rewind("restore-tenant", "acme", "--at", time, "--dry-run"),
        rf"invalid --at '{re.escape(time)}': use an ISO-8601 instant .* for a snapshot use --snapshot",
    )
    assert snapshot_state() == before


def test_garbage_as_of_names_every_accepted_form(rewind: Rewind, world: str) -> None:
    fails(
        rewind("query", "acme", world, "--as-of", "g@"),
        r"invalid time or snapshot 'g@': use a snapshot name, an ISO-8601 instant .* or a ts",
    )


@pytest.mark.parametrize("window", ["99999999999999999999w", "365001d"])
def test_huge_pitr_window_is_one_clear_error_and_changes_nothing(
    rewind: Rewind, world: str, snapshot_state: Callable[[], Any], window: str
) -> None:
    before = snapshot_state()
    fails(rewind("pitr", "set", "acme", window), r"invalid duration .*: at most 365000d")
    assert snapshot_state() == before


@pytest.mark.parametrize(
    ("option", "value", "match"),
    [
        ("--every", "999999999999w", r"invalid duration .*: at most 365000d"),
        ("--keep-for", "999999999999w", r"invalid duration .*: at most 365000d"),
        ("--keep-last", "99999999999999999999", r"retain count must be at most 1,000,000"),
    ],
)
def test_huge_schedule_setting_is_one_clear_error(
    rewind: Rewind,
    world: str,
    snapshot_state: Callable[[], Any],
    option: str,
    value: str,
    match: str,
) -> None:
    before = snapshot_state()
    base = {"--every": "1d"}
    base[option] = value
    args = [a for kv in base.items() for a in kv]
    fails(rewind("snapshot", "schedule", "acme", "--first", "02:00", *args), match)
    assert snapshot_state() == before


# numbers


@pytest.mark.parametrize("target", ["inf", "-inf", "nan", "-1", "0", "1e308", "4097"])
def test_compact_target_must_be_a_finite_positive_size(
    rewind: Rewind, world: str, snapshot_state: Callable[[], Any], target: str
) -> None:
    before = snapshot_state()
    fails(
        rewind("compact", "acme", f"--target-mb={target}"),
        r"invalid --target-mb .*: use a size above 0 and at most 4096 MiB",
    )
    assert snapshot_state() == before


def test_query_limit_past_the_row_count_shows_every_row(rewind: Rewind, world: str) -> None:
    huge = "99999999999999999999"
    assert len(as_json(rewind("--json", "query", "acme", world, "--limit", huge))) == 3
    assert "3 rows" in ok(rewind("query", "acme", world, "--limit", huge)).stdout


def test_negative_query_limit_is_one_clear_error(rewind: Rewind, world: str) -> None:
    fails(
        rewind("query", "acme", world, "--limit", "-1"),
        r"invalid --limit '-1': give a whole number from 0",
    )


@pytest.mark.parametrize("threshold", ["nan", "inf", "-0.1", "1.5"])
def test_gc_threshold_must_be_a_fraction(
    rewind: Rewind, world: str, snapshot_state: Callable[[], Any], threshold: str
) -> None:
    before = snapshot_state()
    fails(rewind("gc", "--dry-run", f"--threshold={threshold}"), r"invalid --threshold")
    assert snapshot_state() == before


# CSV files


@pytest.mark.parametrize(
    "header", ["id,name,name,score,blob", "id,id,name,score,blob", "id,name,score,blob,score"]
)
def test_csv_with_a_column_named_twice_is_refused_naming_the_file(
    rewind: Rewind, world: str, snapshot_state: Callable[[], Any], tmp_path: Path, header: str
) -> None:
    values = ",".join(str(i + 7) for i in range(len(header.split(","))))
    path = write(tmp_path / "dup.csv", f"{header}\n{values}\n")
    before = snapshot_state()
    fails(
        rewind("load", "acme", world, path),
        rf"cannot load {re.escape(str(path))}: column\(s\) \['\w+'\] appear more than once",
    )
    assert snapshot_state() == before


def test_csv_text_is_kept_verbatim_and_only_an_unquoted_empty_field_is_null(
    rewind: Rewind, world: str, tmp_path: Path
) -> None:
    path = write(
        tmp_path / "odd.csv",
        'id,name,score,blob\n10,nan,nan,nan\n11,NULL,inf,N/A\n12,"",-inf,""\n13,,,\n',
    )
    ok(rewind("load", "acme", world, path))
    rows = {r["id"]: r for r in strict_json(ok(rewind("--json", "query", "acme", world)).stdout)}
    assert [rows[i]["name"] for i in (10, 11, 12, 13)] == ["nan", "NULL", "", None]
    assert [rows[i]["score"] for i in (10, 11, 12, 13)] == ["NaN", "Infinity", "-Infinity", None]
    # binary is base64 in JSON: "nan" -> bmFu, "N/A" -> Ti9B, "" -> ""
    assert [rows[i]["blob"] for i in (10, 11, 12, 13)] == ["bmFu", "Ti9B", "", None]


def test_csv_field_longer_than_a_parse_block_loads(
    rewind: Rewind, world: str, tmp_path: Path
) -> None:
    """pyarrow parses in 1 MiB blocks; a longer field once failed with a raw message."""
    long_text = "x" * (3 * 1024 * 1024)
    path = write(tmp_path / "long.csv", f"id,name,score,blob\n20,{long_text},1,b\n21,short,2,c\n")
    assert "loaded 2 rows" in ok(rewind("load", "acme", world, path)).stdout
    rows = {r["id"]: r for r in as_json(rewind("--json", "query", "acme", world))}
    assert rows[20]["name"] == long_text and rows[21]["name"] == "short"


# delete counts


def test_delete_counts_only_the_keys_that_were_there(
    rewind: Rewind, world: str, snapshot_state: Callable[[], Any], tmp_path: Path
) -> None:
    absent = write(tmp_path / "absent.csv", "id\n99\n")
    before = snapshot_state()
    out = ok(rewind("delete", "acme", world, "--keys", absent)).stdout
    assert "deleted 0 keys" in out and "nothing was written" in out
    assert snapshot_state() == before

    one = write(tmp_path / "one.csv", "id\n1\n")
    assert (
        "deleted 1 key from acme/shop.items: commit ts"
        in ok(rewind("delete", "acme", world, "--keys", one)).stdout
    )
    mixed = write(tmp_path / "mixed.csv", "id\n1\n2\n98\n")
    out = ok(rewind("delete", "acme", world, "--keys", mixed)).stdout
    assert "deleted 1 key from acme/shop.items (2 keys given not there)" in out
    result = as_json(rewind("--json", "delete", "acme", world, "--keys", mixed))
    assert (result["deleted"], result["keys_given"], result["objects"]) == (0, 3, [])
    assert [r["id"] for r in as_json(rewind("--json", "query", "acme", world))] == [3]


# JSON output


def test_json_output_is_strict_json_with_non_finite_floats_as_strings(
    rewind: Rewind, world: str, tmp_path: Path
) -> None:
    path = write(tmp_path / "nf.csv", "id,name,score,blob\n30,a,nan,x\n31,b,inf,y\n32,c,-inf,z\n")
    ok(rewind("load", "acme", world, path))
    text = ok(rewind("--json", "query", "acme", world)).stdout
    rows = {r["id"]: r["score"] for r in strict_json(text)}
    assert (rows[30], rows[31], rows[32], rows[1]) == ("NaN", "Infinity", "-Infinity", 1.5)
    for command in (("objects", "acme"), ("snapshot", "list", "acme"), ("ddl", "acme")):
        strict_json(ok(rewind("--json", *command)).stdout)


# backups


def test_backup_list_flags_a_corrupt_manifest_and_lists_the_rest(
    rewind: Rewind, world: str, s3_server: EmbeddedS3
) -> None:
    name = f"rewind-cli-bad-bk-{uuid.uuid4().hex[:10]}"
    s3_server.create_bucket(name)
    dest = f"s3://{name}/bk"
    ids = [
        as_json(rewind("--json", "backup", "create", "acme", "--snapshot", "mon", "--to", dest, "--kind", kind))["backup_id"]
        for kind in ("physical", "logical", "physical")
    ]  # fmt: skip
    client = boto3.client("s3", **s3_server.settings.to_boto3())
    client.put_object(Bucket=name, Key=f"bk/backups/{ids[1]}/manifest.json", Body=b"{not json")

    listed = {e["backup_id"]: e for e in as_json(rewind("--json", "backup", "list", dest))}
    assert set(listed) == set(ids)
    assert listed[ids[0]]["complete"] and listed[ids[2]]["complete"]
    assert listed[ids[0]]["problem"] is None
    assert not listed[ids[1]]["complete"]
    assert "is not valid JSON" in listed[ids[1]]["problem"]

    result = ok(rewind("--wide", "backup", "list", dest))  # ids whole, not wrapped
    assert ids[0] in result.stdout and ids[2] in result.stdout
    assert "NO (unreadable manifest; delete it)" in result.stdout
    warning = result.stderr.strip().splitlines()
    assert len(warning) == 1 and warning[0].startswith(f"warning: backup {ids[1]}: manifest")
    fails(
        rewind("backup", "show", dest, ids[1]), rf"backup {ids[1]}: manifest .* is not valid JSON"
    )
    # With no --backup, restore picks the newest readable one.
    ok(rewind("backup", "restore", "--from", dest, "--tenant", "again"))


# URIs


@pytest.mark.parametrize(
    ("option", "uri", "match"),
    [
        ("--catalog", "sqlite:///", r"invalid catalog 'sqlite:///': it names no file"),
        ("--catalog", "sqlite:///:memory:", r"in-memory catalog would vanish"),
        ("--warehouse", "file://relwh", r"invalid warehouse 'file://relwh': 'relwh' is a host"),
        ("--warehouse", "file://..", r"invalid warehouse 'file://\.\.'"),
        ("--warehouse", "file:///", r"filesystem root"),
    ],
)
def test_malformed_uri_is_one_clear_error_showing_a_valid_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str, uri: str, match: str
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REWIND_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REWIND_CATALOG", raising=False)
    monkeypatch.delenv("REWIND_WAREHOUSE", raising=False)
    line = fails(CliRunner().invoke(app, [option, uri, "tenant", "create", "acme"]), match)
    assert "sqlite:///relative/path" in line or "file:///absolute/path" in line
    assert list(tmp_path.iterdir()) == []


def test_malformed_backup_destination_is_refused_by_its_name(rewind: Rewind, world: str) -> None:
    fails(rewind("backup", "list", "file://relbk"), r"invalid backup destination 'file://relbk'")


# a busy catalog


@pytest.mark.parametrize("new_catalog_uri", ["sqlite"], indirect=True)  # SQLite's file lock
def test_busy_catalog_is_one_line_naming_the_holder_and_readers_carry_on(
    rewind: Rewind,
    world: str,
    uris: tuple[str, str],
    snapshot_state: Callable[[], Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sqlite_backend, "BUSY_TIMEOUT_S", 0.3, raising=False)
    before = snapshot_state()
    with write_lock_held(uris[0][len("sqlite:///") :]) as pid:
        for command in (
            ("tenant", "list"),
            ("query", "acme", world),
            ("snapshot", "list", "acme"),
            ("objects", "acme"),
            ("history", "acme"),
        ):
            ok(rewind("--json", *command))
        line = fails(
            rewind("tenant", "create", "globex"),
            rf"catalog sqlite:///.* busy, retry: its write lock is held by pid {pid} on \S+ \(",
        )
        assert "not released within 0.3 s" in line
    assert snapshot_state() == before
    ok(rewind("tenant", "create", "globex"))  # and once it is free, the same command works


@pytest.mark.parametrize("where", ["global", "command"])
def test_an_error_under_json_is_one_json_line_and_changes_nothing(
    rewind: Rewind, where: str
) -> None:
    ok(rewind("tenant", "create", "acme"))
    args = ["restore-tenant", "acme", "--snapshot", "nope", "--yes"]
    result = rewind("--json", *args) if where == "global" else rewind(*args, "--json")
    assert result.exit_code == 1, result.output
    [line] = result.stdout.strip().splitlines()
    error = json.loads(line)["error"]
    assert error["type"] == "NotFound" and "nope" in error["message"]
    assert result.stderr.strip() == ""
