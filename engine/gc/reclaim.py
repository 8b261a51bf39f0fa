"""How many stored rows no protected time needs, per table, and compacting them away.

Dropped snapshots and a moving PITR window free versions only on paper; full
compaction is what rewrites the objects without them. GC asks, per live table
of every active tenant, what fraction of stored rows full compaction would
drop, and runs it where that fraction reaches a threshold. Measuring reads
every object of the table (its keys and ``__ts``, streamed through the merge
full compaction uses), so it costs a scan, not the table's size in memory.

One damaged object (missing, size or checksum mismatch, unreadable Parquet)
does not stop the scan: its table is reported as not measured, naming the
tenant, table and key, is never compacted, and the other tables go on. GC
never deletes an object for being damaged: it is still referenced, and the
operator decides (restore the tenant, or the object from a backup).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from engine.gc import DEFAULT_THRESHOLD
from tenants.catalog import Catalog
from tenants.compaction import CompactionResult, compact_table, count_unneeded
from tenants.errors import ConcurrentModification, CorruptObject, ObjectMissing
from tenants.objects.reader import open_object
from tenants.objects.record import ObjectRecord, live_objects
from tenants.objectstore import ObjectStore
from tenants.progress import step
from tenants.tenancy import TableRecord, list_tenants, tables_at
from tenants.timeline.protection import Protection, protection

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DamagedObject:
    """An object that could not be read back as its catalog record says."""

    tenant: str
    table: str  # database.table
    key: str
    error: str


@dataclass(frozen=True)
class Reclaimable:
    tenant: str
    table: TableRecord
    rows: int
    reclaimable_rows: int
    reclaimable_bytes: int  # estimated from each object's bytes per row
    damaged: tuple[DamagedObject, ...] = ()  # non-empty: not measured (reclaimable 0)

    @property
    def fraction(self) -> float:
        return self.reclaimable_rows / self.rows if self.rows else 0.0


def measure(
    objects: ObjectStore,
    tenant: str,
    table: TableRecord,
    records: list[ObjectRecord],
    guard: Protection,
) -> Reclaimable:
    """Rows (and estimated bytes) of ``records`` that ``guard``'s protected times do not need.

    ``rows`` counts the rows the table holds: a member held with a cut (an
    instant restore's straddler) only up to its cut, so its fraction is the
    one the same table, rewritten, would have. Bytes are estimated from each
    object's stored bytes per stored row.

    A table with a damaged object is not measured: which versions its other
    objects may drop depends on the rows the damaged one holds.
    """
    try:
        unneeded = count_unneeded(objects, table, records, guard)
    except (CorruptObject, ObjectMissing) as e:
        damaged = find_damaged(objects, tenant, table, records)
        damaged = damaged or [DamagedObject(tenant, table.qualified, "", e.message)]
        return Reclaimable(tenant, table, sum(o.rows for o in records), 0, 0, tuple(damaged))
    rows = dropped = size = 0
    for record in records:
        count = unneeded[record.id]
        rows += count.held
        dropped += count.unneeded
        size += record.bytes * count.unneeded // max(1, record.rows)
    return Reclaimable(tenant, table, rows, dropped, size)


def find_damaged(
    objects: ObjectStore, tenant: str, table: TableRecord, records: list[ObjectRecord]
) -> list[DamagedObject]:
    """The objects that cannot be read back whole (missing, size, checksum, Parquet),
    each read on its own, streamed."""
    damaged: list[DamagedObject] = []
    for o in records:
        try:
            with open_object(objects, o) as reader:
                for _ in reader.batches():
                    pass
        except (CorruptObject, ObjectMissing) as e:
            damaged.append(DamagedObject(tenant, table.qualified, o.key, e.message))
    return damaged


def scan(catalog: Catalog, objects: ObjectStore) -> list[Reclaimable]:
    """Reclaimable rows of every live table of every active tenant."""
    with catalog.snapshot() as tx:
        work = []
        for tenant in list_tenants(tx):
            guard = protection(tx, tenant)
            for table in tables_at(tx, tenant, tx.last_ts()):
                work.append((tenant.name, table, live_objects(tx, table.id), guard))
    found = []
    # measure reads every live object (its keys and ts): the long part of a GC pass.
    with step(
        "measuring what GC may reclaim", sum(o.bytes for w in work for o in w[2])
    ) as scanning:
        for name, table, live, guard in work:
            if live:
                found.append(measure(objects, name, table, live, guard))
                scanning.advance(sum(o.bytes for o in live))
    return found


def compact_reclaimable(
    catalog: Catalog,
    objects: ObjectStore,
    found: list[Reclaimable],
    *,
    threshold: float = DEFAULT_THRESHOLD,
) -> tuple[list[tuple[Reclaimable, CompactionResult]], list[DamagedObject]]:
    """Full-compact the tables whose reclaimable fraction reaches ``threshold``.

    A table whose compaction meets a damaged object (damaged since it was
    measured) is skipped and reported; the others are compacted.
    """
    done: list[tuple[Reclaimable, CompactionResult]] = []
    damaged: list[DamagedObject] = []
    for item in found:
        if not item.reclaimable_rows or item.fraction < threshold:
            continue
        try:
            done.append((item, compact_table(catalog, objects, item.table, full=True)))
        except ConcurrentModification as e:
            # Another compaction (a user's, a loader's) replaced some of its inputs
            # first: the table was just rewritten; the next GC measures it again.
            log.info("gc: %s; skipping it this round", e.message)
        except (CorruptObject, ObjectMissing) as e:
            # Which object? Read them all again, one by one (only on this rare path).
            with catalog.snapshot() as tx:
                live = live_objects(tx, item.table.id)
            broken = find_damaged(objects, item.tenant, item.table, live)
            damaged += broken or [DamagedObject(item.tenant, item.table.qualified, "", e.message)]
    return done, damaged
