"""A table at a snapshot, in DuckDB and polars: their own objects over Rewind's stream.

Both engines scan :class:`tenants.arrow_reads.ArrowRead`, the checked plan of a
read, never the Parquet objects (docs/engines.md says why). Each query an
engine runs opens a new stream over the same plan, so a relation or a
LazyFrame can be queried again and again and always shows the same rows;
a plain ``RecordBatchReader`` handed to them would be drained by the first
query and read as empty by the next, without an error.

duckdb and polars are optional (``pip install 'rewind[engines]'``): they are
imported when a function here is called, never at import.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import replace
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pyarrow.compute as pc

from tenants.arrow_reads import Keys, Store, plan_arrow_read, plan_time
from tenants.catalog.engine_views import create_table_view
from tenants.errors import InvalidArgument, MissingDependency
from tenants.names import object_name

if TYPE_CHECKING:
    import duckdb
    import polars as pl

__all__ = ["duckdb_sql", "sql_tables", "to_duckdb", "to_polars"]

INSTALL_HINT = "pip install 'rewind[engines]'"


def to_duckdb(
    store: Store,
    tenant: str,
    table: str,
    *,
    snapshot: str | None = None,
    ts: int | None = None,
    at: str | None = None,
    columns: Sequence[str] | None = None,
    keys: Keys | None = None,
    filter: pc.Expression | None = None,
    connection: duckdb.DuckDBPyConnection | None = None,
    name: str | None = None,
) -> duckdb.DuckDBPyRelation:
    """The visible rows of ``table`` at a snapshot or time, as a DuckDB relation.

    DuckDB scans the rows as Rewind streams them (in primary-key order, in
    batches), once per query it runs on the relation; filters, joins and
    aggregates in DuckDB apply to visible rows only, so they are always
    correct. Arguments as :func:`tenants.arrow_reads.read_arrow`, plus:

    Args:
        connection: the DuckDB connection (default: duckdb's default one, the
            one ``duckdb.sql`` uses).
        name: also make the rows a view of that name on the connection, for SQL
            (``duckdb.sql("SELECT ... FROM orders")``); an existing view of that
            name is replaced.

    Raises:
        MissingDependency: duckdb is not installed.
        and what :func:`~tenants.arrow_reads.read_arrow` raises, when called.
    """
    duck = _engine("duckdb", "to_duckdb")
    read = plan_arrow_read(
        store,
        tenant,
        table,
        snapshot=snapshot,
        ts=ts,
        at=at,
        columns=columns,
        keys=keys,
        filter=filter,
    )
    if name is not None:
        object_name(name, "view")
    if connection is None:
        default = duck.default_connection
        connection = default() if callable(default) else default
    assert connection is not None
    relation = connection.from_arrow(read)
    if name is not None:
        relation.create_view(name, replace=True)
    return relation


def to_polars(
    store: Store,
    tenant: str,
    table: str,
    *,
    snapshot: str | None = None,
    ts: int | None = None,
    at: str | None = None,
    columns: Sequence[str] | None = None,
    keys: Keys | None = None,
    filter: pc.Expression | None = None,
    lazy: bool = True,
) -> pl.LazyFrame | pl.DataFrame:
    """The visible rows of ``table`` at a snapshot or time, as a polars LazyFrame
    (or, with ``lazy=False``, the DataFrame it collects to).

    The LazyFrame is a polars IO source over Rewind's stream, read anew each
    time it is collected: polars pushes its projection down (only the columns a
    query uses are read from the objects) and stops early for ``head``; its
    predicates run on the visible rows, after MVCC resolution, and prune
    nothing (key bounds prune: pass ``keys``). Under polars' streaming engine
    (the default in polars 2) a query runs in the memory of a few batches;
    the in-memory engine, and ``lazy=False``, hold the result.
    Arguments as :func:`tenants.arrow_reads.read_arrow`.

    Raises:
        MissingDependency: polars is not installed, or too old to have IO sources.
        and what :func:`~tenants.arrow_reads.read_arrow` raises, when called.
    """
    polars = _engine("polars", "to_polars")
    try:
        from polars.io.plugins import register_io_source
    except ImportError as e:
        raise MissingDependency(
            f"to_polars needs polars>=1.4 (IO sources); polars {polars.__version__} is "
            f"installed: {INSTALL_HINT}"
        ) from e
    read = plan_arrow_read(
        store,
        tenant,
        table,
        snapshot=snapshot,
        ts=ts,
        at=at,
        columns=columns,
        keys=keys,
        filter=filter,
    )
    schema = polars.from_arrow(read.schema.empty_table()).schema

    def source(
        with_columns: list[str] | None,
        predicate: pl.Expr | None,
        n_rows: int | None,
        batch_size: int | None,
    ) -> Iterator[pl.DataFrame]:
        """One scan: polars asks for columns, a predicate (which it leaves to the
        source to apply) and a row count; all three apply to visible rows."""
        shown = list(with_columns or read.columns)  # none named: all (a count needs rows)
        needed = [] if predicate is None else predicate.meta.root_names()
        scan = read.select(shown + [c for c in dict.fromkeys(needed) if c not in shown])
        if predicate is None and n_rows is not None:
            scan = replace(scan, limit=n_rows if scan.limit is None else min(n_rows, scan.limit))
        left = n_rows
        for batch in scan.batches():
            frame = polars.from_arrow(batch)
            assert isinstance(frame, polars.DataFrame)
            if predicate is not None:
                frame = frame.filter(predicate)
            frame = frame.select(shown)
            if left is not None:
                frame = frame.head(left)
                left -= frame.height
            if frame.height:
                yield frame
            if left == 0:
                return

    frame = register_io_source(source, schema=schema)
    return frame if lazy else frame.collect()


def duckdb_sql(
    store: Store,
    tenant: str,
    sql: str,
    *,
    snapshot: str | None = None,
    ts: int | None = None,
    at: str | None = None,
    connection: duckdb.DuckDBPyConnection | None = None,
) -> duckdb.DuckDBPyRelation:
    """The result of a DuckDB ``sql`` query over the tenant's tables, every table it
    names (``db.table``) read as :func:`to_duckdb` reads it, all at one time.

    Each ``db.table`` the query names becomes a view ``db.table`` on the
    connection (a fresh in-memory one by default) over the rows visible at
    that time: joins, filters and aggregates run on visible rows only. The
    time is resolved once, so two tables are never read at two times.

    Raises:
        MissingDependency: duckdb is not installed.
        InvalidArgument: the query does not parse, or names no ``db.table``.
        and what :func:`~tenants.arrow_reads.read_arrow` raises for each table
        (``NotFound`` for a table the tenant does not have at that time).
    """
    duck = _engine("duckdb", "duckdb_sql")
    first = plan_time(store, tenant, snapshot=snapshot, ts=ts, at=at)
    tables = sql_tables(sql, duck)
    if connection is None:
        connection = duck.connect()
    assert connection is not None
    for database, table in tables:
        read = plan_arrow_read(store, tenant, f"{database}.{table}", ts=first)
        hidden = f"__rewind_{database}__{table}"
        connection.from_arrow(read).create_view(hidden, replace=True)
        create_table_view(connection, database, table, hidden)
    try:
        return connection.sql(sql)
    except duck.Error as e:
        raise InvalidArgument(f"the query failed: {str(e).splitlines()[0]}") from e


def sql_tables(sql: str, duck: ModuleType | None = None) -> list[tuple[str, str]]:
    """The ``db.table`` names a query reads, as DuckDB's parser finds them (a name
    in another form, such as an unqualified CTE, is DuckDB's own)."""
    duck = duck or _engine("duckdb", "sql_tables")
    try:
        names = duck.get_table_names(sql, qualified=True)
    except duck.Error as e:
        raise InvalidArgument(f"the query does not parse: {str(e).splitlines()[0]}") from e
    found = []
    for name in sorted(names):
        reference = re.split(r"\s+AS\s+", name, maxsplit=1, flags=re.IGNORECASE)[0].strip()
        parts = [p.strip('"') for p in re.findall(r'"(?:[^"]|"")*"|[^.]+', reference)]
        if len(parts) == 2:
            found.append((object_name(parts[0], "database"), object_name(parts[1], "table")))
    if not found:
        raise InvalidArgument(
            "the query names no table: name each as database.table (FROM shop.orders)"
        )
    return sorted(set(found))


def _engine(module: str, caller: str) -> Any:
    """Import an optional engine, or say how to install it."""
    try:
        engine: ModuleType = importlib.import_module(module)
    except ImportError as e:
        raise MissingDependency(f"{caller} needs {module}: {INSTALL_HINT}") from e
    return engine
