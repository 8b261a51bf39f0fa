"""Rich tables and JSON for restore plans, outcomes and tenant history."""

from __future__ import annotations

from itertools import groupby
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

from engine.cli.render_layout import (
    WIDE,
    Stack,
    fixed,
    human_bytes,
    local_time,
    local_time_or_blank,
    titled,
    wrapping,
)
from engine.pipeline import ACTIONS, Installed, RestorePlan
from tenants.times import format_ts

if TYPE_CHECKING:
    from engine.restore.history import CommitRecord, History
    from engine.restore.job import RestoreOutcome
    from engine.restore.journal import JobRecord


def where_to(plan: RestorePlan) -> str:
    """Where a plan installs, in words: a tenant in place or as a clone, or tables
    into a tenant that exists."""
    if plan.into_existing_tenant:
        names = ", ".join(t.out_qualified for t in plan.tables) or "no table"
        how = "in place" if plan.mode == "in_place" else "beside the source"
        return f"{plan.scope} {how}: {names} in tenant {plan.target_name!r}"
    if plan.mode == "in_place":
        return f"into {plan.target_name!r} in place"
    return f"as clone {plan.target_name!r}"


def plan_table(
    plan: RestorePlan,
    executor: str,
    reason: str = "",
    *,
    method: str = "physical",
    instant: bool = False,
) -> Table:
    """Objects and bytes per table and action. Each action's count and size sit
    in two narrow columns under a two-line header, so seven columns and a long
    table name fit in 100. The caption says how the job runs: its method, an
    instant job's install first, its executor and why."""
    where = where_to(plan)
    # A time named by its ts is labelled with it: say it once.
    ts = "" if plan.at_label == str(plan.at_ts) else f"ts {plan.at_ts}, "
    table = titled(
        f"restore plan {plan.job_id}: {plan.source.ref} to {plan.at_label} "
        f"({ts}{local_time(plan.at_ts)}) {where}",
        caption=f"method {method}"
        + (", instant (installed first, rewritten after)" if instant else "")
        + f", executor {executor}"
        + (f" ({reason})" if reason else "")
        + f", {len(plan.tasks)} rewrite task(s), {len(plan.snapshots)} snapshot(s) carried",
    )
    wrapping(table, "table")
    for action in ACTIONS:
        fixed(table, f"{action}\nobjects", right=True)
        fixed(table, f"{action}\nsize", right=True)
    for t in plan.tables:
        totals = t.totals()
        name = t.qualified + (" (dropped)" if t.dropped_ts is not None else "")
        if t.out_qualified != t.qualified:
            name += f" -> {t.out_qualified}"
        table.add_row(
            Text(name),
            *[Text(c) for a in ACTIONS for c in (f"{totals[a][0]:,}", human_bytes(totals[a][1]))],
        )
    totals = plan.totals()
    table.add_row(
        Text("total", style="bold"),
        *[
            Text(c, style="bold")
            for a in ACTIONS
            for c in (f"{totals[a][0]:,}", human_bytes(totals[a][1]))
        ],
    )
    return table


def plan_json(
    plan: RestorePlan, executor: str, reason: str = "", *, instant: bool = False
) -> dict[str, Any]:
    return {
        "job_id": plan.job_id,
        "source": plan.source.ref,
        "target": plan.target_name,
        "scope": plan.scope,
        "mode": plan.mode,
        "replaces_tables": len(plan.replaced_table_ids),
        "method": "physical",
        "instant": instant,
        "executor": executor,
        "executor_reason": reason,
        "at": {"label": plan.at_label, "ts": plan.at_ts, "iso": format_ts(plan.at_ts)},
        "totals": {a: {"objects": c, "bytes": b} for a, (c, b) in plan.totals().items()},
        "tables": [
            {
                "table": t.qualified,
                "to": t.out_qualified,
                "dropped": t.dropped_ts is not None,
                **{a: {"objects": c, "bytes": b} for a, (c, b) in t.totals().items()},
            }
            for t in plan.tables
        ],
        "tasks": len(plan.tasks),
        "snapshots_carried": [s.name for s in plan.snapshots],
    }


