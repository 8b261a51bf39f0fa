"""Rich tables and JSON for ``rewind status`` (docs/operations.md, "Status and
recovery point objectives").

The list is one line per tenant, worst first, in 100 columns: coarse ages
(``3h12m``) for a person scanning thousands of rows, an age per backup
destination; ``rewind status TENANT`` names the destinations, snapshots and
jobs in full, and the JSON keeps every raw ts, µs and byte count.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from engine.cli.render import plural
from engine.cli.render_grid import Column, Grid
from engine.cli.render_layout import Stack, fixed, human_bytes, local_time, titled, wrapping
from engine.cli.snapshot_render import format_age
from engine.operations.status import Job, LastRun, Pitr, StatusReport, TenantStatus
from tenants.redaction import redact
from tenants.times import format_duration, format_ts

_STYLE = {"missed": "bold red", "met": "green", "none": "dim"}
_JOB_STYLE = {"failed": "bold red", "stale": "bold red", "running": "yellow"}


def _ago(us: int | None) -> str:
    return "never" if us is None else f"{format_age(us)} ago"


def _age(us: int | None) -> str:
    return "none" if us is None else format_age(us)


def _objective(t: TenantStatus) -> str:
    if t.objective_us is None:
        return ""
    return f"{format_duration(t.objective_us)} {t.verdict}"


def _pitr_reach(p: Pitr | None) -> str:
    if p is None:
        return "off"
    return f"{format_age(p.reach_us)}/{format_duration(p.window_us)}"


def _job_line(j: Job) -> str:
    what = j.kind if j.method is None or j.kind == "restore" else f"{j.kind} {j.method}"
    return f"{what} {j.state}"


def _jobs_cell(t: TenantStatus, now: int) -> str:
    lines = [_job_line(j) for j in t.jobs]
    d = t.drill
    if d is not None and d.state == "done":  # a failed or stale one is among the jobs
        lines.append(f"drill {format_age(max(now - (d.ended_us or d.started_us), 0))}")
    return ", ".join(lines)


def _storage_cell(t: TenantStatus) -> str:
    data, tomb = t.storage.get("data"), t.storage.get("tomb")
    return f"{human_bytes(data.bytes if data else 0)} / {human_bytes(tomb.bytes if tomb else 0)}"


STATUS_COLUMNS = (
    Column("tenant", wraps=True, min_width=12),
    Column("objective"),
    Column("recovery\npoint", right=True),
    Column("backups\n(per dest.)", right=True, wraps=True),
    Column("snapshot", right=True),
    Column("PITR\nreach", right=True),
    Column("jobs\nlast drill", wraps=True, min_width=10),
    Column("data / tomb", right=True),
)


def status_table(report: StatusReport) -> Grid:
    """One line per tenant, worst first (a long name or many jobs wrap). A grid,
    not a rich Table: 10,000 rows print in a fraction of a second
    (engine.cli.render_grid)."""
    missed = sum(t.verdict == "missed" for t in report.tenants)
    troubled = sum(bool(t.troubled_jobs) for t in report.tenants)
    grid = Grid(
        STATUS_COLUMNS,
        title=f"status at {local_time(report.now_ts)}",
        caption=f"{plural(len(report.tenants), 'tenant')}: {missed} missing the objective, "
        f"{troubled} with failed or stale jobs; ages are how long ago",
    )
    for t in report.tenants:
        verdict = "bold red" if t.verdict == "missed" else ""  # colour only what is wrong
        grid.add_row(
            t.name,
            (_objective(t), verdict),
            (_age(t.recovery_point_age_us), verdict),
            " ".join(format_age(b.age_us) for b in t.backups) or "none",
            _age(None if t.snapshot is None else t.snapshot.age_us),
            _pitr_reach(t.pitr),
            (_jobs_cell(t, report.now_ts), "bold red" if t.troubled_jobs else ""),
            _storage_cell(t),
        )
    return grid


def warehouse_lines(report: StatusReport) -> list[str]:
    """The warehouse's own jobs under the table: GC passes, restore jobs of no tenant."""
    lines = []
    for run in report.gc:
        when = run.ended_us if run.ended_us is not None else run.started_us
        lines.append(
            f"gc ({run.method}): last pass {run.state} {_ago(max(report.now_ts - when, 0))}"
        )
    for job in report.warehouse_jobs:
        if job.kind != "gc":
            lines.append(f"{job.kind} {job.id} of {job.tenant}: {job.state}")
    return lines


