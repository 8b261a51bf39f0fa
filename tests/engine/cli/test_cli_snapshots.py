"""The snapshot, PITR, schedule, ALTER and DDL commands end to end.

Every command runs in-process through ``typer.testing.CliRunner`` against a
real SQLite catalog file and a real moto S3 warehouse; state is checked
through the CLI's own ``--json`` output. Schedules need time to pass, so the
schedule test gives the CLI's store a controllable clock (the real catalog
and S3, only ``now`` is chosen by the test).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from engine.cli import context
from engine.cli.render_layout import local_time
from engine.restore.job import restore_tenant
from tenants.catalog.base import Clock
from tenants.objectstore.embedded import EmbeddedS3
from tenants.store import TableStore
from tenants.tenancy import active_tenant
from tenants.timeline.snapshots import create_snapshot
from tenants.times import US, format_ts, parse_instant
from tests.helpers.cli import as_json, ok

# Not the catalog's behaviour: on SQLite alone (conftest.py, one_catalog).
pytestmark = pytest.mark.one_catalog

Rewind = Callable[..., Result]

TABLE = "sales.orders"
ORDERS = ["--column", "id:int64", "--column", "item:string", "--column", "amount:double"]


@pytest.fixture
def api(uris: tuple[str, str], s3_server: EmbeddedS3) -> Iterator[TableStore]:
    """The same catalog and warehouse through the API (for what the CLI does not do)."""
    table_store = TableStore.open(*uris)
    yield table_store
    table_store.close()


def failed(result: Result, expected: str) -> str:
    """Assert exit 1 with one ``error:`` line naming ``expected`` and no traceback."""
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], (
        result.stderr
    )
    return lines[0]


def load(rewind: Rewind, tmp_path: Path, rows: str) -> int:
    """Upsert CSV rows ``id,item,amount`` into acme's orders; the commit ts."""
    path = tmp_path / f"rows-{len(list(tmp_path.iterdir()))}.csv"
    path.write_text("id,item,amount\n" + rows)
    return int(as_json(rewind("--json", "load", "acme", TABLE, path))["ts"])


def rows(rewind: Rewind, *args: str) -> list[dict[str, Any]]:
    return list(as_json(rewind("--json", "query", "acme", TABLE, *args)))


def ids(rewind: Rewind, *args: str) -> list[int]:
    return [r["id"] for r in rows(rewind, *args)]


def snapshot_names(rewind: Rewind) -> list[str]:
    return [s["name"] for s in as_json(rewind("--json", "snapshot", "list", "acme"))]


@pytest.fixture
def orders(rewind: Rewind) -> str:
    """Tenant ``acme`` with an empty ``sales.orders`` keyed by id."""
    ok(rewind("tenant", "create", "acme"))
    ok(rewind("table", "create", "acme", TABLE, *ORDERS, "--key", "id"))
    return TABLE


@pytest.fixture
def loaded(rewind: Rewind, orders: str, tmp_path: Path) -> str:
    load(rewind, tmp_path, "1,a,1.5\n2,b,2.5\n")
    return orders


class FixedClock:
    """The catalog clock the CLI's store will use; the test moves it."""

    def __init__(self, at: str) -> None:
        self.now = parse_instant(at)

    def set(self, at: str) -> None:
        self.now = parse_instant(at)

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def cli_clock(monkeypatch: pytest.MonkeyPatch) -> FixedClock:
    """Make every store the CLI opens read ``now`` from a clock the test sets."""
    clock = FixedClock("2026-01-05T10:00:00Z")

    class ClockedStore(TableStore):
        @classmethod
        def open(cls, *args: Any, clock: Clock = clock, **kwargs: Any) -> TableStore:  # type: ignore[override]
            return TableStore.open(*args, clock=clock, **kwargs)

    monkeypatch.setattr(context, "TableStore", ClockedStore)
    return clock


# snapshots


