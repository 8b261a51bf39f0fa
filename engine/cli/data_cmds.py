"""``rewind load|delete|query|compact|objects``: data in, data out, layout.

Files are read whole into Arrow (one file = one commit, however big) and
handed to the store's write path, which casts them to the table's schema and
rejects them — writing nothing — if they do not fit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from engine.cli import render
from engine.cli.context import (
    cli_state,
    read_time_arg,
    size_arg,
    table_arg,
    tenant_arg,
)
from engine.cli.options import count_parser
from engine.cli.render_layout import local_time
from engine.cli.sql_query import show_sql
from tenants.errors import InvalidArgument
from tenants.objects.sizes import DEFAULT_TARGET_BYTES, MAX_TARGET_BYTES, MIN_MEMORY
from tenants.progress import step
from tenants.store import TableStore

if TYPE_CHECKING:
    import pyarrow as pa

    from tenants.schema import TableSchema

MIB = 1024 * 1024
TABLE_VIEW_LIMIT = 100

Tenant = Annotated[str, typer.Argument(metavar="TENANT", help="Tenant name.", show_default=False)]
TableRef = Annotated[
    str, typer.Argument(metavar="DB.TABLE", help="Database and table.", show_default=False)
]
InputFile = Annotated[
    Path,
    typer.Argument(
        metavar="FILE",
        help="A .parquet or .csv file.",
        exists=True,
        dir_okay=False,
        readable=True,
        show_default=False,
    ),
]


class ReaderChoice(StrEnum):
    local = "local"
    spark = "spark"


def _schema(store: TableStore, tenant: str, table: str) -> TableSchema:
    """The table's current schema (raises ``NotFound`` for an unknown tenant or table).

    Only a parsing hint: the write path checks the batch against the schema
    again inside its commit.
    """
    return store.plan_read(tenant, table).table.schema


def load(ctx: typer.Context, tenant: Tenant, table: TableRef, file: InputFile) -> None:
    """Upsert every row of FILE into the table, in one commit (streamed: any size).

    A CSV file has a header naming the table's columns; a row whose key is
    already there replaces it.

    Example:
      rewind load acme shop.orders examples/orders.csv
    """
    from tenants.load_files import CSV_MAX_ROW_BYTES, RowTooLong, read_batches

    state = cli_state(ctx)
    tenant_arg(tenant)
    table_arg(table)
    store = state.store()
    target = _schema(store, tenant, table).arrow()
    size = file.stat().st_size
    try:
        with step(f"loading {file.name}", size) as loading:
            batches = read_batches(file, target, progress=loading)
            result = store.load(tenant, table, batches)
    except RowTooLong:
        # Rare: a row longer than a block. Again, with blocks as large as we accept.
        with step(f"loading {file.name}", size) as loading:
            batches = read_batches(file, target, CSV_MAX_ROW_BYTES, loading)
            result = store.load(tenant, table, batches)
    if state.json:
        render.emit_json(render.write_json(tenant, table, result))
    else:
        render.say(
            f"loaded {render.plural(result.upserted, 'row')} into {tenant}/{table} "
            f"from {file.name}: commit ts {result.ts} ({local_time(result.ts)})"
        )


def delete(
    ctx: typer.Context,
    tenant: Tenant,
    table: TableRef,
    keys: Annotated[
        Path,
        typer.Option(
            "--keys",
            metavar="FILE",
            help="A .parquet or .csv file holding exactly the key columns.",
            exists=True,
            dir_okay=False,
            readable=True,
            show_default=False,
        ),
    ],
) -> None:
    """Delete the rows whose primary keys are listed in a file, in one commit.

    The file holds the key columns only (a CSV file: a header, then one key
    per row); keys that are not there are counted and skipped.

    Example:
      rewind delete acme shop.orders --keys examples/oops.csv
    """
    from tenants.load_files import read_file

    state = cli_state(ctx)
    tenant_arg(tenant)
    table_arg(table)
    store = state.store()
    key_rows = read_file(keys, _schema(store, tenant, table).key_arrow())
    # Only keys that are there get a tombstone, so the count is what was deleted.
    result = store.write(tenant, table, deletes=key_rows, only_present=True)
    given = key_rows.num_rows
    if state.json:
        render.emit_json(render.write_json(tenant, table, result) | {"keys_given": given})
    elif not result.object_ids:
        render.say(
            f"deleted 0 keys from {tenant}/{table}: none of the {render.plural(given, 'key')} "
            "given is there; nothing was written"
        )
    else:
        absent = given - result.deleted
        note = f" ({render.plural(absent, 'key')} given not there)" if absent else ""
        render.say(
            f"deleted {render.plural(result.deleted, 'key')} from {tenant}/{table}{note}: "
            f"commit ts {result.ts} ({local_time(result.ts)})"
        )


def query(
    ctx: typer.Context,
    tenant: Tenant,
    table: Annotated[
        str | None,
        typer.Argument(metavar="DB.TABLE", help="The table (or --sql QUERY).", show_default=False),
    ] = None,
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            metavar="TIME",
            help="Read as of this time: a snapshot name, -1h, PT15M (that long ago), now, "
            "an ISO-8601 instant or a ts in µs (default: now).",
            show_default=False,
        ),
    ] = None,
    snapshot: Annotated[
        str | None,
        typer.Option(
            "--snapshot",
            metavar="NAME",
            help="Read as of this snapshot (or --as-of, --at).",
            show_default=False,
        ),
    ] = None,
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            metavar="TIME",
            help="Read as of this time: -1h, PT15M, now, an ISO-8601 instant or a ts in µs.",
            show_default=False,
        ),
    ] = None,
    sql: Annotated[
        str | None,
        typer.Option(
            "--sql",
            metavar="QUERY",
            help="One read-only DuckDB query over the tenant's tables, each named "
            "database.table (SELECT ... FROM shop.orders), all read as of one time; "
            "it can read nothing else.",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            metavar="N",
            # More than the rows is all of them; limit + 1 (engine.cli.sql_query) still fits int64.
            parser=count_parser("--limit", minimum=0, ceiling=2**62),
            help=f"Print at most N rows (default: {TABLE_VIEW_LIMIT} in "
            "the table view, all with --json).",
            show_default=False,
        ),
    ] = None,
    reader: Annotated[
        ReaderChoice, typer.Option("--reader", help="Where the read runs.")
    ] = ReaderChoice.local,
    key_from: Annotated[
        str | None,
        typer.Option(
            "--from",
            metavar="KEY",
            help="First key to show (inclusive): a value, or a JSON list for several "
            "key columns. Objects and row groups before it are not read.",
            show_default=False,
        ),
    ] = None,
    key_to: Annotated[
        str | None,
        typer.Option(
            "--to",
            metavar="KEY",
            help="Last key to show (inclusive), as --from.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Print the table's visible rows, sorted by primary key, now or as of a time;
    or the result of a DuckDB query over the tenant's tables at that time.

    Examples:
      rewind query acme shop.orders
      rewind query acme shop.orders --as-of mon --limit 10
      rewind query acme --snapshot mon --sql "SELECT item, sum(qty) FROM shop.orders GROUP BY item"
    """
    import pyarrow as pa

    from tenants.reads.key_range import KeyRange
    from tenants.reads.visible import stream_visible

    state = cli_state(ctx)
    tenant_arg(tenant)
    if (table is None) == (sql is None):
        raise InvalidArgument("say what to read: DB.TABLE, or --sql QUERY (not both)")
    when = read_time_arg(as_of, snapshot, at)
    if limit is not None and limit < 0:
        raise InvalidArgument(f"invalid --limit {limit}: use 0 or more rows")
    if sql is not None and (key_from or key_to or reader is ReaderChoice.spark):
        raise InvalidArgument(
            "--sql reads every table it names: leave out --from, --to and --reader"
        )
    if limit is None and not state.json:
        limit = TABLE_VIEW_LIMIT
    store = state.store()
    # Pin "now" to a ts, so the title names exactly the time that was read.
    ts = store.now() if when is None else store.resolve_time(tenant, when)
    if sql is not None:
        show_sql(store, tenant, sql, ts, limit, state.json)
        return
    assert table is not None
    table_arg(table)
    plan = store.plan_read(tenant, table, ts)
    keys = KeyRange.parse(key_from, key_to, plan.table.schema.key_arrow())
    if keys is not None and reader is ReaderChoice.spark:
        raise InvalidArgument("--from and --to read locally: leave out --reader spark")
    if reader is ReaderChoice.spark:
        whole = store.read(tenant, table, ts, reader="spark")
        keep = whole.num_rows if limit is None else min(limit + 1, whole.num_rows)
        parts: Iterable[pa.Table] = [whole.slice(0, keep)]
    else:
        # One row past the limit tells whether the limit left rows out.
        parts = stream_visible(
            store.objects, plan, limit=None if limit is None else limit + 1, keys=keys
        )
    if state.json and limit is None:
        render.emit_rows_json(parts)  # streamed: never the whole result at once
        return
    assert limit is not None
    rows = pa.Table.from_batches(
        [b for part in parts for b in part.to_batches()], schema=plan.table.schema.arrow()
    )
    shown = rows.slice(0, min(limit, rows.num_rows))  # slice() wants a C long
    if state.json:
        render.emit_rows_json(shown)
    else:
        title = f"{tenant}/{table} as of {local_time(ts)}"
        render.show(render.rows_table(title, shown, rows.num_rows > limit, ts))


