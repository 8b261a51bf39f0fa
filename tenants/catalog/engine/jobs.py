"""Restore jobs in the catalog: the job row, its plan, its tasks and its lease.

``restore_jobs`` holds one small row per job (state, lease, stop request),
updated at every step; ``restore_plans`` the journaled plan, written once;
``restore_tasks`` one row per rewrite task and its result. Every state change
is a compare-and-set on the job row (``set_job_state`` returns the rows it
changed: 0 means someone else moved the job, or took its lease, first).

Lease columns: ``lease_holder`` (``host:pid:start:token``) and
``lease_expires_us`` (wall-clock µs of the hosts, not the catalog's commit
clock); ``stop_requested_us`` is set once by ``--cancel`` and read by the
holder. See ``engine.restore.lease`` for the protocol.
"""

from __future__ import annotations

from collections.abc import Sequence

from tenants.catalog.base import Row, Tx
from tenants.errors import RestoreInProgress


def unfinished_job_on(tx: Tx, name: str, states: Sequence[str]) -> Row | None:
    """A job in one of ``states`` that restores into, or reads from, the tenant
    named ``name`` (``id``, ``state``, ``created_ts``): one restore per tenant.

    Checked in the write transaction that inserts the job, so two starts on the
    same name serialise on the catalog's write lock.
    """
    placeholders = ", ".join("?" for _ in states)
    return tx.one(
        "SELECT j.id, j.state, j.created_ts FROM restore_jobs j "
        "JOIN tenants s ON s.id = j.source_tenant_id "
        f"WHERE (j.lock_name = ? OR s.name = ?) AND j.state IN ({placeholders})",
        (name, name, *states),
    )


def insert_job(
    tx: Tx,
    *,
    job_id: str,
    lock_name: str,
    source_tenant_id: str,
    replaced_tenant_id: str | None,
    new_tenant_id: str,
    target_name: str,
    at_ts: int,
    mode: str,
    method: str,
    executor: str,
    verify: str,
    ts: int,
    lease: tuple[str, int] | None,
    scope: str = "tenant",
    instant: bool = False,
) -> None:
    """Journal a new job as ``planned`` at ``ts``, holding ``lock_name``; ``lease``
    (holder, expiry µs) makes its starter the holder from the first commit.

    Raises:
        RestoreInProgress: ``lock_name`` has an unfinished job (the index
            ``restore_jobs_one_per_tenant``; callers check first, for a message
            naming that job).
    """
    busy = f"tenant {lock_name!r} already has an unfinished restore job"
    with tx.unique(lambda: RestoreInProgress(busy)):
        _insert_job_row(
            tx,
            (
                job_id,
                lock_name,
                source_tenant_id,
                replaced_tenant_id,
                new_tenant_id,
                target_name,
                at_ts,
                mode,
                method,
                executor,
                verify,
                ts,
                ts,
                *(lease if lease is not None else (None, None)),
                scope,
                int(instant),
            ),
        )


def _insert_job_row(tx: Tx, values: tuple[object, ...]) -> None:
    tx.execute(
        "INSERT INTO restore_jobs (id, lock_name, source_tenant_id, replaced_tenant_id, "
        "new_tenant_id, target_name, at_ts, mode, method, state, executor, verify, "
        "created_ts, updated_ts, lease_holder, lease_expires_us, scope, instant) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'planned', ?, ?, ?, ?, ?, ?, ?, ?)",
        values,
    )


def insert_plan(tx: Tx, job_id: str, plan_json: str) -> None:
    """Journal the job's plan in its own row, written once: state changes update
    the small job row only."""
    tx.execute(
        "INSERT INTO restore_plans (job_id, plan_json) VALUES (?, ?)",
        (job_id, plan_json),
    )


def insert_tasks(tx: Tx, job_id: str, task_ids: Sequence[str]) -> None:
    """Journal the job's rewrite tasks as ``pending``."""
    tx.executemany(
        "INSERT INTO restore_tasks (job_id, task_id, state) VALUES (?, ?, 'pending')",
        [(job_id, task_id) for task_id in task_ids],
    )


def job_row(tx: Tx, job_id: str) -> Row | None:
    """The job's ``restore_jobs`` row, if the job exists."""
    return tx.one("SELECT * FROM restore_jobs WHERE id = ?", (job_id,))


def job_rows(tx: Tx) -> list[Row]:
    """Every job's row, oldest first."""
    return tx.all("SELECT * FROM restore_jobs ORDER BY created_ts")


def plan_json(tx: Tx, job_id: str) -> str | None:
    """The job's journaled plan (JSON), if it has one."""
    text = tx.scalar("SELECT plan_json FROM restore_plans WHERE job_id = ?", (job_id,))
    return None if text is None else str(text)


def job_state(tx: Tx, job_id: str) -> str | None:
    """The job's state, if the job exists."""
    state = tx.scalar("SELECT state FROM restore_jobs WHERE id = ?", (job_id,))
    return None if state is None else str(state)


def job_state_and_holder(tx: Tx, job_id: str) -> Row | None:
    """``state`` and ``lease_holder``: why a compare-and-set on the job failed."""
    return tx.one("SELECT state, lease_holder FROM restore_jobs WHERE id = ?", (job_id,))