def test_snapshot_create_list_show_and_as_of_it_reads_the_rows_before_later_writes(
    rewind: Rewind, loaded: str, tmp_path: Path
) -> None:
    created = as_json(rewind("--json", "snapshot", "create", "acme", "monday"))
    assert created["name"] == "monday" and created["kind"] == "manual"
    assert created["at"] == format_ts(created["ts"]) and created["expires_at"] is None
    later = load(rewind, tmp_path, "2,changed,9\n3,c,3.5\n")
    assert later > created["ts"]

    assert rows(rewind, "--as-of", "monday") == [
        {"id": 1, "item": "a", "amount": 1.5},
        {"id": 2, "item": "b", "amount": 2.5},
    ]
    assert [(r["id"], r["item"]) for r in rows(rewind)] == [(1, "a"), (2, "changed"), (3, "c")]
    assert ids(rewind, "--as-of", str(created["ts"])) == [1, 2]  # the raw ts is protected too

    (listed,) = as_json(rewind("--json", "snapshot", "list", "acme"))
    assert {k: listed[k] for k in ("name", "ts", "at", "kind", "expires", "lives_in")} == {
        "name": "monday",
        "ts": created["ts"],
        "at": created["at"],
        "kind": "manual",
        "expires": None,
        "lives_in": None,
    }
    assert listed["age_us"] >= 0
    text = ok(rewind("snapshot", "list", "acme")).stdout
    assert "monday" in text and local_time(created["ts"]) in text  # its time, in the local zone
    assert "manual" in text and "never" in text and "1 snapshot(s)" in text

    shown = as_json(rewind("--json", "snapshot", "show", "acme", "monday"))
    assert shown["ts"] == created["ts"] and shown["lives_in"] is None
    text = ok(rewind("snapshot", "show", "acme", "monday")).stdout
    assert str(created["ts"]) in text and local_time(created["ts"]) in text
    assert "(this tenant)" in text


def test_snapshot_at_an_earlier_protected_time_reads_that_time(
    rewind: Rewind, orders: str, tmp_path: Path
) -> None:
    ok(rewind("pitr", "set", "acme", "1h"))
    first = load(rewind, tmp_path, "1,a,1\n")
    load(rewind, tmp_path, "1,b,2\n")
    created = as_json(rewind("--json", "snapshot", "create", "acme", "early", "--at", str(first)))
    assert created["ts"] == first
    ok(rewind("pitr", "set", "acme", "off"))  # now only the snapshot protects it
    assert [r["item"] for r in rows(rewind, "--as-of", "early")] == ["a"]
    assert [r["item"] for r in rows(rewind, "--as-of", format_ts(first))] == ["a"]


def test_snapshot_drop_by_name_by_kind_and_older_than(
    rewind: Rewind, loaded: str, api: TableStore
) -> None:
    for name in ("a", "b", "c"):
        ok(rewind("snapshot", "create", "acme", name))
    with api.catalog.transaction() as tx:
        create_snapshot(tx, active_tenant(tx, "acme"), "auto-20260101T000000Z", kind="scheduled")
    assert snapshot_names(rewind) == ["a", "b", "c", "auto-20260101T000000Z"]

    dropped = as_json(rewind("--json", "snapshot", "drop", "acme", "a", "--yes"))
    assert [s["name"] for s in dropped["dropped"]] == ["a"]
    text = ok(rewind("snapshot", "drop", "acme", "--kind", "scheduled", "-y")).stdout
    assert "dropped 1 snapshot(s) of acme: auto-20260101T000000Z" in text
    assert snapshot_names(rewind) == ["b", "c"]

    dropped_none = ok(rewind("snapshot", "drop", "acme", "--older-than", "1d", "--yes")).stdout
    assert "nothing dropped" in dropped_none
    assert snapshot_names(rewind) == ["b", "c"]
    dropped = as_json(rewind("--json", "snapshot", "drop", "acme", "--older-than", "1us", "--yes"))
    assert [s["name"] for s in dropped["dropped"]] == ["b", "c"]
    assert snapshot_names(rewind) == []

    failed(rewind("snapshot", "drop", "acme"), "give a snapshot name, or --older-than")
    failed(rewind("snapshot", "drop", "acme", "b", "--kind", "manual"), "either a snapshot name")