def outcome_json(outcome: RestoreOutcome, usable_after_s: float | None = None) -> dict[str, Any]:
    """The outcome for ``--json``. ``usable_after_s``: how long after the command
    began the result could be read (an instant job's install, else its end; 0
    for a resumed job whose result was installed before the command began)."""
    from engine.executors.task import worker_name

    totals = outcome.plan.totals()
    return {
        "job_id": outcome.job_id,
        # --no-wait returns an instant job after its install, its rewrite journaled
        "state": "rewriting" if outcome.rewrite_pending else "done",
        "scope": outcome.plan.scope,
        "tenant": outcome.tenant.ref,
        "tables": [t.out_qualified for t in outcome.plan.tables]
        if outcome.plan.into_existing_tenant
        else None,
        "retired": None
        if outcome.plan.replaced_tenant_id is None
        else f"{outcome.plan.target_name}@{outcome.plan.replaced_tenant_id}",
        "method": outcome.method,
        "executor": outcome.executor,
        "executor_reason": outcome.executor_reason,
        "driver": worker_name(),
        "workers": list(outcome.workers),
        "rewritten_objects": outcome.rewritten,
        "bytes_written": outcome.bytes_written,
        "bytes_reused": totals["reuse"][1],
        "objects_verified": outcome.objects_verified,
        "prefixes_listed": outcome.prefixes_listed,
        "tables_compared": outcome.tables_compared,
        "seconds": outcome.seconds,
        "instant": outcome.instant,
        "rewrite_pending": outcome.rewrite_pending,
        "installed_ts": outcome.installed_ts,
        "installed": None if outcome.installed_ts is None else format_ts(outcome.installed_ts),
        "usable_after_s": None if usable_after_s is None else round(usable_after_s, 3),
    }


def outcome_lines(outcome: RestoreOutcome, usable_after_s: float | None = None) -> list[str]:
    data = outcome_json(outcome, usable_after_s)
    what = (
        f"{', '.join(data['tables']) or 'no table'} of tenant {outcome.tenant.ref}"
        if data["tables"] is not None
        else f"tenant {outcome.tenant.ref}"
    )
    at = f"{outcome.plan.at_label} (ts {outcome.plan.at_ts}, {local_time(outcome.plan.at_ts)})"
    head = f"restore job {outcome.job_id} done ({outcome.method}): {what} at {at}"
    if outcome.rewrite_pending:
        lines = [
            f"restore job {outcome.job_id} installed ({outcome.method}, instant): {what} at {at}",
            f"reused {totals_line(outcome.plan)} without copying",
            *pending_lines(outcome.plan, outcome.job_id),
        ]
    elif outcome.method == "logical":
        lines = [
            head,
            f"dumped and reloaded {outcome.tables_compared} table(s), "
            f"{human_bytes(outcome.bytes_written)} of dump files; counts and content hashes "
            "matched the dump before the swap",
        ]
    else:
        compared = (
            f", {outcome.tables_compared} table(s) compared in full"
            if outcome.tables_compared
            else ""
        )
        lines = [
            head,
            f"rewrote {outcome.rewritten} object(s), {human_bytes(outcome.bytes_written)} written; "
            f"reused {totals_line(outcome.plan)} without copying",
            f"verified {outcome.objects_verified} object(s) by listing {outcome.prefixes_listed} "
            f"prefix(es){compared}",
        ]
        if outcome.instant:
            if usable_after_s is None:
                usable = ""
            elif usable_after_s == 0:  # a resumed job that had installed
                usable = ", usable before this command began"
            else:
                usable = f", usable after {usable_after_s:.2f}s"
            lines.append(
                f"installed first{usable}; then rewrote, verified and swapped in "
                f"{outcome.rewritten} straddling object(s)"
            )
        if outcome.workers:
            lines.append(
                f"rewrite tasks ran on {outcome.executor} in {len(outcome.workers)} process(es): "
                f"{', '.join(outcome.workers[:4])}{' ...' if len(outcome.workers) > 4 else ''} "
                f"(driver {data['driver']})"
            )
    if outcome.plan.replaced_table_ids:
        lines.append(undo_line(outcome))
    if data["retired"]:
        lines.append(
            f"the previous tenant {data['retired']} is retired; undo with "
            f"`rewind tenant undrop {data['retired']} --as NEW_NAME` or restore again"
        )
    lines.append("timings: " + ", ".join(f"{k} {v:.2f}s" for k, v in outcome.seconds.items()))
    return lines


def installed_what(plan: RestorePlan, ref: str) -> tuple[str, bool]:
    """What a job installs, in words (``tenant acme@1f2e``, ``shop.orders of
    tenant acme@1f2e``), and whether that is several things (``are`` usable)."""
    if not plan.into_existing_tenant:
        return f"tenant {ref}", False
    names = [t.out_qualified for t in plan.tables]
    return f"{', '.join(names) or 'no table'} of tenant {ref}", len(names) > 1


def usable_line(plan: RestorePlan, installed: Installed, *, wait: bool) -> str:
    """What an instant restore prints the moment its install commits: the data
    is usable now; the straddlers' rewrite follows in this command, or (``wait``
    false) is left journaled."""
    what, several = installed_what(plan, installed.tenant.ref)
    head = f"{what} {'are' if several else 'is'} usable (installed at {local_time(installed.ts)})"
    if not plan.tasks:
        return f"{head}; nothing to rewrite"
    if wait:
        return f"{head}; rewriting {straddlers(plan)} in the background of this command"
    return (
        f"{head}; its {straddlers(plan)} are read through a cut at ts {plan.at_ts} until rewritten"
    )


