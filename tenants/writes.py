"""The write path: one commit = objects uploaded first, then one short catalog transaction.

No catalog transaction is open while bytes move. A commit resolves its tenant
and table in a read transaction, validates the batch and uploads it as commit
objects that carry no ts (``tenants.objects.io.write_commit_object``), then
opens a write transaction that allocates the commit ts, checks that nothing it
relied on changed (compare-and-set: the same tenant still holds the name, the
table has the same id and schema, and for ``only_present`` deletes the
tenant's ``last_change_ts`` is the one it read), and registers the objects at
that ts. The ts is allocated inside the transaction that makes it visible, so
commit order equals ts order and a read at "now" never changes afterwards.

A failed check is a ``ConcurrentModification``: the uploads are deleted and
the commit starts over (tenacity, jittered exponential backoff, at most
``WRITE_ATTEMPTS`` tries). Any other failure before the commit also deletes
the uploads; a failure at ``COMMIT`` itself (a lost connection) leaves them
as orphans, which GC removes after its grace period, because whether the
commit landed is then unknown. The write transaction holds the catalog's
write lock (SQLite) or the clock row (PostgreSQL) for a few statements only,
so a load of one tenant makes another tenant's commands wait at most about
one commit's metadata transaction, never an upload.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from tenacity import (
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from tenants.catalog import Catalog, Tx
from tenants.catalog.changes import record_change_objects
from tenants.catalog.commits import record_commit
from tenants.catalog.tenants import set_last_change_if
from tenants.errors import (
    ConcurrentModification,
    InvalidArgument,
    KeyViolation,
    SchemaMismatch,
)
from tenants.mvcc import project, resolve
from tenants.objects.intents import WriteIntent, begin_intent, give_up
from tenants.objects.io import stamp, write_commit_object
from tenants.objects.reader import open_object
from tenants.objects.record import ObjectKind, ObjectRecord, add_member, insert_object, live_objects
from tenants.objectstore import ObjectStore
from tenants.schema import TS, TableSchema
from tenants.tenancy import (
    TableRecord,
    TenantRecord,
    active_tenant,
    find_table,
    table_identity,
    touch_tenant,
)

log = logging.getLogger(__name__)

WRITE_ATTEMPTS = 5
"""Tries of one commit that keeps losing its compare-and-set to other commits."""


@dataclass(frozen=True)
class WriteResult:
    """What one commit wrote: ``deleted`` counts the tombstones written (with
    ``only_present``, the keys that were visible and are now deleted)."""

    ts: int
    upserted: int
    deleted: int
    object_ids: tuple[str, ...]
    bytes: int = 0  # what its objects hold (a load's event reports it)


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
    objects: ObjectStore,
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
    of the table's keys (see ``present_keys``), and the commit lands only if
    the tenant did not change since that read (else it reads again).

    Raises:
        NotFound: unknown tenant or table.
        TenantDropped: ``tenant`` names a dropped tenant id.
        SchemaMismatch, KeyViolation: the batch is invalid; nothing is written.
        ConcurrentModification: other commits changed the table or tenant under
            this one ``WRITE_ATTEMPTS`` times in a row; nothing is written.
    """
    if (upserts is None or upserts.num_rows == 0) and (deletes is None or deletes.num_rows == 0):
        raise InvalidArgument(f"nothing to write to {database}.{table} of tenant {tenant!r}")
    for attempt in Retrying(
        retry=retry_if_exception_type(ConcurrentModification),
        stop=stop_after_attempt(WRITE_ATTEMPTS),
        wait=wait_random_exponential(multiplier=0.02, max=1.0),
        reraise=True,
    ):
        with attempt:
            return _write_once(
                catalog, objects, tenant, database, table, upserts, deletes, only_present
            )
    raise AssertionError("unreachable: tenacity reraises the last attempt's error")


