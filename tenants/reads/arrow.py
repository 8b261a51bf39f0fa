"""A table's visible rows at a time, as an Arrow stream other engines can read.

Rewind's Parquet objects are not the table: a data object holds every
version of its rows with the internal ``__ts``, deletes live in tombstone
objects that hold only keys, and objects written before a schema change lack
the columns added since. Only the MVCC merge (tenants.reads.visible) says what a time
shows, so this module hands engines that speak Arrow (DuckDB, polars, pandas)
its output instead of the files: :func:`read_arrow` returns a
``pyarrow.RecordBatchReader`` of the visible rows, user columns only, in
primary-key order, streamed a batch at a time over
:func:`tenants.reads.visible.stream_visible`, never the whole table.

Everything that can be wrong with a request (tenant, table, time, columns,
key range, filter) is checked when the read is planned, before the first
batch; after that only the objects themselves can fail.

Filters and MVCC: a predicate on a non-key column must never drop *events*
before visibility is resolved. A key whose old version matches and whose
newer version does not would come back from the dead (the newer version
filtered away, the old one then looks newest). So only the primary-key range
(``keys``) prunes objects, row groups and rows before the merge (every event
of a key shares the key, so a key range keeps or drops all of them); the
``filter`` expression runs on the visible rows, after resolution
(docs/engines.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, replace
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from tenants.catalog import Catalog
from tenants.errors import InvalidArgument, ObjectMissing
from tenants.names import qualified_table
from tenants.objects.reader import BATCH_ROWS
from tenants.objectstore import ObjectStore
from tenants.reads.key_range import KeyRange, exact_bound
from tenants.reads.stream_exit import ExitSafeStream
from tenants.reads.visible import ReadPlan, narrowed, plan_read, stream_visible
from tenants.tenancy import find_tenant
from tenants.timeline.lineage import require_data, resolve_time
from tenants.times import AsOf

__all__ = ["ArrowRead", "KeyRange", "Keys", "plan_arrow_read", "plan_time", "read_arrow"]

Keys = KeyRange | tuple[Any, Any]
"""A primary-key range, both ends inclusive: a :class:`KeyRange`, or ``(low, high)``
where each end is None (unbounded), a value of the first key column, or a tuple
of values of the leading key columns (a prefix: ``(3,)`` on a key ``(id, region)``
means every key whose id is 3)."""

_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError)


class Store(Protocol):
    """What a read needs of a :class:`tenants.store.TableStore` (which this module
    cannot import: the store imports it for ``TableStore.read_arrow``)."""

    @property
    def catalog(self) -> Catalog: ...

    @property
    def objects(self) -> ObjectStore: ...


@dataclass(frozen=True, eq=False)  # a pyarrow Expression's == is an expression, not a bool
class ArrowRead:
    """A read planned and checked: one table at one time, with what to show of it.

    The plan's object list is fixed, and objects are immutable, so every stream
    opened from it (:meth:`batches`, :meth:`reader`, ``__arrow_c_stream__``) shows
    the same rows: a DuckDB relation or a polars LazyFrame over it can run any
    number of queries. The objects are not pinned (docs/engines.md, "A long
    read"): an object GC collected since the plan raises ``ObjectMissing``.
    """

    objects: ObjectStore
    plan: ReadPlan
    columns: tuple[str, ...]
    """Shown, in this order."""
    keys: KeyRange | None = None
    filter: pc.Expression | None = None
    filter_columns: tuple[str, ...] = ()
    """Read for the filter; shown only if in ``columns``."""
    limit: int | None = None
    batch_rows: int = BATCH_ROWS

    @property
    def schema(self) -> pa.Schema:
        """The rows' schema: the table's columns as of the read's time, user columns only."""
        table = self.plan.table.schema.arrow()
        return pa.schema([table.field(name) for name in self.columns])

    def select(self, columns: Sequence[str]) -> ArrowRead:
        """The same read showing ``columns`` only (an engine's projection).

        Raises:
            NotFound: a column the table does not have at the read's time.
        """
        narrowed(self.plan, columns)
        return replace(self, columns=tuple(columns))

    def batches(self) -> Iterator[pa.RecordBatch]:
        """A new stream of the visible rows: batches of ``batch_rows`` rows (the last
        may be shorter), in primary-key order."""
        table_names = self.plan.table.schema.names
        wanted = set(self.columns) | set(self.filter_columns)
        read = [name for name in table_names if name in wanted]
        schema = self.schema
        left = self.limit
        if left == 0:
            return
        # Before the filter, a limit would count rows the filter then drops.
        rounds = stream_visible(
            self.objects,
            self.plan,
            limit=self.limit if self.filter is None else None,
            keys=self.keys,
            columns=None if read == table_names else read,
        )
        pending: list[pa.RecordBatch] = []
        held = 0
        with closing(rounds), self._explained():  # an engine stopping early closes objects too
            for rows in rounds:
                if self.filter is not None:
                    rows = rows.filter(self.filter)  # on visible rows only: see the module doc
                rows = rows.select(list(self.columns))
                if left is not None:
                    rows = rows.slice(0, left)
                    left -= rows.num_rows
                pending += [b for b in rows.to_batches() if b.num_rows]
                held += rows.num_rows
                # A round holds the keys the merge could settle, a few rows or many:
                # engines are handed even batches.
                while held >= self.batch_rows:
                    buffered = pa.Table.from_batches(pending, schema).combine_chunks()
                    yield from buffered.slice(0, self.batch_rows).to_batches()
                    rest = buffered.slice(self.batch_rows)
                    pending, held = rest.to_batches(), rest.num_rows
                if left == 0:
                    break
        if held:
            yield from pa.Table.from_batches(pending, schema).combine_chunks().to_batches()

    @contextmanager
    def _explained(self) -> Iterator[None]:
        """A missing object says why it may be gone: the read planned before
        holds no pin (docs/engines.md, "A long read")."""
        try:
            yield
        except ObjectMissing as e:
            raise ObjectMissing(
                f"{e.message}, reading {self.plan.where} at ts {self.plan.as_of}: a read's "
                "objects are not pinned, and GC collects replaced ones after its grace "
                "(1 h by default); plan the read again, at a time still protected"
            ) from e

    def reader(self) -> pa.RecordBatchReader:
        """A new stream of the visible rows, as a ``RecordBatchReader``: one the
        process waits for at exit if another engine's threads read it
        (tenants.reads.stream_exit)."""
        where = f"{self.plan.where} at ts {self.plan.as_of}"
        return pa.RecordBatchReader.from_batches(self.schema, ExitSafeStream(self.batches(), where))

    def __arrow_c_schema__(self) -> object:
        """The Arrow PyCapsule interface: engines learn the schema without reading."""
        return self.schema.__arrow_c_schema__()

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The Arrow PyCapsule interface: a new stream each time it is asked for, so
        an engine that scans its source once per query reads the rows each time."""
        return self.reader().__arrow_c_stream__(requested_schema)


def plan_arrow_read(
    store: Store,
    tenant: str,
    table: str,
    as_of: AsOf | None = None,
    *,
    columns: Sequence[str] | None = None,
    keys: Keys | None = None,
    filter: pc.Expression | None = None,
    limit: int | None = None,
    batch_rows: int = BATCH_ROWS,
) -> ArrowRead:
    """Plan and check a read for :func:`read_arrow` (see there); nothing is read yet."""
    if not isinstance(table, str):
        raise InvalidArgument(f"table {table!r}: give it as 'database.table'")
    database, name = qualified_table(table)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise InvalidArgument(f"invalid limit {limit!r} for {tenant}/{table}: use 0 or more rows")
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
        raise InvalidArgument(
            f"invalid batch_rows {batch_rows!r} for {tenant}/{table}: use 1 or more rows"
        )
    plan = plan_read(store.catalog, tenant, database, name, as_of)  # as TableStore.read plans
    shown = tuple(plan.table.schema.names if columns is None else columns)
    narrowed(plan, shown)  # refuses unknown, repeated or no columns, naming the table
    return ArrowRead(
        store.objects,
        plan,
        shown,
        keys=_key_range(keys, plan),
        filter=filter,
        filter_columns=() if filter is None else _filter_columns(filter, plan),
        limit=limit,
        batch_rows=batch_rows,
    )


def read_arrow(
    store: Store,
    tenant: str,
    table: str,
    as_of: AsOf | None = None,
    *,
    columns: Sequence[str] | None = None,
    keys: Keys | None = None,
    filter: pc.Expression | None = None,
    limit: int | None = None,
    batch_rows: int = BATCH_ROWS,
) -> pa.RecordBatchReader:
    """The visible rows of ``table`` at a time, streamed as Arrow.

    The rows are what ``TableStore.read`` returns at that time, in primary-key
    order, with the table's columns as of then and no internal column; they
    come a batch at a time as the reader is read, so a table of any size is
    read in the memory of a few batches per object the merge holds open.

    Args:
        store: a ``TableStore`` (anything with its ``catalog`` and ``objects``).
        tenant: tenant name (or ``name@id``); times before a restore read the
            tenant that held the name then (tenants.timeline.lineage).
        table: ``database.table``.
        as_of: the time (:data:`tenants.times.AsOf`): a snapshot name of the
            tenant's lineage, an ISO-8601 instant, a ts in µs, or a time before
            the catalog's now (``-1h``, ``PT15M``); None: now.
        columns: the columns to show, in that order (default all); objects are
            read with these, the key and ``__ts`` alone.
        keys: a primary-key range (:data:`Keys`): objects and row groups wholly
            outside it are not read.
        filter: a ``pyarrow.compute`` expression over the table's columns, kept
            rows are those it is true for. It runs on the visible rows, after
            MVCC resolution, and prunes nothing: put key bounds in ``keys``.
        limit: at most this many rows (after the filter).
        batch_rows: rows per batch (the last may be shorter).

    Raises:
        NotFound: the tenant, the table at that time, the snapshot, or a column.
        InvalidName: a malformed tenant, table or snapshot name.
        UnprotectedTime: the time is not protected (no snapshot, outside the PITR
            window, not now).
        InvalidArgument: a malformed time (or one of another type than str or int),
            key range, filter, limit or batch size.
        ObjectMissing, CorruptObject (while reading): an object of the plan is
            gone (collected by GC after the read's time stopped being
            protected and the grace passed) or damaged; never fewer rows.
    """
    return plan_arrow_read(
        store,
        tenant,
        table,
        as_of,
        columns=columns,
        keys=keys,
        filter=filter,
        limit=limit,
        batch_rows=batch_rows,
    ).reader()


def plan_time(store: Store, tenant: str, as_of: AsOf | None = None) -> int:
    """The ts ``as_of`` (None: now) names for ``tenant``, checked as a read checks
    it: reads of several tables at it see one state of the tenant.

    Raises:
        NotFound, UnprotectedTime, InvalidArgument: as :func:`read_arrow`.
    """
    with store.catalog.snapshot() as tx:
        tenant_rec = require_data(find_tenant(tx, tenant))
        return tx.last_ts() if as_of is None else resolve_time(tx, tenant_rec, as_of)[1]


def _key_range(keys: Keys | None, plan: ReadPlan) -> KeyRange | None:
    """``keys`` as a :class:`KeyRange` of the key's own types, checked against the table."""
    if keys is None:
        return None
    if isinstance(keys, KeyRange):
        low, high = keys.low, keys.high
    elif isinstance(keys, (tuple, list)) and len(keys) == 2:
        low, high = keys
    else:
        raise InvalidArgument(f"key range {keys!r} of {plan.where}: give (low, high) or a KeyRange")
    if low is None and high is None:
        return None
    return KeyRange(_bound(low, plan), _bound(high, plan))


def _bound(value: Any, plan: ReadPlan) -> tuple[Any, ...] | None:
    if value is None:
        return None
    key_schema = plan.table.schema.key_arrow()
    values = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if not 1 <= len(values) <= len(key_schema):
        raise InvalidArgument(
            f"key bound {value!r} of {plan.where}: give up to {len(key_schema)} value(s) for "
            f"({', '.join(key_schema.names)})"
        )
    return tuple(
        exact_bound(item, field, value, plan.where)
        for field, item in zip(key_schema, values, strict=False)
    )


def _filter_columns(expression: pc.Expression, plan: ReadPlan) -> tuple[str, ...]:
    """The columns ``expression`` reads, found by binding it to the table's schema
    (pyarrow does not list an expression's fields): a column is needed if the
    expression no longer binds without it. Binding also refuses, before any I/O,
    a filter on a column the table lacks or of the wrong type."""
    if not isinstance(expression, pc.Expression):
        raise InvalidArgument(
            f"filter {expression!r} of {plan.where}: give a pyarrow.compute.Expression, "
            "e.g. pc.field('qty') > 2"
        )
    empty = plan.table.schema.arrow().empty_table()
    try:
        empty.filter(expression)
    except _ARROW_ERRORS as e:
        first_line = str(e).splitlines()[0]
        raise InvalidArgument(
            f"filter {expression} cannot run on {plan.where} at ts {plan.as_of}: {first_line}; "
            f"its columns then: {', '.join(empty.column_names)}"
        ) from e
    needed = []
    for name in empty.column_names:
        try:
            empty.drop_columns([name]).filter(expression)
        except _ARROW_ERRORS:
            needed.append(name)
    return tuple(needed)
