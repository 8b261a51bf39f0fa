"""``rewind query TENANT --sql QUERY``: DuckDB over the tenant's tables at one time.

Each ``db.table`` the query names is a DuckDB view over the rows visible at
the time (tenants.reads.interop.duckdb_sql, the Arrow stream ``to_duckdb`` scans),
so joins, filters and aggregates see visible rows only, every table at the
same time. The result prints as ``rewind query`` prints rows: a table of at
most ``--limit`` rows, or JSON (all of them, streamed, under ``--json``).
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any

from engine.cli import render
from engine.cli.render_layout import local_time
from tenants.errors import InvalidArgument

if TYPE_CHECKING:
    import pyarrow as pa

    from tenants.store import TableStore

BATCH_ROWS = 64 * 1024


def show_sql(
    store: TableStore, tenant: str, sql: str, ts: int, limit: int | None, as_json: bool
) -> None:
    """Run ``sql`` over ``tenant``'s tables at ``ts`` and print its rows.

    Raises:
        InvalidArgument: the query does not parse, is not one read-only query,
            names no ``db.table``, or fails (before or after rows were printed).
        NotFound: a table the tenant does not have at ``ts``.
        MissingDependency: duckdb is not installed.
    """
    import pyarrow as pa

    from tenants.reads.interop import duckdb_sql, sandboxed_duckdb

    connection = sandboxed_duckdb()
    try:
        batches = result_batches(duckdb_sql(store, tenant, sql, as_of=ts, connection=connection))
        try:
            if as_json and limit is None:
                render.emit_rows_json(pa.Table.from_batches([b]) for b in batches)
                return
            assert limit is not None
            rows = first_rows(batches, limit + 1)
        finally:
            batches.close()
    finally:
        # Closed here, not left to the interpreter's exit, where DuckDB would
        # tear down its scans of Rewind's Python streams as Python finalizes.
        connection.close()
    shown = rows.slice(0, min(limit, rows.num_rows))
    if as_json:
        render.emit_rows_json(shown)
    else:
        title = f"{tenant} as of {local_time(ts)}: {' '.join(sql.split())}"
        render.show(render.rows_table(title, shown, rows.num_rows > limit, ts))


def first_rows(batches: Iterator[pa.RecordBatch], count: int) -> pa.Table:
    """The first ``count`` rows of ``batches`` (fewer if they end first).

    Counted here, not by DuckDB's LIMIT, so any ``--limit`` works (DuckDB's
    takes an int64)."""
    import pyarrow as pa

    kept: list[pa.RecordBatch] = []
    held = 0
    for batch in batches:
        kept.append(batch.slice(0, min(batch.num_rows, count - held)))  # slice wants a C long
        held += kept[-1].num_rows
        if held >= count:
            break
    return pa.Table.from_batches(kept)


def result_batches(relation: Any) -> Generator[pa.RecordBatch, None, None]:
    """The relation's rows, batch by batch, after an empty batch that carries the
    schema (so a result of no rows still has its columns).

    A failure at any batch, the first or a later one, is one ``InvalidArgument``:
    DuckDB raises its own errors before the first batch, pyarrow's ``OSError``
    after it."""
    import duckdb
    import pyarrow as pa

    try:
        start = getattr(relation, "to_arrow_reader", None) or relation.fetch_record_batch
        with start(BATCH_ROWS) as reader:
            yield pa.RecordBatch.from_pylist([], schema=reader.schema)
            yield from reader
    except (duckdb.Error, pa.ArrowException, OSError) as e:
        raise InvalidArgument(f"the query failed: {str(e).splitlines()[0]}") from e
