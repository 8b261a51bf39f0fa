"""``rewind tenant set --rpo`` and ``rewind status``: what cron and CI read.

In-process (typer's CliRunner) on a real catalog and moto warehouse. Exit 3
when a tenant misses its objective or a job failed or is stale, 0 when all is
well; ``--json`` is one object; the table fits 100 columns off a terminal.
Killed and hung backup processes: tests/engine/operations/test_status_kills.py.
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
from tests.helpers.cli import as_json, catalog_and_bucket, fails, items_tenant, ok

# How the CLI words, lays out and exits: SQLite alone (conftest.py, one_catalog);
# the catalog statements run on both in tests/engine/operations/.
pytestmark = pytest.mark.one_catalog

Rewind = Callable[..., Result]
EXIT_ATTENTION = 3


@pytest.fixture
def acme(rewind: Rewind, tmp_path: Path) -> Rewind:
    items_tenant(rewind, tmp_path)  # acme: shop.items, snapshot mon
    return rewind


def test_tenant_set_rpo_is_listed_and_off_removes_it(acme: Rewind) -> None:
    ok(acme("tenant", "create", "globex"))
    said = ok(acme("tenant", "set", "acme", "--rpo", "90m")).stdout
    assert "recovery point objective of acme: 90m" in said
    listed = {t["name"]: t["rpo_us"] for t in as_json(acme("--json", "tenant", "list"))}
    assert listed == {"acme": 90 * 60 * 1_000_000, "globex": None}
    table = ok(acme("tenant", "list")).stdout
    assert re.search(r"acme@\w+\s+│ active │\s+90m │", table), table
    assert as_json(acme("--json", "tenant", "set", "acme", "--rpo", "off"))["rpo_us"] is None
    assert "no recovery point objective" in ok(acme("tenant", "set", "acme", "--rpo", "OFF")).stdout
    assert [t["rpo_us"] for t in as_json(acme("--json", "tenant", "list"))] == [None, None]


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("--rpo", "0"), r"recovery point objective: invalid duration '0'"),
        (("--rpo", "-1h"), r"invalid duration '-1h'"),
        (("--rpo", "abc"), r"invalid duration 'abc'.*off removes it"),
        (("--rpo", "1y"), r"invalid duration '1y'"),
        ((), r"nothing to set for tenant 'acme': give --rpo"),
    ],
)
def test_a_bad_rpo_is_one_line_exit_1_and_changes_nothing(
    acme: Rewind,
    uris: tuple[str, str],
    s3_server: EmbeddedS3,
    bucket: str,
    args: tuple[str, ...],
    match: str,
) -> None:
    ok(acme("tenant", "set", "acme", "--rpo", "1h"))
    before = catalog_and_bucket(uris[0], s3_server, bucket)
    fails(acme("tenant", "set", "acme", *args), match)
    assert catalog_and_bucket(uris[0], s3_server, bucket) == before


def test_tenant_set_of_an_unknown_tenant_is_one_line_exit_1(acme: Rewind) -> None:
    fails(acme("tenant", "set", "acmee", "--rpo", "1h"), r"tenant 'acmee' does not exist")


def test_status_exits_0_when_all_is_well_and_3_when_an_objective_is_missed(
    acme: Rewind, tmp_path: Path
) -> None:
    assert ok(acme("status")).exit_code == 0  # no objective, no job: nothing to page for
    ok(acme("tenant", "set", "acme", "--rpo", "1h"))
    missed = acme("status")
    assert missed.exit_code == EXIT_ATTENTION, missed.output
    assert "1h missed" in missed.stdout and "1 missing the objective" in missed.stdout
    ok(acme("backup", "create", "acme", "--snapshot", "now", "--to", f"file://{tmp_path}/bk"))
    met = ok(acme("status"))
    assert "1h met" in met.stdout and "0 missing the objective" in met.stdout
    # 1 µs is always missed: the backup's point is older than that by now
    ok(acme("tenant", "set", "acme", "--rpo", "1us"))
    assert acme("status", "acme").exit_code == EXIT_ATTENTION


def test_status_json_is_one_object_with_the_tenants_worst_first(
    acme: Rewind, tmp_path: Path
) -> None:
    ok(acme("tenant", "create", "globex"))
    ok(acme("tenant", "set", "globex", "--rpo", "1h"))
    ok(acme("backup", "create", "acme", "--snapshot", "mon", "--to", f"file://{tmp_path}/bk"))
    result = acme("status", "--json")
    assert result.exit_code == EXIT_ATTENTION, result.output
    report = json.loads(result.stdout)
    assert report["healthy"] is False and isinstance(report["tenants"], list)
    globex, acme_ = report["tenants"]
    assert (globex["tenant"], globex["verdict"], globex["backups"]) == ("globex", "missed", [])
    assert acme_["tenant"] == "acme" and acme_["verdict"] == "none"
    (backup,) = acme_["backups"]
    assert backup["target"] == f"file://{tmp_path}/bk" and backup["method"] == "physical"
    assert acme_["recovery_point_ts"] == backup["point_ts"] == acme_["snapshot"]["ts"]
    assert acme_["storage"]["data"]["objects"] == 1
    assert report["warehouse"] == {"gc": [], "jobs": []}
    one = as_json(acme("--json", "status", "acme"))
    assert [t["tenant"] for t in one["tenants"]] == ["acme"] and one["healthy"] is True


def test_status_of_one_tenant_shows_its_detail(acme: Rewind, tmp_path: Path) -> None:
    ok(acme("pitr", "set", "acme", "7d"))
    ok(acme("backup", "create", "acme", "--snapshot", "mon", "--to", f"file://{tmp_path}/bk"))
    out = ok(acme("status", "acme")).stdout
    for expected in (
        "status of acme",
        "the newest backup's",
        "`rewind tenant set acme --rpo 1h` sets one",
        "mon at ",
        "1w window, reaching back",
        "data: 1 object",
        "newest backup of acme per destination",
        "physical",
    ):
        assert expected in out, out
    fails(acme("status", "acmee"), r"tenant 'acmee' does not exist")


def test_status_is_a_line_per_tenant_in_100_columns(acme: Rewind, tmp_path: Path) -> None:
    long_name = "a-tenant-with-a-name-long-enough-to-wrap-in-its-column"
    ok(acme("tenant", "create", long_name))
    ok(acme("tenant", "set", "acme", "--rpo", "1h"))
    ok(acme("pitr", "set", "acme", "7d"))
    for to in ("first", "second", "third"):
        ok(acme("backup", "create", "acme", "--snapshot", "mon", "--to", f"file://{tmp_path}/{to}"))
    out = acme("status").stdout
    lines = [line for line in out.splitlines() if line.strip()]
    assert max(len(line) for line in lines) <= 100, "\n".join(lines)
    assert "…" not in out
    (row,) = [line for line in lines if line.startswith("│ acme ")]
    assert "1h met" in row and "/1w" in row and "769 B / 0 B" in row, row
    # --wide: every row one line, however long
    wide = acme("--wide", "status").stdout
    (row,) = [line for line in wide.splitlines() if line.startswith(f"│ {long_name} ")]
    (row,) = [line for line in wide.splitlines() if line.startswith("│ acme ")]
    cells = [cell.strip() for cell in row.split("│")[1:-1]]
    assert cells[0] == "acme" and len(cells[3].split()) == 3  # an age per destination
    assert cells[7] == "769 B / 0 B"


def test_status_help_documents_the_exit_codes(rewind: Rewind) -> None:
    shown = " ".join(ok(rewind("status", "--help")).stdout.replace("│", " ").split())
    assert "Exit status: 0 when every tenant meets its objective" in shown
    assert "3 when any does (for cron and CI)" in shown


def test_status_of_a_catalog_with_no_active_tenant_is_healthy(rewind: Rewind) -> None:
    ok(rewind("tenant", "create", "gone"))
    ok(rewind("tenant", "drop", "gone", "--yes"))
    report: dict[str, Any] = as_json(rewind("--json", "status"))
    assert report["tenants"] == [] and report["healthy"] is True
    assert "0 tenants" in ok(rewind("status")).stdout
