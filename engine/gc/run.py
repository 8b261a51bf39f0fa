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

from engine.gc.clocks import real_now
from engine.gc.collect import DEFAULT_GRACE_US, CollectReport, collect
from engine.gc.deep import SweepBeside, deep_sweep, deep_sweep_beside
from engine.gc.dumps import PREFIX as DUMPS
from engine.gc.dumps import sweep_dumps
from engine.gc.flatten import Flattened, flatten_chains
from engine.gc.intents import IntentReport, sweep_intents
from engine.gc.orphans import OrphanReport
from engine.gc.ownership import Ownership, ownership
from engine.gc.partial import SWEPT_PREFIXES, PartialReport, sweep_partial_writes
from engine.gc.reclaim import (
    DEFAULT_THRESHOLD,
    DamagedObject,
    Reclaimable,
    compact_reclaimable,
    scan,
)
from engine.gc.time_limit import TimeLimit
from engine.operations.runs import journaled
from tenants.catalog.intents import record_deep_sweep
from tenants.compaction import CompactionResult
from tenants.errors import InvalidArgument
from tenants.observe import events
from tenants.store import TableStore
from tenants.times import US, format_duration

DEFAULT_ORPHAN_GRACE_US = 24 * US["h"]
PHASES = ("collect", "flatten", "intents", "orphans")
"""A pass's phases after compaction, in order (a deep pass without a time limit
sweeps the intents first: see :func:`_gc_pass`)."""


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
    intents: IntentReport = field(default_factory=IntentReport.nothing)  # stale intents swept
    deep: bool = False  # the whole warehouse was listed for orphans
    stopped: str | None = None  # --max-seconds ran out: the phase the pass stopped in


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
    deep: bool = False,
    max_seconds: float | None = None,
) -> GcReport:
    """One GC pass. Objects unreferenced for ``grace_us`` are collected; unknown keys
    are swept only after ``orphan_grace_us`` (at least ``grace_us``), since a long
    compaction or restore may still be about to register them: those under the
    write intents older than that (engine/gc/intents.py) and, with ``deep``,
    every key of the warehouse the catalog does not know (the full, streamed listing
    of engine/gc/deep.py). Only objects the catalog queued as possibly freed are
    examined for collection; ``deep`` examines every object too (the audit).
    ``max_seconds`` stops the pass between units of work once it has run that
    long (engine/gc/time_limit.py): ``stopped`` names the phase, and the next
    pass goes on from there.

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

    def one_pass(dry_run: bool) -> GcReport:
        return _gc_pass(
            store,
            dry_run=dry_run,
            grace_us=grace_us,
            compact=compact,
            threshold=threshold,
            orphan_grace_us=orphan_grace_us,
            deep=deep,
            max_seconds=max_seconds,
        )

    if dry_run:
        with events.job("gc"):  # each phase an event (tenants.observe.events)
            return one_pass(True)
    method = "deep" if deep else "default"
    with (
        journaled(store.catalog, "gc", method=method) as run,
        events.job("gc", job_id=run.run_id),  # the pass's events name its journaled run
    ):
        report = one_pass(False)
        orphans = (*report.orphans.orphans, *report.intents.orphans)
        run.objects = report.collected.deleted_objects + len(orphans)
        run.bytes = report.collected.deleted_bytes + sum(o.size for o in orphans)
        return report


def _gc_pass(
    store: TableStore,
    *,
    dry_run: bool = True,
    grace_us: int = DEFAULT_GRACE_US,
    compact: bool = True,
    threshold: float = DEFAULT_THRESHOLD,
    orphan_grace_us: int = DEFAULT_ORPHAN_GRACE_US,
    deep: bool = False,
    max_seconds: float | None = None,
) -> GcReport:
    """The pass :func:`run_gc` journals (its arguments checked); each phase ends
    in one event of the caller's GC job (tenants.observe.events)."""
    limit = TimeLimit(max_seconds)
    seconds: dict[str, float] = {}
    stopped: str | None = None
    owner = ownership(store.catalog, store.objects)  # before anything is collected
    clock = time.perf_counter()
    compacted: list[tuple[Reclaimable, CompactionResult]] = []
    cut: list[bool] = []  # set when --max-seconds left tables uncompacted

    def stop_compacting() -> bool:
        if limit.up():
            cut.append(True)
        return bool(cut)

    with events.step("compact") as compacting:
        found = scan(store.catalog, store.objects, remember=not dry_run) if compact else []
        damaged = [d for item in found for d in item.damaged]
        if not dry_run:
            compacted, failed = compact_reclaimable(
                store.catalog, store.objects, found, threshold=threshold, stop=stop_compacting
            )
            damaged += failed
        compacting.objects = sum(result.inputs for _, result in compacted)
        compacting.bytes = sum(result.bytes_out for _, result in compacted)
        compacting.rows = sum(result.rows for _, result in compacted)
        compacting.stopped = bool(cut)
    seconds["compact"] = time.perf_counter() - clock
    collected = CollectReport(dry_run, (), ())
    flattened: list[Flattened] = []
    intents = IntentReport.nothing()
    orphans = OrphanReport(dry_run, 0, 0, (), 0, ())
    partial = PartialReport(dry_run, 0, (), 0, 0)
    orphan_grace = max(grace_us, orphan_grace_us)
    # A deep pass with no time limit sweeps the intents first, then lists the
    # warehouse beside the audit (engine/gc/deep.py, deep_sweep_beside); with a
    # limit, each phase in turn, so the pass can stop between them.
    beside_audit = deep and max_seconds is None
    phases = ("intents", "collect", "flatten", "orphans") if beside_audit else PHASES
    beside: SweepBeside | None = None
    try:
        for phase in phases:
            if cut:
                stopped = "compact"
                break
            if limit.up():
                stopped = phase
                break
            if phase == "collect" and beside_audit:
                beside = deep_sweep_beside(
                    store.catalog,
                    store.objects,
                    grace_us=orphan_grace,
                    dry_run=dry_run,
                    owner=owner,
                )
            clock = time.perf_counter()
            collected, flattened, intents, orphans, partial = _phase(
                phase,
                store,
                dry_run=dry_run,
                grace_us=grace_us,
                orphan_grace=orphan_grace,
                owner=owner,
                deep=deep,
                limit=limit,
                beside=beside,
                done=(collected, flattened, intents, orphans, partial),
            )
            seconds[phase] = time.perf_counter() - clock
            if (phase == "intents" and intents.stopped) or (
                phase == "collect" and collected.stopped
            ):
                stopped = phase  # time ran out between batches: the rest waits for the next pass
                break
    finally:
        if beside is not None:
            beside.close()
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
        intents,
        deep,
        stopped,
    )


