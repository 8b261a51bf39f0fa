"""A table at a snapshot, in DuckDB and polars: their own objects over Rewind's stream.

Both engines scan :class:`tenants.reads.arrow.ArrowRead`, the checked plan of a
read, never the Parquet objects (docs/engines.md says why). Each query an
engine runs opens a new stream over the same plan, so a relation or a
LazyFrame can be queried again and again and always shows the same rows;
a plain ``RecordBatchReader`` handed to them would be drained by the first
query and read as empty by the next, without an error.

duckdb and polars are optional (``pip install 'rewind-tables[engines]'``): they are
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

from tenants.catalog.query_views import create_table_view, relation_name, sandboxed_connection
from tenants.errors import InvalidArgument, MissingDependency
from tenants.names import object_name
from tenants.reads.arrow import Keys, Store, plan_arrow_read, plan_time
from tenants.times import AsOf

if TYPE_CHECKING:
    import duckdb
    import polars as pl

__all__ = ["check_query", "duckdb_sql", "sandboxed_duckdb", "sql_tables", "to_duckdb", "to_polars"]

INSTALL_HINT = "pip install 'rewind-tables[engines]'"


def to_duckdb(
    store: Store,
    tenant: str,
    table: str,
    as_of: AsOf | None = None,
    *,
    columns: Sequence[str] | None = None,
    keys: Keys | None = None,
    filter: pc.Expression | None = None,
    connection: duckdb.DuckDBPyConnection | None = None,
    name: str | None = None,
) -> duckdb.DuckDBPyRelation:
    """The visible rows of ``table`` at a time, as a DuckDB relation.

    DuckDB scans the rows as Rewind streams them (in primary-key order, in
    batches), once per query it runs on the relation; filters, joins and
    aggregates in DuckDB apply to visible rows only, so they are always
    correct. Arguments as :func:`tenants.reads.arrow.read_arrow`, plus:

    Args:
        connection: the DuckDB connection to put the relation on. Without one,
            Rewind opens its own, sandboxed as ``rewind query --sql``'s is (no
            file, URL or extension, settings locked), so SQL run on the
            relation (``relation.query("t", "SELECT ... FROM t")``) reads these
            rows and nothing else. A connection the caller passes stays the
            caller's: Rewind registers the relation (and the view ``name``) on
            it and changes none of its settings.
        name: also make the rows a view of that name on ``connection``, for SQL
            (``connection.sql("SELECT ... FROM orders")``); an existing view of
            that name is replaced. Needs ``connection``: a view on a connection
            only Rewind holds could never be queried by name.

    Raises:
        MissingDependency: duckdb is not installed.
        InvalidArgument: ``name`` without ``connection``.
        and what :func:`~tenants.reads.arrow.read_arrow` raises, when called.
    """
    duck = _engine("duckdb", "to_duckdb")
    if name is not None:
        object_name(name, "view")
        if connection is None:
            raise InvalidArgument(
                f"a view {name!r} needs the connection you will query it on: pass "
                "connection=duckdb.connect() (or duckdb.default_connection()) with name"
            )
    read = plan_arrow_read(
        store,
        tenant,
        table,
        as_of,
        columns=columns,
        keys=keys,
        filter=filter,
    )
    if connection is None:
        connection = sandboxed_connection(duck)
    relation = connection.from_arrow(read)
    if name is not None:
        relation.create_view(name, replace=True)
    return relation


def to_polars(
    store: Store,
    tenant: str,
    table: str,
    as_of: AsOf | None = None,
    *,
    columns: Sequence[str] | None = None,
    keys: Keys | None = None,
    filter: pc.Expression | None = None,
    lazy: bool = True,
) -> pl.LazyFrame | pl.DataFrame:
    """The visible rows of ``table`` at a time, as a polars LazyFrame
    (or, with ``lazy=False``, the DataFrame it collects to).

    The LazyFrame is a polars IO source over Rewind's stream, read anew each
    time it is collected: polars pushes its projection down (only the columns a
    query uses are read from the objects) and stops early for ``head``; its
    predicates run on the visible rows, after MVCC resolution, and prune
    nothing (key bounds prune: pass ``keys``). Under polars' streaming engine
    (the default in polars 2) a query runs in the memory of a few batches;
    the in-memory engine, and ``lazy=False``, hold the result.
    Arguments as :func:`tenants.reads.arrow.read_arrow`.

    Raises:
        MissingDependency: polars is not installed, or too old to have IO sources.
        and what :func:`~tenants.reads.arrow.read_arrow` raises, when called.
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
        as_of,
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
    as_of: AsOf | None = None,
    *,
    connection: duckdb.DuckDBPyConnection | None = None,
) -> duckdb.DuckDBPyRelation:
    """The result of a DuckDB ``sql`` query over the tenant's tables, every table it
    names (``db.table``) read as :func:`to_duckdb` reads it, all at one time.

    ``sql`` must be one read-only query (:func:`check_query`), refused before
    anything is planned or registered. Each ``db.table`` it names becomes a
    view ``db.table`` over the rows visible at that time, resolved exactly
    (``shop.Orders`` reads Rewind's ``shop.Orders``, never ``shop.orders``):
    joins, filters and aggregates run on visible rows only. The time is
    resolved once, so two tables are never read at two times.

    The connection is, by default, a new one that can read only those views
    (:func:`tenants.catalog.query_views.sandboxed_connection`): no file, URL,
    extension or setting. A connection the caller passes stays the caller's:
    Rewind registers the views on it and changes none of its settings.

    Raises:
        MissingDependency: duckdb is not installed.
        InvalidArgument: the query does not parse, is not one read-only query,
            names no ``db.table``, names two DuckDB cannot tell apart, or fails.
        and what :func:`~tenants.reads.arrow.read_arrow` raises for each table
        (``NotFound`` for a table the tenant does not have at that time).
    """
    duck = _engine("duckdb", "duckdb_sql")
    check_query(sql, duck)
    tables = sql_tables(sql, duck)
    first = plan_time(store, tenant, as_of)
    reads = [
        (database, table, plan_arrow_read(store, tenant, f"{database}.{table}", first))
        for database, table in tables
    ]
    if connection is None:
        connection = sandboxed_connection(duck)
    for database, table, read in reads:
        hidden = relation_name(database, table)
        try:
            connection.from_arrow(read).create_view(hidden, replace=True)
            create_table_view(connection, database, table, hidden)
        except duck.Error as e:
            raise InvalidArgument(
                f"DuckDB cannot show {database}.{table} under that name "
                f"({str(e).splitlines()[0]}): read it with `rewind query {tenant} "
                f"{database}.{table}` or to_duckdb"
            ) from e
    try:
        relation = connection.sql(sql)
    except duck.Error as e:
        raise InvalidArgument(f"the query failed: {str(e).splitlines()[0]}") from e
    if relation is None:  # check_query lets only queries through; this is its backstop
        raise InvalidArgument("the query returned no result: give a SELECT")
    return relation


