"""The runs journal: one row per backup, GC pass and restore drill.

Restore jobs have their own journal (``restore_jobs``); everything else an
operator is paged for (did last night's backup run? did it fail? is a drill
hanging?) is a *run*: a row inserted ``running`` when the work starts, with a
lease its process renews, and set ``done`` or ``failed`` when it ends, with its
size and the (redacted) error. A ``running`` row whose lease ran out is a
process that died mid-run: *stale*. ``rewind status`` and ``rewind metrics``
read only this table and ``restore_jobs``, so any host with the catalog sees
every run (engine/operations/runs.py writes it).

Recovery point objectives (``recovery_objectives``) are keyed by tenant *name*:
a restore gives the tenant a new id under the same name, and its objective
stays. This module imports no domain code.
"""

from __future__ import annotations

from dataclasses import dataclass

from tenants.catalog.base import Row, Tx

RUNNING = "running"
DONE = "done"
FAILED = "failed"


@dataclass(frozen=True)
class RunStart:
    """What a run is, known when it starts."""

    run_id: str
    kind: str  # backup, gc, drill
    tenant_name: str | None  # None: the whole warehouse (a GC pass)
    target: str | None  # a destination URI, redacted
    method: str | None  # physical/logical, default/deep, ...
    point_ts: int | None  # the catalog time its data is as of
    backup_id: str | None


@dataclass(frozen=True)
class RunEnd:
    """How a run ended."""

    state: str  # done or failed
    ended_us: int
    bytes: int | None = None
    objects: int | None = None
    row_count: int | None = None
    error: str | None = None  # one line, redacted
    backup_id: str | None = None  # known only at the end for some runs
    point_ts: int | None = None


def insert_run(tx: Tx, start: RunStart, started_us: int, holder: str, expires_us: int) -> None:
    """Journal ``start`` as running, leased to ``holder`` until ``expires_us``."""
    tx.execute(
        "INSERT INTO runs (id, kind, tenant_name, target, method, state, started_us, "
        "lease_holder, lease_expires_us, point_ts, backup_id) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            start.run_id,
            start.kind,
            start.tenant_name,
            None if start.target is None else start.target[:1024],
            start.method,
            RUNNING,
            started_us,
            holder[:255],
            expires_us,
            start.point_ts,
            start.backup_id,
        ),
    )


def renew_run(tx: Tx, run_id: str, holder: str, expires_us: int) -> bool:
    """Extend a running run's lease; False when it is no longer running under ``holder``."""
    changed = tx.execute(
        "UPDATE runs SET lease_expires_us = ? WHERE id = ? AND state = ? AND lease_holder = ?",
        (expires_us, run_id, RUNNING, holder[:255]),
    )
    return changed == 1


def finish_run(tx: Tx, run_id: str, end: RunEnd) -> bool:
    """Record how the run ended; False when it was not running any more."""
    changed = tx.execute(
        "UPDATE runs SET state = ?, ended_us = ?, bytes = ?, objects = ?, row_count = ?, "
        "error = ?, backup_id = COALESCE(?, backup_id), point_ts = COALESCE(?, point_ts) "
        "WHERE id = ? AND state = ?",
        (
            end.state,
            end.ended_us,
            end.bytes,
            end.objects,
            end.row_count,
            end.error,
            end.backup_id,
            end.point_ts,
            run_id,
            RUNNING,
        ),
    )
    return changed == 1


def run_row(tx: Tx, run_id: str) -> Row | None:
    return tx.one("SELECT * FROM runs WHERE id = ?", (run_id,))


def recent_runs(tx: Tx, kind: str | None = None, limit: int = 50) -> list[Row]:
    """The newest runs first (of ``kind``, or all)."""
    if kind is None:
        return tx.all("SELECT * FROM runs ORDER BY started_us DESC, id LIMIT ?", (limit,))
    return tx.all(
        "SELECT * FROM runs WHERE kind = ? ORDER BY started_us DESC, id LIMIT ?", (kind, limit)
    )


def set_objective(tx: Tx, tenant_name: str, rpo_us: int | None, ts: int) -> None:
    """Set (``None``: remove) the tenant's recovery point objective."""
    tx.execute("DELETE FROM recovery_objectives WHERE tenant_name = ?", (tenant_name,))
    if rpo_us is not None:
        tx.execute(
            "INSERT INTO recovery_objectives (tenant_name, rpo_us, set_ts) VALUES (?, ?, ?)",
            (tenant_name, rpo_us, ts),
        )


def objective(tx: Tx, tenant_name: str) -> int | None:
    """The tenant's recovery point objective in µs, or None."""
    value = tx.scalar(
        "SELECT rpo_us FROM recovery_objectives WHERE tenant_name = ?", (tenant_name,)
    )
    return None if value is None else int(value)
