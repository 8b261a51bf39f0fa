"""``rewind restore-table``, ``rewind restore-database`` and ``rewind table undrop``.

Thin shells over the restore job (``engine.restore.job.run_restore``, with the
plans engine.restore.tables makes its jobs of), shaped like ``restore-tenant``:
plan (print it; stop on ``--dry-run``), then run the journaled job, its plan
printed as it starts and, ``--instant``, its tables' being usable as they
are installed; ``--resume`` and ``--cancel`` act on an existing job of the
tenant.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from engine.cli import render
from engine.cli.background import background_nice
from engine.cli.choices import ExecutorOption, VerifyOption
from engine.cli.confirm import YesOption, confirm
from engine.cli.context import cli_state, table_arg, tenant_arg
from engine.cli.options import (
    AtOption,
    BeforeOption,
    InstantOption,
    NoWaitOption,
    RewriteFirstOption,
    SnapshotOption,
    instant_choice,
)
from engine.cli.restore_cmds import JobWatch, job_action, restore_point
from engine.cli.restore_render import plan_json, plan_table
from engine.pipeline import ExecutorName, RestorePlan, VerifyLevel
from tenants.errors import InvalidArgument
from tenants.names import object_name, tenant_name
from tenants.observe import events
from tenants.store import TableStore

if TYPE_CHECKING:
    from engine.restore.job import Proposal

Tenant = Annotated[
    str, typer.Argument(metavar="TENANT", help="Tenant name (or name@id).", show_default=False)
]
ToTenant = Annotated[
    str | None,
    typer.Option("--to-tenant", metavar="OTHER", help="Restore into this other (existing) tenant."),
]
DryRun = Annotated[bool, typer.Option("--dry-run", help="Print the plan and stop.")]
Resume = Annotated[
    str | None,
    typer.Option(
        "--resume",
        metavar="JOB",
        help="Finish an interrupted or failed job, or an instant one's rewrite.",
    ),
]
Cancel = Annotated[
    str | None,
    typer.Option(
        "--cancel",
        metavar="JOB",
        help="Cancel a job; its outputs and holds go. An instant job that installed has "
        "only its rewrite cancelled (the tables stay, correct).",
    ),
]
Json = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


def restore_table_cmd(
    ctx: typer.Context,
    tenant: Tenant,
    table: Annotated[
        str | None,
        typer.Argument(metavar="DB.TABLE", help="The table to restore.", show_default=False),
    ] = None,
    snapshot: SnapshotOption = None,
    at: AtOption = None,
    before: BeforeOption = None,
    to: Annotated[
        str | None,
        typer.Option("--to", metavar="DB.NEW_TABLE", help="Restore beside it, as a new table."),
    ] = None,
    to_tenant: ToTenant = None,
    dry_run: DryRun = False,
    yes: YesOption = False,
    executor: ExecutorOption = "auto",
    verify: VerifyOption = "objects",
    instant: InstantOption = False,
    rewrite_first: RewriteFirstOption = False,
    no_wait: NoWaitOption = False,
    resume: Resume = None,
    cancel: Cancel = None,
    keys: Annotated[
        Path | None,
        typer.Option(
            "--keys",
            metavar="FILE",
            help="Restore only the rows with these keys (a .csv or .parquet of the key "
            "columns), in one commit; every other row is untouched.",
            exists=True,
            dir_okay=False,
            readable=True,
            show_default=False,
        ),
    ] = None,
    where: Annotated[
        str | None,
        typer.Option(
            "--where",
            metavar="LOW..HIGH",
            help="Restore only the rows whose key lies in this range (both ends inclusive, "
            'either may be left out: 100..200, ..99, [1,"a"]..[1,"z"]), in one commit.',
            show_default=False,
        ),
    ] = None,
    json_output: Json = False,
) -> None:
    """Restore one table to a snapshot or protected time.

    The other tables keep every later write. In place, the table's content and
    schema become what they were then; the table as it was stays readable at
    earlier times (undo by restoring to one). Writes to it are refused while
    the job runs. With --keys or --where only those rows are put back, in one
    ordinary commit (no job; the table stays writable).

    Examples:
      rewind restore-table acme shop.orders --before TS   (TS from `rewind history acme --commits`)
      rewind restore-table acme shop.orders --snapshot mon --to shop.orders_mon
      rewind restore-table acme shop.orders --snapshot mon --keys lost.csv --yes
    """
    from engine.restore.history import before_commit
    from engine.restore.table_plan import plan_table_restore

    state = cli_state(ctx)
    as_json = json_output or state.json
    tenant_arg(tenant)
    if table is not None:
        table_arg(table)
    if to is not None:
        table_arg(to)
    if to_tenant is not None:
        tenant_name(to_tenant)
    modes = (instant, rewrite_first, no_wait)
    if _job_given(resume, cancel, snapshot or before, at, to, to_tenant, dry_run, modes):
        job_action(state.store(), tenant, resume, cancel, as_json)
        return
    installs_first = instant_choice(*modes)
    if table is None:
        raise InvalidArgument("say which table to restore: rewind restore-table TENANT DB.TABLE")
    if keys is not None or where is not None:
        if keys is not None and where is not None:
            raise InvalidArgument("give --keys FILE or --where LOW..HIGH, not both")
        if to is not None or to_tenant is not None or any(modes):
            raise InvalidArgument(
                "--keys and --where put rows back in place, in one commit: leave out --to, "
                "--to-tenant, --instant, --rewrite-first and --no-wait"
            )
    point = restore_point(
        snapshot, at, before, lambda: before_commit(state.store().catalog, tenant, before or "")
    )
    store = state.store()
    if keys is not None or where is not None:
        _restore_keys(store, tenant, table, point, keys, where, dry_run, yes, as_json)
        return
    ctx.with_resource(events.job("table_restore", tenant))  # the plan's event names it
    _run(
        store,
        lambda: plan_table_restore(
            store.catalog, tenant, table, point, to=to, to_tenant=to_tenant
        ),
        executor=executor,
        verify=verify,
        instant=installs_first,
        wait=not no_wait,
        dry_run=dry_run,
        yes=yes,
        as_json=as_json,
    )  # fmt: skip


def restore_database_cmd(
    ctx: typer.Context,
    tenant: Tenant,
    database: Annotated[
        str | None,
        typer.Argument(metavar="DB", help="The database to restore.", show_default=False),
    ] = None,
    snapshot: SnapshotOption = None,
    at: AtOption = None,
    before: BeforeOption = None,
    to: Annotated[
        str | None,
        typer.Option("--to", metavar="NEW_DB", help="Restore beside it, as a new database."),
    ] = None,
    to_tenant: ToTenant = None,
    dry_run: DryRun = False,
    yes: YesOption = False,
    executor: ExecutorOption = "auto",
    verify: VerifyOption = "objects",
    instant: InstantOption = False,
    rewrite_first: RewriteFirstOption = False,
    no_wait: NoWaitOption = False,
    resume: Resume = None,
    cancel: Cancel = None,
    json_output: Json = False,
) -> None:
    """Restore every table of one database to a snapshot or protected time.

    One install: tables created since are dropped, tables dropped since come
    back; other databases keep every later write.
    """
    from engine.restore.history import before_commit
    from engine.restore.table_plan import plan_database_restore

    state = cli_state(ctx)
    as_json = json_output or state.json
    tenant_arg(tenant)
    if database is not None:
        object_name(database, "database")
    if to is not None:
        object_name(to, "database")
    if to_tenant is not None:
        tenant_name(to_tenant)
    modes = (instant, rewrite_first, no_wait)
    if _job_given(resume, cancel, snapshot or before, at, to, to_tenant, dry_run, modes):
        job_action(state.store(), tenant, resume, cancel, as_json)
        return
    installs_first = instant_choice(*modes)
    if database is None:
        raise InvalidArgument("say which database to restore: rewind restore-database TENANT DB")
    point = restore_point(
        snapshot, at, before, lambda: before_commit(state.store().catalog, tenant, before or "")
    )
    store = state.store()
    ctx.with_resource(events.job("table_restore", tenant))  # the plan's event names it
    _run(
        store,
        lambda: plan_database_restore(
            store.catalog, tenant, database, point, to=to, to_tenant=to_tenant
        ),
        executor=executor,
        verify=verify,
        instant=installs_first,
        wait=not no_wait,
        dry_run=dry_run,
        yes=yes,
        as_json=as_json,
    )  # fmt: skip


def undrop_cmd(
    ctx: typer.Context,
    tenant: Tenant,
    table: Annotated[
        str, typer.Argument(metavar="DB.TABLE", help="The dropped table.", show_default=False)
    ],
    as_name: Annotated[
        str | None,
        typer.Option("--as", metavar="DB.NEW_TABLE", help="Bring it back under this name."),
    ] = None,
    dry_run: DryRun = False,
    executor: ExecutorOption = "auto",
    json_output: Json = False,
) -> None:
    """Bring back the most recently dropped table of that name.

    Its data comes back as at the drop, while the tenant's snapshots or PITR
    window reach back before it.
    """
    from engine.restore.table_plan import plan_table_restore

    state = cli_state(ctx)
    as_json = json_output or state.json
    tenant_arg(tenant)
    table_arg(table)
    if as_name is not None:
        table_arg(as_name)
    store = state.store()
    ctx.with_resource(events.job("table_restore", tenant))  # the plan's event names it
    _run(  # as engine.restore.tables.undrop_table: rewrite first
        store,
        lambda: plan_table_restore(store.catalog, tenant, table, None, to=as_name, undrop=True),
        executor=executor,
        verify="objects",
        instant=False,
        wait=True,
        dry_run=dry_run,
        yes=True,  # an undrop replaces nothing
        as_json=as_json,
    )


def _restore_keys(
    store: TableStore,
    tenant: str,
    table: str,
    point: str | int,
    keys: Path | None,
    where: str | None,
    dry_run: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """``restore-table --keys|--where``: some rows back, in one commit."""
    from engine.cli.diff_cmds import keys_restored_text, revert_json
    from tenants.load_files import read_file
    from tenants.reads.key_range import KeyRange

    schema = store.plan_read(tenant, table).table.schema
    key_rows = None if keys is None else read_file(keys, schema.key_arrow())
    key_range = None
    if where is not None:
        low, dots, high = where.partition("..")
        if not dots:
            raise InvalidArgument(
                f"invalid --where {where!r}: give LOW..HIGH (either end may be left out: "
                "100..200, ..99, 100..)"
            )
        key_range = KeyRange.parse(
            low.strip() or None, high.strip() or None, schema.key_arrow(), "--where"
        )
        if key_range is None:
            raise InvalidArgument(
                f"invalid --where {where!r}: give at least one end of the range; to restore "
                "every row, leave out --where"
            )

    def run(dry: bool) -> Any:
        return store.restore_keys(
            tenant, table, point, keys=key_rows, key_range=key_range, dry_run=dry
        )

    if not dry_run:
        confirm(
            f"restore some rows of {tenant}/{table}",
            yes=yes,
            as_json=as_json,
            plan=lambda: [keys_restored_text(run(True))],
        )
    result = run(dry_run)
    if as_json:
        render.emit_json(revert_json(result))
    else:
        render.say(keys_restored_text(result))


def _job_given(
    resume: str | None,
    cancel: str | None,
    snapshot: str | None,
    at: str | None,
    to: str | None,
    to_tenant: str | None,
    dry_run: bool,
    modes: tuple[bool, ...],
) -> bool:
    if not (resume or cancel):
        return False
    if snapshot or at or to or to_tenant or dry_run or any(modes):
        raise InvalidArgument(
            "--resume/--cancel take only a job id, not --snapshot/--at/--to/--to-tenant/"
            "--dry-run/--instant/--rewrite-first/--no-wait"
        )
    return True


def _run(
    store: TableStore,
    make_plan: Callable[[], RestorePlan],
    *,
    executor: ExecutorName,
    verify: VerifyLevel,
    instant: bool,
    wait: bool,
    dry_run: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """Plan (and stop on ``--dry-run``); a restore that replaces live tables (in
    place only: ``--to`` and ``--to-tenant`` refuse a taken name in the plan) goes
    ahead only with ``--yes`` or a yes at the terminal (engine.cli.confirm); then
    run the job (what engine.restore.tables' functions run, with the CLI's
    hooks: the plan as the job starts, the tables usable as an instant job
    installs them)."""
    from engine.restore.job import propose, run_restore

    if dry_run:
        made = propose(make_plan, executor=executor, method="physical")
        plan, chosen = made.plan, made.executor
        if as_json:
            render.emit_json(plan_json(plan, chosen.name, chosen.reason, instant=instant))
        else:
            render.show(plan_table(plan, chosen.name, chosen.reason, instant=instant))
            render.say("dry run: nothing was changed")
        return
    approved: Proposal | None = None  # a plan the user saw and said yes to: the one that runs
    if not yes:
        # Only the plan knows whether live tables would be replaced (an in-place
        # restore of a table dropped since replaces nothing), so it is made first.
        made = propose(make_plan, executor=executor, method="physical")
        if made.plan.replaced_table_ids:
            plan, chosen = made.plan, made.executor
            confirm(
                f"replace {len(plan.replaced_table_ids)} live table(s) of tenant "
                f"{plan.target_name!r} with their state at {plan.at_label}",
                yes=False,
                as_json=as_json,
                plan=lambda: [
                    plan_table(plan, chosen.name, chosen.reason, instant=instant),
                    "the current tables stay readable at earlier times (undo by restoring to one)",
                ],
            )
            approved = made
    watch = JobWatch(as_json, wait=wait, nice=background_nice())
    outcome = run_restore(
        store,
        make_plan,
        executor=executor,
        verify=verify,
        method="physical",
        instant=instant,
        wait=wait,
        on_started=watch.started,
        on_installed=watch.installed,
        proposal=approved,
    )
    watch.done(outcome)