Done = tuple[CollectReport, list[Flattened], IntentReport, OrphanReport, PartialReport]


def _phase(
    phase: str,
    store: TableStore,
    *,
    dry_run: bool,
    grace_us: int,
    orphan_grace: int,
    owner: Ownership,
    deep: bool,
    limit: TimeLimit,
    beside: SweepBeside | None,
    done: Done,
) -> Done:
    """Run one phase of a pass as one event; ``done`` with the phase's report replaced."""
    collected, flattened, intents, orphans, partial = done
    with events.step(phase) as measure:
        if phase == "collect":
            collected = collect(
                store.catalog,
                store.objects,
                grace_us=grace_us,
                dry_run=dry_run,
                full_scan=deep,  # the audit: every object, not only the queued ones
                stop=limit.up,
            )
        elif phase == "flatten":
            flattened = flatten_chains(store.catalog, dry_run=dry_run)
        elif phase == "intents":
            intents = sweep_intents(
                store.catalog,
                store.objects,
                grace_us=orphan_grace,
                owner=owner,
                dry_run=dry_run,
                stop=limit.up,
            )
        elif beside is not None:  # listed beside the audit: wait for it
            orphans = beside.result()
        elif deep:  # every key of the warehouse against the catalog's
            orphans = deep_sweep(
                store.catalog,
                store.objects,
                grace_us=orphan_grace,
                dry_run=dry_run,
                owner=owner,
            )  # known keys read again: compaction above registered new objects
        else:  # only the dumps of logical restores: tables' orphans are under intents
            orphans = sweep_dumps(
                store.catalog,
                store.objects,
                grace_us=orphan_grace,
                dry_run=dry_run,
                owner=owner,
            )
        if phase == "orphans":
            partial = sweep_partial_writes(
                store.catalog,
                store.objects,
                grace_us=orphan_grace,
                owner=owner,
                dry_run=dry_run,
                prefixes=SWEPT_PREFIXES if deep else (DUMPS,),
            )
            if deep and not dry_run:
                with store.catalog.transaction() as tx:
                    record_deep_sweep(tx, real_now(store.catalog))
        measure.objects, measure.bytes, measure.rows, measure.stopped = _did(
            phase, collected, flattened, intents, orphans, partial
        )
    return collected, flattened, intents, orphans, partial


def _did(
    phase: str,
    collected: CollectReport,
    flattened: list[Flattened],
    intents: IntentReport,
    orphans: OrphanReport,
    partial: PartialReport,
) -> tuple[int | None, int | None, int | None, bool]:
    """What ``phase`` deleted (in a dry run: would delete), as its event's
    (objects, bytes, rows, stopped short)."""
    if phase == "collect":
        c = collected
        done = (
            (c.candidate_count, c.candidate_bytes)
            if c.dry_run
            else (c.deleted_objects, c.deleted_bytes)
        )
        return *done, None, c.stopped
    if phase == "flatten":
        return None, None, sum(f.rows for f in flattened), False
    if phase == "intents":
        return len(intents.orphans), intents.orphan_bytes, None, intents.stopped
    return len(orphans.orphans) + len(partial.stale), orphans.orphan_bytes, None, False
