"""The write path: one commit = objects first, then one catalog transaction.

The commit's ts is allocated inside the catalog transaction and the objects
are uploaded while it is open, so commit order equals ts order and a read at
"now" never changes afterwards. The cost is that user writes serialise on the
catalog's write lock for the duration of their upload (SQLite serialises
writers anyway; on PostgreSQL it is a row lock on the clock row). If anything
fails, the transaction rolls back: uploaded objects become orphans that GC
removes after its grace period, and nothing is registered.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from tenants.catalog import Catalog, Tx
from tenants.errors import InvalidArgument, KeyViolation, SchemaMismatch
from tenants.mvcc import project, resolve
from tenants.object_io import read_object, write_object
from tenants.objects import ObjectKind, add_member, insert_object, live_objects
from tenants.objectstore import ObjectStore
from tenants.schema import TS, TableSchema
from tenants.tenancy import TenantRecord, active_tenant, find_table, touch_tenant

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WriteResult:
    """What one commit wrote: ``deleted`` counts the tombstones written (with
    ``only_present``, the keys that were visible and are now deleted)."""

    ts: int
    upserted: int
    deleted: int
    object_ids: tuple[str, ...]


def conform_rows(batch: pa.Table, schema: TableSchema, where: str) -> pa.Table:
    """Cast ``batch`` to the table's columns, or say exactly what does not match."""
    _unique_columns(batch, where)
    expected = schema.names
    got = batch.column_names
    missing = [c for c in expected if c not in got]
    extra = [c for c in got if c not in expected]
    if missing or extra:
        raise SchemaMismatch(
            f"batch for {where} does not match the table schema: "
            f"missing columns {missing}, unexpected columns {extra}; expected {expected}"
        )
    return _cast_columns(batch, schema.arrow(), where, schema.primary_key)


def conform_keys(batch: pa.Table, schema: TableSchema, where: str) -> pa.Table:
    """Cast a batch of keys to the key columns (extra columns are not allowed)."""
    _unique_columns(batch, where)
    keys = list(schema.primary_key)
    if sorted(batch.column_names) != sorted(keys):
        raise SchemaMismatch(
            f"delete keys for {where} must have exactly the key columns {keys}, "
            f"got {batch.column_names}"
        )
    return _cast_columns(batch, schema.key_arrow(), where, schema.primary_key)


def _unique_columns(batch: pa.Table, where: str) -> None:
    """Arrow allows a name twice in one table; a batch may not (which one is the value?)."""
    names = batch.column_names
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise SchemaMismatch(
            f"batch for {where} has column(s) {repeated} more than once; give each column once"
        )


