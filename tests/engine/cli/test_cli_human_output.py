"""Human-sized output (issue 17, part 6): tables fit 100 columns off a terminal
without cutting a value short, ``--wide`` gives one line per row, times are
local with their zone (and go back into ``--at`` as the same ts), sizes are in
units of 1024, and the JSON stays as it was (UTC, raw integers).

The CLI runs in-process (typer's CliRunner, which is not a terminal) on a
SQLite catalog file and a ``file://`` warehouse, with names as long as real
ones get: layout does not depend on the catalog's backend.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from engine.cli.app import app
from engine.cli.render_layout import human_bytes, local_time
from tenants.times import MAX_TS, format_ts, parse_instant
from tests.helpers.cli import as_json, ok
from tests.helpers.paths import ROOT

# Not the catalog's behaviour: on SQLite alone (conftest.py, one_catalog).
pytestmark = pytest.mark.one_catalog

TENANT = "northwind-traders-europe-west-production-1"
CLONE = f"{TENANT}-clone"
OTHER = "initech-payments-sandbox"
TABLE = "warehouse_inventory.stock_movements_by_location_daily"
SNAPSHOT = "before_the_quarterly_inventory_migration_2026"
WIDTH = 100
BORDERS = "┃│┏┓┗┛┡┩┠┨┣┫┌┐└┘├┤╇╋┼┳┻━─"
# A time as people read it: date, a space, time of day with six digits of µs, offset.
LOCAL_TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}[+-]\d\d:\d\d")

Rewind = Callable[..., Result]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("human")


@pytest.fixture(scope="module")
def where(home: Path) -> list[str]:
    """``--catalog`` and ``--warehouse`` of this module's story."""
    return ["--catalog", f"sqlite:///{home / 'catalog.db'}", "--warehouse", f"file://{home / 'wh'}"]


@pytest.fixture(scope="module")
def rewind(where: list[str]) -> Rewind:
    """``rewind ARGS`` on this module's catalog and warehouse, off a terminal, with
    no ``COLUMNS`` (the pipe default applies)."""
    runner = CliRunner()

    def run(*args: str | Path) -> Result:
        return runner.invoke(app, [*where, *map(str, args)], env={"COLUMNS": None})

    return run


@pytest.fixture(scope="module")
def story(rewind: Rewind, home: Path) -> dict[str, Any]:
    """A tenant with long names that went through what every listing shows: two
    tables, loads and a delete, a snapshot, a restore in place (a retired
    tenant in its lineage, a restore job), a clone, a compaction, a backup, and
    a dropped tenant beside it."""
    ok(rewind("tenant", "create", TENANT))
    ok(rewind("tenant", "create", OTHER))
    ok(
        rewind(
            "table", "create", TENANT, TABLE, "-c", "id:int64", "-c", "location_code:string",
            "-c", "quantity_on_hand:int64", "-c", "note:string", "-k", "id", "-k", "location_code",
        )
    )  # fmt: skip
    ok(
        rewind(
            "table", "create", TENANT, "shop.items", "-c", "id:int64", "-c", "v:string", "-k", "id"
        )
    )
    (home / "a.csv").write_text(
        "id,location_code,quantity_on_hand,note\n1,AMS-01,10,a\n2,BER-02,20,b\n3,CDG-03,30,c\n"
    )
    (home / "b.csv").write_text(
        "id,location_code,quantity_on_hand,note\n2,BER-02,25,bb\n4,DUB-04,40,d\n"
    )
    (home / "k.csv").write_text("id,location_code\n1,AMS-01\n")
    (home / "i.csv").write_text("id,v\n1,x\n2,y\n")
    ok(rewind("load", TENANT, TABLE, home / "a.csv"))
    ok(rewind("load", TENANT, "shop.items", home / "i.csv"))
    ok(rewind("pitr", "set", TENANT, "72h"))
    ok(rewind("snapshot", "create", TENANT, SNAPSHOT))
    ok(rewind("load", TENANT, TABLE, home / "b.csv"))
    ok(rewind("delete", TENANT, TABLE, "--keys", home / "k.csv"))
    ok(rewind("restore-tenant", TENANT, "--snapshot", SNAPSHOT, "--yes"))
    ok(rewind("restore-tenant", TENANT, "--snapshot", SNAPSHOT, "--to", CLONE))
    ok(rewind("load", TENANT, TABLE, home / "b.csv"))
    ok(rewind("compact", TENANT))
    ok(rewind("backup", "create", TENANT, "--snapshot", SNAPSHOT, "--to", home / "backups"))
    # A tenant without snapshot or PITR window keeps no change log: its compaction
    # leaves garbage for `gc --dry-run` to list.
    ok(
        rewind(
            "table", "create", OTHER, "shop.items", "-c", "id:int64", "-c", "v:string", "-k", "id"
        )
    )
    ok(rewind("load", OTHER, "shop.items", home / "i.csv"))
    ok(rewind("load", OTHER, "shop.items", home / "i.csv"))
    ok(rewind("compact", OTHER))
    ok(rewind("tenant", "drop", OTHER, "--yes"))
    (snapshot,) = as_json(rewind("--json", "snapshot", "list", TENANT))
    return {"snapshot": snapshot, "backups": home / "backups"}