def job_lease(tx: Tx, job_id: str) -> Row | None:
    """``state``, ``lease_holder`` and ``lease_expires_us``: whether a live process runs it."""
    return tx.one(
        "SELECT state, lease_holder, lease_expires_us FROM restore_jobs WHERE id = ?",
        (job_id,),
    )


def job_lease_and_stop(tx: Tx, job_id: str) -> Row | None:
    """``state``, the lease columns and ``stop_requested_us``: what taking a lease checks."""
    return tx.one(
        "SELECT state, lease_holder, lease_expires_us, stop_requested_us "
        "FROM restore_jobs WHERE id = ?",
        (job_id,),
    )


def holder_and_stop(tx: Tx, job_id: str) -> Row | None:
    """``lease_holder`` and ``stop_requested_us``: what the holder polls between steps."""
    return tx.one(
        "SELECT lease_holder, stop_requested_us FROM restore_jobs WHERE id = ?",
        (job_id,),
    )


def stop_requested_at(tx: Tx, job_id: str) -> int | None:
    """When someone asked the job to stop (wall-clock µs), or ``None``."""
    at = tx.scalar("SELECT stop_requested_us FROM restore_jobs WHERE id = ?", (job_id,))
    return None if at is None else int(at)


def set_job_state(
    tx: Tx,
    job_id: str,
    state: str,
    *,
    expect: Sequence[str],
    error: str | None,
    updated_ts: int,
    end_lease: bool,
    holder: str | None,
) -> int:
    """Compare-and-set: move the job to ``state`` iff it is in one of ``expect``
    and, with ``holder``, iff ``holder`` still holds its lease. ``end_lease``
    clears the lease in the same statement (the job stops running anywhere).

    Returns the rows changed: 1, or 0 when the job is missing, in another state,
    or held by someone else.
    """
    placeholders = ", ".join("?" for _ in expect)
    lease = ", lease_holder = NULL, lease_expires_us = NULL" if end_lease else ""
    condition = " AND lease_holder = ?" if holder is not None else ""
    return tx.execute(
        f"UPDATE restore_jobs SET state = ?, error = ?, updated_ts = ?{lease} "
        f"WHERE id = ? AND state IN ({placeholders}){condition}",
        (
            state,
            error,
            updated_ts,
            job_id,
            *expect,
            *((holder,) if holder is not None else ()),
        ),
    )


def mark_installed(tx: Tx, job_id: str, ts: int) -> None:
    """Record the commit ts of the transaction that installed the job's tenant."""
    tx.execute("UPDATE restore_jobs SET installed_ts = ? WHERE id = ?", (ts, job_id))


def end_lease(tx: Tx, job_id: str, holder: str) -> int:
    """Give up ``holder``'s lease on the job (an instant job left to run later, from
    any host); returns 0 if ``holder`` did not hold it."""
    return tx.execute(
        "UPDATE restore_jobs SET lease_holder = NULL, lease_expires_us = NULL "
        "WHERE id = ? AND lease_holder = ?",
        (job_id, holder),
    )


def take_lease(tx: Tx, job_id: str, holder: str, expires_us: int) -> None:
    """Make ``holder`` the job's lease holder until ``expires_us``, unconditionally:
    the caller checked, in this transaction, that no live holder has it."""
    tx.execute(
        "UPDATE restore_jobs SET lease_holder = ?, lease_expires_us = ? WHERE id = ?",
        (holder, expires_us, job_id),
    )


def renew_lease(tx: Tx, job_id: str, holder: str, expires_us: int) -> int:
    """Extend the lease to ``expires_us`` iff ``holder`` still holds it; 0 means lost."""
    return tx.execute(
        "UPDATE restore_jobs SET lease_expires_us = ? WHERE id = ? AND lease_holder = ?",
        (expires_us, job_id, holder),
    )


def request_stop(tx: Tx, job_id: str, at_us: int) -> None:
    """Ask the job's holder to stop (the first request's time is kept)."""
    tx.execute(
        "UPDATE restore_jobs SET stop_requested_us = ? WHERE id = ? AND stop_requested_us IS NULL",
        (at_us, job_id),
    )


def done_task_results(tx: Tx, job_id: str) -> list[str]:
    """The result JSON of each finished task of the job, by task id."""
    return [
        r["result_json"]
        for r in tx.all(
            "SELECT result_json FROM restore_tasks WHERE job_id = ? AND state = 'done' ORDER BY task_id",
            (job_id,),
        )
    ]


def mark_task_done(tx: Tx, job_id: str, task_id: str, result_json: str) -> None:
    """Journal a finished task and its result (a retried task overwrites it)."""
    tx.execute(
        "UPDATE restore_tasks SET state = 'done', result_json = ? WHERE job_id = ? AND task_id = ?",
        (result_json, job_id, task_id),
    )


def task_state_counts(tx: Tx, job_id: str) -> dict[str, int]:
    """How many of the job's tasks are in each state."""
    rows = tx.all(
        "SELECT state, COUNT(*) AS n FROM restore_tasks WHERE job_id = ? GROUP BY state",
        (job_id,),
    )
    return {r["state"]: int(r["n"]) for r in rows}