def test_snapshot_list_shows_snapshots_kept_in_the_retired_tenant_after_a_restore(
    rewind: Rewind, loaded: str, api: TableStore, tmp_path: Path
) -> None:
    ok(rewind("snapshot", "create", "acme", "mon"))
    load(rewind, tmp_path, "3,c,3\n")
    ok(rewind("snapshot", "create", "acme", "wed"))
    old = api.tenant("acme")
    restore_tenant(api, "acme", "mon", executor="local")

    listed = {s["name"]: s for s in as_json(rewind("--json", "snapshot", "list", "acme"))}
    assert listed["mon"]["lives_in"] is None  # carried into the restored tenant
    retired = listed["wed"]["lives_in"]
    assert retired["tenant"] == old.ref and retired["state"] == "dropped"
    assert retired["until"] == format_ts(retired["retain_until"])
    text = ok(rewind("--wide", "snapshot", "list", "acme")).stdout
    assert "lives in" in text
    assert f"{old.ref} until {local_time(retired['retain_until'])}" in text
    shown = as_json(rewind("--json", "snapshot", "show", "acme", "wed"))
    assert shown["lives_in"]["tenant"] == old.ref
    assert ids(rewind) == [1, 2] and ids(rewind, "--as-of", "wed") == [1, 2, 3]
    failed(
        rewind("snapshot", "drop", "acme", "wed", "--yes"), f"lives in the retired tenant {old.ref}"
    )
    ok(rewind("snapshot", "drop", old.ref, "wed", "--yes"))
    assert snapshot_names(rewind) == ["mon"]


# PITR


def test_pitr_set_show_and_off_decide_which_past_times_are_readable(
    rewind: Rewind, orders: str, tmp_path: Path
) -> None:
    shown = as_json(rewind("--json", "pitr", "show", "acme"))
    assert shown["window"] is None and shown["recoverable"]["window"] is None
    assert "PITR is off" in ok(rewind("pitr", "show", "acme")).stdout

    window = as_json(rewind("--json", "pitr", "set", "acme", "2h"))
    assert (window["window"], window["window_us"]) == ("2h", 2 * US["h"])
    first = load(rewind, tmp_path, "1,a,1\n")
    load(rewind, tmp_path, "1,b,2\n")
    shown = as_json(rewind("--json", "pitr", "show", "acme"))
    assert shown["since_ts"] == window["since_ts"] <= first
    recoverable = shown["recoverable"]
    assert recoverable["window"]["from_ts"] == window["since_ts"]
    assert recoverable["window"]["to_ts"] == recoverable["now_ts"] > first
    assert recoverable["now_from_ts"] > first and recoverable["snapshots"] == []
    text = ok(rewind("pitr", "show", "acme")).stdout
    assert "PITR window 2h" in text and local_time(recoverable["window"]["from_ts"]) in text
    assert local_time(recoverable["now_from_ts"]) in text

    assert [r["item"] for r in rows(rewind, "--as-of", format_ts(first))] == ["a"]

    off = as_json(rewind("--json", "pitr", "set", "acme", "off"))
    assert off["window"] is None and off["recoverable"]["window"] is None
    assert "PITR is off" in ok(rewind("pitr", "set", "acme", "off")).stdout
    line = failed(rewind("query", "acme", TABLE, "--as-of", format_ts(first)), "is not protected")
    assert "recoverable are no PITR window" in line


def test_unprotected_as_of_fails_naming_the_recoverable_range(
    rewind: Rewind, orders: str, tmp_path: Path
) -> None:
    first = load(rewind, tmp_path, "1,a,1\n")
    ok(rewind("snapshot", "create", "acme", "after_first"))
    second = load(rewind, tmp_path, "1,b,2\n")
    line = failed(rewind("query", "acme", TABLE, "--as-of", str(first - 1)), "is not protected")
    assert f"any time from {format_ts(second)} (the last change) to now" in line
    assert "nearest snapshots: after_first" in line
    failed(rewind("ddl", "acme", "--as-of", str(first - 1)), "is not protected")


# schedules


