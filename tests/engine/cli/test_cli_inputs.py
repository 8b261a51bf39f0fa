"""The CLI's answer to values a user types into the newer options (issue 32).

Out-of-range and non-ASCII numbers, a bare number that is no plausible ts,
destructive commands that must name the real error before asking for
``--yes``: each is one ``error:`` line, exit 1, and nothing changed.
Wording, not the catalog's behaviour: on SQLite alone (conftest.py, one_catalog).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from tenants.objectstore.embedded import EmbeddedS3
from tests.helpers.cli import catalog_and_bucket, fails, items_tenant, ok
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.one_catalog

Rewind = Callable[..., Result]
HUGE = "99999999999999999999"  # 20 digits: past int64
NOT_ASCII = [
    "²",
    "٣",
    "３",
]  # superscript two; Arabic-Indic and full-width digits, which int() takes


@pytest.fixture
def world(rewind: Rewind, tmp_path: Path) -> None:
    items_tenant(rewind, tmp_path)


@pytest.fixture
def state(uris: tuple[str, str], s3_server: EmbeddedS3) -> Callable[[], Any]:
    catalog_uri, warehouse = uris
    bucket = warehouse[len("s3://") :].split("/")[0]
    return lambda: catalog_and_bucket(catalog_uri, s3_server, bucket)


# item 4: numbers out of range or not in ASCII digits


HISTORY = ("history", "acme", "--commits", "--limit")
QUERY = ("query", "acme", "shop.items", "--limit")
SCHEDULE = ("snapshot", "schedule", "acme", "--first", "01:00", "--every", "1d", "--keep-last")
TICK = ("snapshot", "tick", "--every", "1h", "--count")  # on main, `--count ٣` ticked for 3 hours


@pytest.mark.parametrize(
    ("command", "value"),
    [
        *((c, v) for c in (HISTORY, QUERY, SCHEDULE, TICK) for v in ("-1", "1e3", *NOT_ASCII)),
        *((c, v) for c in (HISTORY, SCHEDULE, TICK) for v in ("0",)),
        *((c, v) for c in (HISTORY, TICK) for v in (HUGE, "9" * 5000)),
    ],
)
def test_count_options_refuse_numbers_past_int64_or_not_ascii_before_any_io(
    rewind: Rewind, world: None, state: Callable[[], Any], command: tuple[str, ...], value: str
) -> None:
    before = state()
    fails(rewind(*command, value), rf"invalid {command[-1]} '.*': give a whole number from \d")
    assert state() == before


def test_a_count_past_int64_means_all_rows_or_meets_the_command_s_own_bound(
    rewind: Rewind, world: None
) -> None:
    assert "2 rows" in ok(rewind(*QUERY, HUGE)).stdout
    assert "2 rows" in ok(rewind(*QUERY, "9" * 5000)).stdout
    fails(rewind(*SCHEDULE, HUGE), r"retain count must be at most 1,000,000")


@pytest.mark.parametrize("value", [HUGE, "9" * 5000, "12", *NOT_ASCII, "1795600800000000²"])
@pytest.mark.parametrize("command", ["restore-tenant", "restore-table", "restore-database"])
def test_before_refuses_a_commit_ts_past_int64_or_not_ascii_naming_where_ts_come_from(
    rewind: Rewind, world: None, state: Callable[[], Any], command: str, value: str
) -> None:
    target = {"restore-tenant": (), "restore-table": ("shop.items",), "restore-database": ("shop",)}
    before = state()
    fails(
        rewind(command, "acme", *target[command], "--before", value, "--dry-run"),
        r"invalid --before '.*': give a commit's ts .*`rewind history TENANT --commits`",
    )
    assert state() == before


def test_history_limit_still_takes_a_plain_number(rewind: Rewind, world: None) -> None:
    out = ok(rewind("history", "acme", "--commits", "--limit", "1", "-q")).stdout.split()
    assert len(out) == 1 and out[0].isdigit()


# item 14: a bare number that is no plausible ts in µs


@pytest.mark.parametrize("value", ["1999", "2026", "1795600800", "1795600800000"])
@pytest.mark.parametrize(
    "command",
    [
        ("query", "acme", "shop.items", "--as-of"),
        ("restore-tenant", "acme", "--dry-run", "--at"),
        ("snapshot", "create", "acme", "later", "--at"),
    ],
    ids=["query", "restore", "snapshot"],
)
def test_bare_number_before_2000_in_us_is_refused_naming_the_accepted_forms(
    rewind: Rewind, world: None, state: Callable[[], Any], command: tuple[str, ...], value: str
) -> None:
    before = state()
    line = fails(rewind(*command, value), rf"invalid time '{value}': a bare number is a ts in µs")
    assert "946684800000000" in line and "ISO-8601" in line and "-1h" in line
    assert state() == before


# item 13: the real error before "refusing ... without --yes"


@pytest.mark.parametrize(
    ("command", "match"),
    [
        (("restore-tenant", "acme", "--snapshot", "nope"), r"no snapshot 'nope'"),
        (("restore-tenant", "acme", "--at", "2001-01-01T00:00:00Z"), r"is not protected"),
        (("restore-tenant", "acmee", "--snapshot", "mon"), r"tenant 'acmee' does not exist"),
        (("restore-table", "acme", "shop.itemz", "--snapshot", "mon"), r"shop.itemz did not exist"),
        (("restore-table", "acme", "shop.items", "--snapshot", "nope"), r"no snapshot 'nope'"),
        (("restore-database", "acme", "shoop", "--snapshot", "mon"), r"shoop did not exist"),
        (("tenant", "drop", "acmee"), r"tenant 'acmee' does not exist"),
        (("tenant", "purge", "acmee@0123456789abcdef"), r"acmee@0123456789abcdef does not exist"),
        (("tenant", "purge", "acme"), r"is active; drop it first"),
        (("snapshot", "drop", "acme", "nope"), r"no snapshot 'nope'"),
        (("snapshot", "drop", "acmee", "mon"), r"tenant 'acmee' does not exist"),
        (("backup", "delete", "s3://rewind-never-made/bk", "bk-1"), r"rewind-never-made"),
    ],
)
def test_destructive_command_without_yes_names_the_bad_argument_not_the_missing_yes(
    rewind: Rewind, world: None, state: Callable[[], Any], command: tuple[str, ...], match: str
) -> None:
    before = state()
    line = fails(rewind(*command), match)  # stdin is no terminal under CliRunner
    assert "--yes" not in line
    assert state() == before


def test_destructive_command_with_valid_arguments_still_refuses_without_yes(
    rewind: Rewind, world: None, state: Callable[[], Any]
) -> None:
    before = state()
    fails(rewind("restore-tenant", "acme", "--snapshot", "mon"), r"refusing to .* without --yes")
    fails(rewind("gc"), r"refusing to run gc .* without --yes")
    assert state() == before


def test_an_out_of_range_count_under_json_is_one_parseable_error(
    rewind: Rewind, world: None
) -> None:
    result = rewind("--json", "history", "acme", "--commits", "--limit", HUGE)
    assert result.exit_code == 1
    error = json.loads(result.stdout)["error"]
    assert error["type"] == "InvalidArgument" and "invalid --limit" in error["message"]


# item 14: messages that say what is so


@pytest.mark.parametrize(
    ("command", "match"),
    [
        (("query", "acmee", "shop.items"), r"tenant 'acmee' does not exist \(did you mean 'acme'\?\)"),
        (("query", "acme", "shop.itemz"), r"shop.itemz does not exist .*\(did you mean 'shop.items'\?\)"),
        (("query", "acme", "shop.items", "--as-of", "mom"), r"no snapshot 'mom' \(did you mean 'mon'\?\)"),
        (("restore-table", "acme", "shop.itemz", "--snapshot", "mon", "--dry-run"), r"did you mean 'shop.items'"),
        (("restore-database", "acme", "shoop", "--snapshot", "mon", "--dry-run"), r"did you mean 'shop'"),
        (("tenant", "drop", "acme2"), r"did you mean 'acme'"),
    ],
)  # fmt: skip
def test_misspelled_tenant_table_or_snapshot_suggests_the_name_that_exists(
    rewind: Rewind, world: None, command: tuple[str, ...], match: str
) -> None:
    fails(rewind(*command), match)


def test_missing_table_names_the_time_as_iso_not_only_a_raw_ts(rewind: Rewind, world: None) -> None:
    line = fails(rewind("table", "drop", "acme", "shop.gone"), r"shop.gone does not exist")
    assert re.search(r"at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z \(ts \d{16}\)", line), line


def test_unprotected_time_after_a_restore_describes_the_name_s_own_window_not_the_retired_one(
    rewind: Rewind, world: None
) -> None:
    ok(rewind("restore-tenant", "acme", "--snapshot", "mon", "--yes"))
    ok(rewind("pitr", "set", "acme", "72h"))
    line = fails(rewind("restore-tenant", "acme", "--at", "-1h", "--dry-run"), r"is not protected")
    assert "before acme@" in line and "took the name at" in line and "(a restore)" in line
    # what the name protects now: its own PITR window, as `pitr show` shows it
    assert re.search(r"'acme' protects: the PITR window \d{4}-", line), line
    assert "`rewind pitr show acme`" in line


# item 15: --to-tenant never replaces the other tenant's table, as the docs say


def test_restore_into_another_tenant_refuses_a_taken_name_even_with_yes_and_says_how_to_free_it(
    rewind: Rewind, world: None, state: Callable[[], Any]
) -> None:
    ok(rewind("tenant", "create", "other"))
    ok(rewind("table", "create", "other", "shop.items", "-c", "id:int64", "-k", "id"))
    before = state()
    line = fails(
        rewind("restore-table", "acme", "shop.items", "--snapshot", "mon", "--to-tenant", "other", "--yes"),
        r"shop.items already exists in tenant other@\w+; a restore into another tenant never "
        r"replaces its tables; restore under another name with --to DB.NEW",
    )  # fmt: skip
    assert state() == before
    [hint] = re.findall(r"`rewind ([^`]+)`", line)
    ok(rewind(*hint.split()))  # drops other's table, as printed
    ok(rewind("restore-table", "acme", "shop.items", "--snapshot", "mon", "--to-tenant", "other"))
    readme = (ROOT / "README.md").read_text()
    assert "tables of the same name in `--to-tenant`" not in readme


# The first defects the CLI fuzz suite (test_cli_fuzz.py) found, each pinned here.


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("backup", "list", "\x00"), "no control characters"),
        (("backup", "verify", "a\x00b", "b1"), "no control characters"),
        (("backup", "restore", "--from", "\x00"), "no control characters"),
        (("compact", "acme", "--memory", HUGE), "at most .* bytes"),
        (("tenant", "undrop", "postgresql://u:hunter2@127.0.0.1:1/x"), r"give NAME or NAME@ID"),
        (("query", "s3://AKIAX:hunter2@b/k", "shop.items"), r"give NAME or NAME@ID"),
    ],
    ids=["nul-list", "nul-verify", "nul-restore", "huge-memory", "ref-pg-uri", "ref-s3-uri"],
)
def test_what_the_fuzz_found_first_is_one_line_with_no_secret_and_nothing_changed(
    rewind: Rewind, world: None, state: Callable[[], Any], args: tuple[str, ...], match: str
) -> None:
    before = state()
    for verbose in ([], ["--verbose"]):
        result = rewind(*verbose, *args)
        assert "hunter2" not in result.output
        if not verbose:
            fails(result, match)
    assert state() == before


def test_catalog_copy_from_a_catalog_that_does_not_exist_creates_none(
    rewind: Rewind, tmp_path: Path
) -> None:
    missing = tmp_path / "a" / "b" / "none.db"
    fails(rewind("catalog", "copy", f"sqlite:///{missing}", HUGE), "does not exist")
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize(
    "source", ["\x00", "missing-backups"], ids=["nul-source", "no-backups-there"]
)
def test_a_backup_restore_that_cannot_find_its_backup_creates_no_store(
    tmp_path: Path, source: str
) -> None:
    """``backup restore`` may create a store (into a new deployment), so it finds
    the backup first: the fuzz had it create one for ``--from \\x00``."""
    from typer.testing import CliRunner

    from engine.cli.app import app

    home = tmp_path / "new"
    where = ["--catalog", f"sqlite:///{home}/c.db", "--warehouse", f"file://{home}/wh"]
    source = source if source == "\x00" else str(tmp_path / source)
    result = CliRunner().invoke(
        app, [*where, "backup", "restore", "--from", source, "--backup", "b1"]
    )
    fails(result, "control characters|holds no Rewind backups")
    assert not home.exists()
