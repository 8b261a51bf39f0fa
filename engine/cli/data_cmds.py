"""``rewind load|delete|query|compact|objects``: data in, data out, layout.

Files are read whole into Arrow (one file = one commit, however big) and
handed to the store's write path, which casts them to the table's schema and
rejects them — writing nothing — if they do not fit.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import typer

from engine.cli import render
from engine.cli.context import (
    cli_state,
    read_time_arg,
    resolve_as_of,
    size_arg,
    table_arg,
    tenant_arg,
)
from engine.cli.options import count_parser
from engine.cli.render_layout import local_time
from engine.cli.sql_query import show_sql
from tenants.compaction import DEFAULT_TARGET_BYTES, MAX_TARGET_BYTES, MIN_MEMORY
from tenants.errors import InvalidArgument
from tenants.progress import SILENT, Share, Step, step
from tenants.reads.key_range import KeyRange
from tenants.reads.visible import stream_visible
from tenants.schema import TableSchema
from tenants.store import TableStore

MIB = 1024 * 1024
CSV_MAX_ROW_BYTES = 1024 * MIB
CSV_BLOCK_BYTES = MIB  # a streamed CSV's read block (rows longer than it: see load)
TABLE_VIEW_LIMIT = 100
CSV_SUFFIXES = (".csv", ".csv.gz", ".csv.bz2", ".csv.zst")
PARQUET_SUFFIXES = (".parquet", ".pq")

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


def read_file(path: Path, target: pa.Schema) -> pa.Table:
    """Read a Parquet or CSV file into Arrow, ready for the write path.

    CSV types are inferred, except that columns the table stores as text (or
    bytes) are read as text: inference would turn ``007`` into 7 before the
    write path could cast it back to a string. Everything else is cast (and
    checked) by the write path, so CSV and Parquet follow the same rules.

    CSV nulls follow PostgreSQL's ``COPY ... CSV``: only an unquoted empty field
    is null, in every column. A quoted empty field (``""``) is the empty string,
    and any other text is data: ``nan``, ``NULL`` or ``N/A`` stay text in a
    text column, and ``nan`` is NaN in a float column. pyarrow's ``write_csv``
    writes exactly this way, so its files round-trip.

    Raises:
        InvalidArgument: unknown extension, the file cannot be parsed, or two of
            its columns share a name.
    """
    name = path.name.lower()
    try:
        if name.endswith(PARQUET_SUFFIXES):
            return _unique_columns(path, pq.read_table(path))
        if name.endswith(CSV_SUFFIXES):
            return _unique_columns(path, _read_csv(path, target))
    except (pa.ArrowInvalid, OSError) as e:
        raise InvalidArgument(f"cannot read {path}: {_short(str(e))}") from e
    raise InvalidArgument(
        f"cannot tell the format of {path}: use a file ending in "
        f"{', '.join(PARQUET_SUFFIXES + CSV_SUFFIXES)}"
    )


class _RowTooLong(InvalidArgument):
    """A CSV row longer than the reader's block (see ``read_batches``)."""


def read_batches(
    path: Path,
    target: pa.Schema,
    block_bytes: int = CSV_BLOCK_BYTES,
    progress: Step = SILENT,
) -> Iterator[pa.Table]:
    """A Parquet or CSV file as batches, for a streamed load (tenants.loads).

    CSV follows :func:`read_file`'s rules, with one difference that streaming
    forces: a streaming reader fixes each column's type from its first block,
    so a column the table has is read as text and cast by the write path
    (``007`` stays text in a text column; ``1.5`` after a block of integers is
    not an error). Columns the table lacks keep an inferred type, and the write
    path names them.

    ``progress`` advances by the file's bytes read.

    Raises:
        InvalidArgument: unknown extension, a parse error, a repeated column
            (``_RowTooLong`` for a row longer than ``block_bytes``).
    """
    name = path.name.lower()
    try:
        if name.endswith(PARQUET_SUFFIXES):
            parquet = pq.ParquetFile(path)
            _unique_names(path, parquet.schema_arrow.names)
            share = Share(progress, path.stat().st_size, parquet.metadata.num_rows)
            for batch in parquet.iter_batches(batch_size=64 * 1024):
                share.rows(batch.num_rows)
                yield pa.Table.from_batches([batch])
            share.finish()
            return
        if name.endswith(CSV_SUFFIXES):
            types = {f.name: _csv_type(f.type) for f in target}
            size = path.stat().st_size
            with pa.input_stream(str(path)) as stream:
                reader = pa_csv.open_csv(
                    stream,
                    read_options=pa_csv.ReadOptions(block_size=block_bytes, use_threads=False),
                    convert_options=_csv_convert(types),
                )
                _unique_names(path, reader.schema.names)
                done = 0
                try:
                    for batch in reader:
                        # What the reader has taken so far. It reads ahead of its
                        # batches on a thread of its own, so the position is read
                        # once: two reads may differ, and what lies between them
                        # would be counted by neither advance.
                        taken = stream.tell()
                        progress.advance(taken - done)
                        done = taken
                        yield pa.Table.from_batches([batch])
                finally:
                    progress.advance(max(0, size - done))
            return
    except (pa.ArrowInvalid, OSError) as e:
        if "straddl" in str(e):
            if block_bytes >= CSV_MAX_ROW_BYTES:
                raise InvalidArgument(
                    f"cannot read {path}: a row is longer than {CSV_MAX_ROW_BYTES // MIB} MiB; "
                    "load such values from a Parquet file"
                ) from e
            raise _RowTooLong(f"cannot read {path}: a row is longer than a block") from e
        raise InvalidArgument(f"cannot read {path}: {_short(str(e))}") from e
    raise InvalidArgument(
        f"cannot tell the format of {path}: use a file ending in "
        f"{', '.join(PARQUET_SUFFIXES + CSV_SUFFIXES)}"
    )