def test_schedule_set_show_tick_is_idempotent_expires_by_count_and_off_stops_it(
    rewind: Rewind, cli_clock: FixedClock
) -> None:
    ok(rewind("tenant", "create", "acme"))
    assert as_json(rewind("--json", "snapshot", "schedule", "acme"))["schedule"] is None
    shown = as_json(
        rewind(
            "--json",
            "snapshot",
            "schedule",
            "acme",
            "--first",
            "00:00",
            "--every",
            "1d",
            "--keep-last",
            "2",
        )
    )["schedule"]
    assert (shown["first"], shown["every"], shown["keep_last"], shown["keep_for"]) == (
        "00:00:00",
        "1d",
        2,
        None,
    )
    assert shown["last_due"] is None and shown["next_due"] == "2026-01-06T00:00:00.000000Z"
    text = ok(rewind("snapshot", "schedule", "acme", "--show")).stdout
    assert "every 1d from 00:00:00 UTC" in text and "kept the last 2" in text

    # Today's 00:00 came before the schedule existed: nothing is due yet.
    assert as_json(rewind("--json", "snapshot", "tick"))[0]["created"] == []

    made = []
    for day in ("06", "07", "08"):
        cli_clock.set(f"2026-01-{day}T00:00:30Z")
        (result,) = as_json(rewind("--json", "snapshot", "tick", "acme"))
        (snap,) = result["created"]
        assert re.fullmatch(r"auto-\d{8}T000000Z", snap["name"])
        assert snap["name"] == f"auto-202601{day}T000000Z" and snap["kind"] == "scheduled"
        assert snap["ts"] == parse_instant(f"2026-01-{day}T00:00:00Z")  # due time, protected
        made.append(snap["name"])
        again = as_json(rewind("--json", "snapshot", "tick", "acme"))
        assert again == [{"tenant": "acme", "created": [], "expired": []}]
        if day == "08":
            assert [s["name"] for s in result["expired"]] == [made[0]]
    assert snapshot_names(rewind) == made[1:]

    cli_clock.set("2026-01-09T00:00:30Z")
    text = ok(rewind("snapshot", "tick")).stdout
    assert "acme: created auto-20260109T000000Z" in text
    assert "acme: expired auto-20260107T000000Z" in text
    assert "tick: 1 created, 1 expired, 1 tenant(s) checked" in text

    assert (
        "removed the snapshot schedule of acme"
        in ok(rewind("snapshot", "schedule", "acme", "--off")).stdout
    )
    assert as_json(rewind("--json", "snapshot", "schedule", "acme"))["schedule"] is None
    cli_clock.set("2026-01-10T00:00:30Z")
    assert as_json(rewind("--json", "snapshot", "tick"))[0]["created"] == []
    assert snapshot_names(rewind) == ["auto-20260108T000000Z", "auto-20260109T000000Z"]
    assert "had no snapshot schedule" in ok(rewind("snapshot", "schedule", "acme", "--off")).stdout


# schema history


def test_table_alter_adds_and_drops_columns_and_as_of_before_reads_the_old_schema(
    rewind: Rewind, loaded: str
) -> None:
    ok(rewind("snapshot", "create", "acme", "before_alter"))
    altered = as_json(
        rewind(
            "--json",
            "table",
            "alter",
            "acme",
            TABLE,
            "--add",
            "note:string=007",
            "--add",
            "qty:int64:not-null=0",
            "--add",
            "ratio:double=1",
            "--drop",
            "item",
        )
    )
    assert altered["columns"] == [
        {"name": "id", "type": "int64", "nullable": False, "default": None},
        {"name": "amount", "type": "double", "nullable": True, "default": None},
        {"name": "note", "type": "string", "nullable": True, "default": "007"},
        {"name": "qty", "type": "int64", "nullable": False, "default": 0},
        {"name": "ratio", "type": "double", "nullable": True, "default": 1.0},
    ]
    assert altered["schema_from"] == format_ts(altered["schema_from_ts"])

    assert rows(rewind) == [
        {"id": 1, "amount": 1.5, "note": "007", "qty": 0, "ratio": 1.0},
        {"id": 2, "amount": 2.5, "note": "007", "qty": 0, "ratio": 1.0},
    ]
    assert rows(rewind, "--as-of", "before_alter") == [
        {"id": 1, "item": "a", "amount": 1.5},
        {"id": 2, "item": "b", "amount": 2.5},
    ]
    text = ok(rewind("table", "alter", "acme", TABLE, "--add", 'tag:string="x"')).stdout
    assert "altered table acme/sales.orders: added tag" in text