def tenant_table(report: StatusReport, t: TenantStatus) -> list[Any]:
    """The detail of one tenant: what it is protected by, then its backups and jobs."""
    now = report.now_ts
    table = titled(f"status of {t.name} at {local_time(now)}", show_header=False)
    wrapping(table, "what")
    wrapping(table, "value")
    point = t.recovery_point_ts
    table.add_row("tenant", f"{t.name}@{t.id}")
    table.add_row(
        "recovery point",
        Text(
            "none: no finished backup"
            if point is None
            else f"{local_time(point)} ({_ago(t.recovery_point_age_us)}), the newest backup's",
            style=_STYLE[t.verdict],
        ),
    )
    table.add_row(
        "objective",
        Text(
            f"none (`rewind tenant set {t.name} --rpo 1h` sets one)"
            if t.objective_us is None
            else f"{format_duration(t.objective_us)}: {t.verdict}",
            style=_STYLE[t.verdict],
        ),
    )
    s = t.snapshot
    table.add_row(
        "snapshot",
        "none"
        if s is None
        else f"{s.name} at {local_time(s.ts)} ({_ago(s.age_us)}); {plural(s.count, 'snapshot')}",
    )
    p = t.pitr
    table.add_row(
        "PITR",
        "off"
        if p is None
        else f"{format_duration(p.window_us)} window, reaching back {format_age(p.reach_us)} "
        f"to {local_time(p.start_ts)}"
        + ("" if p.full else f" (on since {local_time(p.since_ts)})"),
    )
    d = t.drill
    table.add_row(
        "last drill",
        "none"
        if d is None
        else f"{d.state} {_ago(max(now - (d.ended_us or d.started_us), 0))}"
        + (f": {redact(d.error)}" if d.error else ""),
    )
    table.add_row(
        "storage",
        "\n".join(
            f"{kind}: {plural(v.objects, 'object')}, {human_bytes(v.bytes)}"
            for kind, v in sorted(t.storage.items())
        )
        or "nothing",
    )
    parts: list[Any] = [table]
    if t.backups:
        backups = titled(f"newest backup of {t.name} per destination")
        wrapping(backups, "destination")
        fixed(backups, "method")
        wrapping(backups, "backup")
        wrapping(backups, "point")
        fixed(backups, "age", right=True)
        fixed(backups, "size", right=True)
        for b in t.backups:
            backups.add_row(
                *map(
                    Text,
                    (
                        redact(b.target),
                        b.method or "",
                        b.backup_id or "",
                        local_time(b.point_ts),
                        format_age(b.age_us),
                        "" if b.bytes is None else human_bytes(b.bytes),
                    ),
                )
            )
        parts.append(backups)
    if t.jobs:
        parts.append(jobs_table(f"jobs of {t.name}", t.jobs))
    return parts


_JOB_AND_START = Stack(("job", "started"))


def jobs_table(title: str, jobs: tuple[Job, ...]) -> Table:
    """A row per job: its id over its start (``--wide``: a column each), the rest
    of the width for what it did and how it failed."""
    table = titled(title)
    fixed(table, "kind")
    fixed(table, "state")
    _JOB_AND_START.add_to(table)
    wrapping(table, "detail")
    for j in jobs:
        detail = "; ".join(
            redact(x)
            for x in (j.method, j.target, j.error, None if j.state != "stale" else j.holder)
            if x
        )
        started = "" if j.started_us is None else local_time(j.started_us)
        table.add_row(
            Text(j.kind),
            Text(j.state, style=_JOB_STYLE[j.state]),
            *map(Text, _JOB_AND_START.cells(j.id, started)),
            Text(detail),
        )
    return table


# JSON: raw ts, µs and bytes beside their ISO-8601 UTC times


def _at(ts: int | None) -> str | None:
    return None if ts is None else format_ts(ts)


def job_json(j: Job) -> dict[str, Any]:
    return {
        "kind": j.kind,
        "id": j.id,
        "state": j.state,
        "tenant": j.tenant,
        "target": None if j.target is None else redact(j.target),
        "method": j.method,
        "started_us": j.started_us,
        "started": _at(j.started_us),
        "error": None if j.error is None else redact(j.error),
        "holder": j.holder,
    }


def run_json(r: LastRun | None) -> dict[str, Any] | None:
    if r is None:
        return None
    return {
        "id": r.id,
        "kind": r.kind,
        "state": r.state,
        "method": r.method,
        "target": None if r.target is None else redact(r.target),
        "backup_id": r.backup_id,
        "started_us": r.started_us,
        "started": _at(r.started_us),
        "ended_us": r.ended_us,
        "ended": _at(r.ended_us),
        "error": None if r.error is None else redact(r.error),
    }


def tenant_status_json(t: TenantStatus) -> dict[str, Any]:
    s, p = t.snapshot, t.pitr
    return {
        "tenant": t.name,
        "id": t.id,
        "healthy": t.healthy,
        "objective_us": t.objective_us,
        "objective": None if t.objective_us is None else format_duration(t.objective_us),
        "verdict": t.verdict,
        "recovery_point_ts": t.recovery_point_ts,
        "recovery_point": _at(t.recovery_point_ts),
        "recovery_point_age_us": t.recovery_point_age_us,
        "snapshot": None
        if s is None
        else {"name": s.name, "ts": s.ts, "at": _at(s.ts), "age_us": s.age_us, "count": s.count},
        "pitr": None
        if p is None
        else {
            "window_us": p.window_us,
            "since_ts": p.since_ts,
            "start_ts": p.start_ts,
            "start": _at(p.start_ts),
            "reach_us": p.reach_us,
            "full": p.full,
        },
        "backups": [
            {
                "target": redact(b.target),
                "method": b.method,
                "backup_id": b.backup_id,
                "point_ts": b.point_ts,
                "point": _at(b.point_ts),
                "age_us": b.age_us,
                "ended_us": b.ended_us,
                "bytes": b.bytes,
            }
            for b in t.backups
        ],
        "jobs": [job_json(j) for j in t.jobs],
        "last_drill": run_json(t.drill),
        "storage": {
            kind: {"objects": v.objects, "bytes": v.bytes} for kind, v in sorted(t.storage.items())
        },
    }


def status_json(report: StatusReport) -> dict[str, Any]:
    """One object: the time, whether all is well, the tenants worst first, the warehouse."""
    return {
        "now_ts": report.now_ts,
        "now": format_ts(report.now_ts),
        "healthy": report.healthy,
        "tenants": [tenant_status_json(t) for t in report.tenants],
        "warehouse": {
            "gc": [run_json(r) for r in report.gc],
            "jobs": [job_json(j) for j in report.warehouse_jobs],
        },
    }
