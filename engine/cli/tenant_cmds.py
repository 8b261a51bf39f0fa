"""``rewind tenant create|list|set|drop|undrop|purge``."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import RenderableType

from engine.cli import render
from engine.cli.confirm import YesOption, confirm
from engine.cli.context import cli_state, new_tenant_arg, tenant_arg
from engine.cli.render_layout import local_time
from tenants.errors import InvalidArgument
from tenants.times import format_duration

app = typer.Typer(
    help="Create, list, drop, undrop and purge tenants; set their recovery point objective.",
    no_args_is_help=True,
)

TenantName = Annotated[
    str, typer.Argument(metavar="NAME", help="Tenant name, e.g. acme.", show_default=False)
]


@app.command("create")
def create(ctx: typer.Context, name: TenantName) -> None:
    """Create an empty tenant: a namespace for databases, tables and snapshots.

    Example:
      rewind tenant create acme
    """
    state = cli_state(ctx)
    new_tenant_arg(name)
    tenant = state.store().create_tenant(name)
    if state.json:
        render.emit_json(render.tenant_json(tenant))
    else:
        render.say(
            f"created tenant {tenant.name} (id {tenant.id}) at {local_time(tenant.created_ts)}"
        )


@app.command("list")
def list_(
    ctx: typer.Context,
    include_dropped: Annotated[
        bool, typer.Option("--all", help="Include dropped tenants.")
    ] = False,
) -> None:
    """List tenants (active ones, or all with --all)."""
    from engine.operations.objectives import recovery_objectives

    state = cli_state(ctx)
    tenants = state.store().tenants(include_dropped=include_dropped)
    objectives = recovery_objectives(state.store())
    if state.json:
        render.emit_json(
            [
                render.tenant_json(t)
                | {"rpo_us": objectives.get(t.name) if t.state == "active" else None}
                for t in tenants
            ]
        )
    else:
        render.show(render.tenants_table(tenants, objectives=objectives))


@app.command("set")
def set_(
    ctx: typer.Context,
    tenant: Annotated[
        str, typer.Argument(metavar="TENANT", help="An active tenant.", show_default=False)
    ],
    rpo: Annotated[
        str | None,
        typer.Option(
            "--rpo",
            metavar="DURATION|off",
            help="Recovery point objective: the newest backup's point may be at most this "
            "old, e.g. 1h or 1d; 'off' removes it. `rewind status` checks it.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Set a tenant's recovery point objective (`--rpo 1h`; `--rpo off` removes it).

    Example:
      rewind tenant set acme --rpo 1h
    """
    from engine.operations.objectives import parse_rpo, set_recovery_objective

    state = cli_state(ctx)
    tenant_arg(tenant)
    if rpo is None:
        raise InvalidArgument(
            f"nothing to set for tenant {tenant!r}: give --rpo DURATION (e.g. 1h) or --rpo off"
        )
    parse_rpo(rpo)  # a bad value is refused before the catalog opens
    rpo_us = set_recovery_objective(state.store(), tenant, rpo)
    if state.json:
        render.emit_json(
            {
                "tenant": tenant,
                "rpo_us": rpo_us,
                "rpo": None if rpo_us is None else format_duration(rpo_us),
            }
        )
    elif rpo_us is None:
        render.say(f"tenant {tenant} has no recovery point objective now")
    else:
        render.say(
            f"recovery point objective of {tenant}: {format_duration(rpo_us)} "
            "(`rewind status` exits 3 while its newest backup is older)"
        )


@app.command("drop")
def drop(
    ctx: typer.Context,
    name: Annotated[
        str, typer.Argument(metavar="NAME", help="Tenant name (or name@id).", show_default=False)
    ],
    yes: YesOption = False,
) -> None:
    """Drop a tenant: it stops accepting writes; its data is kept (restorable) for now.

    `rewind tenant undrop NAME@ID` brings it back while it is retained; after
    that, or after `rewind tenant purge NAME@ID`, `rewind gc` deletes its data.
    """
    state = cli_state(ctx)
    tenant_arg(name)
    confirm(
        f"drop tenant {name}",
        yes=yes,
        as_json=state.json,
        plan=lambda: [render.tenants_table([state.store().tenant(name)])],
    )
    tenant = state.store().drop_tenant(name)
    if state.json:
        render.emit_json(render.tenant_json(tenant))
    else:
        assert tenant.dropped_ts is not None
        render.say(f"dropped tenant {tenant.ref} at {local_time(tenant.dropped_ts)}")


@app.command("undrop")
def undrop(
    ctx: typer.Context,
    ref: Annotated[
        str,
        typer.Argument(
            metavar="NAME@ID",
            help="The retired tenant (see `rewind history NAME`).",
            show_default=False,
        ),
    ],
    new_name: Annotated[
        str | None,
        typer.Option("--as", metavar="NAME", help="Bring it back under this name instead."),
    ] = None,
) -> None:
    """Bring back a dropped or restore-retired tenant, while it is retained."""
    state = cli_state(ctx)
    tenant_arg(ref)
    if new_name is not None:
        new_tenant_arg(new_name)
    tenant = state.store().undrop_tenant(ref, new_name)
    if state.json:
        render.emit_json(render.tenant_json(tenant))
    else:
        render.say(f"tenant {tenant.ref} is active again as {tenant.name!r}")


@app.command("purge")
def purge(
    ctx: typer.Context,
    ref: Annotated[
        str, typer.Argument(metavar="NAME@ID", help="A dropped tenant.", show_default=False)
    ],
    yes: YesOption = False,
) -> None:
    """End a dropped tenant's retention now: its snapshots go and its objects become collectable.

    A half-loaded staging tenant (left by a killed `backup restore`) is discarded.
    """
    from engine.gc.purge import purge_tenant
    from engine.logical.reload import discard_abandoned_staging

    state = cli_state(ctx)
    tenant_arg(ref)

    def plan() -> list[RenderableType]:
        tenant = state.store().tenant(ref)
        if tenant.state == "active":  # the real error, before asking for --yes
            raise InvalidArgument(
                f"tenant {tenant.ref} is active; drop it first (`rewind tenant drop {tenant.name}`), "
                "then purge"
            )
        what = (
            "the half-loaded staging tenant and its objects are discarded"
            if tenant.state == "staging"
            else "its snapshots are dropped and `rewind gc` may delete its objects: it can no "
            "longer be undropped"
        )
        return [render.tenants_table([tenant]), what]

    confirm(f"purge tenant {ref}", yes=yes, as_json=state.json, plan=plan)
    store = state.store()
    if store.tenant(ref).state == "staging":
        staging = discard_abandoned_staging(store, ref)
        if state.json:
            render.emit_json({"tenant": staging.ref, "discarded": "staging"})
        else:
            render.say(f"discarded the half-loaded staging tenant {staging.ref} and its objects")
        return
    result = purge_tenant(store.catalog, ref)
    if state.json:
        render.emit_json(result.__dict__)
    else:
        render.say(
            f"purged {result.tenant}: {result.memberships_ended} membership(s) ended, "
            f"{result.snapshots_dropped} snapshot(s) dropped; `rewind gc` deletes its objects "
            "after the grace period"
        )
