"""Reads at a time T: a plan from the catalog, then a local, streamed execution.

The plan is the table as of T, its schema as of T, and the current members
whose ts range starts at or before T (later objects cannot hold events <= T).
Reads use the current membership: compaction keeps every version a protected
time needs, so replaced objects are never consulted.

The local execution is a k-way merge of the plan's objects (tenants.reads.merge):
each round holds every event of its keys, so MVCC resolves round by round and
visible rows come out in key order, a round at a time. Memory is a batch per
object; a reader that wants the first N rows stops after N.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from tenants.catalog import Catalog, Tx
from tenants.errors import InvalidArgument, NotFound
from tenants.mvcc import IS_DATA, last_of_each_key, project, resolve
from tenants.objects.reader import ObjectReader, open_object
from tenants.objects.record import ObjectRecord, live_objects
from tenants.objectstore import ObjectStore
from tenants.reads.key_range import KeyFilter, KeySet
from tenants.reads.merge import MergeInput, gather, merge_rounds, typed_key
from tenants.schema import TS, TableSchema
from tenants.tenancy import TableRecord, TenantRecord, find_table, find_tenant
from tenants.timeline.lineage import require_data, resolve_time
from tenants.times import AsOf


@dataclass(frozen=True)
class ReadPlan:
    tenant: TenantRecord
    table: TableRecord
    as_of: int
    objects: tuple[ObjectRecord, ...]

    @property
    def where(self) -> str:
        return f"{self.tenant.name}/{self.table.qualified}"


def plan_read(
    catalog: Catalog, tenant: str, database: str, table: str, as_of: AsOf | None = None
) -> ReadPlan:
    """Resolve tenant, table, schema and objects for a read at ``as_of`` (default now).

    ``as_of`` is a ts, or text: a snapshot name, an ISO-8601 instant or a ts.
    A tenant name's history follows its lineage: after a restore, times before
    it read the retired tenant that held the name then (tenants.timeline.lineage).

    Raises:
        UnprotectedTime: ``as_of`` is not protected; its history may be gone.
    """
    with catalog.snapshot() as tx:
        tenant_rec = require_data(find_tenant(tx, tenant))
        if as_of is None:
            ts = tx.last_ts()
        else:
            tenant_rec, ts, _ = resolve_time(tx, tenant_rec, as_of)
        return read_plan_in(tx, tenant_rec, database, table, ts)


def read_plan_in(tx: Tx, tenant_rec: TenantRecord, database: str, table: str, ts: int) -> ReadPlan:
    """The read of ``database.table`` of exactly ``tenant_rec`` at ``ts``, in the
    caller's transaction, without resolving names or asking whether ``ts`` is
    protected (the caller did, or holds a pin on what it reads)."""
    table_rec = find_table(tx, tenant_rec, database, table, ts)
    records = tuple(o for o in live_objects(tx, table_rec.id) if o.min_ts <= ts)
    return ReadPlan(tenant_rec, table_rec, ts, records)


def read_local(objects: ObjectStore, plan: ReadPlan) -> pa.Table:
    """Visible rows of the plan's table at its time, sorted by primary key (all of them,
    in memory: :func:`stream_visible` hands them over a round at a time)."""
    target = plan.table.schema.arrow()
    return pa.Table.from_batches(
        [b for t in stream_visible(objects, plan) for b in t.to_batches()], schema=target
    )


def stream_visible(
    objects: ObjectStore,
    plan: ReadPlan,
    *,
    limit: int | None = None,
    keys: KeyFilter | None = None,
    columns: Sequence[str] | None = None,
) -> Generator[pa.Table, None, None]:
    """Visible rows of the plan's table at its time, in primary-key order, a round
    at a time (see the module doc).

    With ``limit``, at most that many rows, read in small batches; with ``keys``
    (a KeyRange or a KeySet), only those keys, skipping objects and row groups
    that cannot hold them (tenants.reads.key_range); with ``columns``, only
    those columns, in that order: objects are read with the key, ``__ts`` and
    those columns alone (the key decides visibility whether it is shown or
    not). Any of them is a partial read, done without each object's whole-file
    checksum (a partial read cannot have it; every page read is still
    CRC-checked): the first rows of a huge table come after reading a little of
    each object, not all of it.

    Raises:
        NotFound: ``columns`` names a column the table does not have at the
            plan's time.
    """
    schema = plan.table.schema if columns is None else narrowed(plan, columns)
    names = schema.names if columns is None else list(columns)
    target = schema.arrow()
    shown = pa.schema([target.field(n) for n in names])
    key_schema = schema.key_arrow()
    pk = list(schema.primary_key)
    batch_rows = None if limit is None else max(1024, min(limit + 1, 64 * 1024))
    left = limit
    if left == 0 or not plan.objects:
        return
    records = [o for o in plan.objects if keys is None or keys.may_hold(o, key_schema)]
    whole = limit is None and keys is None and columns is None
    with ExitStack() as stack:
        sources = []
        data_sources = []
        for index, record in enumerate(records):

            def open_(record: ObjectRecord = record) -> Iterator[pa.RecordBatch]:
                events = _events_at(objects, record, schema, plan.as_of, batch_rows, keys, whole)
                stack.callback(events.close)  # an early end (a limit) closes it too
                return events

            # Each object opens when the merge reaches its first key, and closes
            # when read: disjoint objects are read one after another.
            sources.append(MergeInput(record.kind, open_, typed_key(record.min_pk, key_schema)))
            if record.kind == "data":
                data_sources.append(index)
        projected = pa.schema([*target, pa.field(TS, pa.int64(), False)])
        for round_ in merge_rounds(sources, key_schema):
            events = round_.events
            visible = pc.and_(last_of_each_key(events, pk), events.column(IS_DATA))
            rows = gather(round_, events.filter(visible), data_sources, projected)
            if rows is None or rows.num_rows == 0:
                continue
            rows = rows.select(names).cast(shown)
            if left is not None:
                if rows.num_rows > left:
                    rows = rows.slice(0, left)
                left -= rows.num_rows
            yield rows
            if left == 0:
                return


POINT_READ_WORKERS = 8
"""Objects a point read opens at once: on S3 each is a footer and a row group
fetched (latency-bound), locally a row group decoded (pyarrow releases the GIL)."""


def read_keys(objects: ObjectStore, plan: ReadPlan, keys: KeySet) -> pa.Table:
    """The visible rows of exactly ``keys`` at the plan's time, sorted by key: a
    point read.

    Unlike :func:`stream_visible`'s merge, which opens objects one after another
    as the merge reaches them, a point read knows every object it needs up front
    (those whose key range holds a key of the set): it reads them in parallel,
    each only its row groups that may hold a key, keeps the rows of the set, and
    resolves MVCC over what it kept. Memory is the kept events (bounded by the
    set's size times the versions of each key) and a row group per worker.
    """
    schema = plan.table.schema
    key_schema = schema.key_arrow()
    records = [o for o in plan.objects if keys.may_hold(o, key_schema)]
    if not records:
        return schema.arrow().empty_table()

    def events(record: ObjectRecord) -> tuple[str, list[pa.Table]]:
        with open_object(objects, record, verify=False) as reader:
            found = _conformed(
                reader, schema, record.read_ts(plan.as_of), record.kind == "tomb", None, keys
            )
            return record.kind, [pa.Table.from_batches([b]) for b in found]

    data: list[pa.Table] = []
    tombs: list[pa.Table] = []
    workers = min(POINT_READ_WORKERS, len(records))
    with ThreadPoolExecutor(workers, thread_name_prefix="rewind-point-read") as pool:
        for kind, found in pool.map(events, records):
            (data if kind == "data" else tombs).extend(found)
    return resolve(data, tombs, schema, plan.as_of)


def narrowed(plan: ReadPlan, columns: Sequence[str]) -> TableSchema:
    """The plan's schema cut down to ``columns`` and the primary key, in table order:
    what a read of those columns must take from each object.

    Raises:
        NotFound: a column the table does not have at the plan's time (``__ts``
            included: internal columns are never shown).
        InvalidArgument: no column, or one named twice.
    """
    schema = plan.table.schema
    if isinstance(columns, str) or not columns:
        raise InvalidArgument(
            f"columns of {plan.where}: give a list of one or more of {', '.join(schema.names)}"
            " (or none, for all of them)"
        )
    unknown = [c for c in columns if c not in schema.names]
    if unknown:
        raise NotFound(
            f"table {plan.table.qualified} of tenant {plan.tenant.name!r} has no column "
            f"{unknown[0]!r} at ts {plan.as_of}; its columns then: {', '.join(schema.names)}"
        )
    twice = sorted({c for c in columns if list(columns).count(c) > 1})
    if twice:
        raise InvalidArgument(f"columns of {plan.where}: {twice[0]!r} is named twice")
    keep = set(columns) | set(schema.primary_key)
    return TableSchema(tuple(c for c in schema.columns if c.name in keep), schema.primary_key)


def _events_at(
    objects: ObjectStore,
    record: ObjectRecord,
    schema: TableSchema,
    as_of: int,
    batch_rows: int | None,
    keys: KeyFilter | None,
    verify: bool,
) -> Generator[pa.RecordBatch, None, None]:
    """An object's events at or before ``as_of`` (and its cut, if the table holds it
    with one), and in ``keys``, conformed to ``schema``."""
    with open_object(objects, record, verify=verify) as reader:
        yield from _conformed(
            reader, schema, record.read_ts(as_of), record.kind == "tomb", batch_rows, keys
        )


def _conformed(
    reader: ObjectReader,
    schema: TableSchema,
    as_of: int,
    keys_only: bool,
    batch_rows: int | None,
    keys: KeyFilter | None,
) -> Iterator[pa.RecordBatch]:
    pk = list(schema.primary_key)
    groups = None if keys is None else keys.row_groups(reader.parquet, pk[0])
    # Only the columns the schema shows (a tombstone: the key) and __ts are
    # decoded; columns added since the object was written are filled by project.
    stored = set(reader.parquet.schema_arrow.names)
    wanted = [n for n in (pk if keys_only else schema.names) if n in stored] + [TS]
    for batch in reader.batches(wanted, batch_rows=batch_rows, row_groups=groups):
        rows = pa.Table.from_batches([batch])
        rows = rows.filter(pc.less_equal(rows.column(TS), as_of))
        if keys is not None:
            rows = rows.filter(keys.mask(rows, pk))
        if rows.num_rows:
            yield from project(rows, schema, keys_only=keys_only).to_batches()
