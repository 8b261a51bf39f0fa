"""The restore job: plan → rewrite → verify → install, journaled and resumable.

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
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from engine.executors.base import decide_executor, executor_for
from engine.restore.cancel import AlreadyInstalled as AlreadyInstalled
from engine.restore.cancel import RestoreCancelled, cancel_now, staging_root
from engine.restore.cancel import cancel_restore as cancel_restore
from engine.restore.install import install
from engine.restore.journal import (
    ACTIVE_STATES,
    JobRecord,
    error_json,
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
from engine.restore.members import PlanOutdated, require_current_pins
from engine.restore.plan import RestorePlan, plan_restore
from engine.restore.rewrite import RewriteResult
from engine.restore.verify import check_level, verify_full, verify_objects, verify_rewrites
from tenants.catalog import Tx
from tenants.catalog.jobs import mark_installed
from tenants.catalog.pins import release_pins
from tenants.catalog.tenants import tenant_row
from tenants.errors import InvalidArgument, RewindError
from tenants.store import TableStore
from tenants.tenancy import TenantRecord

log = logging.getLogger(__name__)
# A busy source may change between planning and pinning; each try takes a fraction of a second.
PLAN_ATTEMPTS = 3
Progress = Callable[[RewriteResult], None]


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


def restore_tenant(
    store: TableStore,
    tenant: str,
    point: str | int,
    *,
    to: str | None = None,
    executor: str = "auto",
    verify: str = "objects",
    method: str = "auto",
    progress: Progress | None = None,
) -> RestoreOutcome:
    """Restore ``tenant`` to ``point`` (snapshot name, ISO instant or ts).

    ``method`` is ``physical`` (reuse objects, rewrite straddlers), ``logical``
    (dump at S to the warehouse's staging area, reload, swap) or ``auto``,
    which is physical whenever the plan can reuse the source's objects in
    place (always, within one warehouse; see ``choose_method``).

    Raises:
        NotFound, UnprotectedTime, AlreadyExists: bad input; nothing changed.
        RestoreInProgress: the tenant already has an unfinished restore job.
        RewindError: a step failed; the job is ``failed`` and resumable.
    """
    return run_restore(
        store,
        lambda: plan_restore(store.catalog, tenant, point, to=to),
        executor=executor,
        verify=verify,
        method=method,
        progress=progress,
    )


def run_restore(
    store: TableStore,
    make_plan: Callable[[], RestorePlan],
    *,
    executor: str = "auto",
    verify: str = "objects",
    method: str = "auto",
    progress: Progress | None = None,
) -> RestoreOutcome:
    """Plan with ``make_plan``, journal the job and run it: every restore's path
    (a tenant, a database, a table). A plan that GC outdated before its job
    started is made again, up to ``PLAN_ATTEMPTS`` times."""
    check_level(verify)
    for attempt in range(1, PLAN_ATTEMPTS + 1):
        started = time.perf_counter()
        plan = make_plan()
        planned = time.perf_counter() - started
        chosen, _ = choose_method(method, plan)
        choice = decide_executor(executor, plan.totals()["rewrite"][1])
        if choice.name == "spark" and plan.tasks and chosen == "physical":
            # Start Spark (and check a cluster's workers) before the job exists:
            # a worker that cannot run the tasks fails here, with nothing journaled.
            from tenants.spark_session import get_spark

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
            )
            break
        except PlanOutdated:
            if attempt == PLAN_ATTEMPTS:
                raise
            log.info(
                "tenant %s: changed while planning restore job %s; planning again",
                plan.source.ref,
                plan.job_id,
            )
    log.info(
        "tenant %s: restore job %s (%s) to %s (ts %d) planned: %s",
        plan.source.ref,
        job.id,
        plan.scope,
        plan.at_label,
        plan.at_ts,
        plan.totals(),
    )
    lease.begin()
    outcome = _run(store, job, lease, progress, {"plan": planned})
    return replace(outcome, executor_reason=choice.reason)


def resume_restore(
    store: TableStore, job_id: str, *, progress: Progress | None = None
) -> RestoreOutcome:
    """Finish an interrupted or failed job, from its journal.

    Raises:
        JobBusy: a live process still runs the job.
        InvalidArgument: the job is done or cancelled.
    """
    job = load_job(store.catalog, job_id)
    if job.state in ("done", "cancelled"):
        raise InvalidArgument(f"restore job {job_id} is {job.state}; there is nothing to resume")
    with store.catalog.snapshot() as tx:
        require_current_pins(tx, job.id, job.plan.source.ref)
    lease = JobLease(store.catalog, job_id)
    lease.acquire(active_states=ACTIVE_STATES)
    # Read the job again under the lease: another process may have finished or
    # cancelled it since we looked.
    job = load_job(store.catalog, job_id)
    if job.state in ("done", "cancelled"):
        lease.close()
        raise InvalidArgument(f"restore job {job_id} is {job.state}; there is nothing to resume")
    outcome = _run(store, job, lease, progress, {})
    return replace(outcome, executor_reason="recorded with the job when it was planned")


def choose_method(method: str, plan: RestorePlan) -> tuple[str, str]:
    """(method, why). Physical needs the source's objects in this warehouse, readable
    by this Rewind; the plan has already proven that (it lists them from the
    catalog and validated every fingerprint), so ``auto`` picks physical."""
    if method not in ("auto", "physical", "logical"):
        raise InvalidArgument(f"unknown restore method {method!r}: use physical, logical or auto")
    if method == "logical" and plan.into_existing_tenant:
        raise InvalidArgument(
            f"a {plan.scope} restore is physical only: it installs tables into tenant "
            f"{plan.target_name!r}; use --method physical (or auto), or restore the whole "
            "tenant logically with `rewind restore-tenant --method logical`"
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
) -> RestoreOutcome:
    """Run the job under ``lease`` (held by this process; closed on the way out)."""
    with lease:
        try:
            if job.method == "logical":
                return _run_logical(store, job, lease, seconds)
            return _run_physical(store, job, lease, progress, seconds)
        except StopRequested as e:
            cancel_now(store, job, holder=lease.holder)
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
) -> RestoreOutcome:
    plan = job.plan
    catalog = store.catalog
    holder = lease.holder
    clock = time.perf_counter()
    lease.poll()
    set_state(catalog, job.id, "rewriting", expect=ACTIVE_STATES, holder=holder)
    results = finished_results(catalog, job.id)
    done = {r.task_id for r in results}
    pending = [t for t in plan.tasks if t.task_id not in done]
    executor = executor_for(decide_executor(job.executor, sum(t.input.bytes for t in pending)))

    def on_result(result: RewriteResult) -> None:
        lease.poll()  # one small read per task: a stop request is seen within a task
        record_result(catalog, job.id, result)
        if progress:
            progress(result)

    results += executor.rewrite(store.objects, pending, on_result)
    seconds["rewrite"] = time.perf_counter() - clock

    clock = time.perf_counter()
    lease.poll()
    set_state(catalog, job.id, "verifying", expect=("rewriting",), holder=holder)
    checked = prefixes = compared = 0
    if job.verify != "none":
        checked, prefixes = verify_objects(catalog, store.objects, plan, results)
        verify_rewrites(store.objects, plan, results)
    if job.verify == "full":
        compared = verify_full(catalog, store.objects, plan, results)
    seconds["verify"] = time.perf_counter() - clock

    clock = time.perf_counter()
    lease.poll()
    set_state(catalog, job.id, "installing", expect=("verifying",), holder=holder)
    tenant, installed_ts = install(catalog, plan, results, holder=holder)
    seconds["install"] = time.perf_counter() - clock
    log.info("tenant %s: restore job %s installed as %s", plan.source.ref, job.id, tenant.ref)
    return RestoreOutcome(
        job_id=job.id,
        plan=plan,
        tenant=tenant,
        executor=executor.name,
        rewritten=len(results),
        bytes_written=sum(r.output.bytes for r in results),
        objects_verified=checked,
        prefixes_listed=prefixes,
        tables_compared=compared,
        seconds=seconds,
        workers=tuple(sorted({r.worker for r in results if r.worker})),
        installed_ts=installed_ts,
    )


def _run_logical(
    store: TableStore, job: JobRecord, lease: JobLease, seconds: dict[str, float]
) -> RestoreOutcome:
    """Dump at S into the staging area (unless a complete dump is there), reload, swap.

    The swap and "done" are one transaction, so no crash can leave an installed
    tenant behind a job that still looks cancellable.
    """
    from engine.logical.dump import dump_restore_plan
    from engine.logical.manifest import MANIFEST, read_manifest
    from engine.logical.reload import reload_dump

    plan = job.plan
    root = staging_root(job.id)
    holder = lease.holder
    lease.poll()
    set_state(store.catalog, job.id, "rewriting", expect=ACTIVE_STATES, holder=holder)
    clock = time.perf_counter()
    have_dump = any(i.key == f"{root}/{MANIFEST}" for i in store.objects.list(f"{root}/"))
    if not have_dump:
        dump_restore_plan(
            store,
            plan,
            store.objects,
            root,
            reader="spark" if job.executor == "spark" else "local",
            dump_id=job.id,
        )
    seconds["dump"] = time.perf_counter() - clock
    clock = time.perf_counter()
    lease.poll()
    set_state(store.catalog, job.id, "installing", expect=("rewriting",), holder=holder)
    manifest = read_manifest(store.objects, root)

    def mark_done(tx: Tx) -> None:
        transition(tx, job.id, "done", expect=("installing",), holder=holder)
        release_pins(tx, job.id)
        mark_installed(tx, job.id, tx.commit_ts())

    tenant = _installed_by(store, job)
    if tenant is None:
        tenant = reload_dump(
            store,
            store.objects,
            root,
            target_name=plan.target_name,
            replace_tenant_id=plan.replaced_tenant_id,
            staging_id=plan.new_tenant_id,
            job_id=job.id,
            on_swap=mark_done,
            checkpoint=lease.check,
        ).tenant
    else:
        # Swapped in by a Rewind that marked the job done in a second transaction,
        # and stopped between the two: finish the job.
        with store.catalog.transaction() as tx:
            mark_done(tx)
    seconds["reload"] = time.perf_counter() - clock
    store.objects.delete_many(i.key for i in store.objects.list(f"{root}/"))
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


def _installed_by(store: TableStore, job: JobRecord) -> TenantRecord | None:
    with store.catalog.snapshot() as tx:
        row = tenant_row(tx, job.plan.new_tenant_id)
    if row is not None and row["state"] != "staging" and row["restore_job_id"] == job.id:
        return TenantRecord.from_row(row)
    return None


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
