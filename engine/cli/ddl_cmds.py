"""``rewind ddl``: a tenant's databases, tables and schemas as of a protected time.

The time is resolved exactly as ``query --as-of`` resolves it (tenants.timeline.lineage):
after a restore, a time before it shows the DDL of the retired tenant that held
the name then, and a snapshot name is found in the lineage too.
"""

from __future__ import annotations

import json
from itertools import groupby
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from engine.cli import render
from engine.cli.context import cli_state, tenant_arg
from engine.cli.render_layout import local_time, wrapping
from tenants.tenancy import TableRecord, TenantRecord, find_tenant, tables_at
from tenants.times import format_ts, parse_time, starts_time, time_word


def _time_arg(text: str) -> str:
    """Reject a malformed snapshot name or instant before any I/O."""
    from tenants.timeline.snapshots import snapshot_name

    value = text.strip()
    if starts_time(value) or time_word(value):
        parse_time(value)
    else:
        snapshot_name(value)
    return value


def table_ddl_json(table: TableRecord) -> dict[str, Any]:
    return {
        "table": table.name,
        "id": table.id,
        "created_ts": table.created_ts,
        "created": format_ts(table.created_ts),
        "dropped_ts": table.dropped_ts,
        "schema_from_ts": table.schema_from_ts,
        "schema_from": format_ts(table.schema_from_ts),
        "columns": [c.to_json() for c in table.schema.columns],
        "primary_key": list(table.schema.primary_key),
        "fingerprint": table.schema.fingerprint,
    }


def ddl_json(
    tenant: str, holder: TenantRecord, ts: int, tables: list[TableRecord]
) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "tenant_id": holder.id,
        "ts": ts,
        "at": format_ts(ts),
        "databases": [
            {"name": database, "tables": [table_ddl_json(t) for t in group]}
            for database, group in groupby(tables, key=lambda t: t.database)
        ],
    }


def _columns_table(table: TableRecord) -> Table:
    key = table.schema.primary_key
    view = Table(caption=f"primary key ({', '.join(key)})", caption_justify="left")
    for name in ("column", "type", "nullable", "default"):
        wrapping(view, name)
    for c in table.schema.columns:
        default = "" if c.default is None else json.dumps(c.to_json()["default"])
        view.add_row(
            Text(c.name, style="bold" if c.name in key else ""),
            Text(c.type),
            Text("yes" if c.nullable else "no"),
            Text(default),
        )
    return view


def ddl_tree(tenant: str, holder: TenantRecord, ts: int, tables: list[TableRecord]) -> Tree:
    where = f" (in {holder.ref})" if holder.state != "active" else ""
    tree = Tree(Text(f"{tenant} as of {local_time(ts)} (ts {ts}){where}", style="bold"))
    if not tables:
        tree.add(Text("no tables", style="dim"))
    for database, group in groupby(tables, key=lambda t: t.database):
        db_node = tree.add(Text(database, style="bold"))
        for table in group:
            label = Text(
                f"{table.name}  created {local_time(table.created_ts)}, "
                f"schema from {local_time(table.schema_from_ts)}"
            )
            db_node.add(label).add(_columns_table(table))
    return tree


def ddl(
    ctx: typer.Context,
    tenant: Annotated[
        str, typer.Argument(metavar="TENANT", help="Tenant name.", show_default=False)
    ],
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            metavar="TIME",
            help="A snapshot name, -1h or PT15M (that long ago), now, an ISO-8601 instant or "
            "a ts in µs (default: now).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Show the databases, tables, columns and keys as of a protected time."""
    from tenants.timeline.lineage import resolve_time

    state = cli_state(ctx)
    tenant_arg(tenant)
    if as_of is not None:
        as_of = _time_arg(as_of)
    with state.store().catalog.snapshot() as tx:
        holder = find_tenant(tx, tenant)
        if as_of is None:
            ts = tx.last_ts()
        else:
            holder, ts, _ = resolve_time(tx, holder, as_of)
        tables = tables_at(tx, holder, ts)
    if state.json:
        render.emit_json(ddl_json(tenant, holder, ts, tables))
    else:
        render.show(ddl_tree(tenant, holder, ts, tables))
