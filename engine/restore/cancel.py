"""Cancelling a restore job: never what a live job or an installed tenant references.

An instant job that installed its tenant and still rewrites is cancelled too,
but only its rewrite is: the tenant stays, reading its straddlers through
their cuts (correct, only slower to scan), and only the rewritten copies no
table took are deleted.

A job that a live process runs is only asked to stop (its lease's
``stop_requested_us``); the holder then cancels its own job. Otherwise one
transaction marks the job cancelled, releases its pins and forgets a logical
job's staging tenant, after checking that no tenant was installed from it and
no live process holds its lease. Only then are its outputs deleted: nothing in
the catalog references them any more, and a kill before the deletes leaves
orphans for GC.
"""

from __future__ import annotations

import logging
import time

from engine.restore.journal import ACTIVE_STATES, JobRecord, load_job, transition
from engine.restore.lease import JobBusy, describe, lease_live, lease_seconds
from engine.restore.swap import unswapped_outputs
from tenants.catalog import Tx
from tenants.catalog.base import wall_clock_us
from tenants.catalog.engine.install import installed_tenant
from tenants.catalog.engine.jobs import job_lease, job_state, request_stop
from tenants.catalog.engine.pins import release_pins
from tenants.catalog.engine.table_restore import tables_installed_by
from tenants.errors import InvalidArgument, RewindError
from tenants.names import job_id as checked_job_id
from tenants.store import TableStore

log = logging.getLogger(__name__)


def staging_root(job_id: str) -> str:
    """Where a logical restore job dumps, inside the warehouse (never under tenants/)."""
    return f"staging/{checked_job_id(job_id)}"


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
    return cancel_now(store, job, holder=None)


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


def _refuse_finished(tx: Tx, job: JobRecord) -> bool:
    """A done or cancelled job, or one whose tenant is installed, is not cancelled;
    returns whether it is an instant job whose tenant is installed (only its
    rewrite is cancelled)."""
    state = job_state(tx, job.id)
    installed = (
        tables_installed_by(tx, job.id) > 0
        if job.plan.into_existing_tenant
        else installed_tenant(tx, job.plan.new_tenant_id) is not None
    )
    if state == "cancelled":
        raise InvalidArgument(f"restore job {job.id} is cancelled; it cannot be cancelled")
    if installed and job.instant and state != "done":
        return True
    if installed and job.plan.into_existing_tenant:
        raise AlreadyInstalled(
            f"restore job {job.id} already installed its tables into tenant "
            f"{job.plan.target_name}@{job.plan.new_tenant_id}, so it cannot be cancelled; to "
            "undo it, restore the table to a time before it"
        )
    if installed or state == "done":
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
            f"(`rewind history {job.plan.target_name}` lists the retired tenant and its snapshots)"
        )
    return False


def output_prefixes(job: JobRecord) -> list[str]:
    """Where a job writes: its new tenant's prefix, or, for a table or database
    restore into a tenant that exists, each new table's prefix (never the
    tenant's, which holds its other tables), and its staging area."""
    plan = job.plan
    if plan.into_existing_tenant:
        prefixes = [f"tenants/{plan.new_tenant_id}/{t.new_table_id}/" for t in plan.tables]
    else:
        prefixes = [f"tenants/{plan.new_tenant_id}/"]
    return [*prefixes, f"{staging_root(job.id)}/"]


def cancel_now(store: TableStore, job: JobRecord, *, holder: str | None) -> JobRecord:
    """Cancel in one transaction, then delete the outputs nothing can reference any more.

    ``holder`` is the lease holder cancelling its own job; ``None`` is another
    process, which may cancel only when no live process holds the lease.
    """
    with store.catalog.transaction() as tx:
        rewrite_only = _refuse_finished(tx, job)
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

            wipe_staging(tx, job.plan.new_tenant_id)
    if rewrite_only:
        # The tenant stays: only the rewritten copies no swap installed go (a swap
        # is conditional on the job's state, so none installs one from here on).
        unused = unswapped_outputs(store.catalog, job.plan)
        store.objects.delete_many(unused)
        log.info(
            "restore job %s: rewrite cancelled; tenant %s@%s stays, reading its remaining "
            "straddlers through their cuts (%d unused copies deleted)",
            job.id,
            job.plan.target_name,
            job.plan.new_tenant_id,
            len(unused),
        )
        return load_job(store.catalog, job.id)
    # The catalog now says: no tenant was installed from this job and no process
    # will install one (a paused holder's install is conditional on its lease and
    # on the job's state). Its outputs are unreferenced; a crash here leaves them
    # as orphans for GC's sweep.
    for prefix in output_prefixes(job):
        store.objects.delete_many(info.key for info in store.objects.list(prefix))
    log.info("restore job %s of tenant %s cancelled", job.id, job.plan.source.ref)
    return load_job(store.catalog, job.id)
