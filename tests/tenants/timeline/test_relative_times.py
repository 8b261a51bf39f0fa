"""Relative and human times: ``now``, ``-1h``, ``PT15M`` wherever a user names a time.

The parser is tested on its own, with "now" handed in; the store and the CLI
run on a real catalog and a real S3 endpoint with the catalog's clock frozen
(the ``clock`` fixture), so "an hour ago" is an exact ts.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from engine.cli import context
from engine.cli.context import instant_arg
from tenants.catalog.base import Clock
from tenants.errors import InvalidArgument, UnprotectedTime
from tenants.store import TableStore
from tenants.times import (
    MAX_TS,
    US,
    TimeSpec,
    format_ts,
    parse_instant,
    parse_time,
    starts_time,
    time_word,
)
from tests.helpers.cli import as_json, ok
from tests.helpers.item_rows import SCHEMA, pairs, rows

S = US["s"]
M = US["m"]
H = US["h"]
D = US["d"]
T0 = parse_instant("2026-01-05T00:30:00Z")
NOW = parse_instant("2026-11-25T12:00:00Z")
RANGE = r"times run from 1970-01-01T00:00:00.000000Z \(ts 0\) to 9999-12-31"

Rewind = Callable[..., Result]


# --- the parser --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ago"),
    [
        ("now", 0),
        ("NOW", 0),
        (" now ", 0),
        ("-1h", H),
        ("-90s", 90 * S),
        ("-1h30m", H + 30 * M),
        ("-7d", 7 * D),
        ("-2w", 14 * D),
        ("-250ms", 250_000),
        ("-0s", 0),
        ("PT15M", 15 * M),
        ("-PT15M", 15 * M),
        ("pt15m", 15 * M),
        ("P1DT2H", D + 2 * H),
        ("PT0.5S", S // 2),
        ("PT0,5S", S // 2),
        ("PT1H30.5M", H + 30 * M + 30 * S),
        ("P1W", 7 * D),
        ("P2W3D", 17 * D),
        ("PT2M", 2 * M),  # M after T is minutes, never months
        ("PT0S", 0),
    ],
)
def test_relative_time_counts_back_from_the_now_it_is_given(text: str, ago: int) -> None:
    spec = parse_time(text)
    assert spec.relative
    assert spec.resolve(NOW) == NOW - ago
    assert spec.resolve(NOW + H) == NOW + H - ago  # pinned only when resolved


@pytest.mark.parametrize(
    ("text", "ts"),
    [
        ("2026-11-25T10:00:00+01:00", parse_instant("2026-11-25T09:00:00Z")),
        ("2026-11-25T10:00:00", parse_instant("2026-11-25T10:00:00Z")),  # naive is UTC
        ("2026-11-25T10:00:00Z", 1_795_600_800_000_000),
        ("1795600800000000", 1_795_600_800_000_000),
    ],
)
def test_absolute_time_ignores_now(text: str, ts: int) -> None:
    spec = parse_time(text)
    assert not spec.relative
    assert spec == TimeSpec(text, ts=ts)
    assert spec.resolve(0) == spec.resolve(NOW) == ts


@pytest.mark.parametrize("text", ["P1Y", "P2M", "-P1Y", "P1Y2D", "P0M", "P1M2DT3H"])
def test_years_and_months_are_refused_because_their_length_is_ambiguous(text: str) -> None:
    with pytest.raises(InvalidArgument, match=r"years and months have no fixed length.*P30D"):
        parse_time(text)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("-1x", r"invalid time '-1x': a time before now is a minus sign and a duration: -90s"),
        ("-", r"a time before now is a minus sign and a duration"),
        ("-1000", r"a time before now is a minus sign and a duration"),
        ("-PT", r"invalid time '-PT': an ISO-8601 duration is P\[nW\]\[nD\]"),
        ("-P1DT", r"an ISO-8601 duration is P\[nW\]\[nD\]"),
        ("PT1.5H30M", r"only the last number of an ISO-8601 duration may have a fraction"),
        ("PT0.0000001S", r"invalid time 'PT0.0000001S': finer than a microsecond"),
        ("PT", r"invalid time 'PT': use a snapshot name, an ISO-8601 instant .*-1h, -90s, PT15M"),
        ("+1h", r"invalid time '\+1h': use a snapshot name"),
        ("yesterday", r"invalid time 'yesterday': use a snapshot name"),
    ],
)
def test_malformed_time_names_the_forms_it_could_have_been(text: str, match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        parse_time(text)


def test_relative_time_before_the_epoch_is_the_range_error() -> None:
    assert parse_time("-1h").resolve(H) == 0  # the epoch itself is a time
    with pytest.raises(InvalidArgument, match=rf"invalid time '-1h': {RANGE}"):
        parse_time("-1h").resolve(H - 1)
    with pytest.raises(InvalidArgument, match=rf"invalid time '-P100000D': {RANGE}"):
        parse_time("-P100000D").resolve(NOW)  # 274 years before 2026
    assert parse_time("now").resolve(MAX_TS) == MAX_TS


@pytest.mark.parametrize("text", ["-" + "9" * 30 + "w", "-P" + "9" * 5000 + "D", "-999999999999d"])
def test_relative_time_longer_than_every_range_is_refused_before_any_clock(text: str) -> None:
    with pytest.raises(InvalidArgument, match=RANGE):
        parse_time(text)


@pytest.mark.parametrize(
    ("text", "point"),
    [
        ("now", "-0s"),
        ("PT15M", "-PT15M"),
        ("-1h", "-1h"),
        ("-PT1S", "-PT1S"),
        ("1795600800000000", 1_795_600_800_000_000),
    ],
)
def test_a_point_handed_on_reads_as_the_same_time_never_as_a_snapshot(
    text: str, point: int | str
) -> None:
    spec = parse_time(text)
    assert spec.as_point() == point
    if isinstance(point, str):
        assert starts_time(point)  # resolve_time never looks it up as a snapshot
        assert parse_time(point).resolve(NOW) == spec.resolve(NOW)


@pytest.mark.parametrize(
    ("text", "first", "word"),
    [
        ("-1h", True, False),
        ("2026-01-01", True, False),
        ("now", False, True),
        ("PT1M", False, True),
        ("P1Y", False, True),  # looks like a duration: refused by name, or a snapshot's
        ("PT15X", False, False),
        ("mon", False, False),
        ("nowhere", False, False),
    ],
)
def test_which_text_is_a_time_and_which_may_be_a_snapshot(
    text: str, first: bool, word: bool
) -> None:
    assert starts_time(text) is first
    assert time_word(text) is word


# --- --at: a time, never a snapshot, checked before any I/O --------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("now", "-0s"),
        ("-1h", "-1h"),
        ("PT15M", "-PT15M"),
        ("2026-11-22T10:00:00Z", parse_instant("2026-11-22T10:00:00Z")),
        ("1795600800000000", 1_795_600_800_000_000),
    ],
)
def test_at_accepts_relative_times_and_still_pins_instants(text: str, expected: int | str) -> None:
    assert instant_arg("--at", text) == expected


@pytest.mark.parametrize("text", ["mon", "yesterday", "PT15X", "g@", ""])
def test_at_refuses_a_word_that_is_no_time_naming_the_new_forms(text: str) -> None:
    with pytest.raises(
        InvalidArgument,
        match=r"invalid --at .*: use an ISO-8601 instant .*now, or a time before now "
        r"\(-1h, -90s, PT15M\); for a snapshot use --snapshot NAME",
    ):
        instant_arg("--at", text)


def test_at_refuses_years_before_any_io() -> None:
    with pytest.raises(InvalidArgument, match=r"years and months have no fixed length"):
        instant_arg("--at", "P1Y")


# --- the store: "now" is the catalog clock ------------------------------------------


def read(store: TableStore, tenant: str, as_of: int | str | None = None) -> list[tuple[int, str]]:
    return pairs(store.read(tenant, "db.items", as_of))


@pytest.fixture
def tenant(store: TableStore, clock: Any) -> str:
    """A tenant with ``db.items`` and a 1-day PITR window: ``a`` at T0+1m, ``b`` at
    T0+2m; the clock then stands at T0+3m."""
    clock.fixed = T0
    name = f"t-{uuid.uuid4().hex[:10]}"
    store.create_tenant(name)
    store.create_table(name, "db.items", SCHEMA)
    store.set_pitr(name, D)
    clock.fixed = T0 + M
    store.write(name, "db.items", upserts=rows((1, "a")))
    clock.fixed = T0 + 2 * M
    store.write(name, "db.items", upserts=rows((1, "b")))
    clock.fixed = T0 + 3 * M
    return name


def test_relative_as_of_reads_the_state_that_long_before_the_catalog_clock(
    store: TableStore, tenant: str
) -> None:
    assert store.resolve_time(tenant, "-5s") == T0 + 3 * M - 5 * S
    assert store.resolve_time(tenant, "now") == T0 + 3 * M
    assert read(store, tenant, "-90s") == [(1, "a")]  # T0+1m30s
    assert read(store, tenant, "PT90S") == [(1, "a")]
    assert read(store, tenant, "-PT30S") == [(1, "b")]
    assert read(store, tenant, "now") == [(1, "b")]
    assert [t.name for t in store.tables(tenant, as_of="-1m")] == ["items"]


def test_relative_time_moves_with_the_clock(store: TableStore, clock: Any, tenant: str) -> None:
    assert read(store, tenant, "-1m30s") == [(1, "a")]
    clock.fixed = T0 + 4 * M
    assert read(store, tenant, "-1m30s") == [(1, "b")]


def test_now_is_never_behind_the_newest_commit(store: TableStore, clock: Any, tenant: str) -> None:
    clock.fixed = T0  # the clock steps back: commits keep their order
    result = store.write(tenant, "db.items", upserts=rows((2, "c")))
    assert result.ts > T0 + 2 * M
    assert store.resolve_time(tenant, "now") == result.ts
    assert read(store, tenant, "now") == [(1, "b"), (2, "c")]


def test_relative_time_outside_the_protected_times_is_unprotected(
    store: TableStore, tenant: str
) -> None:
    with pytest.raises(UnprotectedTime, match=r"is not protected"):
        store.resolve_time(tenant, "-1h")  # before the PITR window was switched on
    with pytest.raises(InvalidArgument, match=rf"invalid time '-P100000D': {RANGE}"):
        store.resolve_time(tenant, "-P100000D")
    with pytest.raises(InvalidArgument, match=r"is in the future"):  # as before
        store.resolve_time(tenant, format_ts(T0 + H))


def test_snapshot_named_like_a_time_wins_over_the_time(store: TableStore, tenant: str) -> None:
    early = store.create_snapshot(tenant, "now", at=T0 + M)
    store.create_snapshot(tenant, "PT1M", at=T0 + M)
    assert read(store, tenant, "now") == [(1, "a")]  # the snapshot
    assert read(store, tenant, "PT1M") == [(1, "a")]  # the snapshot, not T0+2m
    assert read(store, tenant, "PT2M") == [(1, "a")]  # no such snapshot: T0+1m
    assert read(store, tenant, "PT30S") == [(1, "b")]
    assert store.resolve_time(tenant, "now") == early.ts
    # '-' and digits are always times, so a point starting with '-' is the time
    # (now: the newest commit, the second snapshot's, one µs past the clock).
    assert store.resolve_time(tenant, "-0s") == store.now() == T0 + 3 * M + 1
    assert store.resolve_time(tenant, "-PT1M") == T0 + 2 * M + 1


def test_snapshot_at_a_relative_time_records_that_time(store: TableStore, tenant: str) -> None:
    assert store.create_snapshot(tenant, "s1", at="-90s").ts == T0 + M + 30 * S
    assert store.create_snapshot(tenant, "s2", at="PT30S").ts == T0 + 2 * M + 30 * S
    # Now: the newest commit (s2's, at T0+3m+1: s1 took T0+3m), never behind it.
    assert store.create_snapshot(tenant, "s3", at="now").ts == T0 + 3 * M + 1
    assert read(store, tenant, "s1") == [(1, "a")]
    with pytest.raises(UnprotectedTime, match=r"is not protected"):
        store.create_snapshot(tenant, "s4", at="-1h")
    assert [s.name for s in store.snapshots(tenant)] == ["s1", "s2", "s3"]


# --- the CLI ------------------------------------------------------------------------


@pytest.fixture
def cli(rewind: Rewind, clock: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Rewind:
    """The ``rewind`` CLI on a store with the frozen clock; tenant ``acme`` with
    ``shop.items``, PITR 1 day, ``a`` at T0+1m, ``b`` at T0+2h, the clock at T0+3h."""

    class ClockedStore(TableStore):
        @classmethod
        def open(cls, *args: Any, clock: Clock = clock, **kwargs: Any) -> TableStore:  # type: ignore[override]
            return TableStore.open(*args, clock=clock, **kwargs)

    monkeypatch.setattr(context, "TableStore", ClockedStore)
    clock.fixed = T0
    ok(rewind("tenant", "create", "acme"))
    ok(rewind("table", "create", "acme", "shop.items", "--column", "id:int64",
              "--column", "v:string", "--key", "id"))  # fmt: skip
    ok(rewind("pitr", "set", "acme", "1d"))
    for at, value in ((T0 + M, "a"), (T0 + 2 * H, "b")):
        clock.fixed = at
        csv = tmp_path / f"{value}.csv"
        csv.write_text(f"id,v\n1,{value}\n")
        ok(rewind("load", "acme", "shop.items", csv))
    clock.fixed = T0 + 3 * H
    return rewind


def test_cli_restore_dry_run_at_an_hour_ago_plans_that_time(cli: Rewind) -> None:
    plan = as_json(cli("--json", "restore-tenant", "acme", "--at", "-1h", "--dry-run"))
    assert plan["at"]["ts"] == T0 + 2 * H
    plan = as_json(cli("--json", "restore-tenant", "acme", "--at=-PT150M", "--dry-run"))
    assert plan["at"]["ts"] == T0 + 30 * M


def test_cli_at_now_is_the_time_even_beside_a_snapshot_named_now(cli: Rewind) -> None:
    ok(cli("snapshot", "create", "acme", "now", "--at", "-PT2H"))  # T0+1h
    plan = as_json(cli("--json", "restore-tenant", "acme", "--at", "now", "--dry-run"))
    assert plan["at"]["ts"] == T0 + 3 * H
    plan = as_json(cli("--json", "restore-tenant", "acme", "--snapshot", "now", "--dry-run"))
    assert plan["at"]["ts"] == T0 + H
    # --as-of may name either: the snapshot wins.
    assert [r["v"] for r in as_json(cli("--json", "query", "acme", "shop.items", "--as-of", "now"))] == ["a"]  # fmt: skip


def test_cli_snapshot_create_and_query_take_relative_times(cli: Rewind) -> None:
    created = as_json(cli("--json", "snapshot", "create", "acme", "early", "--at", "PT2H"))
    assert created["ts"] == T0 + H
    for as_of, expected in (("-2h", "a"), ("early", "a"), ("-PT30M", "b"), ("now", "b")):
        found = as_json(cli("--json", "query", "acme", "shop.items", "--as-of", as_of))
        assert [r["v"] for r in found] == [expected], as_of


def test_cli_at_still_refuses_a_bare_word_and_names_the_new_forms(cli: Rewind) -> None:
    result = cli("restore-tenant", "acme", "--at", "yesterday", "--dry-run")
    assert result.exit_code == 1
    assert "invalid --at 'yesterday'" in result.stderr
    assert "now, or a time before now (-1h, -90s, PT15M)" in result.stderr
    result = cli("snapshot", "create", "acme", "x", "--at", "P1M")
    assert result.exit_code == 1 and "years and months have no fixed length" in result.stderr