def _cast_columns(
    batch: pa.Table, target: pa.Schema, where: str, keys: tuple[str, ...] = ()
) -> pa.Table:
    arrays = []
    for field in target:
        column = batch.column(field.name)
        try:
            column = column.cast(field.type, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise SchemaMismatch(
                f"column {field.name!r} of {where} has type {column.type}, "
                f"which cannot be stored as {field.type}: {e}"
            ) from e
        if not field.nullable and column.null_count:
            if field.name in keys:
                raise KeyViolation(f"batch for {where} has a null in key column {field.name!r}")
            raise SchemaMismatch(f"column {field.name!r} of {where} is NOT NULL but has nulls")
        arrays.append(column)
    return pa.Table.from_arrays(arrays, schema=target)


def canonical_float_keys(
    batch: pa.Table, primary_key: list[str], tenant: str, table: str, what: str
) -> pa.Table:
    """Refuse NaN in float key columns and store -0.0 as 0.0.

    A key must equal itself and nothing else. NaN equals nothing, not even
    itself, so a NaN key could never be found again (reads would show every
    version of it, deletes would hide none), and local and Spark readers would
    disagree. -0.0 and 0.0 compare equal but hash and print apart, so one batch
    could hold both as two rows of one key. SQL engines refuse or normalise
    such keys the same way; this runs before the duplicate check, so -0.0 and
    0.0 in one batch are one key twice.
    """
    for key in primary_key:
        column = batch.column(key)
        if not pa.types.is_floating(column.type):
            continue
        nan = pc.is_nan(column)
        if pc.any(nan).as_py():
            row = pc.index(nan, True).as_py()
            raise KeyViolation(
                f"{what} for tenant {tenant!r} table {table} have NaN in float key column "
                f"{key!r} (row {row}); NaN equals nothing, not even itself, so it cannot "
                "identify a row. Nothing was written: give a number, or key the table by "
                "another column"
            )
        zero = pa.scalar(0.0, column.type)
        batch = batch.set_column(
            batch.schema.get_field_index(key),
            batch.schema.field(key),
            pc.if_else(pc.equal(column, zero), zero, column),
        )
    return batch


def check_keys(batch: pa.Table, primary_key: list[str], where: str, what: str) -> None:
    """No null and no duplicate key inside one batch."""
    for key in primary_key:
        if batch.column(key).null_count:
            raise KeyViolation(f"{what} for {where} has a null in key column {key!r}")
    counts = batch.group_by(primary_key).aggregate([([], "count_all")])
    dupes = counts.filter(pc.greater(counts.column("count_all"), 1))
    if dupes.num_rows:
        example = json.dumps([dupes.column(k)[0].as_py() for k in primary_key], default=str)
        raise KeyViolation(
            f"{what} for {where} has {dupes.num_rows} duplicate key(s), e.g. {example}; "
            "a key may appear once per batch"
        )


def write(
    catalog: Catalog,
    store: ObjectStore,
    tenant: str,
    database: str,
    table: str,
    *,
    upserts: pa.Table | None = None,
    deletes: pa.Table | None = None,
    only_present: bool = False,
) -> WriteResult:
    """Upsert rows and delete keys of one table in one commit.

    A key may appear in both ``upserts`` and ``deletes``: that is an update
    (tombstone and version at the same ts; the version wins).

    ``only_present=True`` first drops the delete keys that are not visible
    (a tombstone for them would hide nothing), so ``deleted`` counts the keys
    actually deleted; if that leaves nothing to write, nothing is committed and
    the result has the current ts, no objects and zero counts. It costs a read
    of the table's keys (see ``present_keys``).

    Raises:
        NotFound: unknown tenant or table.
        TenantDropped: ``tenant`` names a dropped tenant id.
        SchemaMismatch, KeyViolation: the batch is invalid; nothing is written.
    """
    if (upserts is None or upserts.num_rows == 0) and (deletes is None or deletes.num_rows == 0):
        raise InvalidArgument(f"nothing to write to {database}.{table} of tenant {tenant!r}")
    with catalog.transaction() as tx:
        tenant_rec = active_tenant(tx, tenant)
        if only_present and deletes is not None and deletes.num_rows:
            # Under the write lock nothing commits between this read and the
            # commit below, so "present" means present just before it.
            deletes = present_keys(tx, store, tenant_rec, database, table, deletes)
            if not deletes.num_rows and (upserts is None or not upserts.num_rows):
                return WriteResult(ts=tx.last_ts(), upserted=0, deleted=0, object_ids=())
        return commit(tx, store, tenant_rec, database, table, upserts, deletes)


def present_keys(
    tx: Tx,
    store: ObjectStore,
    tenant_rec: TenantRecord,
    database: str,
    table: str,
    deletes: pa.Table,
) -> pa.Table:
    """The keys of ``deletes`` that are visible now (conformed to the key columns).

    Reads the key columns of every live object of the table, so it costs about
    what a read of the table costs; only callers that report what a delete
    removed (the CLI's ``delete``) ask for it.
    """
    now = tx.last_ts()
    target = find_table(tx, tenant_rec, database, table, now)
    where = f"{tenant_rec.name}/{target.qualified}"
    pk = list(target.schema.primary_key)
    keys = conform_keys(deletes, target.schema, where)
    keys = canonical_float_keys(keys, pk, tenant_rec.name, target.qualified, "deletes")
    check_keys(keys, pk, where, "deletes")
    key_schema = TableSchema(tuple(target.schema.column(k) for k in pk), tuple(pk))
    data: list[pa.Table] = []
    tombs: list[pa.Table] = []
    for record in live_objects(tx, target.id):
        events = project(read_object(store, record), target.schema, keys_only=True)
        events = events.join(keys, keys=pk, join_type="left semi")  # only the keys asked about
        (data if record.kind == "data" else tombs).append(events)
    visible = resolve(data, tombs, key_schema, now)
    return visible.cast(target.schema.key_arrow())


def commit(
    tx: Tx,
    store: ObjectStore,
    tenant_rec: TenantRecord,
    database: str,
    table: str,
    upserts: pa.Table | None,
    deletes: pa.Table | None,
) -> WriteResult:
    """The commit itself, inside the caller's transaction, for an already-resolved tenant.

    ``write`` uses it for active tenants; a logical reload uses it for the
    staging tenant it is building, so both take exactly the same path.
    """
    ts = tx.commit_ts()
    target = find_table(tx, tenant_rec, database, table, ts)
    where = f"{tenant_rec.name}/{target.qualified}"
    schema = target.schema
    pk = list(schema.primary_key)
    batches: list[tuple[ObjectKind, pa.Table]] = []
    if upserts is not None and upserts.num_rows:
        rows = conform_rows(upserts, schema, where)
        rows = canonical_float_keys(rows, pk, tenant_rec.name, target.qualified, "upserts")
        check_keys(rows, pk, where, "upserts")
        batches.append(("data", rows))
    if deletes is not None and deletes.num_rows:
        keys = conform_keys(deletes, schema, where)
        keys = canonical_float_keys(keys, pk, tenant_rec.name, target.qualified, "deletes")
        check_keys(keys, pk, where, "deletes")
        batches.append(("tomb", keys))
    object_ids = []
    for kind, rows in batches:
        rows = rows.append_column(
            pa.field(TS, pa.int64(), False), pa.repeat(pa.scalar(ts, pa.int64()), rows.num_rows)
        )
        record = write_object(
            store,
            rows,
            tenant_id=tenant_rec.id,
            table_id=target.id,
            kind=kind,
            fingerprint=schema.fingerprint,
            primary_key=pk,
            created_ts=ts,
        )
        insert_object(tx, record)
        add_member(tx, target.id, record.id, ts)
        object_ids.append(record.id)
    touch_tenant(tx, tenant_rec.id, ts)
    log.info("tenant %s table %s: commit ts %d wrote %s", where, target.id, ts, object_ids)
    return WriteResult(
        ts=ts,
        upserted=upserts.num_rows if upserts is not None else 0,
        deleted=deletes.num_rows if deletes is not None else 0,
        object_ids=tuple(object_ids),
    )
