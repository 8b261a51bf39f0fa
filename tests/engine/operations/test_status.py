"""``status`` and recovery point objectives, through the Python API, on both catalogs.

The recovery point is the newest finished backup's point; snapshots and PITR
are shown beside it. A job needs attention when it failed or is stale; only
the newest run of a recurring job counts. The clock is frozen (the ``clock``
fixture), so every age is exact. Real kills: test_status_kills.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from engine.backup.api import create_backup
from engine.executors import DEFAULT_EXECUTORS
from engine.gc.run import run_gc
from engine.operations.objectives import recovery_objectives, set_recovery_objective
from engine.operations.runs import journaled
from engine.operations.status import TenantStatus, catalog_status, status
from engine.pipeline import ExecutorChoice, OnResult, RewriteExecutor, RewriteResult, RewriteTask
from engine.restore.job import restore_tenant
from tenants.catalog import open_catalog
from tenants.catalog.base import wall_clock_us
from tenants.catalog.engine.copy import copy_catalog
from tenants.catalog.engine.runs import RunEnd, RunStart, finish_run, insert_run
from tenants.catalog.migrations import _NEWEST_BACKFILL
from tenants.errors import InvalidArgument, NotFound, StorageError, TaskFailed, TenantDropped
from tenants.objectstore import ObjectStore
from tenants.store import TableStore
from tenants.times import US
from tests.conftest import ManualClock
from tests.helpers.backups import build_source
from tests.helpers.item_rows import SCHEMA, keys, rows
from tests.helpers.restores import SimulatedCrash, catalog_rows

pytestmark = pytest.mark.usefixtures("s3_server")
H = US["h"]
S = US["s"]


def one(store: TableStore, tenant: str) -> TenantStatus:
    (found,) = [t for t in status(store).tenants if t.name == tenant]
    return found


def test_an_objective_is_kept_by_name_set_in_any_form_and_removed_with_off(
    store: TableStore,
) -> None:
    store.create_tenant("acme")
    assert set_recovery_objective(store, "acme", "1h") == H
    assert recovery_objectives(store) == {"acme": H}
    assert set_recovery_objective(store, "acme", 90 * 60 * S) == 90 * 60 * S
    assert one(store, "acme").objective_us == 90 * 60 * S
    assert set_recovery_objective(store, "acme", "off") is None
    assert recovery_objectives(store) == {}
    set_recovery_objective(store, "acme", "2d")
    assert set_recovery_objective(store, "acme", None) is None
    assert recovery_objectives(store) == {}


@pytest.mark.parametrize("bad", ["0", "-1h", "abc", "", "1y", 0, -1, 2.5])
def test_a_bad_objective_is_refused_and_nothing_is_written(store: TableStore, bad: Any) -> None:
    store.create_tenant("acme")
    set_recovery_objective(store, "acme", "1h")
    with pytest.raises(InvalidArgument, match="recovery point objective|invalid duration"):
        set_recovery_objective(store, "acme", bad)
    assert recovery_objectives(store) == {"acme": H}


def test_an_objective_needs_an_active_tenant(store: TableStore) -> None:
    store.create_tenant("acme")
    with pytest.raises(NotFound, match="tenant 'acmee' does not exist"):
        set_recovery_objective(store, "acmee", "1h")
    dropped = store.drop_tenant("acme")
    with pytest.raises(NotFound, match="a dropped tenant acme@"):
        set_recovery_objective(store, "acme", "1h")
    with pytest.raises(TenantDropped):
        set_recovery_objective(store, dropped.ref, "1h")
    assert recovery_objectives(store) == {}


def test_an_objective_outlives_an_in_place_restore(store: TableStore) -> None:
    build_source(store)
    set_recovery_objective(store, "acme", "1h")
    before = store.tenant("acme").id
    restore_tenant(store, "acme", "mon", executor="local", verify="none")
    assert store.tenant("acme").id != before
    assert one(store, "acme").objective_us == H


def test_the_recovery_point_is_the_newest_backup_point_over_all_destinations(
    store: TableStore, clock: ManualClock, tmp_path: Path
) -> None:
    source = build_source(store)
    first, second = f"file://{tmp_path}/first", f"file://{tmp_path}/second"
    create_backup(store, "acme", "sun", first)
    create_backup(store, "acme", "mon", first)
    create_backup(store, "acme", "sun", second, kind="logical")
    clock.fixed = source.mon + 2 * H

    acme = one(store, "acme")

    assert [(b.target, b.point_ts, b.method) for b in acme.backups] == [
        (first, source.mon, "physical"),
        (second, source.sun, "logical"),
    ]
    assert acme.recovery_point_ts == source.mon
    assert acme.recovery_point_age_us == 2 * H
    assert acme.verdict == "none" and acme.healthy
    set_recovery_objective(store, "acme", "2h")
    assert one(store, "acme").verdict == "met"
    set_recovery_objective(store, "acme", "119m")
    missed = one(store, "acme")
    assert missed.verdict == "missed" and not missed.healthy and not status(store).healthy


def test_snapshots_and_pitr_are_shown_but_are_no_recovery_point(
    store: TableStore, clock: ManualClock
) -> None:
    clock.fixed = 1_800_000_000 * S
    store.create_tenant("acme")
    store.create_snapshot("acme", "mon")
    store.create_snapshot("acme", "tue")
    store.set_pitr("acme", 7 * 24 * H)  # on since now: it reaches back nothing yet
    set_recovery_objective(store, "acme", "1d")
    clock.fixed += 3 * H

    acme = one(store, "acme")

    assert acme.snapshot is not None and (acme.snapshot.name, acme.snapshot.count) == ("tue", 2)
    assert 3 * H - S < acme.snapshot.age_us <= 3 * H
    assert acme.pitr is not None and acme.pitr.window_us == 7 * 24 * H
    assert 3 * H - S < acme.pitr.reach_us <= 3 * H and not acme.pitr.full
    assert acme.recovery_point_ts is None and acme.verdict == "missed"
    clock.fixed += 8 * 24 * H
    pitr = one(store, "acme").pitr
    assert pitr is not None and pitr.full and pitr.reach_us == 7 * 24 * H


def test_a_failed_backup_is_failed_until_a_later_one_to_its_destination_succeeds(
    store: TableStore, tmp_path: Path
) -> None:
    build_source(store)
    uri = f"file://{tmp_path}/bk"
    with pytest.raises(StorageError):
        with journaled(store.catalog, "backup", tenant="acme", target=uri, method="physical"):
            raise StorageError("cannot write: disk full\nsecond line")
    (job,) = one(store, "acme").jobs
    assert (job.kind, job.state, job.target) == ("backup", "failed", uri)
    assert job.error == "StorageError: cannot write: disk full"
    assert not status(store).healthy

    create_backup(store, "acme", "mon", uri)

    acme = one(store, "acme")
    assert acme.jobs == () and acme.healthy and status(store).healthy


def test_a_running_run_is_running_while_its_lease_is_live_and_stale_after(
    store: TableStore,
) -> None:
    store.create_tenant("acme")

    def run(run_id: str, expires_us: int) -> None:
        start = RunStart(run_id, "backup", "acme", f"s3://b/{run_id}", "physical", None, None)
        with store.catalog.transaction() as tx:  # a holder on another host: only expiry tells
            insert_run(tx, start, wall_clock_us(), "elsewhere:42:1:token", expires_us)

    run("live", wall_clock_us() + 60 * S)
    run("dead", wall_clock_us() - S)

    states = {j.id: j.state for j in one(store, "acme").jobs}
    assert states == {"live": "running", "dead": "stale"}
    assert not status(store).healthy


def test_a_run_of_a_dropped_tenant_needs_nobody(store: TableStore) -> None:
    store.create_tenant("acme")
    with pytest.raises(StorageError):
        with journaled(store.catalog, "backup", tenant="acme", target="s3://b/p"):
            raise StorageError("refused")
    store.drop_tenant("acme")
    report = status(store)
    assert report.tenants == () and report.warehouse_jobs == () and report.healthy


class _FailingRewrite:
    """The default executors, whose rewrite raises ``error`` before it starts."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def decide(self, name: str, rewrite_bytes: int) -> ExecutorChoice:
        return DEFAULT_EXECUTORS.decide(name, rewrite_bytes)

    def build(self, choice: ExecutorChoice) -> RewriteExecutor:
        error = self.error

        class Failing:
            name = choice.name

            def rewrite(
                self, store: ObjectStore, tasks: Sequence[RewriteTask], on_result: OnResult
            ) -> list[RewriteResult]:
                raise error

        return Failing()  # type: ignore[return-value]


