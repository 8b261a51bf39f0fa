"""``rewind table create|list|drop``: DDL of one tenant."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import typer

from engine.cli import render
from engine.cli.context import cli_state, table_arg, tenant_arg
from tenants.errors import InvalidArgument
from tenants.schema import Column, TableSchema
from tenants.times import format_ts

app = typer.Typer(help="Create, list and drop the tables of a tenant.", no_args_is_help=True)

Tenant = Annotated[str, typer.Argument(metavar="TENANT", help="Tenant name.", show_default=False)]
TableRef = Annotated[
    str, typer.Argument(metavar="DB.TABLE", help="Database and table.", show_default=False)
]


def parse_schema(columns: Sequence[str], keys: Sequence[str]) -> TableSchema:
    """``["id:int64", "name:string"]`` and ``["id"]`` → a validated schema.

    Only the first ``:`` splits, so types may contain anything after it
    (``amount:decimal(12, 2)``, ``at:timestamp[us, tz=UTC]``).
    """
    parsed = []
    for spec in columns:
        name, sep, type_text = spec.partition(":")
        if not sep or not name.strip() or not type_text.strip():
            raise InvalidArgument(f"invalid --column {spec!r}: expected NAME:TYPE, e.g. id:int64")
        parsed.append(Column(name.strip(), type_text.strip()))
    return TableSchema.of(parsed, [k.strip() for k in keys])


@app.command("create")
def create(
    ctx: typer.Context,
    tenant: Tenant,
    table: TableRef,
    column: Annotated[
        list[str],
        typer.Option(
            "--column",
            "-c",
            help="NAME:TYPE, repeat in column order (types: int64, string, double, "
            "bool, date, timestamp, decimal(p, s), ...).",
            show_default=False,
        ),
    ],
    key: Annotated[
        list[str],
        typer.Option(
            "--key",
            "-k",
            help="Primary-key column; repeat for a composite key.",
            show_default=False,
        ),
    ],
) -> None:
    """Create a table with a primary key (key columns are NOT NULL)."""
    state = cli_state(ctx)
    tenant_arg(tenant)
    database, name = table_arg(table)
    schema = parse_schema(column, key)
    record = state.store().create_table(tenant, database, name, schema)
    if state.json:
        render.emit_json(render.table_json(record))
    else:
        created = format_ts(record.created_ts)
        render.say(f"created table {tenant}/{record.qualified} (id {record.id}) at {created}")


@app.command("list")
def list_(ctx: typer.Context, tenant: Tenant) -> None:
    """List the tenant's live tables with their columns and keys."""
    state = cli_state(ctx)
    tenant_arg(tenant)
    tables = state.store().tables(tenant)
    if state.json:
        render.emit_json([render.table_json(t) for t in tables])
    else:
        render.show(render.tables_table(tenant, tables))


@app.command("drop")
def drop(ctx: typer.Context, tenant: Tenant, table: TableRef) -> None:
    """Drop a table (its history stays readable at earlier times)."""
    state = cli_state(ctx)
    tenant_arg(tenant)
    database, name = table_arg(table)
    record = state.store().drop_table(tenant, database, name)
    if state.json:
        render.emit_json(render.table_json(record))
    else:
        render.say(f"dropped table {tenant}/{record.qualified}")