def _write_once(
    catalog: Catalog,
    objects: ObjectStore,
    tenant: str,
    database: str,
    table: str,
    upserts: pa.Table | None,
    deletes: pa.Table | None,
    only_present: bool,
) -> WriteResult:
    with catalog.snapshot() as tx:
        tenant_rec = active_tenant(tx, tenant)
        now = tx.last_ts()
        target = find_table(tx, tenant_rec, database, table, now)
        target.require_writable(tenant_rec.name)
        members = live_objects(tx, target.id) if only_present and deletes is not None else []
    expected_change: int | None = None
    if only_present and deletes is not None and deletes.num_rows:
        deletes = present_keys(objects, tenant_rec, target, members, now, deletes)
        if not deletes.num_rows and (upserts is None or not upserts.num_rows):
            return WriteResult(ts=now, upserted=0, deleted=0, object_ids=())
        expected_change = tenant_rec.last_change_ts
    prepared = prepare_commit(catalog, objects, tenant_rec, target, upserts, deletes)
    return install_prepared(catalog, objects, prepared, tenant, expected_change)


def present_keys(
    objects: ObjectStore,
    tenant_rec: TenantRecord,
    target: TableRecord,
    members: Sequence[ObjectRecord],
    now: int,
    deletes: pa.Table,
) -> pa.Table:
    """The keys of ``deletes`` that are visible at ``now`` among ``members`` (conformed
    to the key columns).

    Reads the key columns of every live object of the table, so it costs about
    what a read of the table costs; only callers that report what a delete
    removed (the CLI's ``delete``) ask for it. It runs outside any transaction:
    the commit checks afterwards that the tenant did not change since ``now``.
    """
    where = f"{tenant_rec.name}/{target.qualified}"
    pk = list(target.schema.primary_key)
    keys = conform_keys(deletes, target.schema, where)
    keys = canonical_float_keys(keys, pk, tenant_rec.name, target.qualified, "deletes")
    check_keys(keys, pk, where, "deletes")
    key_schema = TableSchema(tuple(target.schema.column(k) for k in pk), tuple(pk))
    data: list[pa.Table] = []
    tombs: list[pa.Table] = []
    for record in members:
        # Streamed: only the events of the keys asked about are kept.
        with open_object(objects, record) as reader:
            for batch in reader.batches([*pk, TS]):
                events = project(pa.Table.from_batches([batch]), target.schema, keys_only=True)
                events = events.join(keys, keys=pk, join_type="left semi")
                if events.num_rows:
                    (data if record.kind == "data" else tombs).append(events)
    visible = resolve(data, tombs, key_schema, now)
    return visible.cast(target.schema.key_arrow())


@dataclass(frozen=True)
class PreparedCommit:
    """A commit's objects, uploaded and not yet registered (their ts is not known yet).

    ``table`` is the table as the batch was validated against: the commit
    lands only if the table still has this id and schema fingerprint.
    """

    tenant: TenantRecord
    table: TableRecord
    objects: tuple[ObjectRecord, ...]
    upserted: int
    deleted: int
    intent: WriteIntent | None  # the objects' intent; None only for a commit of no object

    @property
    def where(self) -> str:
        return f"{self.tenant.name}/{self.table.qualified}"


def prepare_commit(
    catalog: Catalog,
    objects: ObjectStore,
    tenant_rec: TenantRecord,
    target: TableRecord,
    upserts: pa.Table | None,
    deletes: pa.Table | None,
) -> PreparedCommit:
    """Validate the batch against ``target`` and upload it, outside any transaction
    but under a write intent (tenants/objects/intents.py) recorded just before.

    Raises:
        SchemaMismatch, KeyViolation: the batch is invalid; nothing is uploaded.
    """
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
    uploaded: list[ObjectRecord] = []
    intent = (
        begin_intent(catalog, "write", [(tenant_rec.id, target.id)], [k for k, _ in batches])
        if batches
        else None
    )
    try:
        for kind, rows in batches:
            assert intent is not None
            uploaded.append(
                write_commit_object(
                    objects,
                    rows,
                    tenant_id=tenant_rec.id,
                    table_id=target.id,
                    kind=kind,
                    fingerprint=schema.fingerprint,
                    primary_key=pk,
                    object_id=intent.new_object_id(kind),
                )
            )
    except Exception:
        give_up(catalog, objects, uploaded, intent)
        raise
    return PreparedCommit(
        tenant_rec,
        target,
        tuple(uploaded),
        upserted=upserts.num_rows if upserts is not None else 0,
        deleted=deletes.num_rows if deletes is not None else 0,
        intent=intent,
    )


