"""``rewind table create|list|alter|drop``: DDL of one tenant."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any

import typer

from engine.cli import render
from engine.cli.context import cli_state, table_arg, tenant_arg
from engine.cli.render_layout import local_time
from tenants.defaults import is_text_encoded
from tenants.errors import InvalidArgument
from tenants.names import column_name
from tenants.schema import Column, TableSchema, parse_type
from tenants.times import format_ts

app = typer.Typer(
    help="Create, list, alter, drop and undrop the tables of a tenant.", no_args_is_help=True
)

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
            metavar="NAME:TYPE",
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
            metavar="COLUMN",
            help="Primary-key column; repeat for a composite key.",
            show_default=False,
        ),
    ],
) -> None:
    """Create a table with a primary key (key columns are NOT NULL).

    Example:
      rewind table create acme shop.orders -c id:int64 -c item:string -c qty:int32 -k id
    """
    state = cli_state(ctx)
    tenant_arg(tenant)
    table_arg(table)
    schema = parse_schema(column, key)
    record = state.store().create_table(tenant, table, schema)
    if state.json:
        render.emit_json(render.table_json(record))
    else:
        created = local_time(record.created_ts)
        render.say(f"created table {tenant}/{record.qualified} (id {record.id}) at {created}")


@app.command("list")
def list_(
    ctx: typer.Context,
    tenant: Tenant,
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            metavar="TIME",
            help="The tables as they were then: a snapshot name or a protected time "
            "(-1h, an ISO-8601 instant, a ts).",
        ),
    ] = None,
) -> None:
    """List the tenant's live tables (or those live at --as-of) with their columns and keys."""
    state = cli_state(ctx)
    tenant_arg(tenant)
    tables = state.store().tables(tenant, as_of)
    if state.json:
        render.emit_json([render.table_json(t) for t in tables])
    else:
        render.show(render.tables_table(tenant, tables))


@app.command("drop")
def drop(ctx: typer.Context, tenant: Tenant, table: TableRef) -> None:
    """Drop a table (its history stays readable at earlier times)."""
    state = cli_state(ctx)
    tenant_arg(tenant)
    table_arg(table)
    store = state.store()
    record = store.drop_table(tenant, table)
    guard = store.protection(tenant)
    retained = guard.oldest < guard.current_from  # a snapshot or the PITR window reaches back
    if state.json:
        render.emit_json(render.table_json(record) | {"undroppable": retained})
    else:
        render.say(f"dropped table {tenant}/{record.qualified}")
        if retained:
            render.say(f"`rewind table undrop {tenant} {record.qualified}` brings it back")
        else:
            render.warn(
                f"tenant {tenant} has no snapshot or PITR window reaching back before this drop: "
                "the next `rewind gc` releases the table's data and it cannot be undropped"
            )


NOT_NULL = ":not-null"


def _split_default(text: str) -> tuple[str, str | None]:
    """``TYPE[:not-null][=DEFAULT]`` → (type part, default text or None).

    The first ``=`` outside brackets starts the default, so types that hold an
    ``=`` themselves (``timestamp[us, tz=UTC]``) stay whole.
    """
    depth = 0
    for i, char in enumerate(text):
        if char in "[(":
            depth += 1
        elif char in "])":
            depth -= 1
        elif char == "=" and depth == 0:
            return text[:i], text[i + 1 :]
    return text, None


def parse_default(text: str, type_text: str) -> Any:
    """A default given on the command line, as the value the catalog stores.

    JSON scalars (``7``, ``2.5``, ``true``, ``"x"``) are taken as such, anything
    else as text. A text column keeps the text verbatim unless it is a JSON
    string (so ``=007`` and ``=123`` stay strings), and a float column takes an
    integer as a float. A date, timestamp or decimal column takes ISO-8601 text
    or digits (``=2026-01-05``, ``=2026-01-05T10:00:00Z``, ``=12.50``), as its
    schema JSON stores them (tenants.defaults). The store then checks that the
    value is exactly one of the column's type.
    """
    import pyarrow as pa

    arrow_type = parse_type(type_text)
    try:
        value: Any = json.loads(text)
    except ValueError:
        value = text
    if isinstance(value, dict | list):
        value = text
    if is_text_encoded(arrow_type):
        return value if isinstance(value, str) or value is None else text
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return value if isinstance(value, str) or value is None else text
    if pa.types.is_floating(arrow_type) and type(value) is int:
        return float(value)
    return value


def parse_column_spec(spec: str) -> Column:
    """``NAME:TYPE[:not-null][=DEFAULT]`` → a validated :class:`Column`.

    ``qty:int64:not-null=0``, ``note:string``, ``at:timestamp[us, tz=UTC]``.
    """
    name, sep, rest = spec.partition(":")
    type_part, default_text = _split_default(rest)
    nullable = True
    if type_part.strip().lower().endswith(NOT_NULL):
        nullable = False
        type_part = type_part.strip()[: -len(NOT_NULL)]
    type_text = type_part.strip()
    if not sep or not name.strip() or not type_text:
        raise InvalidArgument(
            f"invalid --add {spec!r}: expected NAME:TYPE[:not-null][=DEFAULT], "
            "e.g. note:string or qty:int64:not-null=0"
        )
    column_name(name.strip())
    parse_type(type_text)
    default = None if default_text is None else parse_default(default_text, type_text)
    return Column(name.strip(), type_text, nullable, default)


@app.command("alter")
def alter(
    ctx: typer.Context,
    tenant: Tenant,
    table: TableRef,
    add: Annotated[
        list[str] | None,
        typer.Option(
            "--add",
            metavar="NAME:TYPE",
            help="NAME:TYPE[:not-null][=DEFAULT] (DEFAULT as JSON, else text; ISO-8601 for "
            "date and timestamp columns, e.g. d:date=2026-01-05); repeat. "
            "A NOT NULL column needs a default.",
            show_default=False,
        ),
    ] = None,
    drop: Annotated[
        list[str] | None,
        typer.Option(
            "--drop", metavar="COLUMN", help="A non-key column to drop; repeat.", show_default=False
        ),
    ] = None,
) -> None:
    """Add and drop columns, as a new schema version valid from this commit.

    Earlier times keep reading the schema they had, so history reads as it was.
    """
    state = cli_state(ctx)
    tenant_arg(tenant)
    table_arg(table)
    columns = [parse_column_spec(spec) for spec in add or []]
    dropped = [column_name(c.strip()) for c in drop or []]
    if not columns and not dropped:
        raise InvalidArgument(f"nothing to alter in {table}: give --add NAME:TYPE or --drop NAME")
    record = state.store().alter_table(tenant, table, add=columns, drop=dropped)
    if state.json:
        render.emit_json(
            {
                **render.table_json(record),
                "columns": [c.to_json() for c in record.schema.columns],
                "schema_from_ts": record.schema_from_ts,
                "schema_from": format_ts(record.schema_from_ts),
            }
        )
    else:
        changes = [f"added {c.name}" for c in columns] + [f"dropped {c}" for c in dropped]
        render.say(
            f"altered table {tenant}/{record.qualified}: {', '.join(changes)}; new schema "
            f"valid from ts {record.schema_from_ts} ({local_time(record.schema_from_ts)})"
        )
