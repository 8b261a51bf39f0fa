"""``rewind status``: recovery points, objectives and jobs of every tenant, for cron and CI."""

from __future__ import annotations

from typing import Annotated

import typer

from engine.cli import render
from engine.cli.context import cli_state, tenant_arg
from engine.cli.render_layout import WIDE
from tenants.catalog import open_catalog
from tenants.config import default_catalog_uri

EXIT_ATTENTION = 3  # a tenant misses its objective, or a job failed or is stale


def status_cmd(
    ctx: typer.Context,
    tenant: Annotated[
        str | None,
        typer.Argument(
            metavar="TENANT",
            help="Show this tenant in detail (default: every active tenant, a line each).",
            show_default=False,
        ),
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print one JSON object: the tenants, worst first.")
    ] = False,
) -> None:
    """Recovery point, objective, snapshots, PITR, backups and jobs of every tenant, worst first.

    The recovery point is the newest finished backup's point in time: snapshots
    and the PITR window live in the warehouse and catalog they protect, so
    they are shown beside it but do not count. A tenant misses its objective
    (`rewind tenant set acme --rpo 1h`) when its recovery point is older than
    that, or it has no backup. A job is failed (a restore job, or the newest
    backup, GC pass or drill, that failed) or stale (running, but its lease
    expired or its process is gone).

    Exit status: 0 when every tenant meets its objective and no job failed or
    is stale; 3 when any does (for cron and CI); 1 on an error. Example:
      */15 * * * * rewind status > /dev/null || alert
    """
    from engine.cli import status_render
    from engine.operations.status import catalog_status

    state = cli_state(ctx)
    if tenant is not None:
        tenant_arg(tenant)
    # The catalog alone, read only: a cron job needs its URI, not the warehouse's.
    catalog = open_catalog(state.catalog_uri or default_catalog_uri(), create=False)
    try:
        report = catalog_status(catalog, tenant)
    finally:
        catalog.close()
    if state.json:
        render.emit_json(status_render.status_json(report))
    elif tenant is not None:
        render.show_all(status_render.tenant_table(report, report.tenants[0]))
    else:
        console = render.stdout()
        width = None if WIDE.get() else console.width  # --wide: a row a line, however long
        table = status_render.status_table(report).render(width)
        if console.is_terminal:
            console.print(table, soft_wrap=True)
        else:  # no colours to draw: skip rich's pass over 10^4 lines of spans
            console.file.write(table.plain + "\n")
        render.show_all(status_render.warehouse_lines(report))
    if not report.healthy:
        raise typer.Exit(EXIT_ATTENTION)