def install_prepared(
    catalog: Catalog,
    objects: ObjectStore,
    prepared: PreparedCommit,
    tenant_ref: str | None = None,
    expected_change: int | None = None,
) -> WriteResult:
    """Register ``prepared`` in one short write transaction (see ``install_commit``).

    If the transaction fails before ``COMMIT`` (the catalog stayed busy, a
    check failed, the table was dropped), the uploads are deleted: no catalog
    row names them. If ``COMMIT`` itself fails, whether it landed is unknown,
    so they stay; GC removes them after its grace if no row names them.
    """
    result: WriteResult | None = None
    try:
        with catalog.transaction() as tx:
            result = install_commit(tx, prepared, tenant_ref, expected_change)
    except Exception:
        if result is None:
            give_up(catalog, objects, prepared.objects, prepared.intent)
        raise
    return result


def install_commit(
    tx: Tx,
    prepared: PreparedCommit,
    tenant_ref: str | None = None,
    expected_change: int | None = None,
) -> WriteResult:
    """Give ``prepared`` its commit ts and register its objects, inside ``tx``.

    ``tenant_ref`` (a user's commit) re-resolves the tenant: the same tenant id
    must still be the active holder (a restore may have replaced it). A logical
    reload passes ``None``: its staging tenant is its own. ``expected_change``
    is the tenant's ``last_change_ts`` the commit's reads saw; any commit to the
    tenant since then fails this one.

    Raises:
        ConcurrentModification: the tenant, the table's id or schema, or (with
            ``expected_change``) the tenant's data changed since ``prepared``.
    """
    ts = tx.commit_ts()
    tenant_rec = prepared.tenant
    if tenant_ref is not None and active_tenant(tx, tenant_ref).id != tenant_rec.id:
        raise ConcurrentModification(
            f"tenant {tenant_rec.ref} was replaced while a commit to {prepared.table.qualified} "
            "uploaded its rows"
        )
    table = prepared.table
    current = table_identity(tx, tenant_rec, table.database, table.name, ts)
    if current != (table.id, table.schema.fingerprint):
        raise ConcurrentModification(
            f"table {prepared.where} ({table.id}) was dropped, recreated or altered while a "
            "commit uploaded its rows"
        )
    if expected_change is None:
        touch_tenant(tx, tenant_rec.id, ts)
    elif not set_last_change_if(tx, tenant_rec.id, ts, expected_change):
        raise ConcurrentModification(
            f"tenant {tenant_rec.ref} changed after a delete of {table.qualified} read which "
            "keys were present"
        )
    if prepared.intent is not None:
        prepared.intent.finish(tx)
    assert prepared.intent is not None or not prepared.objects, "objects uploaded without an intent"
    object_ids = []
    for record in prepared.objects:
        insert_object(tx, stamp(record, ts))
        add_member(tx, table.id, record.id, ts)
        object_ids.append(record.id)
    record_change_objects(tx, table.id, ts, object_ids)
    record_commit(
        tx,
        tenant_rec.id,
        ts,
        table.id,
        "write",
        upserted=prepared.upserted,
        deleted=prepared.deleted,
        objects=len(object_ids),
        size=sum(record.bytes for record in prepared.objects),
    )
    log.info("tenant %s table %s: commit ts %d wrote %s", prepared.where, table.id, ts, object_ids)
    return WriteResult(
        ts=ts,
        upserted=prepared.upserted,
        deleted=prepared.deleted,
        object_ids=tuple(object_ids),
        bytes=sum(record.bytes for record in prepared.objects),
    )