def test_a_failed_restore_job_is_failed_and_an_abandoned_one_stale(store: TableStore) -> None:
    build_source(store)
    build_source(store, "globex")
    restore: Callable[..., Any] = restore_tenant
    with pytest.raises(TaskFailed):
        restore(store, "acme", "mon", executor="local", executors=_FailingRewrite(TaskFailed("x")))
    with pytest.raises(SimulatedCrash):  # the journal as a killed process leaves it
        restore(
            store, "globex", "mon", executor="local", executors=_FailingRewrite(SimulatedCrash())
        )

    report = status(store)

    jobs = {t.name: [(j.kind, j.state) for j in t.jobs] for t in report.tenants}
    assert jobs == {"acme": [("restore", "failed")], "globex": [("restore", "stale")]}
    [failed] = catalog_rows(store, "SELECT id FROM restore_jobs WHERE state = 'failed'")
    assert [t.jobs[0].id for t in report.tenants if t.name == "acme"] == [failed["id"]]
    assert not report.healthy


def test_gc_passes_are_the_warehouses_and_a_failed_one_needs_attention(store: TableStore) -> None:
    store.create_tenant("acme")
    run_gc(store, dry_run=False)
    report = status(store)
    assert [(r.kind, r.method, r.state) for r in report.gc] == [("gc", "default", "done")]
    assert report.warehouse_jobs == () and report.healthy
    with pytest.raises(StorageError):
        with journaled(store.catalog, "gc", method="default"):
            raise StorageError("listing failed")
    report = status(store)
    assert [(j.kind, j.state) for j in report.warehouse_jobs] == [("gc", "failed")]
    assert [r.state for r in report.gc] == ["failed"] and not report.healthy


