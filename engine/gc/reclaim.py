"""How many stored rows no protected time needs, per table, and compacting them away.

Dropped snapshots and a moving PITR window free versions only on paper; full
compaction is what rewrites the objects without them. GC asks, per live table
of every active tenant, what fraction of stored rows full compaction would
drop, and runs it where that fraction reaches a threshold. Measuring reads
every object of the table (its keys and ``__ts``, streamed through the merge
full compaction uses), so it costs a scan, not the table's size in memory.

A pass does not measure every table (issue 37: that read the whole warehouse
on every pass). The answer depends only on the table's members and on its
tenant's protected times, so each measurement is kept in the catalog
(``tenants.catalog.measures``) and reused, exactly, while neither changed:

- members: no membership row of the table ended after the measurement's
  commit ts and its view's totals (objects, bytes) are the same; forgetting
  a collected object's rows forgets the measurements of the tables that held
  it (``tenants.catalog.engine.measures``). A write, compaction, restore
  install, instant-restore swap or backup restore always shows so;
- protected times: a version superseded at ``b`` is needed iff a protected
  time lies in ``[born, b)``, and ``b`` is at most the table's newest row
  ts, so only protected times before it decide. Their digest
  (``tenants.timeline.retention.keep_digest``) must be the same: dropping a
  snapshot re-measures the tables with rows after it; a PITR window moving
  through an idle table's history re-measures it until it has passed its
  newest row, then no more.

Tables never measured, changed since, or found damaged last time are
measured. A pass over an unchanged warehouse opens no object; its cost is a
few catalog statements per tenant and table. Skipping a table can only
delay its compaction, never delete anything: GC's keep-set is computed from
the catalog, not from these numbers. A dry run measures what it must and
keeps nothing.

One damaged object (missing, size or checksum mismatch, unreadable Parquet)
does not stop the scan: its table is reported as not measured, naming the
tenant, table and key, is never compacted, and the other tables go on. GC
never deletes an object for being damaged: it is still referenced, and the
operator decides (restore the tenant, or the object from a backup). Since a
pass reads only the tables it measures, damage in an unchanged table is
found by ``rewind storage``, which reads them all, not by every GC pass.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from engine.gc import DEFAULT_THRESHOLD
from tenants.catalog import Catalog
from tenants.catalog.engine.gc import gc_decided_since
from tenants.catalog.engine.measures import (
    Measure,
    forget_measures,
    forget_measures_of_gone_tables,
    member_counts,
    record_measures,
    standing_measures,
)
from tenants.compaction import CompactionResult, compact_table, count_unneeded
from tenants.errors import ConcurrentModification, CorruptObject, ObjectMissing
from tenants.objects.reader import open_object
from tenants.objects.record import ObjectRecord, live_objects
from tenants.objectstore import ObjectStore
from tenants.progress import step
from tenants.tenancy import TableRecord, list_tenants, tables_at
from tenants.timeline.protection import Protection, protection
from tenants.timeline.retention import keep_digest

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


@dataclass(frozen=True)
class _Stale:
    """A table to measure: its measurement is missing or may be wrong."""

    tenant: str
    table: TableRecord
    live: list[ObjectRecord]
    guard: Protection

    @property
    def events_until(self) -> int:
        """The newest row ts its members hold."""
        return max(o.visible_max_ts for o in self.live)


def scan(
    catalog: Catalog, objects: ObjectStore, *, fresh: bool = False, remember: bool = True
) -> list[Reclaimable]:
    """Reclaimable rows of every live table of every active tenant.

    A table's kept measurement is reused when neither its members nor the
    protected times that decide for it changed since (the module doc); the
    others are measured, reading their objects. ``fresh``: measure every table
    (what the tests compare the kept numbers with). ``remember``: keep what
    was measured (a dry run changes no catalog row, so it does not).
    """
    slots: list[Reclaimable | _Stale] = []
    with catalog.snapshot() as tx:
        at = tx.last_ts()
        for tenant in list_tenants(tx):
            guard = protection(tx, tenant)
            tables = tables_at(tx, tenant, at)
            ids = [t.id for t in tables]
            kept = {} if fresh else standing_measures(tx, ids)
            for table in tables:
                known = kept.get(table.id)
                if known is not None and known.protection == keep_digest(guard, known.events_until):
                    slots.append(
                        Reclaimable(
                            tenant.name,
                            table,
                            known.rows,
                            known.reclaimable_rows,
                            known.reclaimable_bytes,
                        )
                    )
                    continue
                live = live_objects(tx, table.id)
                if live:
                    slots.append(_Stale(tenant.name, table, live, guard))
        stale = [s for s in slots if isinstance(s, _Stale)]
        counts = member_counts(tx, [s.table.id for s in stale])
    log.info(
        "gc: %d table(s) measured before and unchanged, %d to measure",
        len(slots) - len(stale),
        len(stale),
    )
    measured: dict[str, Reclaimable] = {}
    # measure reads every live object (its keys and ts) of a table it measures:
    # the long part of a pass that measures anything.
    with step(
        "measuring what GC may reclaim", sum(o.bytes for s in stale for o in s.live)
    ) as scanning:
        for item in stale:
            measured[item.table.id] = measure(
                objects, item.tenant, item.table, item.live, item.guard
            )
            scanning.advance(sum(o.bytes for o in item.live))
    if remember:
        _remember(catalog, at, stale, counts, measured)
    return [measured[s.table.id] if isinstance(s, _Stale) else s for s in slots]


def _remember(
    catalog: Catalog,
    at: int,
    stale: list[_Stale],
    counts: dict[str, tuple[int, int]],
    measured: dict[str, Reclaimable],
) -> None:
    """Keep each table's new measurement as of ``at`` (the commit ts its members
    were read at, with ``counts``, its view's totals then), forget those of
    damaged tables (measured again next time) and of tables gone."""
    keep = []
    for item in stale:
        found = measured[item.table.id]
        if found.damaged:
            continue
        until = item.events_until
        keep.append(
            Measure(
                item.table.id,
                at,
                *counts.get(item.table.id, (0, 0)),
                until,
                keep_digest(item.guard, until),
                found.rows,
                found.reclaimable_rows,
                found.reclaimable_bytes,
            )
        )
    with catalog.transaction() as tx:
        forget_measures(tx, [s.table.id for s in stale if measured[s.table.id].damaged])
        if gc_decided_since(tx, at):
            # Another pass decided deletions after these members were read: it may
            # have forgotten membership rows that ended after ``at``, the only
            # sign of such a change, so a measurement kept now could outlive it.
            log.info("gc: another GC pass collected meanwhile; keeping no measurement")
        else:
            record_measures(tx, keep)
        forget_measures_of_gone_tables(tx)


def compact_reclaimable(
    catalog: Catalog,
    objects: ObjectStore,
    found: list[Reclaimable],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    stop: Callable[[], bool] = lambda: False,
) -> tuple[list[tuple[Reclaimable, CompactionResult]], list[DamagedObject]]:
    """Full-compact the tables whose reclaimable fraction reaches ``threshold``,
    until ``stop()`` (checked between tables: ``rewind gc --max-seconds``).

    A table whose compaction meets a damaged object (damaged since it was
    measured) is skipped and reported; the others are compacted.
    """
    done: list[tuple[Reclaimable, CompactionResult]] = []
    damaged: list[DamagedObject] = []
    for item in found:
        if not item.reclaimable_rows or item.fraction < threshold:
            continue
        if stop():
            break
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
