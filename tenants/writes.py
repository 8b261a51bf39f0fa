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
from tenants.object_io import write_object
from tenants.objects import ObjectKind, add_member, insert_object
from tenants.objectstore import ObjectStore
from tenants.schema import TS, TableSchema
from tenants.tenancy import TenantRecord, active_tenant, find_table, touch_tenant

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WriteResult:
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
) -> WriteResult:
    """Upsert rows and delete keys of one table in one commit.

    A key may appear in both ``upserts`` and ``deletes``: that is an update
    (tombstone and version at the same ts; the version wins).

    Raises:
        NotFound: unknown tenant or table.
        TenantDropped: ``tenant`` names a dropped tenant id.
        SchemaMismatch, KeyViolation: the batch is invalid; nothing is written.
    """
    if (upserts is None or upserts.num_rows == 0) and (deletes is None or deletes.num_rows == 0):
        raise InvalidArgument(f"nothing to write to {database}.{table} of tenant {tenant!r}")
    with catalog.transaction() as tx:
        return commit(tx, store, active_tenant(tx, tenant), database, table, upserts, deletes)


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
        check_keys(rows, pk, where, "upserts")
        batches.append(("data", rows))
    if deletes is not None and deletes.num_rows:
        keys = conform_keys(deletes, schema, where)
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
