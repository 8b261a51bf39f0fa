"""``rewind status`` sends as many catalog statements for 10,000 tenants as for 10.

Each column is one statement over every tenant (tenants.catalog.engine.status);
a statement per tenant would cost 10,000 round trips on PostgreSQL. The
tenants are written set-based (tests/helpers/status_world.py); how long status
takes is measured in benchmarks/bench_status.py, not here.
"""

from __future__ import annotations

from typing import Any

import pytest

from engine.operations.status import StatusReport, status
from tenants.store import TableStore
from tests.conftest import ManualClock
from tests.helpers.status_world import add_tenants
from tests.tenants.catalog.test_membership_by_reference import statements_run_by


def _status(store: TableStore, monkeypatch: pytest.MonkeyPatch) -> tuple[int, StatusReport]:
    seen: list[StatusReport] = []
    count = statements_run_by(store, monkeypatch, lambda: seen.append(status(store)))
    return count, seen[0]


def test_status_sends_as_many_statements_for_10000_tenants_as_for_10(
    store: TableStore, monkeypatch: pytest.MonkeyPatch, clock: ManualClock
) -> None:
    counts: list[int] = []
    for total in (10, 10_000):
        world = add_tenants(store, total - sum(1 for _ in store.tenants()), prefix=f"n{total}-")
        clock.fixed = world.now  # ages exact: tenant n's newest backup point is n seconds old
        count, report = _status(store, monkeypatch)
        counts.append(count)
        assert len(report.tenants) == total
    assert counts[0] == counts[1], counts

    # The columns are the tenants' own, joined by tenant in Python: spot-check them.
    by_name: dict[str, Any] = {t.name: t for t in report.tenants}
    # 10 tenants "n10-1..10", then 9,990 "n10000-1..9990": 6,390 of those are past 1h.
    assert sum(t.verdict == "missed" for t in report.tenants) == 9_990 - 3_600
    assert by_name["n10000-3600"].verdict == "met" and by_name["n10000-3601"].verdict == "missed"
    assert sum(any(j.state == "failed" for j in t.jobs) for t in report.tenants) == 99
    assert sum(any(j.state == "stale" for j in t.jobs) for t in report.tenants) == 9
    t = by_name["n10000-1000"]
    assert {(j.kind, j.state, j.target) for j in t.jobs} == {
        ("backup", "failed", "s3://bk/b"),
        ("backup", "stale", "s3://bk/c"),
    }
    assert [b.target for b in t.backups] == ["s3://bk/a"]
    assert t.recovery_point_age_us == 1000 * 1_000_000
    assert t.snapshot is not None and (t.snapshot.name, t.snapshot.count) == ("tue", 2)
    assert t.pitr is not None and not t.pitr.full and t.pitr.reach_us == 86_400 * 1_000_000
    assert t.drill is not None and t.drill.state == "done"
    assert (t.storage["data"].bytes, t.storage["tomb"].objects) == (1_000_000, 1)
    # Worst first: the missed objectives, those with failed jobs first, oldest point first.
    assert report.tenants[0].name == "n10000-9900"  # missed, a failed job, the oldest of those
    assert report.tenants[-1].name == "n10000-1"
    assert not report.healthy


def test_status_of_one_tenant_among_10000_sends_the_same_statements(
    store: TableStore, monkeypatch: pytest.MonkeyPatch, clock: ManualClock
) -> None:
    world = add_tenants(store, 10_000)
    clock.fixed = world.now
    one: list[StatusReport] = []
    single = statements_run_by(store, monkeypatch, lambda: one.append(status(store, "t42")))
    every, _ = _status(store, monkeypatch)
    (t,) = one[0].tenants
    assert t.name == "t42" and t.verdict == "met" and t.jobs == ()
    assert single == every + 1  # the tenant looked up first