def _csv_type(kind: pa.DataType) -> pa.DataType:
    """How a table column is read from CSV: text as itself (binary as text), the rest as text
    for the write path to cast."""
    return (
        pa.string()
        if pa.types.is_binary(kind)
        else (kind if pa.types.is_string(kind) or pa.types.is_large_string(kind) else pa.string())
    )


def _csv_convert(types: dict[str, pa.DataType]) -> pa_csv.ConvertOptions:
    return pa_csv.ConvertOptions(
        column_types=types,
        null_values=[""],
        strings_can_be_null=True,
        quoted_strings_can_be_null=False,
    )


def _unique_names(path: Path, names: list[str]) -> None:
    """Refuse a file naming a column twice: which of the two would be the value?"""
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise InvalidArgument(
            f"cannot load {path}: column(s) {repeated} appear more than once in its header; "
            "give each column once"
        )


def _read_csv(path: Path, target: pa.Schema) -> pa.Table:
    text_types = {
        f.name: pa.string() if pa.types.is_binary(f.type) else f.type
        for f in target
        if pa.types.is_string(f.type)
        or pa.types.is_large_string(f.type)
        or pa.types.is_binary(f.type)
    }
    convert = _csv_convert(text_types)
    try:
        return pa_csv.read_csv(path, convert_options=convert)
    except pa.ArrowInvalid as e:
        # A row longer than pyarrow's block (1 MiB) fails with this message, the
        # only sign pyarrow gives (no error code). Such rows are rare, so only
        # then read again with blocks as large as the largest row we accept.
        if "straddl" not in str(e):
            raise
    try:
        return pa_csv.read_csv(
            path,
            read_options=pa_csv.ReadOptions(block_size=CSV_MAX_ROW_BYTES),
            convert_options=convert,
        )
    except pa.ArrowInvalid as e:
        if "straddl" not in str(e):
            raise
        raise InvalidArgument(
            f"cannot read {path}: a row is longer than {CSV_MAX_ROW_BYTES // MIB} MiB; "
            "load such values from a Parquet file"
        ) from e


def _unique_columns(path: Path, rows: pa.Table) -> pa.Table:
    _unique_names(path, rows.column_names)
    return rows


def _short(message: str, limit: int = 300) -> str:
    """pyarrow quotes the offending row, which may be megabytes long."""
    return message if len(message) <= limit else f"{message[:limit]}... (cut)"


def _schema(store: TableStore, tenant: str, database: str, table: str) -> TableSchema:
    """The table's current schema (raises ``NotFound`` for an unknown tenant or table).

    Only a parsing hint: the write path checks the batch against the schema
    again inside its commit.
    """
    return store.plan_read(tenant, database, table).table.schema


def load(ctx: typer.Context, tenant: Tenant, table: TableRef, file: InputFile) -> None:
    """Upsert every row of FILE into the table, in one commit (streamed: any size).

    A CSV file has a header naming the table's columns; a row whose key is
    already there replaces it.

    Example:
      rewind load acme shop.orders examples/orders.csv
    """
    state = cli_state(ctx)
    tenant_arg(tenant)
    database, name = table_arg(table)
    store = state.store()
    target = _schema(store, tenant, database, name).arrow()
    size = file.stat().st_size
    try:
        with step(f"loading {file.name}", size) as loading:
            batches = read_batches(file, target, progress=loading)
            result = store.load(tenant, database, name, batches)
    except _RowTooLong:
        # Rare: a row longer than a block. Again, with blocks as large as we accept.
        with step(f"loading {file.name}", size) as loading:
            batches = read_batches(file, target, CSV_MAX_ROW_BYTES, loading)
            result = store.load(tenant, database, name, batches)
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
    state = cli_state(ctx)
    tenant_arg(tenant)
    database, name = table_arg(table)
    store = state.store()
    key_rows = read_file(keys, _schema(store, tenant, database, name).key_arrow())
    # Only keys that are there get a tombstone, so the count is what was deleted.
    result = store.write(tenant, database, name, deletes=key_rows, only_present=True)
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
    ts = store.now() if when is None else resolve_as_of(store, tenant, when)
    if sql is not None:
        show_sql(store, tenant, sql, ts, limit, state.json)
        return
    assert table is not None
    database, name = table_arg(table)
    plan = store.plan_read(tenant, database, name, ts)
    keys = KeyRange.parse(key_from, key_to, plan.table.schema.key_arrow())
    if keys is not None and reader is ReaderChoice.spark:
        raise InvalidArgument("--from and --to read locally: leave out --reader spark")
    if reader is ReaderChoice.spark:
        whole = store.read(tenant, database, name, ts, reader="spark")
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
            metavar="DB.TABLE", help="One table (default: every table).", show_default=False
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
    database, name = table_arg(table) if table is not None else (None, None)
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
        tenant, database, name, target_bytes=max(1, int(target_mb * MIB)), memory=budget
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


def register(app: typer.Typer) -> None:
    """Add the data commands to the root app (they take a tenant, not a group)."""
    for command in (load, delete, query, compact, objects):
        app.command(command.__name__)(command)