def test_ddl_as_of_shows_tables_that_existed_then(rewind: Rewind, tmp_path: Path) -> None:
    ok(rewind("tenant", "create", "acme"))
    ok(rewind("pitr", "set", "acme", "1h"))
    ok(rewind("snapshot", "create", "acme", "empty"))
    created = as_json(rewind("--json", "table", "create", "acme", TABLE, *ORDERS, "-k", "id"))
    load(rewind, tmp_path, "1,a,1\n")
    ok(rewind("table", "drop", "acme", TABLE))

    now = as_json(rewind("--json", "ddl", "acme"))
    assert now["databases"] == []
    assert "no tables" in ok(rewind("ddl", "acme")).stdout
    assert as_json(rewind("--json", "ddl", "acme", "--as-of", "empty"))["databases"] == []

    before_drop = as_json(
        rewind("--json", "ddl", "acme", "--as-of", format_ts(created["created_ts"]))
    )
    (database,) = before_drop["databases"]
    (table,) = database["tables"]
    assert (database["name"], table["table"], table["primary_key"]) == ("sales", "orders", ["id"])
    assert [(c["name"], c["type"], c["nullable"], c["default"]) for c in table["columns"]] == [
        ("id", "int64", False, None),
        ("item", "string", True, None),
        ("amount", "double", True, None),
    ]
    text = ok(rewind("ddl", "acme", "--as-of", str(created["created_ts"]))).stdout
    assert "sales" in text and "orders" in text and "primary key (id)" in text
    assert "amount" in text and "double" in text


# bad inputs


BAD_INPUTS: dict[str, tuple[list[str], str]] = {
    "duplicate_snapshot_name": (["snapshot", "create", "acme", "monday"], "already has a snapshot"),
    "invalid_snapshot_name": (["snapshot", "create", "acme", "1st"], "invalid snapshot name '1st'"),
    "snapshot_at_a_name": (["snapshot", "create", "acme", "x", "--at", "monday"], "invalid --at"),
    "snapshot_in_the_future": (
        ["snapshot", "create", "acme", "x", "--at", "2999-01-01T00:00:00Z"],
        "is in the future",
    ),
    "unknown_snapshot_show": (["snapshot", "show", "acme", "tuesday"], "no snapshot 'tuesday'"),
    "unknown_snapshot_drop": (
        ["snapshot", "drop", "acme", "tuesday", "--yes"],
        "no snapshot 'tuesday'",
    ),
    "unknown_snapshot_as_of": (
        ["query", "acme", TABLE, "--as-of", "tuesday"],
        "no snapshot 'tuesday'",
    ),
    "invalid_pitr_window": (["pitr", "set", "acme", "6x"], "invalid duration '6x'"),
    "invalid_older_than": (
        ["snapshot", "drop", "acme", "--older-than", "6x"],
        "invalid duration '6x'",
    ),
    "invalid_interval": (
        ["snapshot", "schedule", "acme", "--first", "00:00", "--every", "6x"],
        "invalid duration '6x'",
    ),
    "invalid_time_of_day": (
        ["snapshot", "schedule", "acme", "--first", "25:00", "--every", "1d"],
        "invalid time of day '25:00'",
    ),
    "schedule_without_interval": (
        ["snapshot", "schedule", "acme", "--first", "01:00"],
        "needs both --first HH:MM and --every",
    ),
    "schedule_show_and_off": (
        ["snapshot", "schedule", "acme", "--show", "--off"],
        "use either --show, --off",
    ),
    "zero_keep_last": (
        ["snapshot", "schedule", "acme", "--first", "01:00", "--every", "1d", "--keep-last", "0"],
        "invalid --keep-last '0': give a whole number from 1",
    ),
    "drop_key_column": (
        ["table", "alter", "acme", TABLE, "--drop", "id"],
        "cannot drop key column 'id'",
    ),
    "drop_unknown_column": (
        ["table", "alter", "acme", TABLE, "--drop", "nope"],
        "no column 'nope'",
    ),
    "add_existing_column": (
        ["table", "alter", "acme", TABLE, "--add", "item:string"],
        "already has a column 'item'",
    ),
    "not_null_without_default": (
        ["table", "alter", "acme", TABLE, "--add", "n:int64:not-null"],
        "without a default",
    ),
    "default_of_wrong_type": (
        ["table", "alter", "acme", TABLE, "--add", "n:int64=abc"],
        "default 'abc' of column 'n' is not a int64",
    ),
    "bad_add_spec": (["table", "alter", "acme", TABLE, "--add", "n"], "invalid --add 'n'"),
    "nothing_to_alter": (["table", "alter", "acme", TABLE], "nothing to alter"),
    "ddl_unknown_snapshot": (["ddl", "acme", "--as-of", "tuesday"], "no snapshot 'tuesday'"),
    "tick_unknown_tenant": (["snapshot", "tick", "ghost"], "tenant 'ghost' does not exist"),
}


