"""``rewind restore-tenant`` and ``rewind history``.

The command is a thin shell over engine.restore: plan (print it; stop on
``--dry-run``), then run the journaled job with a progress bar over tasks and
bytes. The job's plan is printed as soon as the job starts (a long rewrite
shows what it does while it runs, not after); an instant job also says the
moment its result is usable, before its rewrite (:class:`JobWatch`).
``--resume`` and ``--cancel`` act on an existing job.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import RenderableType

from engine.cli import render
from engine.cli.background import background_nice, run_in_background
from engine.cli.choices import ExecutorOption, MethodOption, VerifyOption
from engine.cli.confirm import YesOption, confirm
from engine.cli.context import cli_state, table_arg, tenant_arg
from engine.cli.options import (
    AtOption,
    BeforeOption,
    InstantOption,
    NoWaitOption,
    RewriteFirstOption,
    SnapshotOption,
    count_parser,
    instant_choice,
    snapshot_or_time,
)
from engine.cli.restore_render import (
    cancelled_line,
    commit_json,
    commits_table,
    history_tables,
    job_json,
    outcome_json,
    outcome_lines,
    plan_json,
    plan_table,
    usable_line,
)
from engine.pipeline import Installed, RestorePlan
from tenants.errors import InvalidArgument
from tenants.names import tenant_name
from tenants.observe import events
from tenants.store import TableStore
from tenants.times import format_ts, typed_ts

if TYPE_CHECKING:
    from engine.restore.job import Proposal, RestoreOutcome, Started


def restore_tenant_cmd(
    ctx: typer.Context,
    tenant: Annotated[
        str,
        typer.Argument(
            metavar="TENANT", help="Tenant to restore (name, or name@id).", show_default=False
        ),
    ],
    snapshot: SnapshotOption = None,
    at: AtOption = None,
    before: BeforeOption = None,
    to: Annotated[
        str | None,
        typer.Option(
            "--to",
            metavar="NEW_TENANT",
            help="Restore into a new tenant of this name (clone); the source is left alone.",
        ),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan and stop.")] = False,
    yes: YesOption = False,
    executor: ExecutorOption = "auto",
    verify: VerifyOption = "objects",
    method: MethodOption = "auto",
    instant: InstantOption = False,
    rewrite_first: RewriteFirstOption = False,
    no_wait: NoWaitOption = False,
    resume: Annotated[
        str | None,
        typer.Option(
            "--resume",
            metavar="JOB",
            help="Finish an interrupted or failed job, or an instant one's rewrite.",
        ),
    ] = None,
    cancel: Annotated[
        str | None,
        typer.Option(
            "--cancel",
            metavar="JOB",
            help="Cancel a job: a running one is asked to stop (this waits for it); "
            "its outputs and pins are removed. A done job is never cancelled; an instant "
            "job that installed has only its rewrite cancelled (the tenant stays, correct).",
        ),
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print machine-readable JSON.")
    ] = False,
) -> None:
    """Restore a tenant to a snapshot or protected time.

    Physically, objects wholly inside the snapshot are reused without copying;
    only objects that straddle it are rewritten. One catalog transaction
    installs the new tenant; in place, the old one is retired (kept, undoable).
    With --instant that install comes first, so the tenant is usable at once.

    Examples:
      rewind restore-tenant acme --snapshot mon --dry-run
      rewind restore-tenant acme --snapshot mon --to acme_mon
      rewind restore-tenant acme --snapshot mon --instant --yes
    """
    from engine.restore.history import before_commit
    from engine.restore.job import propose, run_restore
    from engine.restore.plan import plan_restore

    state = cli_state(ctx)
    as_json = json_output or state.json
    tenant_arg(tenant)
    if to is not None:
        tenant_name(to)
    if cancel or resume:
        if snapshot or at or before or to or dry_run or instant or rewrite_first or no_wait:
            raise InvalidArgument(
                "--resume/--cancel take only a job id, not --snapshot/--at/--before/--to/"
                "--dry-run/--instant/--rewrite-first/--no-wait"
            )
        job_action(state.store(), tenant, resume, cancel, as_json)
        return
    installs_first = instant_choice(instant, rewrite_first, no_wait, method=method)
    point = restore_point(
        snapshot, at, before, lambda: before_commit(state.store().catalog, tenant, before or "")
    )
    store = state.store()
    ctx.with_resource(events.job("restore", tenant))  # a failed plan's event names the tenant

    def make_plan() -> RestorePlan:
        return plan_restore(store.catalog, tenant, point, to=to)

    shown: list[Proposal] = []  # the plan a user saw, if any: the one the job runs

    def proposal() -> Proposal:
        if not shown:
            shown.append(propose(make_plan, executor=executor, method=method))
        return shown[0]

    def table_of(made: Proposal) -> RenderableType:
        return plan_table(
            made.plan,
            made.executor.name,
            made.executor.reason,
            method=made.method,
            instant=installs_first and made.method == "physical",
        )

    def question_plan() -> list[RenderableType]:
        made = proposal()
        retired = f"{made.plan.target_name}@{made.plan.replaced_tenant_id}"
        return [
            table_of(made),
            f"method {made.method_reason}",
            f"the current tenant {retired} is retired, not deleted: `rewind tenant undrop "
            f"{retired} --as NEW_NAME` or another restore brings it back while it is retained",
        ]

    if dry_run:
        made = proposal()
        if as_json:
            render.emit_json(
                plan_json(
                    made.plan,
                    made.executor.name,
                    made.executor.reason,
                    instant=installs_first and made.method == "physical",
                )
                | {"method": made.method, "method_reason": made.method_reason}
            )
        else:
            render.show_all(
                [table_of(made), f"method {made.method_reason}", "dry run: nothing was changed"]
            )
        return
    if to is None:  # in place: the live tenant is replaced (and retired, undoable)
        confirm(
            f"replace tenant {tenant} with its state at {point_words(snapshot, at, before)}",
            yes=yes,
            as_json=as_json,
            plan=question_plan,
        )
    watch = JobWatch(as_json, wait=not no_wait, nice=background_nice())
    outcome = run_restore(
        store, make_plan, executor=executor, verify=verify, method=method,
        instant=installs_first, wait=not no_wait,
        on_started=watch.started, on_installed=watch.installed,
        proposal=shown[0] if shown else None,
    )  # fmt: skip
    watch.done(outcome)


@dataclass
class JobWatch:
    """A restore command's running account of its job, on stdout as it happens:
    the plan when the job starts (not after a long rewrite), the moment an
    instant job's result is usable, then the outcome. Under ``--json`` it prints
    nothing until the one outcome object, which says how soon the result was
    usable (``usable_after_s``)."""

    as_json: bool
    wait: bool = True
    began: float = field(default_factory=time.perf_counter)
    plan: RestorePlan | None = None
    usable_after_s: float | None = None

    def started(self, started: Started) -> None:
        self.plan = started.plan
        if not self.as_json:
            render.show(
                plan_table(
                    started.plan,
                    started.executor,
                    started.executor_reason,
                    method=started.method,
                    instant=started.instant,
                )
            )

    nice: int = 0  # how much the background rewrite lowers the CPU priority

    def installed(self, installed: Installed) -> None:
        self.usable_after_s = time.perf_counter() - self.began
        if not self.as_json and self.plan is not None:
            render.say(usable_line(self.plan, installed, wait=self.wait))
        if self.wait:  # what follows is background work (engine.cli.background)
            run_in_background(self.nice)

    def done(self, outcome: RestoreOutcome) -> None:
        if self.usable_after_s is None:  # installed at the end: usable now
            self.usable_after_s = time.perf_counter() - self.began
        print_outcome(outcome, self.as_json, usable_after_s=self.usable_after_s, plan_shown=True)


def job_action(
    store: TableStore, tenant: str, resume: str | None, cancel: str | None, as_json: bool
) -> None:
    from engine.restore.job import cancel_restore, resume_restore
    from engine.restore.journal import load_job

    if resume and cancel:
        raise InvalidArgument("give either --resume JOB or --cancel JOB, not both")
    job_id = resume or cancel
    assert job_id is not None
    job = load_job(store.catalog, job_id)
    if tenant.split("@")[0] not in (job.plan.target_name, job.plan.source.name):
        raise InvalidArgument(
            f"restore job {job_id} belongs to tenant {job.plan.target_name!r}, not {tenant!r}"
        )
    if cancel:
        job = cancel_restore(store, job_id)
        if as_json:
            render.emit_json(job_json(job))
        else:
            render.say(cancelled_line(job))
        return
    if not as_json:  # what the resumed job will do, before it does it
        render.show(
            plan_table(
                job.plan,
                job.executor,
                "recorded with the job when it was planned",
                method=job.method,
                instant=job.instant,
            )
        )
    began = time.perf_counter()
    outcome = resume_restore(store, job_id)
    # An instant job that had installed was usable before this command began.
    usable = 0.0 if job.installed_ts is not None else time.perf_counter() - began
    print_outcome(outcome, as_json, usable_after_s=usable, plan_shown=True)


def print_outcome(
    outcome: RestoreOutcome,
    as_json: bool,
    *,
    usable_after_s: float | None = None,
    plan_shown: bool = False,
) -> None:
    """The outcome: one JSON object, or (unless ``plan_shown`` when the job
    started) the plan, then what the job did."""
    if as_json:
        render.emit_json(outcome_json(outcome, usable_after_s))
        return
    if not plan_shown:
        render.show(
            plan_table(
                outcome.plan,
                outcome.executor,
                outcome.executor_reason,
                method=outcome.method,
                instant=outcome.instant,
            )
        )
    for line in outcome_lines(outcome, usable_after_s):
        render.say(line)


def history_cmd(
    ctx: typer.Context,
    tenant: Annotated[
        str, typer.Argument(metavar="TENANT", help="Tenant name (or name@id).", show_default=False)
    ],
    commits: Annotated[
        bool,
        typer.Option(
            "--commits",
            help="List commits instead (newest first: ts, time, table, rows), to find a bad "
            "one and restore to just before it with --before TS.",
        ),
    ] = False,
    table: Annotated[
        str | None,
        typer.Option("--table", metavar="DB.TABLE", help="With --commits: only this table's."),
    ] = None,
    limit: Annotated[
        int,
        typer.Option(
            "--limit",
            metavar="N",
            parser=count_parser("--limit"),
            help="With --commits: how many to list.",
        ),
    ] = 50,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet",
            "-q",
            help="With --commits: print only each commit's ts, one a line (for scripts: "
            "TS=$(rewind history acme --commits --limit 1 -q)).",
        ),
    ] = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print machine-readable JSON.")
    ] = False,
) -> None:
    """Show a tenant's lineage (restores, retired ids) and its restore jobs, or its commits.

    Examples:
      rewind history acme
      rewind history acme --commits --table shop.orders
    """
    from engine.restore.history import commit_history
    from engine.restore.history import history as load_history

    state = cli_state(ctx)
    as_json = state.json or json_output
    tenant_arg(tenant)
    if table is not None:
        table_arg(table)
    for option, given in (("--table", table is not None), ("--quiet", quiet)):
        if given and not commits:
            raise InvalidArgument(f"{option} goes with --commits")
    if quiet and as_json:
        raise InvalidArgument("give either --quiet (bare ts) or --json, not both")
    if commits:
        found = commit_history(state.store().catalog, tenant, table=table, limit=limit)
        if as_json:
            render.emit_json([commit_json(c) for c in found])
        elif quiet:
            for c in found:
                render.say(str(c.ts))
        else:
            render.show_all(commits_table(tenant, found))
        return
    hist = load_history(state.store().catalog, tenant)
    if as_json:
        render.emit_json(
            {
                "lineage": [
                    render.tenant_json(t)
                    | {
                        "source_tenant_id": t.source_tenant_id,
                        "source_ts": t.source_ts,
                        "source_time": None if t.source_ts is None else format_ts(t.source_ts),
                        "restore_job_id": t.restore_job_id,
                        "retain_until": t.retain_until,
                        "retain_until_time": None
                        if t.retain_until is None
                        else format_ts(t.retain_until),
                    }
                    for t in hist.lineage
                ],
                "jobs": [job_json(j) for j in hist.jobs],
            }
        )
        return
    render.show_all(history_tables(hist))


def point_words(snapshot: str | None, at: str | None, before: str | None) -> str:
    """The restore point as the user named it, for a question."""
    if snapshot is not None:
        return f"snapshot {snapshot}"
    return f"time {at}" if at is not None else f"just before commit {before}"


def restore_point(
    snapshot: str | None, at: str | None, before: str | None, commit: Callable[[], int]
) -> str | int:
    """The point a restore command names: a snapshot, a time, or just before a
    commit (``commit`` looks it up). Validated before any I/O but the commit's."""
    if sum(x is not None for x in (snapshot, at, before)) != 1:
        raise InvalidArgument(
            "say what to restore to: exactly one of --snapshot NAME, --at TIME or --before COMMIT"
        )
    if before is not None:
        try:  # ASCII digits, a ts in range: checked before any I/O
            valid = typed_ts(before) is not None
        except InvalidArgument:
            valid = False
        if not valid:
            raise InvalidArgument(
                f"invalid --before {before!r}: give a commit's ts (µs since the epoch, 16 "
                "digits), as `rewind history TENANT --commits` lists it"
            )
        return commit()
    return snapshot_or_time(snapshot, at, "restore to")
