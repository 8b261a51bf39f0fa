"""Rich tables and JSON for restore plans, outcomes and tenant history."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from engine.executors.task import worker_name
from engine.pipeline import ACTIONS, RestorePlan
from engine.restore.history import CommitRecord, History
from engine.restore.job import RestoreOutcome
from engine.restore.journal import JobRecord
from tenants.times import format_ts


def human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


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


def plan_table(plan: RestorePlan, executor: str, reason: str = "") -> Table:
    where = where_to(plan)
    table = Table(
        title=f"restore plan {plan.job_id}: {plan.source.ref} to {plan.at_label} "
        f"(ts {plan.at_ts}, {format_ts(plan.at_ts)}) {where}",
        caption=f"method physical, executor {executor}" + (f" ({reason})" if reason else "") + ", "
        f"{len(plan.tasks)} rewrite task(s), {len(plan.snapshots)} snapshot(s) carried",
    )
    table.add_column("table")
    for action in ACTIONS:
        table.add_column(f"{action} objs", justify="right")
        table.add_column(f"{action} bytes", justify="right")
    for t in plan.tables:
        totals = t.totals()
        name = t.qualified + (" (dropped)" if t.dropped_ts is not None else "")
        if t.out_qualified != t.qualified:
            name += f" -> {t.out_qualified}"
        table.add_row(
            name, *[c for a in ACTIONS for c in (f"{totals[a][0]:,}", human_bytes(totals[a][1]))]
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


def plan_json(plan: RestorePlan, executor: str, reason: str = "") -> dict[str, Any]:
    return {
        "job_id": plan.job_id,
        "source": plan.source.ref,
        "target": plan.target_name,
        "scope": plan.scope,
        "mode": plan.mode,
        "replaces_tables": len(plan.replaced_table_ids),
        "method": "physical",
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


def outcome_json(outcome: RestoreOutcome) -> dict[str, Any]:
    totals = outcome.plan.totals()
    return {
        "job_id": outcome.job_id,
        "state": "done",
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
    }


def outcome_lines(outcome: RestoreOutcome) -> list[str]:
    data = outcome_json(outcome)
    what = (
        f"{', '.join(data['tables']) or 'no table'} of tenant {outcome.tenant.ref}"
        if data["tables"] is not None
        else f"tenant {outcome.tenant.ref}"
    )
    head = (
        f"restore job {outcome.job_id} done ({outcome.method}): {what} at "
        f"{outcome.plan.at_label} (ts {outcome.plan.at_ts})"
    )
    if outcome.method == "logical":
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


def job_json(job: JobRecord) -> dict[str, Any]:
    return {
        "job_id": job.id,
        "state": job.state,
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


def history_tables(hist: History) -> list[Table]:
    lineage = Table(title="lineage (newest first)")
    for col in (
        "tenant",
        "state",
        "created",
        "dropped",
        "retained until",
        "restored from",
        "at ts",
        "job",
    ):
        lineage.add_column(col, overflow="fold")
    for t in hist.lineage:
        lineage.add_row(
            t.ref,
            t.state,
            format_ts(t.created_ts),
            "" if t.dropped_ts is None else format_ts(t.dropped_ts),
            "" if t.retain_until is None else format_ts(t.retain_until),
            t.source_tenant_id or "",
            "" if t.source_ts is None else str(t.source_ts),
            t.restore_job_id or "",
        )
    jobs = Table(title="restore jobs")
    for col in ("job", "state", "mode", "source", "target", "to", "created", "installed", "error"):
        jobs.add_column(col, overflow="fold")
    for job in hist.jobs:
        j = job_json(job)
        jobs.add_row(
            j["job_id"],
            j["state"],
            j["mode"] if j["scope"] == "tenant" else f"{j['scope']} {j['mode']}",
            j["source"],
            j["target"],
            j["at"]["label"],
            j["created"],
            j["installed"] or "",
            (job.error or "")[:120],
        )
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


def commits_table(tenant: str, commits: list[CommitRecord]) -> Table:
    table = Table(
        title=f"commits of {tenant} (newest first)",
        caption="restore to just before one with --before TS",
    )
    for col, justify in (
        ("ts", "right"),
        ("time", "left"),
        ("table", "left"),
        ("kind", "left"),
        ("upserted", "right"),
        ("deleted", "right"),
        ("bytes", "right"),
        ("tenant", "left"),
    ):
        table.add_column(col, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for c in commits:
        table.add_row(
            str(c.ts),
            format_ts(c.ts),
            c.table,
            c.kind,
            f"{c.upserted:,}" if c.kind == "write" else "",
            f"{c.deleted:,}" if c.kind == "write" else "",
            human_bytes(c.bytes) if c.bytes else "",
            c.tenant,
        )
    return table