def listings(story: dict[str, Any]) -> dict[str, list[str]]:
    """Every command of the story that prints a table, by name."""
    return {
        "history": ["history", TENANT],
        "commits": ["history", TENANT, "--commits"],
        "plan": ["restore-tenant", TENANT, "--snapshot", SNAPSHOT, "--to", "copy", "--dry-run"],
        "table plan": ["restore-table", TENANT, TABLE, "--snapshot", SNAPSHOT, "--to",
                       "warehouse_inventory.stock_movements_by_location_daily_copy", "--dry-run"],
        "snapshots": ["snapshot", "list", TENANT],
        "snapshot": ["snapshot", "show", TENANT, SNAPSHOT],
        "tenants": ["tenant", "list", "--all"],
        "tables": ["table", "list", TENANT],
        "objects": ["objects", TENANT],
        "storage": ["storage", TENANT],
        "pitr": ["pitr", "show", TENANT],
        "backups": ["backup", "list", str(story["backups"])],
        "gc": ["gc", "--dry-run", "--grace", "0s", "--allow-short-grace", "--orphan-grace", "0s"],
        "query": ["query", TENANT, TABLE],
        "ddl": ["ddl", TENANT],
    }  # fmt: skip


LISTINGS = [
    "history", "commits", "plan", "table plan", "snapshots", "snapshot", "tenants", "tables",
    "objects", "storage", "pitr", "backups", "gc", "query", "ddl",
]  # fmt: skip


def laid_out(text: str) -> list[str]:
    """The lines of tables (and trees, titles, captions) in ``text``: a message
    line (``say``) starts with neither a border nor a space, and stays one line
    however long (docs/decisions.md, "Human output")."""
    return [line for line in text.splitlines() if line[:1] in (" ", *BORDERS, "└", "├")]


@pytest.mark.parametrize("name", LISTINGS)
def test_tables_fit_100_columns_off_a_terminal_and_cut_nothing_short(
    rewind: Rewind, story: dict[str, Any], name: str
) -> None:
    out = ok(rewind(*listings(story)[name])).stdout
    lines = laid_out(out)
    assert lines, out
    too_wide = [line for line in lines if len(line) > WIDTH]
    assert not too_wide, "\n".join(too_wide)
    assert "…" not in out, out  # nothing truncated with an ellipsis
    # A time wraps only at its space: its time of day stays whole.
    for cell in cells(out):
        for at in re.finditer(r"\d\d:\d\d:\d\d", cell):
            assert re.match(r"\.\d{6}[+-]\d\d:\d\d", cell[at.end() :]), cell
    # Nothing cropped at the edge either: a row that starts at a border ends at
    # one (ddl's tree starts its lines with guides, not borders).
    if name != "ddl":
        cropped = [line for line in lines if line[:1] in BORDERS and line[-1:] not in BORDERS]
        assert not cropped, "\n".join(cropped)


