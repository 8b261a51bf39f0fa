"""How many stored rows no protected time needs, per table, and compacting them away.

Dropped snapshots and a moving PITR window free versions only on paper; full
compaction is what rewrites the objects without them. GC asks, per live table
of every active tenant, what fraction of stored rows full compaction would
drop, and runs it where that fraction reaches a threshold. Measuring reads
every object of the table (its keys and ``__ts``), so it costs a scan.
"""

from __future__ import annotations

from dataclasses import dataclass

from tenants.catalog import Catalog
from tenants.compaction import CompactionResult, compact_table
from tenants.object_io import read_object
from tenants.objects import ObjectRecord, live_objects
from tenants.objectstore import ObjectStore
from tenants.protection import Protection, protection
from tenants.retention import keep_masks
from tenants.tenancy import TableRecord, list_tenants, tables_at

DEFAULT_THRESHOLD = 0.2


@dataclass(frozen=True)
class Reclaimable:
    tenant: str
    table: TableRecord
    rows: int
    reclaimable_rows: int
    reclaimable_bytes: int  # estimated from each object's bytes per row

    @property
    def fraction(self) -> float:
        return self.reclaimable_rows / self.rows if self.rows else 0.0


def measure(
    store: ObjectStore,
    tenant: str,
    table: TableRecord,
    objects: list[ObjectRecord],
    guard: Protection,
) -> Reclaimable:
    """Rows (and estimated bytes) of ``objects`` that ``guard``'s protected times do not need."""
    loaded = [(o.kind, read_object(store, o)) for o in objects]
    masks = keep_masks(loaded, table.schema, guard)
    rows = dropped = size = 0
    for record, mask in zip(objects, masks, strict=True):
        gone = int(len(mask) - mask.sum())
        rows += record.rows
        dropped += gone
        size += record.bytes * gone // max(1, record.rows)
    return Reclaimable(tenant, table, rows, dropped, size)


def scan(catalog: Catalog, store: ObjectStore) -> list[Reclaimable]:
    """Reclaimable rows of every live table of every active tenant."""
    with catalog.snapshot() as tx:
        work = []
        for tenant in list_tenants(tx):
            guard = protection(tx, tenant)
            for table in tables_at(tx, tenant, tx.last_ts()):
                work.append((tenant.name, table, live_objects(tx, table.id), guard))
    return [
        measure(store, name, table, objects, guard)
        for name, table, objects, guard in work
        if objects
    ]


def compact_reclaimable(
    catalog: Catalog,
    store: ObjectStore,
    found: list[Reclaimable],
    *,
    threshold: float = DEFAULT_THRESHOLD,
) -> list[tuple[Reclaimable, CompactionResult]]:
    """Full-compact the tables whose reclaimable fraction reaches ``threshold``."""
    return [
        (item, compact_table(catalog, store, item.table, full=True))
        for item in found
        if item.reclaimable_rows and item.fraction >= threshold
    ]