def test_the_last_drill_of_each_tenant_is_shown_and_a_failed_one_needs_attention(
    store: TableStore,
) -> None:
    store.create_tenant("acme")
    with journaled(store.catalog, "drill", tenant="acme", target="s3://b/a", backup_id="b1"):
        pass
    drill = one(store, "acme").drill
    assert drill is not None and (drill.state, drill.backup_id) == ("done", "b1")
    with pytest.raises(StorageError):
        with journaled(store.catalog, "drill", tenant="acme", target="s3://b/a"):
            raise StorageError("object flipped")
    acme = one(store, "acme")
    assert acme.drill is not None and acme.drill.state == "failed"
    assert [(j.kind, j.state) for j in acme.jobs] == [("drill", "failed")]


def test_storage_is_the_live_tables_objects_and_bytes_per_kind(store: TableStore) -> None:
    store.create_tenant("acme")
    store.create_table("acme", "db.items", SCHEMA)
    store.write("acme", "db.items", upserts=rows((1, "a"), (2, "b")))
    store.write("acme", "db.items", deletes=keys(1))
    store.create_table("acme", "db.gone", SCHEMA)
    store.write("acme", "db.gone", upserts=rows((1, "a")))
    store.drop_table("acme", "db.gone")

    storage = one(store, "acme").storage

    live = [r for table, r in store.objects_of("acme") if table == "db.items"]
    for kind in ("data", "tomb"):
        mine = [r for r in live if r.kind == kind]
        assert (storage[kind].objects, storage[kind].bytes) == (
            len(mine),
            sum(r.bytes for r in mine),
        )


def test_tenants_come_worst_first(store: TableStore, clock: ManualClock, tmp_path: Path) -> None:
    clock.fixed = 1_800_000_000 * S
    names = ("ok", "old", "late", "broken", "none")
    for name in names:
        store.create_tenant(name)
        store.create_snapshot(name, "s")
    clock.fixed += 2 * H
    for name in names:
        store.create_snapshot(name, "s2")
    create_backup(store, "old", "s", f"file://{tmp_path}/old")  # 2h older than the others
    for name in ("ok", "late", "broken"):
        create_backup(store, name, "s2", f"file://{tmp_path}/{name}")
    set_recovery_objective(store, "late", "1h")
    with pytest.raises(StorageError):
        with journaled(store.catalog, "backup", tenant="broken", target="s3://x/y"):
            raise StorageError("refused")
    clock.fixed += 3 * H

    ordered = [t.name for t in status(store).tenants]

    # missed objective; failed job; then the oldest recovery point (none at all first)
    assert ordered == ["late", "broken", "none", "old", "ok"]


def test_status_of_one_tenant_and_of_names_that_do_not_do(store: TableStore) -> None:
    store.create_tenant("acme")
    store.create_tenant("globex")
    assert [t.name for t in status(store, "acme").tenants] == ["acme"]
    assert [t.name for t in status(store, f"acme@{store.tenant('acme').id}").tenants] == ["acme"]
    with pytest.raises(NotFound, match="tenant 'acmee' does not exist"):
        status(store, "acmee")
    dropped = store.drop_tenant("globex")
    with pytest.raises(TenantDropped):
        status(store, dropped.ref)


