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
from collections.abc import Iterator, Sequence
from dataclasses import replace
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pyarrow.compute as pc

from tenants.arrow_reads import Keys, Store, plan_arrow_read
from tenants.errors import MissingDependency
from tenants.names import object_name

if TYPE_CHECKING:
    import duckdb
    import polars as pl

__all__ = ["to_duckdb", "to_polars"]

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


def _engine(module: str, caller: str) -> Any:
    """Import an optional engine, or say how to install it."""
    try:
        engine: ModuleType = importlib.import_module(module)
    except ImportError as e:
        raise MissingDependency(f"{caller} needs {module}: {INSTALL_HINT}") from e
    return engine