def straddlers(plan: RestorePlan) -> str:
    count, size = plan.totals()["rewrite"]
    return f"{count} straddling object(s) ({human_bytes(size)})"


def pending_lines(plan: RestorePlan, job_id: str) -> list[str]:
    """What ``--no-wait`` left of an instant job, and how to finish (or drop) it."""
    name = plan.target_name if plan.into_existing_tenant else plan.source.name
    left = (
        f"the rewrite of {straddlers(plan)} is pending; until then they are read through a "
        f"cut at ts {plan.at_ts}: correct, only slower to scan"
        if plan.tasks
        else "nothing is left to rewrite; the job still holds the source's objects until it ends"
    )
    return [
        left,
        f"finish it with `rewind restore-{plan.scope} {name} --resume {job_id}` (on any host), "
        f"or drop only the rewrite with `rewind restore-{plan.scope} {name} --cancel {job_id}` "
        "(the restored data stays as it is, correct)",
    ]


def cancelled_line(job: JobRecord) -> str:
    """What ``--cancel`` did: an instant job that installed keeps its result."""
    if job.installed_ts is None:
        return f"restore job {job.id} cancelled: its outputs and pins are removed"
    what, several = installed_what(job.plan, f"{job.plan.target_name}@{job.plan.new_tenant_id}")
    return (
        f"restore job {job.id}: only its rewrite was cancelled; {what} "
        f"{'stay' if several else 'stays'} installed and correct, reading the straddling "
        f"objects not yet swapped through their cut at ts {job.plan.at_ts} (the unused "
        "rewritten copies are deleted)"
    )


def undo_line(outcome: RestoreOutcome) -> str:
    """How to undo an in-place table or database restore."""
    plan = outcome.plan
    if plan.scope == "table" and plan.tables:
        named = plan.tables[0].out_qualified
    else:
        named = plan.tables[0].out_database if plan.tables else "DB"
    return (
        f"the {len(plan.replaced_table_ids)} table(s) it replaced stay readable at times before "
        "the restore while a snapshot or the PITR window reaches back; undo with "
        f"`rewind restore-{plan.scope} {plan.target_name} {named} --before {outcome.installed_ts}`"
        f" (inside the PITR window), or bring a replaced table back beside the new one with "
        f"`rewind table undrop {plan.target_name} DB.TABLE --as DB.OTHER`"
    )


def totals_line(plan: RestorePlan) -> str:
    count, size = plan.totals()["reuse"]
    return f"{count} object(s), {human_bytes(size)}"


# An installed instant job's state, in words: its install is done, this step is not.
_AFTER_INSTALL = {
    "rewriting": "rewriting",
    "verifying": "verifying",
    "installing": "swapping",
    "failed": "rewrite failed",
    "cancelled": "rewrite cancelled",
}


def job_phase(job: JobRecord) -> str:
    """The job's state as a person reads it. An instant job that installed its
    result is usable whatever its state says: ``installed; rewriting``, or
    ``installed; rewrite pending`` when no process runs it (``--no-wait``, or a
    process that died), ``installed; rewrite cancelled`` ..."""
    from engine.restore.lease import lease_live

    if not job.instant or job.installed_ts is None or job.state == "done":
        return job.state
    doing = _AFTER_INSTALL.get(job.state, job.state)
    if job.state in ("rewriting", "verifying", "installing") and not lease_live(job.lease_row):
        doing = "rewrite pending"
    return f"installed; {doing}"


def job_json(job: JobRecord) -> dict[str, Any]:
    return {
        "job_id": job.id,
        "state": job.state,
        "phase": job_phase(job),
        "instant": job.instant,
        "scope": job.plan.scope,
        "mode": job.plan.mode,
        "source": job.plan.source.ref,
        "target": job.plan.target_name,
        "at": {"label": job.plan.at_label, "ts": job.plan.at_ts, "iso": format_ts(job.plan.at_ts)},
        "method": job.method,
        "executor": job.executor,
        "verify": job.verify,
        "created_ts": job.created_ts,
        "created": format_ts(job.created_ts),
        "installed_ts": job.installed_ts,
        "installed": None if job.installed_ts is None else format_ts(job.installed_ts),
        "error": job.error,
    }


