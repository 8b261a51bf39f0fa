"""The restore job: plan → rewrite → verify → install, journaled and resumable.

Reads as values handed along one line. Each step's outcome is journaled
before the next starts; a crash anywhere leaves the source untouched (the
restore only ever writes under the new tenant's prefix and, at the very end,
one install transaction that also marks the job done). ``resume_restore``
picks up from the journal, skipping finished tasks; ``cancel_restore`` removes
the job's outputs and pins.

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
from dataclasses import dataclass, field

from engine.executors import choose_executor
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
    JobBusy,
    JobLease,
    LeaseLost,
    StopRequested,
    describe,
    lease_live,
    lease_seconds,
)
from engine.restore.members import PlanOutdated, require_current_pins
from engine.restore.plan import RestorePlan, plan_restore
from engine.restore.rewrite import RewriteResult
from engine.restore.verify import check_level, verify_full, verify_objects, verify_rewrites
from tenants.catalog import Tx
from tenants.catalog.base import wall_clock_us
from tenants.catalog.install import installed_tenant
from tenants.catalog.jobs import job_lease, job_state, mark_installed, request_stop
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
    check_level(verify)
    for attempt in range(1, PLAN_ATTEMPTS + 1):
        started = time.perf_counter()
        plan = plan_restore(store.catalog, tenant, point, to=to)
        planned = time.perf_counter() - started
        chosen, _ = choose_method(method, plan)
        executor_name = choose_executor(executor, plan.totals()["rewrite"][1]).name
        lease = JobLease(store.catalog, plan.job_id)
        try:
            job = start_job(
                store.catalog,
                plan,
                executor=executor_name,
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
        "tenant %s: restore job %s to %s (ts %d) planned: %s",
        plan.source.ref,
        job.id,
        plan.at_label,
        plan.at_ts,
        plan.totals(),
    )
    lease.begin()
    return _run(store, job, lease, progress, {"plan": planned})


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
    return _run(store, job, lease, progress, {})


class RestoreCancelled(RewindError):
    """The job stopped because ``--cancel`` asked it to; its outputs are removed."""


class AlreadyInstalled(InvalidArgument):
    """The job's result is a live (or retained) tenant: cancelling would delete its objects."""


def cancel_restore(store: TableStore, job_id: str, *, wait_s: float | None = None) -> JobRecord:
    """Cancel a job: mark it cancelled, release its pins, then delete its outputs.

    A job that a live process runs is asked to stop, and this waits up to
    ``wait_s`` (default: one lease lifetime) for it to cancel itself. A job
    whose result was installed is never cancelled. The source was never
    touched, so cancelling changes nothing anyone can read.

    Raises:
        AlreadyInstalled, InvalidArgument: the job is done, installed or cancelled.
        JobBusy: the job still runs after ``wait_s`` (it was asked to stop).
    """
    job = load_job(store.catalog, job_id)
    with store.catalog.snapshot() as tx:
        _refuse_finished(tx, job)
    if lease_live(job.lease_row):
        job = _ask_to_stop(store, job, lease_seconds() + 5 if wait_s is None else wait_s)
        if job.state == "cancelled":
            return job
    return _cancel_now(store, job, holder=None)


def _ask_to_stop(store: TableStore, job: JobRecord, wait_s: float) -> JobRecord:
    """Ask the live holder to stop; return the job once it is cancelled or its lease died."""
    with store.catalog.transaction() as tx:
        request_stop(tx, job.id, wall_clock_us())
    log.info("restore job %s: asked %s to stop", job.id, describe(job.lease_row))
    deadline = time.monotonic() + wait_s
    while True:
        job = load_job(store.catalog, job.id)
        if job.state == "cancelled" or not lease_live(job.lease_row):
            return job
        if job.state == "done":
            with store.catalog.snapshot() as tx:
                _refuse_finished(tx, job)
        if time.monotonic() >= deadline:
            raise JobBusy(
                f"restore job {job.id} is still running on {describe(job.lease_row)}; it was asked "
                f"to stop and will at its next step; run `--cancel {job.id}` again to check"
            )
        time.sleep(0.1)


def _refuse_finished(tx: Tx, job: JobRecord) -> None:
    """A done or cancelled job, or one whose tenant is installed, is not cancelled."""
    state = job_state(tx, job.id)
    installed = installed_tenant(tx, job.plan.new_tenant_id)
    if state == "cancelled":
        raise InvalidArgument(f"restore job {job.id} is cancelled; it cannot be cancelled")
    if installed is not None or state == "done":
        ref = f"{job.plan.target_name}@{job.plan.new_tenant_id}"
        if state != "done":
            raise AlreadyInstalled(
                f"restore job {job.id} already installed tenant {ref} (the process stopped before "
                f"marking the job done); cancelling would delete a live tenant's objects: finish "
                f"it with `rewind restore-tenant {job.plan.target_name} --resume {job.id}`"
            )
        raise AlreadyInstalled(
            f"restore job {job.id} is done: it installed tenant {ref}, so it cannot be "
            f"cancelled; to undo it, restore {job.plan.target_name!r} to a time before it "
            "(`rewind history` lists the retired tenant and its snapshots)"
        )


def _cancel_now(store: TableStore, job: JobRecord, *, holder: str | None) -> JobRecord:
    """Cancel in one transaction, then delete the outputs nothing can reference any more.

    ``holder`` is the lease holder cancelling its own job; ``None`` is another
    process, which may cancel only when no live process holds the lease.
    """
    with store.catalog.transaction() as tx:
        _refuse_finished(tx, job)
        row = job_lease(tx, job.id)
        assert row is not None
        if holder is None and lease_live(row):
            raise JobBusy(
                f"restore job {job.id} is running on {describe(row)}; ask it to stop with "
                f"`--cancel {job.id}` (which waits for it)"
            )
        transition(tx, job.id, "cancelled", expect=ACTIVE_STATES, holder=holder)
        release_pins(tx, job.id)
        if job.method == "logical":
            from engine.logical.reload import wipe_staging

            wipe_staging(tx, store.objects, job.plan.new_tenant_id)
    # The catalog now says: no tenant was installed from this job and no process
    # will install one (a paused holder's install is conditional on its lease and
    # on the job's state). Its outputs are unreferenced; a crash here leaves them
    # as orphans for GC's sweep.
    for prefix in (f"tenants/{job.plan.new_tenant_id}/", f"{staging_root(job.id)}/"):
        store.objects.delete_many(info.key for info in store.objects.list(prefix))
    log.info("restore job %s of tenant %s cancelled", job.id, job.plan.source.ref)
    return load_job(store.catalog, job.id)


def choose_method(method: str, plan: RestorePlan) -> tuple[str, str]:
    """(method, why). Physical needs the source's objects in this warehouse, readable
    by this Rewind; the plan has already proven that (it lists them from the
    catalog and validated every fingerprint), so ``auto`` picks physical."""
    if method not in ("auto", "physical", "logical"):
        raise InvalidArgument(f"unknown restore method {method!r}: use physical, logical or auto")
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
            _cancel_now(store, job, holder=lease.holder)
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
    executor = choose_executor(job.executor, sum(t.input.bytes for t in pending))

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
    tenant = install(catalog, plan, results, holder=holder)
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
    )


def staging_root(job_id: str) -> str:
    """Where a logical restore job dumps, inside the warehouse (never under tenants/)."""
    return f"staging/{job_id}"


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
    name = job.plan.source.name
    return type(error)(
        f"{error} — restore job {job.id} failed; resume with "
        f"`rewind restore-tenant {name} --resume {job.id}` or cancel with `--cancel {job.id}`"
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