def state_of(rewind: Rewind) -> dict[str, Any]:
    """Everything a failed command must leave unchanged (minus clock-driven fields)."""
    snapshots = as_json(rewind("--json", "snapshot", "list", "acme"))
    pitr = as_json(rewind("--json", "pitr", "show", "acme"))
    return {
        "tenants": as_json(rewind("--json", "tenant", "list", "--all")),
        "snapshots": [{k: v for k, v in s.items() if k != "age_us"} for s in snapshots],
        "pitr": (pitr["window"], pitr["since_ts"], pitr["recoverable"]["now_from_ts"]),
        "schedule": as_json(rewind("--json", "snapshot", "schedule", "acme")),
        "ddl": as_json(rewind("--json", "ddl", "acme"))["databases"],
        "rows": rows(rewind),
    }


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_exits_1_with_one_line_message_and_changes_nothing(
    rewind: Rewind, loaded: str, case: str
) -> None:
    ok(rewind("snapshot", "create", "acme", "monday"))
    ok(rewind("pitr", "set", "acme", "1h"))
    ok(rewind("snapshot", "schedule", "acme", "--first", "00:00", "--every", "1d"))
    args, expected = BAD_INPUTS[case]
    before = state_of(rewind)

    failed(rewind(*args), expected)

    assert state_of(rewind) == before


@pytest.mark.parametrize(
    "args",
    [
        ["snapshot", "create", "acme", "bad name"],
        ["snapshot", "create", "acme", "x", "--at", "yesterday"],
        ["snapshot", "drop", "acme", "--older-than", "6x"],
        ["snapshot", "schedule", "acme", "--first", "25:00", "--every", "1d"],
        ["pitr", "set", "acme", "6x"],
        ["table", "alter", "acme", TABLE, "--add", "__x:int64"],
        ["ddl", "acme", "--as-of", "no such"],
    ],
)
def test_malformed_arguments_are_rejected_before_the_catalog_is_created(
    rewind: Rewind, tmp_path: Path, args: list[str]
) -> None:
    result = rewind(*args)
    assert result.exit_code == 1 and result.stderr.startswith("error: "), result.output
    assert not (tmp_path / "c.db").exists()


def test_tick_every_ticks_in_the_foreground_one_json_line_a_tick(
    rewind: Rewind, cli_clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`snapshot tick --every 5m` is the schedule loop for a container: each pass
    ticks, then sleeps what is left of the interval (here the clock jumps a day)."""
    from engine.cli import snapshot_cmds

    ok(rewind("tenant", "create", "acme"))
    ok(rewind("snapshot", "schedule", "acme", "--first", "00:00", "--every", "1d"))
    days = iter(["2026-01-06T00:00:30Z", "2026-01-07T00:00:30Z"])
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        cli_clock.set(next(days))

    monkeypatch.setattr(snapshot_cmds, "sleep", sleep)

    out = ok(rewind("--json", "snapshot", "tick", "acme", "--every", "5m", "--count", "3")).stdout
    ticks = [json.loads(line) for line in out.splitlines()]
    assert [[s["name"] for s in t[0]["created"]] for t in ticks] == [
        [],
        ["auto-20260106T000000Z"],
        ["auto-20260107T000000Z"],
    ]
    assert len(slept) == 2 and all(290 < s <= 300 for s in slept)


def test_tick_count_without_every_is_refused(rewind: Rewind) -> None:
    result = rewind("snapshot", "tick", "--count", "2")
    assert result.exit_code == 1
    assert "--count goes with --every" in result.output