def _journal(
    store: TableStore, run_id: str, started_us: int, state: str, point: int | None
) -> None:
    """A backup run to ``s3://b/a`` started at ``started_us``, finished as ``state``."""
    start = RunStart(run_id, "backup", "acme", "s3://b/a", "physical", point, run_id)
    with store.catalog.transaction() as tx:
        insert_run(tx, start, started_us, "elsewhere:1:1:t", started_us + 60 * S)
        if state != "running":
            error = "StorageError: refused" if state == "failed" else None
            finish_run(tx, run_id, RunEnd(state, started_us + S, error=error))


def test_the_newest_run_of_each_job_is_kept_whatever_order_runs_are_journaled_in(
    store: TableStore, clock: ManualClock
) -> None:
    clock.fixed = 1_800_000_000 * S
    store.create_tenant("acme")
    now = clock.fixed
    # journaled out of order: a catalog copy inserts rows in whatever order it reads them
    _journal(store, "newer-done", now - H, "done", now - 2 * H)
    _journal(store, "older-done", now - 3 * H, "done", now - 4 * H)
    _journal(store, "oldest-failed", now - 5 * H, "failed", None)
    acme = one(store, "acme")
    assert [(b.backup_id, b.point_ts) for b in acme.backups] == [("newer-done", now - 2 * H)]
    assert acme.jobs == ()  # the failure was superseded
    _journal(store, "newest-failed", now - 30 * 60 * S, "failed", None)
    acme = one(store, "acme")
    assert [j.id for j in acme.jobs] == ["newest-failed"]
    assert [b.backup_id for b in acme.backups] == ["newer-done"]  # still the newest point
    with store.catalog.snapshot() as tx:
        kept = tx.all("SELECT run_id, done_id FROM runs_newest")
    assert kept == [{"run_id": "newest-failed", "done_id": "newer-done"}]


def test_the_migrations_backfill_of_runs_newest_is_what_the_triggers_keep(
    store: TableStore, tmp_path: Path
) -> None:
    """A catalog that journaled runs before runs_newest existed gets the same rows."""
    build_source(store)
    for uri, as_of in ((f"file://{tmp_path}/a", "sun"), (f"file://{tmp_path}/a", "mon")):
        create_backup(store, "acme", as_of, uri)
    create_backup(store, "acme", "sun", f"file://{tmp_path}/b", kind="logical")
    run_gc(store, dry_run=False)
    with pytest.raises(StorageError):
        with journaled(store.catalog, "backup", tenant="acme", target=f"file://{tmp_path}/b"):
            raise StorageError("refused")
    query = "SELECT * FROM runs_newest ORDER BY kind, tenant_name, target, method"
    with store.catalog.snapshot() as tx:
        kept = tx.all(query)
    with store.catalog.transaction() as tx:
        tx.execute("DELETE FROM runs_newest")
        tx.execute(_NEWEST_BACKFILL)
        assert tx.all(query) == kept
    assert len(kept) == 4  # physical to a, logical to b, unnamed-method failure to b, gc


def test_a_catalog_copy_has_the_same_status(
    store: TableStore, tmp_path: Path, new_catalog_uri: Callable[[], str]
) -> None:
    build_source(store)
    set_recovery_objective(store, "acme", "1d")
    create_backup(store, "acme", "mon", f"file://{tmp_path}/a")
    with pytest.raises(StorageError):
        with journaled(store.catalog, "drill", tenant="acme", target=f"file://{tmp_path}/a"):
            raise StorageError("refused")
    copy = open_catalog(new_catalog_uri())
    try:
        copy_catalog(store.catalog, copy)
        (copied,), (source,) = catalog_status(copy, "acme").tenants, status(store, "acme").tenants
    finally:
        copy.close()

    def facts(t: TenantStatus) -> tuple[Any, ...]:  # what does not age between the two reads
        return (
            t.name,
            t.objective_us,
            t.recovery_point_ts,
            [(b.target, b.backup_id, b.point_ts) for b in t.backups],
            [(j.kind, j.id, j.state) for j in t.jobs],
            t.drill,
            t.storage,
        )

    assert facts(copied) == facts(source)
    assert [j.state for j in copied.jobs] == ["failed"] and copied.backups