def sandboxed_duckdb() -> duckdb.DuckDBPyConnection:
    """A new in-memory DuckDB connection that reads no file, URL or Python
    variable, loads no extension, and whose settings no statement can change:
    the one :func:`duckdb_sql` and :func:`to_duckdb` open when given none.

    Raises:
        MissingDependency: duckdb is not installed.
    """
    connection: duckdb.DuckDBPyConnection = sandboxed_connection(
        _engine("duckdb", "sandboxed_duckdb")
    )
    return connection


READ_ONLY = "a SELECT (or WITH, VALUES, FROM, DESCRIBE, SUMMARIZE)"


def check_query(sql: str, duck: ModuleType | None = None) -> None:
    """Refuse ``sql`` unless it is exactly one read-only query.

    The sandbox already stops a statement from reaching a file or a setting;
    this says so plainly before anything runs, and keeps statements that would
    change the connection (CREATE, SET, ATTACH...) from running at all. DuckDB's
    parser decides the kind; ``PRAGMA`` parses as a SELECT of a pragma function
    yet is refused, as is ``EXPLAIN``, whose inner statement cannot be checked.

    Raises:
        InvalidArgument: the query does not parse, holds no statement or more
            than one, or is not a read-only query.
    """
    duck = duck or _engine("duckdb", "check_query")
    try:
        statements = duck.extract_statements(sql)
    except duck.Error as e:
        raise InvalidArgument(f"the query does not parse: {str(e).splitlines()[0]}") from e
    if len(statements) != 1:
        raise InvalidArgument(
            f"the query must be one statement, {READ_ONLY}; it holds {len(statements)}"
        )
    kind = statements[0].type
    first = _first_word(sql, duck)
    if kind != duck.StatementType.SELECT or first == "PRAGMA":
        what = first if first in ("PRAGMA", "EXPLAIN") else kind.name
        raise InvalidArgument(
            f"only a single read-only query runs, {READ_ONLY}, not {what}: a query "
            "reads the tenant's tables at one time and nothing else"
        )


