"""``rewind gc``: end expired protections, compact what history freed, collect, sweep.

Order matters: full compaction first (its replaced objects then age through
the grace period like any other), object collection next, then flattening
chains of inherited membership that grew too deep or that compaction emptied
(engine/gc/flatten.py; it changes no table's members, so it frees nothing for
this run to collect, and a failed collection leaves the catalog as it was),
the orphan sweep last. Destructive by request only: ``dry_run`` defaults to True, and a grace
shorter than an hour needs ``allow_short_grace``, as delta-rs's vacuum does.
Unknown keys (orphans), temp files and incomplete uploads wait 24 h by
default, as docs/design.md says, measured by their real age.

Before anything is collected GC checks that the warehouse is this catalog's
(its owner marker) and reads which tenant ids this catalog minted; it deletes
only keys under those (engine/gc/ownership.py). Damaged objects do not stop
it: they are reported in ``damaged`` and never deleted for it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from engine.gc.collect import DEFAULT_GRACE_US, CollectReport, collect
from engine.gc.flatten import Flattened, flatten_chains
from engine.gc.orphans import OrphanReport, sweep_orphans
from engine.gc.ownership import ownership
from engine.gc.partial import PartialReport, sweep_partial_writes
from engine.gc.reclaim import (
    DEFAULT_THRESHOLD,
    DamagedObject,
    Reclaimable,
    compact_reclaimable,
    scan,
)
from tenants.compaction import CompactionResult
from tenants.errors import InvalidArgument
from tenants.store import TableStore
from tenants.times import US, format_duration

DEFAULT_ORPHAN_GRACE_US = 24 * US["h"]


@dataclass(frozen=True)
class GcReport:
    dry_run: bool
    reclaimable: tuple[Reclaimable, ...]
    compacted: tuple[tuple[Reclaimable, CompactionResult], ...]
    collected: CollectReport
    orphans: OrphanReport
    partial: PartialReport
    catalog_id: str
    damaged: tuple[DamagedObject, ...] = ()  # reported, kept, and their tables not compacted
    seconds: dict[str, float] = field(default_factory=dict)
    flattened: tuple[Flattened, ...] = ()  # inherited levels now read from own rows


def check_gc_args(
    *, grace_us: int, orphan_grace_us: int, allow_short_grace: bool, threshold: float
) -> None:
    """Refuse grace periods and thresholds :func:`run_gc` would refuse, before any I/O.

    Raises:
        InvalidArgument: a grace period under the minimum without
            ``allow_short_grace``; a threshold outside (0, 1].
    """
    if grace_us < DEFAULT_GRACE_US and not allow_short_grace:
        raise InvalidArgument(
            f"a grace period of {format_duration(grace_us) if grace_us else '0s'} is shorter than "
            f"{format_duration(DEFAULT_GRACE_US)}: objects of writes still in flight could be deleted; "
            "pass --allow-short-grace if you are sure"
        )
    if orphan_grace_us < DEFAULT_GRACE_US and not allow_short_grace:
        raise InvalidArgument(
            f"an orphan grace of {format_duration(orphan_grace_us) if orphan_grace_us else '0s'} is "
            f"shorter than {format_duration(DEFAULT_GRACE_US)}; pass --allow-short-grace if you are sure"
        )
    if not 0 < threshold <= 1:
        raise InvalidArgument(f"compaction threshold must be in (0, 1], got {threshold}")


def run_gc(
    store: TableStore,
    *,
    dry_run: bool = True,
    grace_us: int = DEFAULT_GRACE_US,
    allow_short_grace: bool = False,
    compact: bool = True,
    threshold: float = DEFAULT_THRESHOLD,
    orphan_grace_us: int = DEFAULT_ORPHAN_GRACE_US,
) -> GcReport:
    """One GC pass. Objects unreferenced for ``grace_us`` are collected; unknown keys
    are swept only after ``orphan_grace_us`` (at least ``grace_us``), since a long
    compaction or restore may still be about to register them.

    Raises:
        InvalidArgument: a grace period under the minimum without
            ``allow_short_grace``.
        RewindError: the keep-set could not be built; nothing is deleted
            ("never delete what you could not prove safe").
    """
    check_gc_args(
        grace_us=grace_us,
        orphan_grace_us=orphan_grace_us,
        allow_short_grace=allow_short_grace,
        threshold=threshold,
    )
    seconds: dict[str, float] = {}
    owner = ownership(store.catalog, store.objects)  # before anything is collected
    clock = time.perf_counter()
    found = scan(store.catalog, store.objects) if compact else []
    damaged = [d for item in found for d in item.damaged]
    compacted: list[tuple[Reclaimable, CompactionResult]] = []
    if not dry_run:
        compacted, failed = compact_reclaimable(
            store.catalog, store.objects, found, threshold=threshold
        )
        damaged += failed
    seconds["compact"] = time.perf_counter() - clock
    clock = time.perf_counter()
    collected = collect(store.catalog, store.objects, grace_us=grace_us, dry_run=dry_run)
    seconds["collect"] = time.perf_counter() - clock
    clock = time.perf_counter()
    flattened = flatten_chains(store.catalog, dry_run=dry_run)
    seconds["flatten"] = time.perf_counter() - clock
    clock = time.perf_counter()
    orphans = sweep_orphans(
        store.catalog,
        store.objects,
        grace_us=max(grace_us, orphan_grace_us),
        dry_run=dry_run,
        owner=owner,
    )  # known keys read again: compaction above registered new objects
    partial = sweep_partial_writes(
        store.catalog,
        store.objects,
        grace_us=max(grace_us, orphan_grace_us),
        owner=owner,
        dry_run=dry_run,
    )
    seconds["orphans"] = time.perf_counter() - clock
    return GcReport(
        dry_run,
        tuple(found),
        tuple(compacted),
        collected,
        orphans,
        partial,
        owner.catalog_id,
        tuple(damaged),
        seconds,
        tuple(flattened),
    )
