"""The restore job: plan → rewrite → verify → install, journaled and resumable.

An instant job runs plan → install → rewrite → verify → swap instead: its
install makes the tenant usable at once, each straddler held with a cut at S,
and the swap (``engine.restore.swap``) replaces each by its rewritten copy.

Reads as values handed along one line. Each step's outcome is journaled
before the next starts; a crash anywhere leaves the source untouched (the
restore only ever writes under the new tenant's prefix and, at the very end,
one install transaction that also marks the job done). ``resume_restore``
picks up from the journal, skipping finished tasks; ``cancel_restore`` (engine.restore.cancel)
removes the job's outputs and pins.

The process running a job holds its lease (``engine.restore.lease``), and
every state change it makes is conditional on that lease. ``cancel_restore``
of a job a live process runs only asks it to stop and waits: the holder
cancels its own job. Nothing is deleted until one transaction has marked the
job cancelled and shown that no tenant was installed from it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from engine.executors import DEFAULT_EXECUTORS
from engine.logical.runner import ensure_dump, reload_as_restore
from engine.pipeline import INSTANT_BY_DEFAULT as INSTANT_BY_DEFAULT
from engine.pipeline import (
    ExecutorChoice,
    ExecutorName,
    Executors,
    Installed,
    Method,
    RestorePlan,
    RewriteResult,
    Verified,
    VerifyLevel,
    check_level,
    check_method,
)
from engine.restore.cancel import AlreadyInstalled as AlreadyInstalled
from engine.restore.cancel import RestoreCancelled, cancel_now, staging_root
from engine.restore.cancel import cancel_restore as cancel_restore
from engine.restore.install import install
from engine.restore.journal import (
    ACTIVE_STATES,
    JobRecord,
    error_json,
    finish,
    finished_results,
    load_job,
    record_result,
    set_state,
    start_job,
    transition,
)
from engine.restore.lease import (
    JobLease,
    LeaseLost,
    StopRequested,
)
from engine.restore.members import PlanOutdated
from engine.restore.plan import plan_restore
from engine.restore.source import source_at
from engine.restore.swap import still_cut, swap_rewrites
from engine.restore.verify import verify as verify_step
from engine.restore.verify import verify_installable
from tenants.catalog import Tx
from tenants.catalog.engine.jobs import end_lease, mark_installed
from tenants.catalog.engine.pins import release_pins
from tenants.errors import InvalidArgument, RewindError
from tenants.observe import events
from tenants.progress import step
from tenants.store import TableStore
from tenants.tenancy import TenantRecord, tenant_by_id
from tenants.times import AsOf

log = logging.getLogger(__name__)
# A busy source may change between planning and pinning; each try takes a fraction of a second.
PLAN_ATTEMPTS = 3
Progress = Callable[[RewriteResult], None]
# Told as soon as an instant job's tenant is installed (usable), before the rewrite.
OnInstalled = Callable[[Installed], None]
# A step that ends in one of these was stopped (on request, or taken over), not failed.
STOPS: tuple[type[BaseException], ...] = (StopRequested, LeaseLost)


@dataclass(frozen=True)
class Started:
    """A job that has just been journaled, told to ``on_started`` before any work:
    what it will do (the plan), where (the executor) and how (the method), so a
    caller can show the plan while the job runs rather than after it ends."""

    plan: RestorePlan
    executor: str
    executor_reason: str
    method: str
    method_reason: str
    instant: bool


OnStarted = Callable[[Started], None]


@dataclass(frozen=True)
class Proposal:
    """A restore plan with the executor and method chosen for it, once: what a
    user is shown and approves, and then exactly what the job runs
    (``run_restore(..., proposal=...)``): the same job id, objects, executor
    and method, never a second plan made behind the question."""

    plan: RestorePlan
    executor: ExecutorChoice
    method: str
    method_reason: str
    planned_s: float


def propose(
    make_plan: Callable[[], RestorePlan],
    *,
    executor: ExecutorName = "auto",
    method: Method = "auto",
    executors: Executors = DEFAULT_EXECUTORS,
) -> Proposal:
    """Plan with ``make_plan`` and choose the executor and the method for that plan.
    Starts no Spark session and changes nothing.

    Raises:
        InvalidArgument: an unknown executor or method (or logical for a table or
            database); NotFound, UnprotectedTime, AlreadyExists: as the plan raises.
    """
    check_method(method)
    started = time.perf_counter()
    with events.step("plan") as planning:
        plan = make_plan()
        planning.about = job_scope(plan)
        planning.objects, planning.bytes = _planned(plan)
    planned = time.perf_counter() - started
    chosen, method_reason = choose_method(method, plan)
    choice = executors.decide(executor, plan.totals()["rewrite"][1])
    return Proposal(plan, choice, chosen, method_reason, planned)


@dataclass(frozen=True)
class RestoreOutcome:
    job_id: str
    plan: RestorePlan
    tenant: TenantRecord
    executor: str
    rewritten: int
    bytes_written: int
    objects_verified: int
    prefixes_listed: int
    tables_compared: int
    seconds: dict[str, float] = field(default_factory=dict)
    method: str = "physical"
    executor_reason: str = ""  # why this executor (the plan output prints it)
    workers: tuple[str, ...] = ()  # the processes that ran rewrite tasks ("host pid N")
    installed_ts: int | None = None  # the install's commit ts (physical restores)
    instant: bool = False  # installed before the rewrite
    rewrite_pending: bool = False  # instant, not waited for: `--resume JOB` runs the rewrite


def restore_tenant(
    store: TableStore,
    tenant: str,
    as_of: AsOf,
    *,
    to: str | None = None,
    executor: ExecutorName = "auto",
    verify: VerifyLevel = "objects",
    method: Method = "auto",
    progress: Progress | None = None,
    executors: Executors = DEFAULT_EXECUTORS,
    instant: bool = False,
    wait: bool = True,
    on_installed: OnInstalled | None = None,
    on_started: OnStarted | None = None,
) -> RestoreOutcome:
    """Restore ``tenant`` to ``as_of`` (snapshot name, ISO instant or ts).

    ``instant``: install first, the straddlers held with a cut at S, so the
    tenant is usable before a byte is rewritten (``on_installed`` is told
    then); the rewrite and swap follow in the same job, or, with
    ``wait=False``, are left journaled for ``resume_restore`` (any host).
    ``on_started`` is told the plan, executor and method once the job is
    journaled, before any rewrite.

    ``method`` is ``physical`` (reuse objects, rewrite straddlers), ``logical``
    (dump at S to the warehouse's staging area, reload, swap) or ``auto``,
    which is physical whenever the plan can reuse the source's objects in
    place (always, within one warehouse; see ``choose_method``). ``executor``
    (``local``, ``spark``, ``auto``) is decided and built by ``executors``.

    Raises:
        InvalidArgument: an unknown executor, verify level or method.
        NotFound, UnprotectedTime, AlreadyExists: bad input; nothing changed.
        RestoreInProgress: the tenant already has an unfinished restore job.
        RewindError: a step failed; the job is ``failed`` and resumable.
    """
    with events.job("restore", tenant):
        return run_restore(
            store,
            lambda: plan_restore(store.catalog, tenant, as_of, to=to),
            executor=executor,
            verify=verify,
            method=method,
            progress=progress,
            executors=executors,
            instant=instant,
            wait=wait,
            on_installed=on_installed,
            on_started=on_started,
        )


def run_restore(
    store: TableStore,
    make_plan: Callable[[], RestorePlan],
    *,
    executor: ExecutorName = "auto",
    verify: VerifyLevel = "objects",
    method: Method = "auto",
    progress: Progress | None = None,
    executors: Executors = DEFAULT_EXECUTORS,
    instant: bool = False,
    wait: bool = True,
    on_installed: OnInstalled | None = None,
    on_started: OnStarted | None = None,
    proposal: Proposal | None = None,
) -> RestoreOutcome:
    """Plan with ``make_plan``, journal the job and run it: every restore's path
    (a tenant, a database, a table). A plan that GC outdated before its job
    started is made again, up to ``PLAN_ATTEMPTS`` times. ``instant``, ``wait``,
    ``on_installed`` and ``on_started`` as ``restore_tenant`` says (a hook that
    raises before the job runs leaves it journaled and resumable).

    ``proposal`` (from :func:`propose`, made with the same ``make_plan``,
    executor and method) is a plan a user approved: the job runs it as it is,
    and if it is outdated by the time the job starts, the restore is refused
    (``PlanOutdated``) rather than planned again behind the user's back.

    Raises:
        InvalidArgument: an unknown executor, verify level or method, or
            ``instant`` with the logical method (or ``wait=False`` without it).
        PlanOutdated: GC kept outdating the plan, or outdated an approved one.
        RewindError: as ``make_plan`` and the job's steps raise.
    """
    approved = proposal is not None
    check_level(verify)
    check_method(method)
    if instant and method == "logical":
        raise InvalidArgument(
            "an instant restore is physical: it installs the source's objects in place and "
            "rewrites the straddling ones after; drop --instant, or use --method physical"
        )
    if not wait and not instant:
        raise InvalidArgument(
            "--no-wait leaves an instant restore's rewrite for later; add --instant"
        )
    for attempt in range(1, PLAN_ATTEMPTS + 1):
        if proposal is None or attempt > 1:
            proposal = propose(make_plan, executor=executor, method=method, executors=executors)
        plan, choice, chosen = proposal.plan, proposal.executor, proposal.method
        if choice.name == "spark" and plan.tasks and chosen == "physical" and not instant:
            # Start Spark (and check a cluster's workers) before the job exists:
            # a worker that cannot run the tasks fails here, with nothing journaled.
            # (An instant job installs first: Spark starts for its rewrite, after.)
            from tenants.spark.session import get_spark

            get_spark()
        lease = JobLease(store.catalog, plan.job_id)
        try:
            job = start_job(
                store.catalog,
                plan,
                executor=choice.name,
                verify=verify,
                method=chosen,
                lease=(lease.holder, lease.expiry_us()),
                instant=instant and chosen == "physical",
            )
            break
        except PlanOutdated as e:
            if approved:
                raise PlanOutdated(
                    f"tenant {plan.source.ref} changed after restore plan {plan.job_id} was "
                    f"shown (GC or a compaction replaced objects it counted); nothing was "
                    f"changed: run the command again to see the plan as it is now"
                ) from e
            if attempt == PLAN_ATTEMPTS:
                raise
            log.info(
                "tenant %s: changed while planning restore job %s; planning again",
                plan.source.ref,
                plan.job_id,
            )
    assert proposal is not None  # the loop either started a job or raised
    log.info(
        "tenant %s: restore job %s (%s) to %s (ts %d) planned: %s",
        plan.source.ref,
        job.id,
        plan.scope,
        plan.at_label,
        plan.at_ts,
        plan.totals(),
    )
    if on_started is not None:
        on_started(
            Started(
                job.plan, choice.name, choice.reason, chosen, proposal.method_reason, job.instant
            )
        )
    lease.begin()
    outcome = _run(
        store,
        job,
        lease,
        progress,
        {"plan": proposal.planned_s},
        executors,
        on_installed,
        wait=wait,
    )
    return replace(outcome, executor_reason=choice.reason)


def resume_restore(
    store: TableStore,
    job_id: str,
    *,
    progress: Progress | None = None,
    executors: Executors = DEFAULT_EXECUTORS,
) -> RestoreOutcome:
    """Finish an interrupted or failed job, from its journal.

    Raises:
        JobBusy: a live process still runs the job.
        InvalidArgument: the job is done or cancelled.
    """
    job = load_job(store.catalog, job_id)
    if job.state in ("done", "cancelled"):
        raise InvalidArgument(f"restore job {job_id} is {job.state}; there is nothing to resume")
    lease = JobLease(store.catalog, job_id)
    lease.acquire(active_states=ACTIVE_STATES)
    # Read the job again under the lease: another process may have finished or
    # cancelled it since we looked.
    job = load_job(store.catalog, job_id)
    if job.state in ("done", "cancelled"):
        lease.close()
        raise InvalidArgument(f"restore job {job_id} is {job.state}; there is nothing to resume")
    outcome = _run(store, job, lease, progress, {}, executors)
    return replace(outcome, executor_reason="recorded with the job when it was planned")


def choose_method(method: str, plan: RestorePlan) -> tuple[str, str]:
    """(method, why). Physical needs the source's objects in this warehouse, readable
    by this Rewind; the plan has already proven that (it lists them from the
    catalog and validated every fingerprint), so ``auto`` picks physical.

    Raises:
        InvalidArgument: an unknown method, or logical for a table or database.
    """
    check_method(method)
    if method == "logical" and plan.into_existing_tenant:
        raise InvalidArgument(
            f"a {plan.scope} restore is physical only: it installs tables into tenant "
            f"{plan.target_name!r}; use --method physical (or auto), or restore the whole "
            f"tenant logically with `rewind restore-tenant {plan.target_name} --method logical "
            f"--at {plan.at_ts}`"
        )
    if method != "auto":
        return method, f"{method} on request"
    reuse, rewrite = plan.totals()["reuse"][0], plan.totals()["rewrite"][0]
    return "physical", (
        f"physical: all {reuse + rewrite} object(s) are in this warehouse and readable; "
        f"{reuse} reused in place, {rewrite} rewritten"
    )


def _run(
    store: TableStore,
    job: JobRecord,
    lease: JobLease,
    progress: Progress | None,
    seconds: dict[str, float],
    executors: Executors,
    on_installed: OnInstalled | None = None,
    *,
    wait: bool = True,
) -> RestoreOutcome:
    """Run the job under ``lease`` (held by this process; closed on the way out).
    Each step ends in one event (tenants.observe.events), in the job's scope."""
    scope = job_scope(job.plan)
    with lease, events.job(scope.kind, scope.tenant, scope.job_id):
        try:
            if job.method == "logical":
                return _run_logical(store, job, lease, seconds)
            if job.instant:
                return _run_instant(
                    store, job, lease, progress, seconds, executors, on_installed, wait
                )
            return _run_physical(store, job, lease, progress, seconds, executors)
        except StopRequested as e:
            cancelled = cancel_now(store, job, holder=lease.holder)
            if cancelled.installed_ts is not None:
                raise RestoreCancelled(
                    f"restore job {job.id}: its rewrite was cancelled on request; tenant "
                    f"{job.plan.target_name}@{job.plan.new_tenant_id} stays installed, reading "
                    "its remaining straddling objects through their cuts"
                ) from e
            raise RestoreCancelled(
                f"restore job {job.id} of tenant {job.plan.source.ref} was cancelled on request; "
                "its outputs and pins are removed and the source was never touched"
            ) from e
        except LeaseLost:
            raise  # another process owns the job now: journal nothing in its name
        except Exception as e:
            wrapped = _failed(store, job, e, lease.holder)
            if wrapped is e:
                raise
            raise wrapped from e


def _run_physical(
    store: TableStore,
    job: JobRecord,
    lease: JobLease,
    progress: Progress | None,
    seconds: dict[str, float],
    executors: Executors,
) -> RestoreOutcome:
    """The physical path, as values: the plan's tasks -> results -> Verified -> Installed.

    Each step is timed into ``seconds`` and finished in the journal before the
    next starts; the install's transaction also marks the job done.
    """
    plan = job.plan
    catalog = store.catalog
    holder = lease.holder
    lease.poll()
    set_state(catalog, job.id, "rewriting", expect=ACTIVE_STATES, holder=holder)

    with _timed(seconds, "rewrite") as rewriting:
        results, executor_name = _rewrite(store, job, lease, progress, executors)
        rewriting.objects, rewriting.bytes = _written(results)
    lease.poll()
    finish(catalog, job, "rewrite", results, holder=holder)

    with _timed(seconds, "verify") as verifying:
        verified = verify_step(catalog, store.objects, plan, results, check_level(job.verify))
        verifying.objects = verified.objects
    lease.poll()
    finish(catalog, job, "verify", verified, holder=holder)

    with _timed(seconds, "install") as installing:
        installed = install(catalog, plan, results, holder=holder)
        installing.objects, installing.bytes = _planned(plan)
    log.info(
        "tenant %s: restore job %s installed as %s", plan.source.ref, job.id, installed.tenant.ref
    )
    return _outcome(job, executor_name, results, verified, installed, seconds)


def _run_instant(
    store: TableStore,
    job: JobRecord,
    lease: JobLease,
    progress: Progress | None,
    seconds: dict[str, float],
    executors: Executors,
    on_installed: OnInstalled | None,
    wait: bool,
) -> RestoreOutcome:
    """The instant path: install (straddlers held with a cut at S), then rewrite,
    verify and swap. A resumed job that installed already starts at the rewrite.

    Raises:
        LeaseLost: another process holds the job now.
    """
    plan = job.plan
    catalog = store.catalog
    holder = lease.holder
    lease.poll()
    if job.installed_ts is None:
        with _timed(seconds, "check"):
            verify_installable(catalog, store.objects, plan, check_level(job.verify))
        lease.poll()
        set_state(catalog, job.id, "installing", expect=ACTIVE_STATES, holder=holder)
        with _timed(seconds, "install") as installing:
            installed = install(catalog, plan, [], holder=holder, instant=True)
            installing.objects, installing.bytes = _planned(plan)
        log.info(
            "tenant %s: restore job %s installed %s before its rewrite: %d straddling object(s) "
            "read through a cut at ts %d until swapped",
            plan.source.ref,
            job.id,
            installed.tenant.ref,
            len(plan.tasks),
            plan.at_ts,
        )
        if on_installed is not None:
            on_installed(installed)
    else:
        with catalog.snapshot() as tx:
            installed = Installed(tenant_by_id(tx, plan.new_tenant_id), job.installed_ts)
        set_state(catalog, job.id, "rewriting", expect=ACTIVE_STATES, holder=holder)
    if not wait:
        with catalog.transaction() as tx:
            end_lease(tx, job.id, holder)
        return replace(
            _outcome(job, job.executor, [], Verified(check_level(job.verify)), installed, seconds),
            instant=True,
            rewrite_pending=True,
        )
    with _timed(seconds, "rewrite") as rewriting:
        results, executor_name = _rewrite(store, job, lease, progress, executors)
        rewriting.objects, rewriting.bytes = _written(results)
    lease.poll()
    finish(catalog, job, "rewrite", results, holder=holder)
    with _timed(seconds, "verify") as verifying:
        # Only the copies a swap may still install: one swapped in before a kill
        # was verified then, and a compaction and GC may have taken it since.
        pending = still_cut(catalog, plan, results)
        level = check_level(job.verify)
        if level == "full" and len(pending) < len(results):
            level = "objects"  # the whole-table check needs every copy; each is checked
        verified = verify_step(catalog, store.objects, plan, pending, level)
        verifying.objects = verified.objects
    lease.poll()
    finish(catalog, job, "verify", verified, holder=holder)
    with _timed(seconds, "swap") as swapping:
        swap_rewrites(catalog, store.objects, plan, results, holder=holder, checkpoint=lease.poll)
        swapping.objects, swapping.bytes = _written(results)
    log.info(
        "tenant %s: restore job %s swapped in %d rewritten object(s); done",
        plan.source.ref,
        job.id,
        len(results),
    )
    return replace(
        _outcome(job, executor_name, results, verified, installed, seconds), instant=True
    )


def _rewrite(
    store: TableStore,
    job: JobRecord,
    lease: JobLease,
    progress: Progress | None,
    executors: Executors,
) -> tuple[list[RewriteResult], str]:
    """Every task's result: those the journal has, and the rest, run now (each
    journaled as it completes). Returns them and the executor's name."""
    results = finished_results(store.catalog, job.id)
    done = {r.task_id for r in results}
    pending = [t for t in job.plan.tasks if t.task_id not in done]
    executor = executors.build(executors.decide(job.executor, sum(t.input.bytes for t in pending)))

    size = {t.task_id: t.input.bytes for t in pending}
    what = f"rewriting {len(pending)} object{'' if len(pending) == 1 else 's'}"
    with step(what, sum(size.values())) as rewriting:

        def on_result(result: RewriteResult) -> None:
            lease.poll()  # one small read per task: a stop request is seen within a task
            record_result(store.catalog, job.id, result)
            rewriting.advance(size.get(result.task_id, 0))
            if progress:
                progress(result)

        results += executor.rewrite(store.objects, pending, on_result)
    return results, executor.name


def _outcome(
    job: JobRecord,
    executor: str,
    results: list[RewriteResult],
    verified: Verified,
    installed: Installed,
    seconds: dict[str, float],
) -> RestoreOutcome:
    return RestoreOutcome(
        job_id=job.id,
        plan=job.plan,
        tenant=installed.tenant,
        executor=executor,
        rewritten=len(results),
        bytes_written=sum(r.output.bytes for r in results),
        objects_verified=verified.objects,
        prefixes_listed=verified.prefixes,
        tables_compared=verified.tables,
        seconds=seconds,
        workers=tuple(sorted({r.worker for r in results if r.worker})),
        installed_ts=installed.ts,
    )


@contextmanager
def _timed(seconds: dict[str, float], name: str) -> Iterator[events.Measure]:
    """A step of the job: its seconds into ``seconds`` (the outcome's), and its event."""
    started = time.perf_counter()
    try:
        with events.step(name, stops=STOPS) as measure:
            yield measure
    finally:
        seconds[name] = time.perf_counter() - started


def job_scope(plan: RestorePlan) -> events.JobScope:
    """The job a restore plan's steps belong to: a tenant's restore, or a table's
    or database's (``table_restore``), named by its source tenant and job id."""
    kind: events.JobKind = "restore" if plan.scope == "tenant" else "table_restore"
    return events.JobScope(kind, plan.source.name, plan.job_id)


def _planned(plan: RestorePlan) -> tuple[int, int]:
    """(objects, bytes) the restored tables hold: reused and rewritten."""
    totals = plan.totals()
    return totals["reuse"][0] + totals["rewrite"][0], totals["reuse"][1] + totals["rewrite"][1]


def _written(results: list[RewriteResult]) -> tuple[int, int]:
    """(objects, bytes) a rewrite wrote."""
    return len(results), sum(r.output.bytes for r in results)


def _run_logical(
    store: TableStore, job: JobRecord, lease: JobLease, seconds: dict[str, float]
) -> RestoreOutcome:
    """Dump the source at S into the staging area, reload it, swap (engine.logical.runner).

    The swap and "done" are one transaction, so no crash can leave an installed
    tenant behind a job that still looks cancellable.
    """
    plan = job.plan
    root = staging_root(job.id)
    holder = lease.holder
    lease.poll()
    set_state(store.catalog, job.id, "rewriting", expect=ACTIVE_STATES, holder=holder)
    with _timed(seconds, "dump") as dumping:
        source = source_at(store.catalog, plan)
        manifest = ensure_dump(
            store, source, root, reader="spark" if job.executor == "spark" else "local"
        )
        dumping.bytes, dumping.rows = manifest.bytes, manifest.rows
    lease.poll()
    set_state(store.catalog, job.id, "installing", expect=("rewriting",), holder=holder)

    def mark_done(tx: Tx) -> None:
        transition(tx, job.id, "done", expect=("installing",), holder=holder)
        release_pins(tx, job.id)
        mark_installed(tx, job.id, tx.commit_ts())

    with _timed(seconds, "reload") as reloading:
        tenant = reload_as_restore(store, plan, root, on_swap=mark_done, checkpoint=lease.check)
        reloading.bytes, reloading.rows = manifest.bytes, manifest.rows
    return RestoreOutcome(
        job_id=job.id,
        plan=plan,
        tenant=tenant,
        executor=job.executor,
        rewritten=0,
        # the dump's files plus the objects the reload wrote
        bytes_written=manifest.bytes + sum(o.bytes for _, o in store.objects_of(tenant.ref)),
        objects_verified=0,
        prefixes_listed=0,
        tables_compared=len(manifest.tables),
        seconds=seconds,
        method="logical",
    )


def _failed(store: TableStore, job: JobRecord, error: Exception, holder: str) -> Exception:
    """Journal the failure; the error to raise says how to resume or cancel.

    An error that is not a RewindError is a bug: it is returned as it is, so its
    traceback survives.
    """
    _fail(store, job, error, holder)
    if not isinstance(error, RewindError):
        return error
    name = job.plan.target_name if job.plan.into_existing_tenant else job.plan.source.name
    return type(error)(
        f"{error} — restore job {job.id} failed; resume with "
        f"`rewind restore-{job.plan.scope} {name} --resume {job.id}` or cancel with "
        f"`--cancel {job.id}`"
    )


def _fail(store: TableStore, job: JobRecord, error: BaseException, holder: str) -> None:
    try:
        set_state(
            store.catalog,
            job.id,
            "failed",
            expect=ACTIVE_STATES,
            error=error_json(error),
            holder=holder,
        )
    except RewindError:
        log.exception("restore job %s: could not record its failure", job.id)
