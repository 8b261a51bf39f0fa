"""Reads at a time T: a plan from the catalog, then a local (threaded) execution.

The plan is the table as of T, its schema as of T, and the current members
whose ts range starts at or before T (later objects cannot hold events <= T).
Reads use the current membership: compaction keeps every version a protected
time needs, so replaced objects are never consulted.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa

from tenants.catalog import Catalog
from tenants.lineage import require_data, resolve_point
from tenants.mvcc import project, resolve
from tenants.object_io import read_object
from tenants.objects import ObjectRecord, live_objects
from tenants.objectstore import ObjectStore
from tenants.tenancy import TableRecord, TenantRecord, find_table, find_tenant

READ_THREADS = 8


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
    catalog: Catalog, tenant: str, database: str, table: str, as_of: int | str | None = None
) -> ReadPlan:
    """Resolve tenant, table, schema and objects for a read at ``as_of`` (default now).

    ``as_of`` is a ts, or text: a snapshot name, an ISO-8601 instant or a ts.
    A tenant name's history follows its lineage: after a restore, times before
    it read the retired tenant that held the name then (tenants.lineage).

    Raises:
        UnprotectedTime: ``as_of`` is not protected; its history may be gone.
    """
    with catalog.snapshot() as tx:
        tenant_rec = require_data(find_tenant(tx, tenant))
        if as_of is None:
            ts = tx.last_ts()
        else:
            tenant_rec, ts, _ = resolve_point(tx, tenant_rec, as_of)
        table_rec = find_table(tx, tenant_rec, database, table, ts)
        objects = tuple(o for o in live_objects(tx, table_rec.id) if o.min_ts <= ts)
    return ReadPlan(tenant_rec, table_rec, ts, objects)


def load_events(
    store: ObjectStore, plan: ReadPlan, threads: int = READ_THREADS
) -> tuple[list[pa.Table], list[pa.Table]]:
    """Fetch and project every object of the plan: (data tables, tombstone tables)."""
    schema = plan.table.schema

    def load(record: ObjectRecord) -> tuple[str, pa.Table]:
        rows = read_object(store, record)
        return record.kind, project(rows, schema, keys_only=record.kind == "tomb")

    with ThreadPoolExecutor(max_workers=threads) as pool:
        loaded = list(pool.map(load, plan.objects))
    data = [t for kind, t in loaded if kind == "data"]
    tombs = [t for kind, t in loaded if kind == "tomb"]
    return data, tombs


def read_local(store: ObjectStore, plan: ReadPlan, threads: int = READ_THREADS) -> pa.Table:
    """Visible rows of the plan's table at its time, sorted by primary key."""
    data, tombs = load_events(store, plan, threads)
    return resolve(data, tombs, plan.table.schema, plan.as_of)
