"""``rewind query TENANT --sql QUERY``: DuckDB over the tenant's tables at one time.

Each ``db.table`` the query names is a DuckDB view over the rows visible at
the time (tenants.interop.duckdb_sql, the Arrow stream ``to_duckdb`` scans),
so joins, filters and aggregates see visible rows only, every table at the
same time. The result prints as ``rewind query`` prints rows: a table of at
most ``--limit`` rows, or JSON (all of them, streamed, under ``--json``).
"""

from __future__ import annotations

import pyarrow as pa

from engine.cli import render
from engine.cli.render_layout import local_time
from tenants.errors import InvalidArgument
from tenants.interop import duckdb_sql
from tenants.store import TableStore

BATCH_ROWS = 64 * 1024


def show_sql(
    store: TableStore, tenant: str, sql: str, ts: int, limit: int | None, as_json: bool
) -> None:
    """Run ``sql`` over ``tenant``'s tables at ``ts`` and print its rows.

    Raises:
        InvalidArgument: the query does not parse, names no ``db.table`` or fails.
        NotFound: a table the tenant does not have at ``ts``.
        MissingDependency: duckdb is not installed.
    """
    import duckdb

    relation = duckdb_sql(store, tenant, sql, ts=ts)
    try:
        if as_json and limit is None:
            reader = relation.fetch_record_batch(BATCH_ROWS)
            render.emit_rows_json(pa.Table.from_batches([batch]) for batch in reader)
            return
        assert limit is not None
        # One row past the limit tells whether the limit left rows out.
        rows = relation.limit(limit + 1).fetch_record_batch(BATCH_ROWS).read_all()
    except duckdb.Error as e:
        raise InvalidArgument(f"the query failed: {str(e).splitlines()[0]}") from e
    shown = rows.slice(0, min(limit, rows.num_rows))
    if as_json:
        render.emit_rows_json(shown)
    else:
        title = f"{tenant} as of {local_time(ts)}: {' '.join(sql.split())}"
        render.show(render.rows_table(title, shown, rows.num_rows > limit, ts))