def _first_word(sql: str, duck: ModuleType) -> str:
    """The statement's first word, upper-case, past any comment (DuckDB's tokenizer)."""
    tokens = duck.tokenize(sql)
    found = re.match(r"\w+", sql[tokens[0][0] :]) if tokens else None
    return found.group(0).upper() if found else ""


def sql_tables(sql: str, duck: ModuleType | None = None) -> list[tuple[str, str]]:
    """The ``db.table`` names a query reads, as DuckDB's parser finds them (a name
    in another form, such as an unqualified CTE, is DuckDB's own).

    DuckDB matches names without regard to case, where Rewind does not: two
    names that differ only in case are refused, and so is a name in another
    form (``memory.shop.orders``, or ``orders`` for ``main.orders``) that
    DuckDB would resolve to one of the query's tables, so every table is
    read under exactly the name it was asked by.

    Raises:
        InvalidArgument: the query does not parse, names no ``db.table``, or
            names tables DuckDB cannot tell apart.
        InvalidName: a ``db.table`` that is no valid Rewind name.
    """
    duck = duck or _engine("duckdb", "sql_tables")
    # Parsed on a sandbox: finding the names binds table functions (read_csv...).
    parser = sandboxed_connection(duck)
    try:
        names = parser.get_table_names(sql, qualified=True)
    except duck.ParserException as e:
        raise InvalidArgument(f"the query does not parse: {str(e).splitlines()[0]}") from e
    except duck.Error as e:
        raise InvalidArgument(f"the query failed: {str(e).splitlines()[0]}") from e
    finally:
        parser.close()
    references = []
    for name in sorted(names):
        reference = re.split(r"\s+AS\s+", name, maxsplit=1, flags=re.IGNORECASE)[0].strip()
        parts = [p.strip('"') for p in re.findall(r'"(?:[^"]|"")*"|[^.]+', reference)]
        references.append([p.replace('""', '"') for p in parts])
    found = sorted(
        {
            (object_name(r[0], "database"), object_name(r[1], "table"))
            for r in references
            if len(r) == 2
        }
    )
    if not found:
        raise InvalidArgument(
            "the query names no table: name each as database.table (FROM shop.orders)"
        )
    folded: dict[tuple[str, str], str] = {}
    for database, table in found:
        other = folded.setdefault((database.casefold(), table.casefold()), f"{database}.{table}")
        if other != f"{database}.{table}":
            raise InvalidArgument(
                f"the query names {other} and {database}.{table}, which differ only in case: "
                "DuckDB cannot tell them apart, so query them one at a time"
            )
    for parts in references:
        if len(parts) == 2:
            continue
        # DuckDB's search path holds schema main: a bare name may resolve to main.x.
        qualified = ("main", *parts) if len(parts) == 1 else parts[-2:]
        key = (qualified[0].casefold(), qualified[1].casefold())
        if key in folded:
            raise InvalidArgument(
                f"the query names {'.'.join(parts)}, which DuckDB would read as "
                f"{folded[key]}: name each table as database.table"
            )
    return found


def _engine(module: str, caller: str) -> Any:
    """Import an optional engine, or say how to install it."""
    try:
        engine: ModuleType = importlib.import_module(module)
    except ImportError as e:
        raise MissingDependency(f"{caller} needs {module}: {INSTALL_HINT}") from e
    return engine
