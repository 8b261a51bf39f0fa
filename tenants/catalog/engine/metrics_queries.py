"""The statements ``rewind metrics`` runs at each scrape, each over every tenant at once.

A scrape reads the two journals (``restore_jobs`` and ``runs``) and the
per-tenant facts a dashboard pages on (newest snapshot, newest backup, what
the tables hold), in a fixed number of statements whatever the number of
tenants or jobs: counts, sums and histogram buckets are aggregated by the
database (``GROUP BY``, one ``SUM(CASE ...)`` per bucket), so a scrape moves
one row per label set, never one per job. engine/operations/metrics.py turns
the rows into metric families; this module imports no domain code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tenants.catalog.base import Tx

# Restore job states (tenants/catalog/migrations.py): the ones a job still runs in,
# and the ends. A failed job is not an end: it is resumed or cancelled.
RESTORE_ACTIVE = ("planned", "rewriting", "verifying", "installing")
RESTORE_ENDED = ("done", "cancelled")
RESTORE_FAILED = "failed"
RUN_ENDED = ("done", "failed")


@dataclass(frozen=True)
class Count:
    """Jobs of one label set: how many, and what they moved (None: not recorded)."""

    labels: tuple[str, ...]
    count: int
    bytes: int = 0
    objects: int = 0


@dataclass(frozen=True)
class Ended(Count):
    """Ended jobs of one label set, and when the newest of them ended (µs)."""

    last_us: int = 0


@dataclass(frozen=True)
class Buckets:
    """A histogram's series: jobs at or below each bound (cumulative), all jobs, seconds."""

    labels: tuple[str, ...]
    at_or_below: tuple[int, ...]
    count: int
    seconds: float


@dataclass(frozen=True)
class Lease:
    """An unfinished job's lease, for telling running from stale."""

    kind: str
    lease_holder: str | None
    lease_expires_us: int | None


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _bucketed(
    tx: Tx, labels: Sequence[str], source: str, params: Sequence[Any], bounds_us: Sequence[int]
) -> list[Buckets]:
    """Histogram buckets of ``d`` (µs, clamped at 0) over ``source``, grouped by ``labels``.

    ``source`` and ``labels`` are this module's own SQL, never input; the
    bounds are parameters.
    """
    columns = ", ".join(labels)
    buckets = ", ".join("SUM(CASE WHEN d <= ? THEN 1 ELSE 0 END)" for _ in bounds_us)
    sql = (
        f"SELECT {columns}, COUNT(*), SUM(d), {buckets} FROM "
        f"(SELECT {columns}, CASE WHEN raw_d < 0 THEN 0 ELSE raw_d END AS d FROM ({source}) s) b "
        f"GROUP BY {columns} ORDER BY {columns}"
    )
    out = []
    n = len(labels)
    for row in tx.tuples(sql, (*bounds_us, *params)):  # the buckets' marks come first
        out.append(
            Buckets(
                tuple(_text(v) for v in row[:n]),
                tuple(int(v or 0) for v in row[n + 2 :]),
                int(row[n]),
                int(row[n + 1] or 0) / 1e6,
            )
        )
    return out


# --- restore jobs -------------------------------------------------------------------------


def restore_counts(tx: Tx) -> list[Ended]:
    """Restore jobs per (tenant, scope, method, state), for the ended and failed ones,
    and the commit ts the newest of them reached its state at."""
    states = (*RESTORE_ENDED, RESTORE_FAILED)
    marks = ", ".join("?" for _ in states)
    return [
        Ended(tuple(_text(v) for v in row[:4]), int(row[4]), last_us=int(row[5] or 0))
        for row in tx.tuples(
            "SELECT target_name, scope, method, state, COUNT(*), MAX(updated_ts) "
            "FROM restore_jobs "
            f"WHERE state IN ({marks}) GROUP BY target_name, scope, method, state "
            "ORDER BY target_name, scope, method, state",
            states,
        )
    ]


def restore_durations(tx: Tx, bounds_us: Sequence[int]) -> list[Buckets]:
    """Seconds from a restore job's start to its end, per (scope, method, state), ended jobs.

    Both ends are commit timestamps (``created_ts``, ``updated_ts``): the
    catalog's clock, so hosts' clocks do not enter.
    """
    marks = ", ".join("?" for _ in RESTORE_ENDED)
    return _bucketed(
        tx,
        ("scope", "method", "state"),
        "SELECT scope, method, state, updated_ts - created_ts AS raw_d FROM restore_jobs "
        f"WHERE state IN ({marks})",
        RESTORE_ENDED,
        bounds_us,
    )


def restore_usable_after(tx: Tx, bounds_us: Sequence[int]) -> list[Buckets]:
    """Seconds from a restore job's start to its install (the data usable), per (scope,
    method): an instant restore installs before it rewrites, so this is its headline."""
    return _bucketed(
        tx,
        ("scope", "method"),
        "SELECT scope, method, installed_ts - created_ts AS raw_d FROM restore_jobs "
        "WHERE installed_ts IS NOT NULL",
        (),
        bounds_us,
    )


def restore_rewritten(tx: Tx) -> list[Count]:
    """Bytes and objects restore jobs rewrote, per (scope, method): each done task's
    output, as journaled (``restore_tasks.result_json``, read by the database)."""
    if tx.catalog.dialect.name == "postgresql":
        size = "CAST(CAST(t.result_json AS json) -> 'output' ->> 'bytes' AS BIGINT)"
    else:
        size = "CAST(json_extract(t.result_json, '$.output.bytes') AS INTEGER)"
    return [
        Count(tuple(_text(v) for v in row[:2]), int(row[2]), int(row[3] or 0), int(row[2]))
        for row in tx.tuples(
            f"SELECT j.scope, j.method, COUNT(*), SUM({size}) "
            "FROM restore_tasks t JOIN restore_jobs j ON j.id = t.job_id "
            "WHERE t.state = 'done' GROUP BY j.scope, j.method ORDER BY j.scope, j.method"
        )
    ]


