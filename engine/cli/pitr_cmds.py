"""``rewind pitr set|show``: the tenant's point-in-time recovery (PITR) window.

A window protects every time inside it, but never a time before the window
was switched on (or grown): Rewind does not claim history that compaction may
already have dropped. ``show`` prints the whole recoverable range, so a user
sees exactly which ``--as-of`` times will work.
"""

from __future__ import annotations

from typing import Annotated

import typer

from engine.cli import render, snapshot_render
from engine.cli.context import cli_state, tenant_arg
from engine.cli.render_layout import local_time
from tenants.times import format_duration, parse_duration

app = typer.Typer(help="Set and show point-in-time recovery (PITR) windows.", no_args_is_help=True)

Tenant = Annotated[str, typer.Argument(metavar="TENANT", help="Tenant name.", show_default=False)]
OFF = "off"


@app.command("set")
def set_(
    ctx: typer.Context,
    tenant: Tenant,
    window: Annotated[
        str,
        typer.Argument(
            metavar="WINDOW|off",
            help="How far back every time stays recoverable, e.g. 72h or 7d; 'off' removes it.",
            show_default=False,
        ),
    ],
) -> None:
    """Set (or turn off) the PITR window. A new window protects history from now on."""
    state = cli_state(ctx)
    tenant_arg(tenant)
    window_us = None if window.strip().lower() == OFF else parse_duration(window)
    store = state.store()
    result = store.set_pitr(tenant, window_us)
    if state.json:
        render.emit_json(snapshot_render.pitr_json(tenant, result, store.protection(tenant)))
    elif result is None:
        render.say(
            f"PITR is off for {tenant}: only now and its snapshots stay recoverable; "
            "a full compaction may drop the history the window kept"
        )
    else:
        render.say(
            f"PITR window of {tenant}: {format_duration(result.window_us)}, protecting history "
            f"recorded since {local_time(result.since_ts)}"
        )


@app.command("show")
def show(ctx: typer.Context, tenant: Tenant) -> None:
    """Show the PITR window and every time that is recoverable now."""
    state = cli_state(ctx)
    tenant_arg(tenant)
    store = state.store()
    window = store.pitr(tenant)
    protection = store.protection(tenant)
    if state.json:
        render.emit_json(snapshot_render.pitr_json(tenant, window, protection))
    else:
        render.show(snapshot_render.pitr_table(tenant, window, protection))
