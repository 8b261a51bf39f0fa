"""A load: rows that arrive in batches (a large CSV or Parquet file) as one commit.

A file larger than memory cannot be one in-memory batch, so a load cuts the
stream into chunks of about :data:`CHUNK_BYTES` of Arrow data, checks each as
any commit's batch is checked (columns, types, null and duplicate keys),
sorts it and uploads it as one commit object, and forgets it. A key may
appear once per commit, so before committing, the chunk objects' key columns
are merged (tenants.reads.merge: a batch per object in memory) and a key found in
two chunks fails the load like a duplicate inside one. Then one short
transaction registers every object at one ts, exactly as a commit does
(tenants.writes.install_prepared): nothing is visible before it, and a load
that fails anywhere deletes what it uploaded.

The chunk objects may overlap in key range; reads merge them like any other
objects, and compaction later makes them few and disjoint.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import ExitStack

import pyarrow as pa
import pyarrow.compute as pc

from tenants.catalog import Catalog
from tenants.errors import InvalidArgument, KeyViolation
from tenants.mvcc import last_of_each_key
from tenants.objects.intents import WriteIntent, begin_intent
from tenants.objects.io import write_commit_object
from tenants.objects.reader import stream_object
from tenants.objects.record import ObjectRecord
from tenants.objectstore import ObjectStore
from tenants.observe import events
from tenants.reads.merge import MergeInput, merge_rounds, typed_key
from tenants.schema import TS
from tenants.tenancy import TableRecord, TenantRecord, active_tenant, find_table
from tenants.writes import (
    PreparedCommit,
    WriteResult,
    canonical_float_keys,
    check_keys,
    conform_rows,
    give_up,
    install_prepared,
)

CHUNK_BYTES = 16 * 1024 * 1024
"""Arrow bytes per chunk object: a load holds about three chunks (rows, sorted, encoding)."""
CHECK_BYTES = 128 * 1024 * 1024
"""What the duplicate check's merge of every chunk's keys may hold."""
MIN_CHECK_BATCH = 64 * 1024


def load(
    catalog: Catalog,
    objects: ObjectStore,
    tenant: str,
    database: str,
    table: str,
    batches: Iterable[pa.Table | pa.RecordBatch],
    *,
    chunk_bytes: int = CHUNK_BYTES,
) -> WriteResult:
    """Upsert every row of ``batches`` into the table in one commit (see the module doc).

    Raises:
        NotFound, TenantDropped: unknown tenant or table.
        SchemaMismatch, KeyViolation: a batch is invalid, or a key comes twice;
            nothing is committed and the uploads are deleted.
        InvalidArgument: no rows at all.
        ConcurrentModification: the table was altered, dropped or the tenant
            replaced while the rows uploaded (run the load again).
    """
    with events.job("load", tenant), events.step("load") as loading:
        loading.table = f"{database}.{table}"
        with catalog.snapshot() as tx:
            tenant_rec = active_tenant(tx, tenant)
            target = find_table(tx, tenant_rec, database, table, tx.last_ts())
            target.require_writable(tenant_rec.name)
        result = load_into(
            catalog, objects, tenant_rec, target, batches, tenant, chunk_bytes=chunk_bytes
        )
        loading.rows, loading.objects, loading.bytes = (
            result.upserted,
            len(result.object_ids),
            result.bytes,
        )
        return result


def load_into(
    catalog: Catalog,
    objects: ObjectStore,
    tenant_rec: TenantRecord,
    target: TableRecord,
    batches: Iterable[pa.Table | pa.RecordBatch],
    tenant_ref: str | None,
    *,
    chunk_bytes: int = CHUNK_BYTES,
) -> WriteResult:
    """:func:`load` into a resolved table; ``tenant_ref`` as ``install_prepared``
    takes it (None: a reload's staging tenant, which is its own)."""
    where = f"{tenant_rec.name}/{target.qualified}"
    uploaded: list[ObjectRecord] = []
    intent = begin_intent(catalog, "load", [(tenant_rec.id, target.id)], ["data"])
    try:
        pending: list[pa.Table] = []
        size = 0
        for batch in batches:
            rows = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
            if rows.num_rows:
                pending.append(rows)
                size += rows.nbytes
            if size >= chunk_bytes:
                uploaded.append(
                    _upload(objects, tenant_rec.name, tenant_rec.id, target, pending, intent)
                )
                pending, size = [], 0
        if pending:
            uploaded.append(
                _upload(objects, tenant_rec.name, tenant_rec.id, target, pending, intent)
            )
        if not uploaded:
            raise InvalidArgument(f"nothing to load into {where}: no rows")
        if len(uploaded) > 1:
            _check_unique(objects, target, uploaded, where)
    except BaseException:
        give_up(catalog, objects, uploaded, intent)
        raise
    prepared = PreparedCommit(
        tenant_rec,
        target,
        tuple(uploaded),
        upserted=sum(o.rows for o in uploaded),
        deleted=0,
        intent=intent,
    )
    return install_prepared(catalog, objects, prepared, tenant_ref)


def _upload(
    objects: ObjectStore,
    tenant: str,
    tenant_id: str,
    target: TableRecord,
    parts: list[pa.Table],
    intent: WriteIntent,
) -> ObjectRecord:
    where = f"{tenant}/{target.qualified}"
    pk = list(target.schema.primary_key)
    rows = conform_rows(pa.concat_tables(parts, promote_options="default"), target.schema, where)
    rows = canonical_float_keys(rows, pk, tenant, target.qualified, "upserts")
    check_keys(rows, pk, where, "upserts")
    return write_commit_object(
        objects,
        rows,
        tenant_id=tenant_id,
        table_id=target.id,
        kind="data",
        fingerprint=target.schema.fingerprint,
        primary_key=pk,
        object_id=intent.new_object_id("data"),
    )


def _check_unique(
    objects: ObjectStore, target: TableRecord, records: list[ObjectRecord], where: str
) -> None:
    """No key in two chunk objects: a merge of their key columns, a batch each."""
    key_schema = target.schema.key_arrow()
    pk = list(target.schema.primary_key)
    # Every chunk may span every key (an unsorted file): all are read at once,
    # so their batches share CHECK_BYTES.
    batch = max(MIN_CHECK_BATCH, CHECK_BYTES // (4 * len(records)))
    with ExitStack() as stack:
        sources = []
        for o in records:

            def open_(o: ObjectRecord = o) -> Iterator[pa.RecordBatch]:
                batches = stream_object(
                    objects, o, [*pk, TS], buffer_bytes=MIN_CHECK_BATCH, batch_bytes=batch
                )
                stack.callback(batches.close)
                return batches

            # A sorted file's chunks do not overlap: checked one after another.
            sources.append(MergeInput("data", open_, typed_key(o.min_pk, key_schema)))
        for round_ in merge_rounds(sources, key_schema):
            last = last_of_each_key(round_.events, pk)
            if not pc.all(last).as_py():
                index = pc.index(last, False).as_py()
                example = json.dumps(
                    [round_.events.column(k)[index].as_py() for k in pk], default=str
                )
                raise KeyViolation(
                    f"upserts for {where} have duplicate key(s), e.g. {example}; "
                    "a key may appear once per batch"
                )
