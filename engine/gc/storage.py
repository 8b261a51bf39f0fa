"""Where a tenant's bytes go: live, held only by history, shared with other tenants.

Live and shared bytes come from the catalog; "held only by history" reads the
objects. A damaged object leaves its table's history bytes unmeasured (None)
and is listed in the report; the other tables are measured as usual.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from engine.gc.reclaim import DamagedObject, measure
from tenants.catalog import Catalog
from tenants.catalog.engine.gc import objects_shared_with_other_tenants
from tenants.objects.record import live_objects
from tenants.objectstore import ObjectStore
from tenants.tenancy import find_tenant, tables_at
from tenants.timeline.protection import protection


@dataclass(frozen=True)
class TableStorage:
    table: str
    objects: int
    bytes: int
    history_only_bytes: (
        int | None
    )  # rows only snapshots / PITR still need (estimated); None: damaged
    shared_bytes: int  # objects also referenced by another tenant's tables


@dataclass(frozen=True)
class StorageReport:
    tenant: str
    tables: tuple[TableStorage, ...]
    damaged: tuple[DamagedObject, ...] = ()

    @property
    def bytes(self) -> int:
        return sum(t.bytes for t in self.tables)

    @property
    def history_only_bytes(self) -> int:
        """Of the tables that could be measured."""
        return sum(t.history_only_bytes or 0 for t in self.tables)

    @property
    def shared_bytes(self) -> int:
        return sum(t.shared_bytes for t in self.tables)


def storage(catalog: Catalog, objects: ObjectStore, tenant: str) -> StorageReport:
    with catalog.snapshot() as tx:
        record = find_tenant(tx, tenant)
        guard = protection(tx, record)
        now_only = replace(guard, snapshots=(), window=None)
        work = []
        for table in tables_at(tx, record, tx.last_ts()):
            live = live_objects(tx, table.id)
            shared = objects_shared_with_other_tenants(tx, table.id, record.id)
            work.append((table, live, shared))
    result = []
    damaged: list[DamagedObject] = []
    for table, live, shared in work:
        history: int | None = 0
        if live:
            measured = measure(objects, record.name, table, live, now_only)
            damaged += measured.damaged
            history = None if measured.damaged else measured.reclaimable_bytes
        result.append(
            TableStorage(
                table.qualified,
                len(live),
                sum(o.bytes for o in live),
                history,
                sum(o.bytes for o in live if o.id in shared),
            )
        )
    return StorageReport(record.ref, tuple(result), tuple(damaged))
