"""``rewind export``: tables at a snapshot, out of Rewind, as Parquet or Iceberg."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from engine.cli import render
from engine.cli.context import cli_state, table_arg, tenant_arg
from engine.cli.options import AtOption, SnapshotOption, snapshot_or_time
from engine.cli.render_layout import local_time
from engine.cli.restore_render import human_bytes
from engine.export.plan import Format, check_format
from tenants.errors import InvalidArgument
from tenants.names import object_name
from tenants.redaction import redact

if TYPE_CHECKING:
    from engine.export import ExportResult

FormatOption = Annotated[
    Format,
    typer.Option(
        "--format",
        parser=check_format,
        help="parquet: plain Parquet files of the visible rows and a manifest; iceberg: an "
        "Iceberg table, one snapshot per export, objects copied server-side where they can be.",
    ),
]


def export(
    ctx: typer.Context,
    tenant: Annotated[
        str, typer.Argument(metavar="TENANT", help="Tenant name (or name@id).", show_default=False)
    ],
    table: Annotated[
        str | None,
        typer.Argument(
            metavar="DB.TABLE", help="One table (or --database, or --all).", show_default=False
        ),
    ] = None,
    database: Annotated[
        str | None,
        typer.Option("--database", metavar="DB", help="Every table of a database."),
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="Every table of the tenant.")] = False,
    snapshot: SnapshotOption = None,
    at: AtOption = None,
    to: Annotated[
        str,
        typer.Option(
            "--to",
            metavar="URI",
            help="s3://bucket/prefix or file:///path: the export's root (parquet), or where "
            "new Iceberg tables go, <URI>/<namespace>/<table> (iceberg).",
            show_default=False,
        ),
    ] = "",
    format: FormatOption = "parquet",
    iceberg_catalog: Annotated[
        str | None,
        typer.Option(
            "--iceberg-catalog",
            metavar="URI|NAME",
            help="The Iceberg catalog: sqlite:///path.db, postgresql://..., https://... (REST), "
            "or a catalog name from pyiceberg's configuration.",
            show_default=False,
        ),
    ] = None,
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace",
            help="The Iceberg namespace of the tables (default: each table's database).",
            show_default=False,
        ),
    ] = None,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="Replace what the destination holds even if it is not an earlier export of "
            "these tables (another tenant, table or primary key, or not Rewind's).",
        ),
    ] = False,
    rewrite_all: Annotated[
        bool,
        typer.Option(
            "--rewrite-all",
            help="Iceberg: rewrite every row instead of copying wholly visible objects.",
        ),
    ] = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print machine-readable JSON.")
    ] = False,
) -> None:
    """Export tables as of a snapshot or protected time, as Parquet or an Iceberg table.

    Nothing half-written is ever visible: Parquet files are published by a
    pointer written last; an Iceberg export is one Iceberg commit. Exports of
    several snapshots into one Iceberg table are its snapshots (time travel).

    Examples:
      rewind export acme shop.orders --snapshot mon --to s3://exports/acme
      rewind export acme --all --at -1h --to file:///srv/exports/acme
      rewind export acme shop.orders --snapshot mon --format iceberg \\
        --iceberg-catalog sqlite:///srv/iceberg.db --to s3://lake/warehouse
    """
    from engine.export import export_tables

    state = cli_state(ctx)
    as_json = json_output or state.json
    tenant_arg(tenant)
    scope = _scope(table, database, every)
    point = snapshot_or_time(snapshot, at, "export")
    if not to:
        raise InvalidArgument("say where to export: --to s3://bucket/prefix or file:///path")
    if namespace is not None:
        object_name(namespace, "namespace")
    if rewrite_all and format != "iceberg":
        raise InvalidArgument("--rewrite-all is for --format iceberg (parquet rewrites every row)")
    result = export_tables(
        state.store(),
        tenant,
        scope,
        point,
        to,
        format=format,
        replace=replace,
        iceberg_catalog=iceberg_catalog,
        namespace=namespace,
        zero_copy=not rewrite_all,
    )
    if as_json:
        render.emit_json(result.to_json())
        return
    render.show(_table(result))


def _scope(table: str | None, database: str | None, every: bool) -> str:
    """The tables named: exactly one of DB.TABLE, --database DB, --all."""
    if sum((table is not None, database is not None, every)) != 1:
        raise InvalidArgument("say what to export: exactly one of DB.TABLE, --database DB or --all")
    if table is not None:
        table_arg(table)
        return table
    if database is not None:
        return f"{object_name(database, 'database')}.*"
    return "*"


def _table(result: ExportResult) -> Table:
    when = local_time(result.at_ts)
    if result.snapshot:
        when = f"{result.snapshot} ({when})"
    title = (
        f"{result.tenant} at {when} exported as {result.format} to {redact(result.to)} "
        f"in {result.seconds:.2f}s"
    )
    table = Table(title=title, caption=_caption(result))
    for column in ("table", "to", "rows", "files", "reused", "rewritten", "copied", "written"):
        table.add_column(column, overflow="fold")
    for t in result.tables:
        table.add_row(
            t.table,
            redact(t.target),
            f"{t.rows:,}",
            str(t.files),
            str(t.reused_files),
            str(t.rewritten_files),
            human_bytes(t.copied_bytes),
            human_bytes(t.written_bytes),
        )
    return table


def _caption(result: ExportResult) -> str:
    rows = render.plural(result.rows, "row")
    if result.format == "parquet":
        return f"{rows}; files rewritten: plain Parquet of the visible rows (export {result.export_id})"
    return (
        f"{rows}; reused: objects wholly visible at the time, copied inside the object store "
        f"(copied: their bytes); written: rows rewritten by Rewind"
    )