def test_history_was_wider_than_100_columns_and_now_wraps(
    rewind: Rewind, story: dict[str, Any]
) -> None:
    """The wide form is wider than 100 columns; the narrow one is not, and every
    long word of the wide form's cells is whole in it, reassembled from the
    pieces its column folded it into."""
    for name in ("history", "commits", "plan", "backups", "objects", "tenants"):
        args = listings(story)[name]
        narrow = ok(rewind(*args)).stdout
        wide = ok(rewind("--wide", *args)).stdout
        assert max(map(len, laid_out(narrow))) <= WIDTH < max(map(len, laid_out(wide))), name
        if name == "plan":
            continue  # each dry run plans a new job, with a new id
        columns = column_texts(narrow)
        for cell in cells(wide):
            for word in cell.split():
                if len(word) >= 16:
                    assert any(word in column for column in columns), (name, word)


def cells(text: str) -> list[str]:
    """Every cell of every table row in ``text``."""
    return [
        cell.strip() for line in text.splitlines() if line[:1] == "│" for cell in line.split("│")
    ]


def column_texts(text: str) -> list[str]:
    """Each column of each table in ``text``, its pieces joined line after line:
    a word a narrow column folded over three lines is whole again; and the
    titles and captions (where the narrow commits table names its tenant)."""
    tables: list[list[str]] = [[" ".join(line.strip() for line in text.splitlines())]]
    for line in text.splitlines():
        if line[:1] in "┏┌":
            tables.append([])
        elif line[:1] == "│" and tables:
            pieces = [p.strip() for p in line.split("│")[1:-1]]
            columns = tables[-1]
            columns += [""] * (len(pieces) - len(columns))
            for i, piece in enumerate(pieces):
                columns[i] += piece
    return [column for columns in tables for column in columns]


def test_wide_gives_one_line_per_commit_with_its_ts_time_table_and_tenant(
    rewind: Rewind, story: dict[str, Any]
) -> None:
    commits = as_json(rewind("--json", "history", TENANT, "--commits"))
    wide = ok(rewind("--wide", "history", TENANT, "--commits")).stdout.splitlines()
    for commit in commits:
        (line,) = [line for line in wide if str(commit["ts"]) in line]
        assert local_time(commit["ts"]) in line
        assert commit["table"] in line and commit["tenant"] in line
    narrow = ok(rewind("history", TENANT, "--commits")).stdout
    assert max(map(len, narrow.splitlines())) <= WIDTH < max(map(len, wide))


def test_wide_gives_one_line_per_tenant_and_job_in_history(
    rewind: Rewind, story: dict[str, Any]
) -> None:
    hist = as_json(rewind("--json", "history", TENANT))
    wide = ok(rewind("--wide", "history", TENANT)).stdout.splitlines()
    for tenant in hist["lineage"]:
        ref = f"{tenant['name']}@{tenant['id']}"
        (line,) = [line for line in wide if line.startswith(f"│ {ref} ")]
        assert local_time(tenant["created_ts"]) in line
    for job in hist["jobs"]:
        (line,) = [line for line in wide if line.startswith(f"│ {job['job_id']} ")]
        assert job["source"] in line and local_time(job["created_ts"]) in line


def test_columns_still_sets_the_width(where: list[str], story: dict[str, Any]) -> None:
    result = CliRunner().invoke(
        app, [*where, "history", TENANT, "--commits"], env={"COLUMNS": "140"}
    )
    widths = [len(line) for line in laid_out(ok(result).stdout)]
    assert WIDTH < max(widths) <= 140


