"""Tenants, databases and tables in the catalog: create, drop, look up as of a time.

Tenants are addressed by name (the live tenant holding it) or by ``name@id``
(one exact tenant id, live or dropped). Tables are looked up as of a ts: a table
exists at T when ``created_ts <= T`` and it was not dropped at or before T.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from tenants.catalog import Row, Tx
from tenants.catalog.commits import record_commit
from tenants.catalog.tables import (
    database_row_at,
    insert_database,
    insert_schema_version,
    insert_table,
    mark_table_dropped,
    schema_columns_ever,
    schema_version_row_at,
    table_row_at,
    table_rows_at,
)
from tenants.catalog.tenants import (
    active_holder_id,
    active_tenant_row,
    insert_tenant,
    last_dropped_id,
    reactivate_tenant_row,
    retire_tenant_row,
    set_last_change,
    tenant_row,
    tenant_row_named,
    tenant_rows,
)
from tenants.defaults import is_text_encoded
from tenants.errors import (
    AlreadyExists,
    InvalidArgument,
    InvalidName,
    NotFound,
    SchemaMismatch,
    TableBeingRestored,
    TenantDropped,
)
from tenants.names import did_you_mean, object_name, tenant_name
from tenants.schema import Column, TableSchema
from tenants.times import format_ts

TenantState = Literal["active", "dropped"]


DEFAULT_RETENTION_US = 7 * 86_400_000_000


def new_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class TenantRecord:
    id: str
    name: str
    state: TenantState
    created_ts: int
    dropped_ts: int | None
    last_change_ts: int
    source_tenant_id: str | None = None
    source_ts: int | None = None
    restore_job_id: str | None = None
    retain_until: int | None = None
    purged_ts: int | None = None
    previous_holder_id: str | None = None  # who held the name before (set by restores)

    @property
    def ref(self) -> str:
        """``name@id``: names exactly this tenant, even after it is dropped."""
        return f"{self.name}@{self.id}"

    @classmethod
    def from_row(cls, row: Row) -> TenantRecord:
        return cls(
            row["id"],
            row["name"],
            row["state"],
            row["created_ts"],
            row["dropped_ts"],
            row["last_change_ts"] if row["last_change_ts"] is not None else row["created_ts"],
            row.get("source_tenant_id"),
            row.get("source_ts"),
            row.get("restore_job_id"),
            row.get("retain_until"),
            row.get("purged_ts"),
            row.get("previous_holder_id"),
        )


@dataclass(frozen=True)
class TableRecord:
    id: str
    tenant_id: str
    database_id: str
    database: str
    name: str
    created_ts: int
    dropped_ts: int | None
    schema: TableSchema
    schema_from_ts: int
    # The restore job holding the table while it runs (writes and DDL refused).
    lock_job_id: str | None = None

    @property
    def qualified(self) -> str:
        return f"{self.database}.{self.name}"

    def require_writable(self, tenant: str) -> None:
        """Refuse a write or DDL while a restore job holds the table."""
        refuse_locked(tenant, f"table {self.qualified}", self.lock_job_id)


def refuse_locked(tenant: str, what: str, job_id: str | None) -> None:
    """``TableBeingRestored`` if restore job ``job_id`` holds ``what`` (a table or a
    database of ``tenant``): its install would replace what a write changes."""
    if job_id:
        raise TableBeingRestored(
            f"{what} of tenant {tenant!r} is being restored by job {job_id}: writes and DDL "
            f"to it are refused until the job ends; `rewind restore-table {tenant} --resume "
            f"{job_id}` finishes it, `rewind restore-table {tenant} --cancel {job_id}` cancels it"
        )


def parse_tenant_ref(ref: str) -> tuple[str, str | None]:
    """``acme`` → ("acme", None); ``acme@3f2a…`` → ("acme", "3f2a…")."""
    name, at, tenant_id = ref.partition("@")
    try:
        tenant_name(name)
    except InvalidName:
        if not at:
            raise
        # The whole ref, quoted: a part of it would hide from redaction what the
        # whole shows to be a secret (``postgresql://u:PW@host``).
        raise InvalidName(
            f"invalid tenant {ref!r}: give NAME or NAME@ID, where NAME is a tenant name "
            "and ID the tenant's id (`rewind tenant list --all` shows both)"
        ) from None
    if tenant_id and not (tenant_id.isascii() and tenant_id.isalnum()):
        raise InvalidArgument(f"invalid tenant id in {ref!r}: an id is letters and digits")
    return name, tenant_id or None


def find_tenant(tx: Tx, ref: str) -> TenantRecord:
    """The tenant ``ref`` names, active or dropped; ``NotFound`` if none."""
    name, tenant_id = parse_tenant_ref(ref)
    if tenant_id:
        row = tenant_row_named(tx, tenant_id, name)
        if row is None:
            raise NotFound(f"tenant {ref} does not exist in {tx.catalog.searched}")
        return TenantRecord.from_row(row)
    row = active_tenant_row(tx, name)
    if row is None:
        dropped = last_dropped_id(tx, name)
        hint = f" (a dropped tenant {name}@{dropped} exists)" if dropped else ""
        close = did_you_mean(name, (str(r["name"]) for r in tenant_rows(tx)))
        raise NotFound(
            f"tenant {name!r} does not exist{close}{hint} in {tx.catalog.searched}; "
            "see `rewind tenant list`"
        )
    return TenantRecord.from_row(row)


def tenant_by_id(tx: Tx, tenant_id: str) -> TenantRecord:
    row = tenant_row(tx, tenant_id)
    if row is None:
        raise NotFound(f"tenant id {tenant_id} does not exist")
    return TenantRecord.from_row(row)


def active_tenant(tx: Tx, ref: str) -> TenantRecord:
    """The tenant ``ref`` names, which must be active (writable)."""
    tenant = find_tenant(tx, ref)
    if tenant.state != "active":
        raise TenantDropped(
            f"tenant {tenant.ref} was dropped at ts {tenant.dropped_ts}; it no longer accepts "
            f"writes (the name {tenant.name!r} may now belong to another tenant)"
        )
    return tenant


def list_tenants(tx: Tx, include_dropped: bool = False) -> list[TenantRecord]:
    return [TenantRecord.from_row(r) for r in tenant_rows(tx, include_dropped=include_dropped)]


def create_tenant(tx: Tx, name: str) -> TenantRecord:
    tenant_name(name)
    if active_holder_id(tx, name):
        raise AlreadyExists(f"tenant {name!r} already exists")
    ts = tx.commit_ts()
    tenant_id = new_id()
    insert_tenant(tx, tenant_id, name, ts)
    return TenantRecord(tenant_id, name, "active", ts, None, ts)


def touch_tenant(tx: Tx, tenant_id: str, ts: int) -> None:
    """Record that the tenant's data or DDL changed at ``ts``.

    Every time at or after a tenant's last change reads the same as "now", so
    those times are protected without a snapshot (see tenants.timeline.protection).
    """
    set_last_change(tx, tenant_id, ts)


def drop_tenant(tx: Tx, ref: str, *, retention_us: int = DEFAULT_RETENTION_US) -> TenantRecord:
    """Retire a tenant: no more writes; its data is kept until ``retain_until``.

    Like Snowflake's UNDROP window, a dropped tenant can be brought back (see
    ``undrop_tenant``) and restored from until its retention ends.
    """
    tenant = active_tenant(tx, ref)
    ts = tx.commit_ts()
    retire_tenant(tx, tenant, ts, retention_us)
    return tenant_by_id(tx, tenant.id)


def retire_tenant(tx: Tx, tenant: TenantRecord, ts: int, retention_us: int) -> None:
    if not retire_tenant_row(tx, tenant.id, ts, ts + retention_us):
        raise TenantDropped(f"tenant {tenant.ref} was dropped meanwhile")


def undrop_tenant(tx: Tx, ref: str, new_name: str | None = None) -> TenantRecord:
    """Bring a dropped tenant back, under its name or ``new_name``."""
    tenant = find_tenant(tx, ref)
    if tenant.state != "dropped":
        raise InvalidArgument(f"tenant {tenant.ref} is not dropped")
    name = tenant_name(new_name or tenant.name)
    ts = tx.commit_ts()
    if tenant.purged_ts is not None or (
        tenant.retain_until is not None and tenant.retain_until < ts
    ):
        raise NotFound(
            f"tenant {tenant.ref} is past its retention (or purged); it cannot come back"
        )
    holder = active_holder_id(tx, name)
    if holder:
        raise AlreadyExists(
            f"the name {name!r} belongs to the active tenant {name}@{holder}; "
            "undrop under another name (--as NEW) or drop that tenant first"
        )
    reactivate_tenant_row(tx, tenant.id, name)
    return tenant_by_id(tx, tenant.id)


def find_database(tx: Tx, tenant: TenantRecord, database: str, as_of: int) -> Row | None:
    return database_row_at(tx, tenant.id, object_name(database, "database"), as_of)


def create_database(tx: Tx, tenant: TenantRecord, database: str, *, exist_ok: bool = False) -> str:
    ts = tx.commit_ts()
    existing = find_database(tx, tenant, database, ts)
    if existing:
        refuse_locked(tenant.name, f"database {database}", existing.get("lock_job_id"))
        if exist_ok:
            return str(existing["id"])
        raise AlreadyExists(f"database {database!r} already exists in tenant {tenant.name!r}")
    db_id = new_id()
    insert_database(tx, db_id, tenant.id, database, ts)
    return db_id


def create_table(
    tx: Tx, tenant: TenantRecord, database: str, table: str, schema: TableSchema
) -> TableRecord:
    object_name(table, "table")
    db_id = create_database(tx, tenant, database, exist_ok=True)
    ts = tx.commit_ts()
    if _find_table_row(tx, tenant, database, table, ts):
        raise AlreadyExists(f"table {database}.{table} already exists in tenant {tenant.name!r}")
    table_id = new_id()
    insert_table(tx, table_id, tenant.id, db_id, table, ts)
    add_schema_version(tx, table_id, ts, schema)
    touch_tenant(tx, tenant.id, ts)
    record_commit(tx, tenant.id, ts, table_id, "create")
    return TableRecord(table_id, tenant.id, db_id, database, table, ts, None, schema, ts)


def add_schema_version(tx: Tx, table_id: str, ts: int, schema: TableSchema) -> None:
    insert_schema_version(
        tx, table_id, ts, schema.columns_json(), schema.primary_key_json(), schema.fingerprint
    )


def _find_table_row(
    tx: Tx, tenant: TenantRecord, database: str, table: str, as_of: int
) -> Row | None:
    return table_row_at(tx, tenant.id, database, table, as_of)


def schema_at(tx: Tx, table_id: str, as_of: int) -> tuple[TableSchema, int]:
    """The table's schema version valid at ``as_of`` and the ts it became valid."""
    row = schema_version_row_at(tx, table_id, as_of)
    if row is None:
        raise NotFound(f"table {table_id} has no schema at ts {as_of}")
    return TableSchema.from_json(row["columns_json"], row["primary_key_json"]), row["valid_from_ts"]


