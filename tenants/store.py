"""``TableStore``: the tenant store's public API, one catalog and one warehouse.

Everything here is a thin, typed entry point over the modules that do the
work (tenancy, writes, reads, compaction), so the CLI, the engine and the
tests all go through the same code.
"""

from __future__ import annotations

from typing import Literal

import pyarrow as pa

from tenants.catalog import Catalog, open_catalog
from tenants.catalog.base import Clock, wall_clock_us
from tenants.compaction import DEFAULT_TARGET_BYTES, CompactionResult, compact
from tenants.config import S3Settings, default_catalog_uri, default_warehouse_uri
from tenants.objects import ObjectRecord, tenant_objects
from tenants.objectstore import ObjectStore, open_object_store
from tenants.reads import ReadPlan, plan_read, read_local
from tenants.schema import TableSchema
from tenants.tenancy import (
    TableRecord,
    TenantRecord,
    create_table,
    drop_table,
    drop_tenant,
    find_tenant,
    list_tenants,
    tables_at,
)
from tenants.tenancy import create_tenant as _create_tenant
from tenants.writes import WriteResult, write

Reader = Literal["local", "spark"]


class TableStore:
    """A tenant store: a catalog and the warehouse its objects live in."""

    def __init__(self, catalog: Catalog, objects: ObjectStore) -> None:
        self.catalog = catalog
        self.objects = objects

    @classmethod
    def open(
        cls,
        catalog_uri: str | None = None,
        warehouse_uri: str | None = None,
        *,
        s3: S3Settings | None = None,
        clock: Clock = wall_clock_us,
    ) -> TableStore:
        return cls(
            open_catalog(catalog_uri or default_catalog_uri(), clock),
            open_object_store(warehouse_uri or default_warehouse_uri(), s3),
        )

    def close(self) -> None:
        self.catalog.close()

    def now(self) -> int:
        with self.catalog.snapshot() as tx:
            return tx.last_ts()

    # tenants and tables
    def create_tenant(self, name: str) -> TenantRecord:
        with self.catalog.transaction() as tx:
            return _create_tenant(tx, name)

    def drop_tenant(self, ref: str) -> TenantRecord:
        with self.catalog.transaction() as tx:
            return drop_tenant(tx, ref)

    def tenant(self, ref: str) -> TenantRecord:
        with self.catalog.snapshot() as tx:
            return find_tenant(tx, ref)

    def tenants(self, *, include_dropped: bool = False) -> list[TenantRecord]:
        with self.catalog.snapshot() as tx:
            return list_tenants(tx, include_dropped)

    def create_table(self, tenant: str, database: str, table: str, schema: TableSchema) -> TableRecord:
        from tenants.tenancy import active_tenant

        with self.catalog.transaction() as tx:
            return create_table(tx, active_tenant(tx, tenant), database, table, schema)

    def drop_table(self, tenant: str, database: str, table: str) -> TableRecord:
        from tenants.tenancy import active_tenant

        with self.catalog.transaction() as tx:
            return drop_table(tx, active_tenant(tx, tenant), database, table)

    def tables(self, tenant: str, as_of: int | None = None) -> list[TableRecord]:
        with self.catalog.snapshot() as tx:
            tenant_rec = find_tenant(tx, tenant)
            return tables_at(tx, tenant_rec, tx.last_ts() if as_of is None else as_of)

    # data
    def write(
        self,
        tenant: str,
        database: str,
        table: str,
        *,
        upserts: pa.Table | None = None,
        deletes: pa.Table | None = None,
    ) -> WriteResult:
        return write(self.catalog, self.objects, tenant, database, table, upserts=upserts, deletes=deletes)

    def plan_read(self, tenant: str, database: str, table: str, as_of: int | None = None) -> ReadPlan:
        return plan_read(self.catalog, tenant, database, table, as_of)

    def read(
        self,
        tenant: str,
        database: str,
        table: str,
        as_of: int | None = None,
        *,
        reader: Reader = "local",
    ) -> pa.Table:
        """Visible rows at ``as_of`` (default now), sorted by primary key."""
        plan = self.plan_read(tenant, database, table, as_of)
        if reader == "spark":
            from tenants.spark_reader import read_spark

            return read_spark(self.objects, plan)
        return read_local(self.objects, plan)

    def compact(
        self,
        tenant: str,
        database: str | None = None,
        table: str | None = None,
        *,
        target_bytes: int = DEFAULT_TARGET_BYTES,
    ) -> list[CompactionResult]:
        return compact(self.catalog, self.objects, tenant, database, table, target_bytes=target_bytes)

    def objects_of(self, tenant: str) -> list[tuple[str, ObjectRecord]]:
        with self.catalog.snapshot() as tx:
            return tenant_objects(tx, find_tenant(tx, tenant).id)