@pytest.fixture
def kolkata() -> Iterator[None]:
    """This process in Asia/Kolkata (+05:30, no daylight saving), as ``TZ`` says."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Kolkata"
    time.tzset()
    yield
    if before is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = before
    time.tzset()


def test_times_are_local_with_their_zone_and_follow_tz(
    rewind: Rewind, story: dict[str, Any], kolkata: None
) -> None:
    out = ok(rewind("--wide", "snapshot", "list", TENANT)).stdout
    shown = LOCAL_TIME.findall(out)
    assert shown and all(t.endswith("+05:30") for t in shown), out
    assert local_time(story["snapshot"]["ts"]) in out
    assert not re.search(r"\d\.\d{6}Z", out)  # no UTC form in human output
    for args in (["history", TENANT], ["history", TENANT, "--commits"], ["tenant", "list"]):
        text = ok(rewind("--wide", *args)).stdout
        assert "+05:30" in text and not re.search(r"\d\.\d{6}Z", text), args


def test_json_keeps_utc_times_whatever_the_zone(
    rewind: Rewind, story: dict[str, Any], kolkata: None
) -> None:
    (snapshot,) = as_json(rewind("--json", "snapshot", "list", TENANT))
    assert snapshot == story["snapshot"] | {"age_us": snapshot["age_us"]}
    assert snapshot["at"] == format_ts(snapshot["ts"]) and snapshot["at"].endswith("Z")


def test_a_printed_time_given_back_to_at_names_the_same_ts(
    rewind: Rewind, story: dict[str, Any], kolkata: None
) -> None:
    """The time ``snapshot list`` prints, pasted into ``--at`` (quoted: it holds
    a space), restores to exactly the snapshot's ts."""
    snap = story["snapshot"]
    (printed,) = LOCAL_TIME.findall(ok(rewind("--wide", "snapshot", "list", TENANT)).stdout)
    assert printed.endswith("+05:30")
    plan = as_json(
        rewind("--json", "restore-tenant", TENANT, "--at", printed, "--to", "copy", "--dry-run")
    )
    assert plan["at"]["ts"] == snap["ts"]
    rows = as_json(rewind("--json", "query", TENANT, TABLE, "--as-of", printed))
    assert rows == as_json(rewind("--json", "query", TENANT, TABLE, "--as-of", SNAPSHOT))


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata", "America/New_York", "Australia/Lord_Howe"])
def test_local_time_round_trips_through_parse_instant(zone: str) -> None:
    """Across daylight-saving changes too (New York's repeated hour, Lord Howe's
    half-hour shift): the offset printed is the one in force at that instant."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = zone
    time.tzset()
    try:
        # 01:30 on 2026-11-01 in New York, in daylight time and then in standard time.
        repeated = parse_instant("2026-11-01T05:30:00Z")
        for ts in (0, 1, 1764093845123456, repeated, repeated + 3_600_000_000):
            assert parse_instant(local_time(ts)) == ts, (zone, ts)
        # East of UTC the last µs Rewind can name falls in year 10000: printed in UTC.
        assert parse_instant(local_time(MAX_TS)) == MAX_TS
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()


def test_a_fresh_process_follows_tz(where: list[str], story: dict[str, Any], kolkata: None) -> None:
    """``TZ`` in the environment, as a shell sets it: no ``tzset`` involved."""
    done = subprocess.run(
        [sys.executable, "-m", "engine.cli.app", *where, "snapshot", "show", TENANT, SNAPSHOT],
        env={k: v for k, v in os.environ.items() if k != "COLUMNS"} | {"PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    shown = local_time(story["snapshot"]["ts"])  # this process is in Kolkata too
    assert shown.endswith("+05:30") and f"│ time     │ {shown} " in done.stdout


def test_sizes_are_in_units_of_1024_and_json_keeps_bytes(
    rewind: Rewind, story: dict[str, Any]
) -> None:
    objects = as_json(rewind("--json", "objects", TENANT))
    shown = ok(rewind("--wide", "objects", TENANT)).stdout
    for o in objects:
        assert isinstance(o["bytes"], int)
        assert human_bytes(o["bytes"]) in shown
    assert " bytes" not in shown
    commits = ok(rewind("history", TENANT, "--commits")).stdout
    assert re.search(r"\d KiB │", commits) or re.search(r"\d B │", commits)


def test_human_bytes_steps_by_1024() -> None:
    assert [human_bytes(n) for n in (0, 1023, 1024, 1536, 5 << 30, 3 << 50)] == [
        "0 B",
        "1,023 B",
        "1.0 KiB",
        "1.5 KiB",
        "5.0 GiB",
        "3.0 PiB",
    ]