def table_from_row(tx: Tx, row: Row, as_of: int) -> TableRecord:
    schema, since = schema_at(tx, row["id"], as_of)
    return TableRecord(
        row["id"],
        row["tenant_id"],
        row["database_id"],
        row["database_name"],
        row["name"],
        row["created_ts"],
        row["dropped_ts"],
        schema,
        since,
        row.get("lock_job_id"),
    )


def find_table(tx: Tx, tenant: TenantRecord, database: str, table: str, as_of: int) -> TableRecord:
    """The table ``database.table`` as it existed at ``as_of``."""
    object_name(database, "database")
    object_name(table, "table")
    row = _find_table_row(tx, tenant, database, table, as_of)
    if row is None:
        close = did_you_mean(
            f"{database}.{table}", (t.qualified for t in tables_at(tx, tenant, as_of))
        )
        raise NotFound(
            f"table {database}.{table} does not exist in tenant {tenant.name!r} at "
            f"{format_ts(as_of)} (ts {as_of}){close}"
        )
    return table_from_row(tx, row, as_of)


def table_identity(
    tx: Tx, tenant: TenantRecord, database: str, table: str, as_of: int
) -> tuple[str, str] | None:
    """(table id, schema fingerprint) of ``database.table`` at ``as_of``, or None if it
    did not exist: what a commit's compare-and-set compares, without parsing the schema
    (half of a small commit's catalog time went to ``TableSchema.from_json``).

    Raises:
        TableBeingRestored: a restore job holds the table (checked in the commit's
            transaction, so no write lands in a table a restore is replacing).
    """
    row = _find_table_row(tx, tenant, database, table, as_of)
    if row is None:
        return None
    refuse_locked(tenant.name, f"table {database}.{table}", row.get("lock_job_id"))
    version = schema_version_row_at(tx, row["id"], as_of)
    return row["id"], version["fingerprint"] if version is not None else ""