def compact(
    ctx: typer.Context,
    tenant: Tenant,
    table: Annotated[
        str | None,
        typer.Argument(
            metavar="DB.TABLE|DB.*",
            help="One table, or every table of one database (default: every table).",
            show_default=False,
        ),
    ] = None,
    target_mb: Annotated[
        float,
        typer.Option("--target-mb", metavar="MIB", help="Target size of merged objects, in MiB."),
    ] = DEFAULT_TARGET_BYTES / MIB,
    memory: Annotated[
        str | None,
        typer.Option(
            "--memory",
            metavar="SIZE",
            help="Peak memory (RSS) of the whole command, e.g. 512MiB or 2GiB; at least "
            f"{MIN_MEMORY // MIB} MiB (default: a quarter of RAM, at most 1 GiB).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Merge each table's objects into few large objects sorted by (key, ts), streaming."""
    state = cli_state(ctx)
    tenant_arg(tenant)
    if table is not None and not table.endswith(".*"):  # DB.* is checked by the store
        table_arg(table)
    # `not <=` also refuses nan; inf and 1e308 fail the upper bound before int().
    if not 0 < target_mb <= MAX_TARGET_BYTES / MIB:
        raise InvalidArgument(
            f"invalid --target-mb {target_mb}: use a size above 0 and at most "
            f"{MAX_TARGET_BYTES // MIB} MiB"
        )
    budget = size_arg(memory, "--memory") if memory is not None else None
    if budget is not None and budget < MIN_MEMORY:
        raise InvalidArgument(f"invalid --memory {memory!r}: give at least {MIN_MEMORY // MIB} MiB")
    results = state.store().compact(
        tenant, table, target_bytes=max(1, int(target_mb * MIB)), memory=budget
    )
    if state.json:
        render.emit_json([asdict(r) for r in results])
    else:
        render.show(render.compaction_table(tenant, results))


def objects(ctx: typer.Context, tenant: Tenant) -> None:
    """List the live objects of every table of the tenant."""
    state = cli_state(ctx)
    tenant_arg(tenant)
    listing = state.store().objects_of(tenant)
    if state.json:
        render.emit_json([render.object_json(t, o) for t, o in listing])
    else:
        render.show_all(render.objects_tables(tenant, listing))
