"""A restore that crashes anywhere leaves the source untouched and resumes to the same result.

Faults are injected through wrappers around the real backends (an object
store whose N-th put fails, a catalog that dies inside or right after a chosen
commit, a boto3 client that answers SlowDown), never by editing production
code. Each scenario restores in place, the most demanding mode: before the
install commit the source must be exactly as it was; after a resume the
restored tenant must equal an uninterrupted restore of the same point.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from engine.gc.run import run_gc
from engine.restore.job import PLAN_ATTEMPTS, cancel_restore, restore_tenant, resume_restore
from engine.restore.journal import RestoreInProgress, load_job, start_job
from engine.restore.members import PlanOutdated, pinned
from tenants.errors import InvalidArgument, StorageError, TransientError
from tenants.store import TableStore
from tests.helpers.restores import (
    SCHEMA,
    FaultyCatalog,
    Minutes,
    SimulatedCrash,
    SourceState,
    ThrottlingClient,
    WrappedObjectStore,
    bucket_keys,
    catalog_rows,
    crashed_at,
    done_tasks,
    job_state,
    keys,
    pins_of,
    planned_with_members,
    reads,
    restored_signature,
    rows,
    source_state,
    tenant_prefix,
    unique,
    with_catalog,
    with_objects,
)

ITEMS_AT_MON = [{"id": i, "v": "x" if i == 3 else f"v{i}"} for i in range(20) if i not in (4, 5)]
USERS_AT_MON = [{"id": i, "v": f"u{i}"} for i in (1, 3, 4, 5, 6)]


@dataclass
class Scenario:
    store: TableStore
    name: str
    at_ts: int
    tasks: int
    reference: dict[str, Any]  # restored_signature of an uninterrupted restore to "mon"
    before: SourceState

    def source_untouched(self) -> None:
        assert source_state(self.store, self.before.tenant.ref) == self.before
        assert self.store.tenant(self.name).id == self.before.tenant.id

    def only_unfinished_job(self) -> str:
        [row] = catalog_rows(
            self.store, "SELECT id FROM restore_jobs WHERE state NOT IN ('done', 'cancelled')"
        )
        return str(row["id"])

    def check_final(self, job_id: str) -> None:
        """Installed exactly once, equal to the uninterrupted restore; the old tenant retired."""
        installed = catalog_rows(
            self.store, "SELECT id FROM tenants WHERE restore_job_id = ?", (job_id,)
        )
        assert len(installed) == 1
        new = self.store.tenant(self.name)
        assert new.id == installed[0]["id"] and new.restore_job_id == job_id
        assert self.store.tenant(self.before.tenant.ref).state == "dropped"
        assert restored_signature(self.store, self.name) == self.reference
        assert reads(self.store, self.name) == {"db.items": ITEMS_AT_MON, "db.users": USERS_AT_MON}
        assert job_state(self.store, job_id) == "done"
        assert pins_of(self.store, job_id) == []
        # No output leaked: the new prefix holds exactly the installed rewritten objects.
        own = tenant_prefix(new.id)
        assert set(bucket_keys(self.store, own)) == {
            o.key for _, o in self.store.objects_of(self.name) if o.key.startswith(own)
        }
        # The source's rows are still there, in the retired tenant.
        assert reads(self.store, self.before.tenant.ref) == self.before.reads_now


@pytest.fixture
def scenario(store: TableStore, clock: Any) -> Scenario:
    """Two tables, several objects straddling "mon", some reused, some after it."""
    at = Minutes(clock)
    at(0)
    name = unique("acme")
    store.create_tenant(name)
    store.create_table(name, "db.items", SCHEMA)
    store.create_table(name, "db.users", SCHEMA)
    at(1)
    store.write(name, "db.items", upserts=rows(*[(i, f"v{i}") for i in range(20)]))
    store.write(name, "db.users", upserts=rows(*[(i, f"u{i}") for i in range(1, 7)]))
    at(2)
    store.write(name, "db.items", upserts=rows((3, "x")), deletes=keys(3, 4, 5))
    store.write(name, "db.users", deletes=keys(2))
    at(3)
    mon = store.create_snapshot(name, "mon")
    at(4)
    store.write(
        name,
        "db.items",
        upserts=rows((1, "y"), (8, "y"), (15, "y"), (19, "y")),
        deletes=keys(6, 12),
    )
    store.write(name, "db.users", upserts=rows((7, "n")), deletes=keys(3))
    store.compact(name, "db.items", target_bytes=800)
    store.compact(name, "db.users")
    at(5)
    store.write(name, "db.items", upserts=rows((30, "late")))
    at(6)
    reference = restore_tenant(store, name, "mon", to=unique("ref"), executor="local")
    totals = reference.plan.totals()
    assert totals["rewrite"][0] >= 5 and totals["reuse"][0] >= 1 and totals["skip"][0] >= 1
    assert reads(store, reference.tenant.name) == {
        "db.items": ITEMS_AT_MON,
        "db.users": USERS_AT_MON,
    }
    return Scenario(
        store,
        name,
        mon.ts,
        len(reference.plan.tasks),
        restored_signature(store, reference.tenant.name),
        source_state(store, name),
    )


def resume_counting_puts(s: Scenario, job_id: str) -> list[str]:
    counting = WrappedObjectStore(s.store.objects)
    resume_restore(with_objects(s.store, counting), job_id)
    return counting.puts


# --- a crash between every pair of steps -------------------------------------------------


def test_crash_after_journaling_the_plan_leaves_source_untouched_and_resumes(scenario):
    s = scenario
    jobs_before = catalog_rows(s.store, "SELECT id FROM restore_jobs")
    plan, members = planned_with_members(s.store, s.name, "mon")
    # Planning alone writes nothing: a crash before the job is journaled leaves no trace.
    assert catalog_rows(s.store, "SELECT id FROM restore_jobs") == jobs_before
    s.source_untouched()
    job = start_job(s.store.catalog, plan, executor="local", verify="objects")
    # The process dies here: the job is journaled, its objects pinned, nothing written.
    assert job_state(s.store, job.id) == "planned"
    with s.store.catalog.snapshot() as tx:
        held = pinned(tx, plan)
    assert {(o.object.id, o.action) for items in held.values() for o in items} == {
        (o.object.id, o.action) for o in members
    }
    assert bucket_keys(s.store, tenant_prefix(plan.new_tenant_id)) == {}
    s.source_untouched()
    with pytest.raises(RestoreInProgress, match=job.id):
        restore_tenant(s.store, s.name, "mon", executor="local")

    puts = resume_counting_puts(s, job.id)

    assert sorted(puts) == sorted(t.out_key for t in plan.tasks)
    s.check_final(job.id)


TRANSITIONS = ["rewriting", "verifying", "installing", "done"]


@pytest.mark.parametrize("after_commit", [False, True], ids=["inside", "after_commit"])
@pytest.mark.parametrize("step", TRANSITIONS)
def test_crash_at_every_journal_transition_leaves_source_untouched_and_resumes(
    scenario, step, after_commit
):
    """The job moves planned → rewriting → verifying → installing → done; die at each move."""
    s = scenario
    occurrence = TRANSITIONS.index(step) + 1
    faulty = FaultyCatalog(
        s.store.catalog,
        "UPDATE restore_jobs SET state",
        occurrence=occurrence,
        after_commit=after_commit,
    )
    crash = crashed_at("UPDATE restore_jobs SET state", after_commit=after_commit)
    with pytest.raises(SimulatedCrash, match=crash):
        restore_tenant(with_catalog(s.store, faulty), s.name, "mon", executor="local")
    [row] = catalog_rows(s.store, "SELECT id FROM restore_jobs WHERE target_name = ?", (s.name,))
    job_id = row["id"]
    states = ["planned", *TRANSITIONS]
    assert job_state(s.store, job_id) == states[occurrence if after_commit else occurrence - 1]
    if step == "done" and after_commit:
        with pytest.raises(InvalidArgument, match="is done; there is nothing to resume"):
            resume_restore(s.store, job_id)
    else:
        s.source_untouched()
        resume_restore(s.store, job_id)
    s.check_final(job_id)


@pytest.mark.parametrize("crash_at_put", [1, 2, 3, 4, 5])
def test_crash_at_any_rewrite_put_leaves_source_untouched_and_resume_finishes(
    scenario, crash_at_put
):
    s = scenario
    faulty = WrappedObjectStore(s.store.objects, fail_put_at=crash_at_put)
    with pytest.raises(SimulatedCrash, match="crash at put"):
        restore_tenant(with_objects(s.store, faulty), s.name, "mon", executor="local")
    job_id = s.only_unfinished_job()
    assert job_state(s.store, job_id) == "rewriting"
    finished = done_tasks(s.store, job_id)
    assert finished <= crash_at_put - 1
    s.source_untouched()

    puts = resume_counting_puts(s, job_id)

    # Only the unfinished tasks run again; each writes its own deterministic key.
    assert len(puts) == s.tasks - finished
    s.check_final(job_id)


@pytest.mark.parametrize("finished", [0, 1, 3])
def test_crash_journaling_the_kth_task_result_resumes_exactly_the_unfinished_tasks(
    scenario, finished
):
    s = scenario
    faulty = FaultyCatalog(s.store.catalog, "UPDATE restore_tasks", occurrence=finished + 1)
    with pytest.raises(SimulatedCrash, match=crashed_at("UPDATE restore_tasks")):
        restore_tenant(with_catalog(s.store, faulty), s.name, "mon", executor="local")
    job_id = s.only_unfinished_job()
    assert done_tasks(s.store, job_id) == finished
    s.source_untouched()
    job = load_job(s.store.catalog, job_id)
    journaled = {
        r["task_id"]
        for r in catalog_rows(
            s.store,
            "SELECT task_id FROM restore_tasks WHERE job_id = ? AND state = 'done'",
            (job_id,),
        )
    }

    puts = resume_counting_puts(s, job_id)

    assert sorted(puts) == sorted(t.out_key for t in job.plan.tasks if t.task_id not in journaled)
    s.check_final(job_id)


def test_rewrite_storage_error_fails_the_job_loudly_and_it_resumes(scenario):
    s = scenario
    faulty = WrappedObjectStore(
        s.store.objects, fail_put_at=2, error=lambda key: StorageError(f"cannot write {key}: boom")
    )
    with pytest.raises(StorageError, match=r"cannot write .*boom.*failed; resume with .*--resume"):
        restore_tenant(with_objects(s.store, faulty), s.name, "mon", executor="local")
    job_id = s.only_unfinished_job()
    assert job_state(s.store, job_id) == "failed"
    error = load_job(s.store.catalog, job_id).error
    assert error is not None and "StorageError" in error
    s.source_untouched()

    resume_restore(s.store, job_id)

    s.check_final(job_id)


@pytest.mark.parametrize("error", ["crash", "transient"])
def test_crash_in_verify_leaves_source_untouched_and_resume_rewrites_nothing(scenario, error):
    s = scenario
    make = (
        (lambda p: SimulatedCrash(f"crash listing {p}"))
        if error == "crash"
        else (lambda p: TransientError(f"cannot list {p}: SlowDown after retries"))
    )
    faulty = WrappedObjectStore(s.store.objects, fail_lists=1, error=make)
    expected = SimulatedCrash if error == "crash" else TransientError
    with pytest.raises(expected, match="listing|cannot list"):
        restore_tenant(with_objects(s.store, faulty), s.name, "mon", executor="local")
    job_id = s.only_unfinished_job()
    assert job_state(s.store, job_id) == ("verifying" if error == "crash" else "failed")
    assert done_tasks(s.store, job_id) == s.tasks
    s.source_untouched()

    puts = resume_counting_puts(s, job_id)

    assert puts == []
    s.check_final(job_id)


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO restore_jobs",
        "INSERT INTO restore_plans",
        "INSERT INTO restore_tasks",
        "INSERT INTO membership_bases",
        "INSERT INTO job_pins",
    ],
)
def test_crash_inside_the_transaction_that_starts_the_job_journals_nothing(scenario, statement):
    s = scenario
    jobs_before = catalog_rows(s.store, "SELECT id FROM restore_jobs")
    faulty = FaultyCatalog(s.store.catalog, statement)
    with pytest.raises(SimulatedCrash, match="inside"):
        restore_tenant(with_catalog(s.store, faulty), s.name, "mon", executor="local")
    assert faulty.count == 1
    assert catalog_rows(s.store, "SELECT id FROM restore_jobs") == jobs_before
    assert catalog_rows(s.store, "SELECT * FROM job_pins") == []
    uninstalled = "SELECT * FROM membership_bases WHERE table_id NOT IN (SELECT id FROM tables)"
    assert catalog_rows(s.store, uninstalled) == []
    s.source_untouched()
    outcome = restore_tenant(s.store, s.name, "mon", executor="local")
    s.check_final(outcome.job_id)


@pytest.mark.parametrize(
    "statement",
    # the new tenant, membership of rewritten objects, the objects, the pins' release
    [
        "INSERT INTO tenants",
        "INSERT INTO membership (",
        "INSERT INTO objects",
        "DELETE FROM job_pins",
    ],
)
def test_crash_inside_the_install_transaction_rolls_back_and_resumes(scenario, statement):
    s = scenario
    faulty = FaultyCatalog(s.store.catalog, statement)
    with pytest.raises(SimulatedCrash, match="inside"):
        restore_tenant(with_catalog(s.store, faulty), s.name, "mon", executor="local")
    job_id = s.only_unfinished_job()
    assert job_state(s.store, job_id) == "installing"
    assert catalog_rows(s.store, "SELECT id FROM tenants WHERE restore_job_id = ?", (job_id,)) == []
    s.source_untouched()
    assert pins_of(s.store, job_id) != []

    puts = resume_counting_puts(s, job_id)

    assert puts == []
    s.check_final(job_id)


def test_crash_right_after_the_install_commit_is_installed_once_and_not_resumable(scenario):
    s = scenario
    faulty = FaultyCatalog(s.store.catalog, "INSERT INTO tenants", after_commit=True)
    with pytest.raises(SimulatedCrash, match="after committing"):
        restore_tenant(with_catalog(s.store, faulty), s.name, "mon", executor="local")
    [row] = catalog_rows(s.store, "SELECT id FROM restore_jobs WHERE target_name = ?", (s.name,))
    job_id = row["id"]
    assert job_state(s.store, job_id) == "done"

    with pytest.raises(
        InvalidArgument, match=f"restore job {job_id} is done; there is nothing to resume"
    ):
        resume_restore(s.store, job_id)
    with pytest.raises(InvalidArgument, match=f"restore job {job_id} is done"):
        cancel_restore(s.store, job_id)

    s.check_final(job_id)
    assert len([t for t in s.store.tenants() if t.name == s.name]) == 1


# --- S3 errors ---------------------------------------------------------------------------------


def _throttle(store: TableStore, failures: int) -> ThrottlingClient:
    client = ThrottlingClient(store.objects._client, "list_objects_v2", failures)  # type: ignore[attr-defined]
    store.objects._client_obj = client  # type: ignore[attr-defined]
    return client


def test_s3_retry_policy_builds_without_deprecation_warnings():
    """filterwarnings=error: a deprecated tenacity argument would break every S3 code path."""
    result = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", "import tenants.objectstore.s3"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr.strip().splitlines()[-1]


def test_throttled_s3_list_is_retried_and_the_restore_succeeds(scenario):
    s = scenario
    client = _throttle(s.store, failures=2)
    try:
        outcome = restore_tenant(s.store, s.name, "mon", executor="local")
    finally:
        s.store.objects._client_obj = client.inner  # type: ignore[attr-defined]
    assert client.failures == 0
    assert client.calls == outcome.prefixes_listed + 2
    s.check_final(outcome.job_id)


def test_persistent_s3_throttling_fails_the_job_clearly_and_it_resumes(scenario):
    s = scenario
    client = _throttle(s.store, failures=10**9)
    try:
        with pytest.raises(
            TransientError, match=r"cannot list s3://.*: SlowDown after retries .*--resume"
        ):
            restore_tenant(s.store, s.name, "mon", executor="local")
    finally:
        s.store.objects._client_obj = client.inner  # type: ignore[attr-defined]
    assert client.calls == 5  # tenacity's attempts, then a clear failure
    job_id = s.only_unfinished_job()
    assert job_state(s.store, job_id) == "failed"
    error = load_job(s.store.catalog, job_id).error
    assert error is not None and "SlowDown" in error
    s.source_untouched()

    resume_restore(s.store, job_id)

    s.check_final(job_id)


# --- cancel ---------------------------------------------------------------------------------


@pytest.mark.parametrize("crash", ["rewrite", "verify"])
def test_cancel_removes_every_output_releases_pins_and_the_tenant_restores_again(scenario, crash):
    s = scenario
    if crash == "rewrite":
        faulty = WrappedObjectStore(s.store.objects, fail_put_at=3)
        crashed = r"crash at put tenants/\S+\.parquet$"  # a rewritten object
    else:
        faulty = WrappedObjectStore(s.store.objects, fail_lists=1)
        crashed = r"crash at put tenants/\S+/$"  # the default error, given the listed prefix
    with pytest.raises(SimulatedCrash, match=crashed):
        restore_tenant(with_objects(s.store, faulty), s.name, "mon", executor="local")
    job_id = s.only_unfinished_job()
    job = load_job(s.store.catalog, job_id)
    prefix = tenant_prefix(job.plan.new_tenant_id)
    assert bucket_keys(s.store, prefix) != {}
    assert pins_of(s.store, job_id) != []

    cancelled = cancel_restore(s.store, job_id)

    assert cancelled.state == "cancelled" and job_state(s.store, job_id) == "cancelled"
    assert bucket_keys(s.store, prefix) == {}
    assert pins_of(s.store, job_id) == []
    s.source_untouched()
    with pytest.raises(InvalidArgument, match="cancelled; there is nothing to resume"):
        resume_restore(s.store, job_id)

    outcome = restore_tenant(s.store, s.name, "mon", executor="local")
    assert outcome.job_id != job_id
    s.check_final(outcome.job_id)


# --- the source changes between planning and pinning ------------------------------------


class ChangesBeforeWrites:
    """The real catalog; before each of its first ``times`` write transactions, ``change``
    runs through the unwrapped store, as a concurrent writer would between plan and pin."""

    def __init__(self, inner: Any, change: Any, times: int) -> None:
        self.inner = inner
        self.change = change
        self.times = times

    @contextmanager
    def transaction(self, **kwargs: Any) -> Iterator[Any]:
        if self.times > 0:
            self.times -= 1
            self.change()
        with self.inner.transaction(**kwargs) as tx:
            yield tx

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def merge_a_late_write(s: Scenario, *, collect: bool = False) -> Any:
    """A write after "mon", then a compaction that merges it into the straddlers,
    and (``collect``) a GC that decides to delete the objects it replaced."""
    counter = iter(range(100, 200))

    def change() -> None:
        s.store.write(s.name, "db.items", upserts=rows((next(counter), "late")))
        s.store.compact(s.name, "db.items")
        if collect:
            report = run_gc(
                s.store, dry_run=False, grace_us=0, allow_short_grace=True, compact=False
            )
            assert report.collected.candidates

    return change


def test_a_source_changed_while_planning_restores_what_the_plan_read(scenario):
    """Its tables inherit the source as the plan read it: a write and a compaction
    between plan and start change nothing the job restores."""
    s = scenario
    catalog = ChangesBeforeWrites(s.store.catalog, merge_a_late_write(s), times=PLAN_ATTEMPTS)
    jobs_before = catalog_rows(s.store, "SELECT id FROM restore_jobs")
    outcome = restore_tenant(with_catalog(s.store, catalog), s.name, "mon", executor="local")
    assert len(catalog_rows(s.store, "SELECT id FROM restore_jobs")) == len(jobs_before) + 1
    assert reads(s.store, s.name) == {"db.items": ITEMS_AT_MON, "db.users": USERS_AT_MON}
    assert pins_of(s.store, outcome.job_id) == []


def test_a_source_collected_while_planning_is_planned_again(scenario):
    s = scenario
    catalog = ChangesBeforeWrites(s.store.catalog, merge_a_late_write(s, collect=True), times=1)
    jobs_before = catalog_rows(s.store, "SELECT id FROM restore_jobs")
    outcome = restore_tenant(with_catalog(s.store, catalog), s.name, "mon", executor="local")
    assert catalog.times == 0
    assert len(catalog_rows(s.store, "SELECT id FROM restore_jobs")) == len(jobs_before) + 1
    assert reads(s.store, s.name) == {"db.items": ITEMS_AT_MON, "db.users": USERS_AT_MON}
    assert pins_of(s.store, outcome.job_id) == []


def test_a_source_that_keeps_being_collected_fails_the_restore_and_journals_nothing(scenario):
    s = scenario
    catalog = ChangesBeforeWrites(
        s.store.catalog, merge_a_late_write(s, collect=True), times=PLAN_ATTEMPTS
    )
    jobs_before = catalog_rows(s.store, "SELECT * FROM restore_jobs")
    with pytest.raises(PlanOutdated, match="garbage collection ran after the plan.*plan again"):
        restore_tenant(with_catalog(s.store, catalog), s.name, "mon", executor="local")
    assert catalog_rows(s.store, "SELECT * FROM restore_jobs") == jobs_before
    assert catalog_rows(s.store, "SELECT * FROM job_pins") == []
    assert (
        catalog_rows(
            s.store,
            "SELECT * FROM membership_bases WHERE job_id IS NOT NULL "
            "AND table_id NOT IN (SELECT id FROM tables)",
        )
        == []
    )
    assert s.store.tenant(s.name).id == s.before.tenant.id
    assert reads(s.store, s.name, "mon") == {"db.items": ITEMS_AT_MON, "db.users": USERS_AT_MON}