def tables_at(tx: Tx, tenant: TenantRecord, as_of: int) -> list[TableRecord]:
    """Every table of the tenant that existed at ``as_of``, by database and name."""
    rows = table_rows_at(tx, tenant.id, as_of)
    return [table_from_row(tx, row, as_of) for row in rows]


def drop_table(tx: Tx, tenant: TenantRecord, database: str, table: str) -> TableRecord:
    ts = tx.commit_ts()
    record = find_table(tx, tenant, database, table, ts)
    record.require_writable(tenant.name)
    mark_table_dropped(tx, record.id, ts)
    touch_tenant(tx, tenant.id, ts)
    record_commit(tx, tenant.id, ts, record.id, "drop")
    return record


def alter_table(
    tx: Tx,
    tenant: TenantRecord,
    database: str,
    table: str,
    *,
    add: Sequence[Column] = (),
    drop: Sequence[str] = (),
) -> TableRecord:
    """Add and drop columns, as a new schema version valid from this commit.

    Older objects keep their columns; reads project them onto the schema as of
    the read time, so history before the change still reads as it was.
    """
    if not add and not drop:
        raise InvalidArgument(
            f"nothing to alter in {database}.{table}: give columns to add or drop"
        )
    ts = tx.commit_ts()
    record = find_table(tx, tenant, database, table, ts)
    record.require_writable(tenant.name)
    schema = record.schema
    columns = list(schema.columns)
    for name in drop:
        if name in schema.primary_key:
            raise SchemaMismatch(
                f"cannot drop key column {name!r} of {database}.{table}: "
                f"the primary key {list(schema.primary_key)} is fixed"
            )
        if name not in schema.names:
            raise NotFound(
                f"table {database}.{table} has no column {name!r}; columns: {schema.names}"
            )
        columns = [c for c in columns if c.name != name]
    used_before = _column_names_ever(tx, record.id)
    for column in add:
        if column.name in [c.name for c in columns]:
            raise AlreadyExists(f"table {database}.{table} already has a column {column.name!r}")
        if column.name in used_before:
            raise SchemaMismatch(
                f"column name {column.name!r} was used before in {database}.{table} and dropped; "
                "old objects still hold its values, so choose a new name"
            )
        if not column.nullable and column.default is None:
            raise SchemaMismatch(
                f"cannot add NOT NULL column {column.name!r} to {database}.{table} without a "
                "default: existing rows would have no value"
            )
        _check_default(column)
        columns.append(column)
    new_schema = TableSchema(tuple(columns), schema.primary_key)
    add_schema_version(tx, record.id, ts, new_schema)
    touch_tenant(tx, tenant.id, ts)
    record_commit(tx, tenant.id, ts, record.id, "alter")
    return replace(record, schema=new_schema, schema_from_ts=ts)


def _column_names_ever(tx: Tx, table_id: str) -> set[str]:
    """Every column name any schema version of the table has had."""
    names: set[str] = set()
    for columns_json in schema_columns_ever(tx, table_id):
        names.update(c["name"] for c in json.loads(columns_json))
    return names


def _check_default(column: Column) -> None:
    """The default must be exactly a value of the column's type (no silent casts).

    Dates, timestamps and decimals were already made values of their type (or
    refused) when the schema was built (tenants.defaults).
    """
    import pyarrow as pa

    if column.default is None or is_text_encoded(column.arrow_type):
        return
    try:
        typed = pa.array([column.default], type=column.arrow_type)
        ok = typed[0].as_py() == column.default and type(typed[0].as_py()) is type(column.default)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError):
        ok = False
    if not ok:
        raise SchemaMismatch(
            f"default {column.default!r} of column {column.name!r} is not a {column.type}"
        )
