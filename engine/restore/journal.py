"""The restore journal: jobs, their tasks and pins, in the catalog.

A job moves planned → rewriting → verifying → installing → done, or to
failed (resumable) or cancelled. Every transition and every finished task is
its own small transaction, so after a crash the journal says exactly what
is left. While a job is not done or cancelled it holds its tenant name (one
restore per tenant) and pins every object it reads or installs, so GC cannot
remove them.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Literal

from engine.pipeline import RestorePlan, RewriteResult
from engine.restore.lease import LeaseLost
from engine.restore.members import pin_plan
from tenants.catalog import Catalog, Row, Tx
from tenants.catalog.engine.jobs import (
    done_task_results,
    insert_job,
    insert_plan,
    insert_tasks,
    job_row,
    job_rows,
    job_state_and_holder,
    mark_task_done,
    plan_json,
    set_job_state,
    task_state_counts,
    unfinished_job_on,
)
from tenants.catalog.engine.table_restore import lock_tables
from tenants.catalog.intents import end_job_intents
from tenants.errors import InvalidArgument, NotFound, RestoreInProgress
from tenants.names import job_id as checked_job_id
from tenants.objects.intents import new_intent, record_intent_in
from tenants.times import format_ts

log = logging.getLogger(__name__)
JobState = Literal["planned", "rewriting", "verifying", "installing", "done", "failed", "cancelled"]
ACTIVE_STATES: tuple[JobState, ...] = ("planned", "rewriting", "verifying", "installing", "failed")
# States in which no process runs the job: moving to one ends its lease.
STOPPED_STATES: tuple[JobState, ...] = ("done", "failed", "cancelled")


@dataclass(frozen=True)
class JobRecord:
    id: str
    state: JobState
    plan: RestorePlan
    executor: str
    verify: str
    method: str
    error: str | None
    created_ts: int
    updated_ts: int
    installed_ts: int | None
    lease_holder: str | None = None
    lease_expires_us: int | None = None
    stop_requested_us: int | None = None
    # Installed before its rewrite: the tenant reads its straddlers through cuts
    # until the job swaps in their rewritten copies (docs/membership.md).
    instant: bool = False

    @property
    def rewrite_pending(self) -> bool:
        """Whether the job installed its tenant and still has a rewrite to finish."""
        return self.instant and self.installed_ts is not None and self.state != "done"

    @property
    def lease_row(self) -> Row:
        return {"lease_holder": self.lease_holder, "lease_expires_us": self.lease_expires_us}

    @classmethod
    def from_row(cls, row: Row, plan: RestorePlan) -> JobRecord:
        return cls(
            row["id"],
            row["state"],
            plan,
            row["executor"],
            row["verify"],
            row["method"],
            row["error"],
            row["created_ts"],
            row["updated_ts"],
            row["installed_ts"],
            row.get("lease_holder"),
            row.get("lease_expires_us"),
            row.get("stop_requested_us"),
            bool(row.get("instant") or 0),
        )


def _running(tx: Tx, name: str) -> Row | None:
    """An unfinished job that restores into, or reads from, the tenant named ``name``."""
    return unfinished_job_on(tx, name, ACTIVE_STATES)


def start_job(
    catalog: Catalog,
    plan: RestorePlan,
    *,
    executor: str,
    verify: str,
    method: str = "physical",
    lease: tuple[str, int] | None = None,
    instant: bool = False,
) -> JobRecord:
    """Journal the plan, its tasks and pins in one transaction; take the tenant lock.

    An ``instant`` job installs before it rewrites (``engine.restore.swap``).

    ``lease`` (holder, expiry in wall-clock µs) makes the caller the job's
    holder from its first commit, so no other process can resume it meanwhile.

    Raises:
        RestoreInProgress: the tenant already has an unfinished restore job.
        PlanOutdated: the source changed since ``plan`` was made; plan again.
    """
    with catalog.transaction() as tx:
        for name in {plan.target_name, plan.source.name}:
            running = _running(tx, name)
            if running:
                raise RestoreInProgress(
                    f"tenant {name!r} already has restore job {running['id']} ({running['state']}, "
                    f"started {format_ts(running['created_ts'])}); finish it with "
                    f"`rewind restore-tenant {name} --resume {running['id']}` or "
                    f"`--cancel {running['id']}`"
                )
        ts = tx.commit_ts()
        insert_job(
            tx,
            job_id=plan.job_id,
            lock_name=plan.target_name,
            source_tenant_id=plan.source.id,
            replaced_tenant_id=plan.replaced_tenant_id,
            new_tenant_id=plan.new_tenant_id,
            target_name=plan.target_name,
            at_ts=plan.at_ts,
            mode=plan.mode,
            method=method,
            executor=executor,
            verify=verify,
            ts=ts,
            lease=lease,
            scope=plan.scope,
            instant=instant,
        )
        if plan.replaced_table_ids or plan.locked_database_id:
            # Writes and DDL to what the install replaces are refused from here on.
            lock_tables(tx, plan.job_id, plan.replaced_table_ids, plan.locked_database_id)
        # The plan lives in its own row, written once: state changes update the
        # small job row only.
        insert_plan(tx, plan.job_id, plan.to_json())
        insert_tasks(tx, plan.job_id, [t.task_id for t in plan.tasks])
        pin_plan(tx, plan)
        if plan.tasks:
            # Its outputs' keys are in the plan: if the job is cancelled and dies
            # before deleting them, GC finds them from here (engine/gc/intents.py).
            record_intent_in(
                tx, new_intent("restore", ()), tx.catalog.clock(), [], job_id=plan.job_id
            )
        row = job_row(tx, plan.job_id)
        assert row is not None
        return JobRecord.from_row(row, plan)


def load_job_tx(tx: Tx, job_id: str) -> JobRecord:
    row = job_row(tx, checked_job_id(job_id))
    if row is None:
        raise NotFound(f"restore job {job_id!r} does not exist; see `rewind history TENANT`")
    return JobRecord.from_row(row, load_plan(tx, job_id))


def load_plan(tx: Tx, job_id: str) -> RestorePlan:
    text = plan_json(tx, job_id)
    if text is None:
        raise NotFound(f"restore job {job_id!r} has no journaled plan")
    return RestorePlan.from_json(text)


def load_job(catalog: Catalog, job_id: str) -> JobRecord:
    with catalog.snapshot() as tx:
        return load_job_tx(tx, job_id)


def finished_results(catalog: Catalog, job_id: str) -> list[RewriteResult]:
    with catalog.snapshot() as tx:
        texts = done_task_results(tx, job_id)
    return [RewriteResult.from_json(text) for text in texts]


def record_result(catalog: Catalog, job_id: str, result: RewriteResult) -> None:
    with catalog.transaction() as tx:
        mark_task_done(tx, job_id, result.task_id, result.to_json())


def set_state(
    catalog: Catalog,
    job_id: str,
    state: JobState,
    *,
    expect: tuple[JobState, ...],
    error: str | None = None,
    holder: str | None = None,
) -> None:
    """Move the job to ``state`` iff it is in one of ``expect`` (compare-and-swap)."""
    with catalog.transaction() as tx:
        transition(tx, job_id, state, expect=expect, error=error, holder=holder)


def transition(
    tx: Tx,
    job_id: str,
    state: JobState,
    *,
    expect: tuple[JobState, ...],
    error: str | None = None,
    holder: str | None = None,
) -> None:
    """Compare-and-set the job's state; with ``holder``, only while it holds the lease.

    A move to a stopped state (done, failed, cancelled) also ends the lease, in
    the same statement: the job is no longer running anywhere.

    Raises:
        NotFound: no job ``job_id``.
        LeaseLost: the job is in an expected state but another process holds it.
        InvalidArgument: the job is in none of the ``expect`` states.
    """
    changed = set_job_state(
        tx,
        job_id,
        state,
        expect=expect,
        error=error,
        updated_ts=tx.catalog.clock(),
        end_lease=state in STOPPED_STATES,
        holder=holder,
    )
    if changed == 1 and state == "done":
        end_job_intents(tx, job_id)  # every output is installed, or deleted before
    if changed != 1:
        row = job_state_and_holder(tx, job_id)
        if row is None:
            raise NotFound(f"restore job {job_id!r} does not exist")
        if row["state"] in expect and holder is not None:
            raise LeaseLost(
                f"restore job {job_id}: this process no longer holds the job's lease "
                f"(now {row['lease_holder'] or 'nobody'}); it changes nothing more"
            )
        raise InvalidArgument(
            f"restore job {job_id} is {row['state']}; it cannot move to {state} "
            f"(only from {', '.join(expect)})"
        )


# What finishing a step of a running job moves it to: (from, to). The install
# finishes in its own transaction (``engine.restore.install``), with "done".
Step = Literal["rewrite", "verify"]
STEPS: dict[Step, tuple[JobState, JobState]] = {
    "rewrite": ("rewriting", "verifying"),
    "verify": ("verifying", "installing"),
}


def finish(catalog: Catalog, job: JobRecord, step: Step, value: object, *, holder: str) -> None:
    """Record that ``step`` of ``job`` produced ``value``: the job moves on to the
    next step, iff this process still holds its lease.

    The rewrite's results are journaled one by one as tasks finish (``record_result``),
    and they are what a resumed job reuses; a verification is quick to repeat, so a
    resumed job verifies again rather than trusting a record of it.

    Raises:
        LeaseLost: another process holds the job now.
    """
    before, after = STEPS[step]
    set_state(catalog, job.id, after, expect=(before,), holder=holder)
    shown = f"{len(value)} result(s)" if isinstance(value, list | tuple) else value
    log.info("tenant %s: restore job %s finished %s: %s", job.plan.source.ref, job.id, step, shown)


def jobs_of(catalog: Catalog, names: list[str], tenant_ids: list[str]) -> list[JobRecord]:
    """Jobs that targeted any of ``names`` or read any of ``tenant_ids``, oldest first."""
    with catalog.snapshot() as tx:
        rows = job_rows(tx)
        return [
            JobRecord.from_row(r, load_plan(tx, r["id"]))
            for r in rows
            if r["target_name"] in names or r["source_tenant_id"] in tenant_ids
        ]


def task_counts(catalog: Catalog, job_id: str) -> dict[str, int]:
    with catalog.snapshot() as tx:
        return task_state_counts(tx, job_id)


def error_json(error: BaseException) -> str:
    return json.dumps({"type": type(error).__name__, "message": str(error)})
