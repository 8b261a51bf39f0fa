"""Object GC: decide from the complete catalog, record, delete, then forget.

An object is garbage only when no live membership row of any tenant
references it (a dropped tenant keeps its memberships until purged), no
unfinished job pins it, and it has been unreferenced longer than the grace
period. The order is crash-safe, as in checkpoint GC of streaming engines:

1. one transaction ends expired protections and records every decision in
   ``gc_pending`` (the keep-set is built inside it; any error propagates:
   never delete what could not be proven safe);
2. the keys are deleted from the object store (batched, idempotent);
3. the catalog rows are dropped.

Steps 2 and 3 go in batches of :data:`FINISH_BATCH` decisions: a batch's
rows are dropped as soon as its keys are gone, so a crash mid-way leaves
exactly the unfinished decisions, which the next run finishes first.

Memory follows neither the warehouse nor the garbage: the decision is one
INSERT ... SELECT (the candidates never pass through Python), the deletes
read ``gc_pending`` a batch at a time, and the report keeps totals and the
first :data:`SAMPLE` candidates by key, for display.

"Unreferenced longer than the grace" compares the commit ts at which the last
membership ended (or the object was registered) with the wall clock, never
with the commit clock, which a backup restore may push ahead
(engine/gc/clocks.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from engine.gc import DEFAULT_GRACE_US
from engine.gc.clocks import aged_cutoff, real_now
from engine.gc.purge import PurgeResult, expire_retention
from tenants.catalog import Catalog
from tenants.catalog.base import Row
from tenants.catalog.engine.gc import (
    forget_collected,
    pending_batch,
    pending_totals,
    record_garbage,
)
from tenants.objectstore import ObjectStore
from tenants.progress import step

log = logging.getLogger(__name__)

SAMPLE = 1000
"""Candidates a report lists (the first by key); its counts are always exact."""
FINISH_BATCH = 5000
"""Decisions deleted, then forgotten, per batch: a crash loses at most one batch's
progress, and the catalog's cleanup keeps pace with the object store."""


@dataclass(frozen=True)
class Candidate:
    object_id: str
    key: str
    bytes: int
    unreferenced_since: int
    reason: str


@dataclass(frozen=True)
class CollectReport:
    """What one collection decided and did.

    ``candidates`` lists the first :data:`SAMPLE` decisions by key, no more;
    ``candidate_count`` and ``candidate_bytes`` count them all.
    """

    dry_run: bool
    purged: tuple[PurgeResult, ...]
    candidates: tuple[Candidate, ...]
    candidate_count: int = 0
    candidate_bytes: int = 0
    deleted_objects: int = 0
    deleted_bytes: int = 0
    resumed: int = 0
    stopped: bool = False  # stop() left recorded deletions for the next run
    seconds: dict[str, float] = field(default_factory=dict)  # decide, delete, forget

    @property
    def candidates_cut(self) -> bool:
        """Whether ``candidates`` lists fewer than were decided."""
        return len(self.candidates) < self.candidate_count


def _candidate(row: Row) -> Candidate:
    """``since`` is a commit ts, never below the wall clock of its commit, so
    ``now - since`` never overstates the real age."""
    since = row["last_ref"] if row["last_ref"] is not None else row["created_ts"]
    reason = (
        f"unreferenced since {since} by all {row['memberships']} table membership(s)"
        if row["memberships"]
        else "never referenced by a table"
    )
    return Candidate(row["id"], row["object_key"], int(row["byte_size"]), int(since), reason)


def collect(
    catalog: Catalog,
    objects: ObjectStore,
    *,
    grace_us: int = DEFAULT_GRACE_US,
    dry_run: bool = True,
    full_scan: bool = False,
    stop: Callable[[], bool] = lambda: False,
) -> CollectReport:
    """Collect garbage objects; with ``dry_run`` (the default) only report them.
    ``stop()`` is checked between batches of deletions (``rewind gc
    --max-seconds``): what is left stays recorded for the next run.

    A dry run records its decisions exactly as a real run does, in a
    transaction it then rolls back: it reports what the real run would decide.
    Only the objects the catalog queued as possibly freed are examined, so a
    run costs what changed since the last one; ``full_scan`` examines every
    object (an audit, costing the warehouse) and rebuilds the queue.
    """
    began = time.perf_counter()
    with catalog.transaction(rollback=dry_run) as tx:
        now = real_now(catalog)
        purged = expire_retention(tx)
        recorded = record_garbage(
            tx,
            aged_before=aged_cutoff(grace_us, now),
            decided_ts=now,
            sample=SAMPLE,
            full_scan=full_scan,
        )
    seconds = {"decide": time.perf_counter() - began}
    sample = tuple(_candidate(r) for r in recorded.sample)
    if dry_run:
        return CollectReport(
            True, tuple(purged), sample, recorded.objects, recorded.bytes, seconds=seconds
        )
    deleted, size, resumed = finish_pending(
        catalog, objects, fresh=recorded.objects, stop=stop, seconds=seconds
    )
    with catalog.snapshot() as tx:
        left, _ = pending_totals(tx)  # > 0 only when stop() cut the deletions short
    log.info(
        "gc: purged %d tenant(s), deleted %d object(s), %d bytes (%d resumed from an earlier run)",
        len(purged),
        deleted,
        size,
        resumed,
    )
    return CollectReport(
        False,
        tuple(purged),
        sample,
        recorded.objects,
        recorded.bytes,
        deleted,
        size,
        resumed,
        stopped=left > 0,
        seconds=seconds,
    )


def finish_pending(
    catalog: Catalog,
    objects: ObjectStore,
    fresh: int = 0,
    stop: Callable[[], bool] = lambda: False,
    seconds: dict[str, float] | None = None,
) -> tuple[int, int, int]:
    """Delete every recorded decision from the object store, then from the catalog,
    :data:`FINISH_BATCH` at a time; ``(objects, bytes, resumed)``.

    ``fresh`` is how many of the decisions this run made: the rest were left by
    an earlier run that stopped before finishing (``resumed``). Each batch is
    read by a keyset on the object id, its keys deleted, then its rows dropped in
    a transaction of its own: a crash between batches leaves the rest recorded.
    ``seconds``, when given, gains the time spent deleting keys and forgetting rows.
    """
    spent = seconds if seconds is not None else {}
    spent.setdefault("delete", 0.0)
    spent.setdefault("forget", 0.0)
    with catalog.snapshot() as tx:
        total, total_bytes = pending_totals(tx)
    if not total:
        return 0, 0, 0
    deleted = deleted_bytes = 0
    after = ""
    with step(f"deleting {total} objects", total_bytes) as deleting:
        while not stop():
            with catalog.snapshot() as tx:
                batch = pending_batch(tx, after, FINISH_BATCH)
            if not batch:
                break

            def keys(rows: list[Row] = batch) -> Iterator[str]:
                for r in rows:
                    yield r["object_key"]
                    deleting.advance(int(r["byte_size"]))

            clock = time.perf_counter()
            objects.delete_many(keys())
            spent["delete"] += time.perf_counter() - clock
            clock = time.perf_counter()
            with catalog.transaction() as tx:
                forget_collected(tx, [r["object_id"] for r in batch])
            spent["forget"] += time.perf_counter() - clock
            deleted += len(batch)
            deleted_bytes += sum(int(r["byte_size"]) for r in batch)
            after = batch[-1]["object_id"]
    return deleted, deleted_bytes, max(0, deleted - fresh)