_TENANT_TIMES = Stack(
    ("created", "dropped", "kept until"),
    header="times",
    labels=("created", "dropped", "kept until"),
)
_RESTORED_FROM = Stack(
    ("restored from", "at", "by job"), header="restored from", labels=("", "at", "by job")
)
_JOB_RESTORE = Stack(
    ("mode", "source", "target", "to"), header="restore", labels=("", "from", "into", "to")
)
_JOB_TIMES = Stack(("created", "installed"), header="times", labels=("created", "installed"))


def history_tables(hist: History) -> list[Table]:
    """The lineage and the restore jobs. A row's times stack in one cell (a
    label and a time a line), as do where a tenant was restored from and what
    a job did, so each table fits 100 columns and a long tenant name still has
    room; ``--wide`` gives each its own column."""
    refs = {t.id: t.ref for t in hist.lineage}  # a source in the lineage, by name@id
    lineage = titled("lineage (newest first)")
    wrapping(lineage, "tenant")
    fixed(lineage, "state")
    _TENANT_TIMES.add_to(lineage)
    _RESTORED_FROM.add_to(lineage)
    for t in hist.lineage:
        times = _TENANT_TIMES.cells(
            local_time(t.created_ts),
            local_time_or_blank(t.dropped_ts),
            local_time_or_blank(t.retain_until),
        )
        source = _RESTORED_FROM.cells(
            refs.get(t.source_tenant_id or "", t.source_tenant_id),
            local_time_or_blank(t.source_ts),
            t.restore_job_id,
        )
        lineage.add_row(*map(Text, (t.ref, t.state, *times, *source)))
    jobs = titled("restore jobs")
    wrapping(jobs, "job")
    fixed(jobs, "state")
    _JOB_RESTORE.add_to(jobs)
    _JOB_TIMES.add_to(jobs)
    any_error = any(job.error for job in hist.jobs)
    if any_error:
        wrapping(jobs, "error")
    for job in hist.jobs:
        plan = job.plan
        mode = plan.mode if plan.scope == "tenant" else f"{plan.scope} {plan.mode}"
        phase = job_phase(job)
        cells = [
            job.id,
            phase if WIDE.get() else phase.replace("; ", ";\n"),
            *_JOB_RESTORE.cells(
                mode.replace("_", " "), plan.source.ref, plan.target_name, plan.at_label
            ),
            *_JOB_TIMES.cells(local_time(job.created_ts), local_time_or_blank(job.installed_ts)),
        ]
        if any_error:
            cells.append(job.error or "")
        jobs.add_row(*map(Text, cells))
    return [lineage, jobs]


def commit_json(commit: CommitRecord) -> dict[str, Any]:
    return {
        "ts": commit.ts,
        "time": format_ts(commit.ts),
        "tenant": commit.tenant,
        "table": commit.table,
        "kind": commit.kind,
        "rows_upserted": commit.upserted,
        "rows_deleted": commit.deleted,
        "objects": commit.objects,
        "bytes": commit.bytes,
    }


_COMMIT_TIME = Stack(("ts", "time"))


def commits_table(tenant: str, commits: list[CommitRecord]) -> list[Table]:
    """The commits, newest first: one table per tenant of the lineage that made
    them, named ``name@id`` in its title, rather than a column repeating it
    (under ``--wide``, one table with a ``tenant`` column, a commit a line).

    Each commit's ts, what ``--before`` takes, sits over its time in one cell.
    """
    if WIDE.get() or not commits:
        groups: list[tuple[str | None, list[CommitRecord]]] = [(None, commits)]
    else:
        groups = [(ref, list(found)) for ref, found in groupby(commits, key=lambda c: c.tenant)]
    tables = []
    for i, (ref, found) in enumerate(groups):
        table = titled(
            f"commits of {ref or tenant} (newest first)" if i == 0 else f"older commits, of {ref}",
            caption="restore to just before one with --before TS" if i == len(groups) - 1 else None,
        )
        _COMMIT_TIME.add_to(table)
        wrapping(table, "table")
        fixed(table, "kind")
        fixed(table, "rows", right=True)
        fixed(table, "size", right=True)
        if ref is None:
            wrapping(table, "tenant")
        for c in found:
            cells = [
                *_COMMIT_TIME.cells(str(c.ts), local_time(c.ts)),
                c.table,
                c.kind,
                _row_changes(c) if c.kind == "write" else "",
                human_bytes(c.bytes) if c.bytes else "",
            ]
            if ref is None:
                cells.append(c.tenant)
            table.add_row(*map(Text, cells))
        tables.append(table)
    return tables


def _row_changes(commit: CommitRecord) -> str:
    """``+3`` rows upserted, ``-1`` deleted, ``+3 -1`` both: one short column for two counts."""
    parts = [
        f"+{commit.upserted:,}" if commit.upserted else "",
        f"-{commit.deleted:,}" if commit.deleted else "",
    ]
    return " ".join(p for p in parts if p) or "0"