def restore_leases(tx: Tx) -> list[Lease]:
    """The unfinished (neither ended nor failed) restore jobs' leases."""
    marks = ", ".join("?" for _ in RESTORE_ACTIVE)
    return [
        Lease("restore", holder, None if expires is None else int(expires))
        for holder, expires in tx.tuples(
            f"SELECT lease_holder, lease_expires_us FROM restore_jobs WHERE state IN ({marks})",
            RESTORE_ACTIVE,
        )
    ]


# --- runs: backups, GC passes, drills -----------------------------------------------------------


def run_counts(tx: Tx) -> list[Ended]:
    """Ended runs per (kind, tenant, method, state): count, bytes, objects, newest end."""
    marks = ", ".join("?" for _ in RUN_ENDED)
    return [
        Ended(
            tuple(_text(v) for v in row[:4]),
            int(row[4]),
            int(row[5] or 0),
            int(row[6] or 0),
            int(row[7] or 0),
        )
        for row in tx.tuples(
            "SELECT kind, tenant_name, method, state, COUNT(*), SUM(bytes), SUM(objects), "
            f"MAX(ended_us) FROM runs WHERE state IN ({marks}) "
            "GROUP BY kind, tenant_name, method, state ORDER BY kind, tenant_name, method, state",
            RUN_ENDED,
        )
    ]


def run_durations(tx: Tx, bounds_us: Sequence[int]) -> list[Buckets]:
    """Seconds each ended run took, per (kind, method, state) (the runs' wall clock)."""
    marks = ", ".join("?" for _ in RUN_ENDED)
    return _bucketed(
        tx,
        ("kind", "method", "state"),
        "SELECT kind, method, state, ended_us - started_us AS raw_d FROM runs "
        f"WHERE state IN ({marks}) AND ended_us IS NOT NULL",
        RUN_ENDED,
        bounds_us,
    )


def run_leases(tx: Tx) -> list[Lease]:
    """The leases of runs still journaled ``running`` (live, or left by a dead process)."""
    return [
        Lease(str(kind), holder, None if expires is None else int(expires))
        for kind, holder, expires in tx.tuples(
            "SELECT kind, lease_holder, lease_expires_us FROM runs WHERE state = 'running'"
        )
    ]


# --- per tenant -----------------------------------------------------------------------------


def newest_snapshots(tx: Tx) -> list[tuple[str, int | None]]:
    """(name, newest snapshot ts or None) of every active tenant."""
    return [
        (str(name), None if ts is None else int(ts))
        for name, ts in tx.tuples(
            "SELECT t.name, MAX(s.ts) FROM tenants t "
            "LEFT JOIN snapshots s ON s.tenant_id = t.id "
            "WHERE t.state = 'active' GROUP BY t.name ORDER BY t.name"
        )
    ]


def newest_backups(tx: Tx) -> dict[str, int]:
    """Tenant name → the point the newest done backup of that name is as of (any
    destination; a tenant never backed up is absent).

    Backups are journaled by tenant name (``runs.tenant_name``), as a restore
    keeps the name. One pass over the runs, joined to the active tenants by the
    caller: as a join here, PostgreSQL without fresh statistics probed the runs
    once per tenant (2 s at 10^3 tenants).
    """
    return {
        str(name): int(ts)
        for name, ts in tx.tuples(
            "SELECT tenant_name, MAX(point_ts) FROM runs "
            "WHERE kind = 'backup' AND state = 'done' AND tenant_name IS NOT NULL "
            "AND point_ts IS NOT NULL GROUP BY tenant_name"
        )
    }


def tenant_totals(tx: Tx) -> list[tuple[str, str, int, int]]:
    """(name, kind, objects, bytes) the tables of each active tenant hold, from
    ``member_totals`` (tenants/catalog/totals.py): a dropped table's too (it keeps
    its objects while it can be undropped), inherited members count, and an
    object two tables share counts in each."""
    return [
        (str(name), str(kind), int(objects or 0), int(size or 0))
        for name, kind, objects, size in tx.tuples(
            "SELECT t.name, m.kind, SUM(m.objects), SUM(m.bytes) FROM tenants t "
            "JOIN tables tb ON tb.tenant_id = t.id "
            "JOIN member_totals m ON m.table_id = tb.id "
            "WHERE t.state = 'active' GROUP BY t.name, m.kind ORDER BY t.name, m.kind"
        )
    ]


def objectives(tx: Tx) -> list[tuple[str, int]]:
    """(name, recovery point objective µs) of the active tenants that have one."""
    return [
        (str(name), int(rpo))
        for name, rpo in tx.tuples(
            "SELECT t.name, o.rpo_us FROM recovery_objectives o "
            "JOIN tenants t ON t.name = o.tenant_name AND t.state = 'active' ORDER BY t.name"
        )
    ]


def pitr_windows(tx: Tx) -> list[tuple[str, int, int]]:
    """(name, window µs, since ts) of the active tenants with a PITR window."""
    return [
        (str(name), int(window), int(since))
        for name, window, since in tx.tuples(
            "SELECT t.name, p.window_us, p.since_ts FROM pitr_windows p "
            "JOIN tenants t ON t.id = p.tenant_id WHERE t.state = 'active' ORDER BY t.name"
        )
    ]
