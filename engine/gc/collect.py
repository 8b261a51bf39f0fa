"""Object GC: decide from the complete catalog, record, delete, then forget.

An object is garbage only when no live membership row of any tenant
references it (a dropped tenant keeps its memberships until purged), no
unfinished job pins it, and it has been unreferenced longer than the grace
period. The order is crash-safe, as in checkpoint GC of streaming engines:

1. one transaction ends expired protections and records every decision in
   ``gc_pending`` (the keep-set is built inside it; any error propagates:
   never delete what could not be proven safe);
2. the keys are deleted from the object store (batched, idempotent);
3. one transaction drops the catalog rows.

A rerun first finishes whatever ``gc_pending`` still holds.

"Unreferenced longer than the grace" compares the commit ts at which the last
membership ended (or the object was registered) with the wall clock, never
with the commit clock, which a backup restore may push ahead
(engine/gc/clocks.py).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

from engine.gc import DEFAULT_GRACE_US
from engine.gc.clocks import aged, real_now
from engine.gc.purge import PurgeResult, expire_retention
from tenants.catalog import Catalog, Tx
from tenants.catalog.engine.gc import (
    forget_collected,
    pending_deletions,
    record_pending,
    unreferenced_objects,
)
from tenants.objectstore import ObjectStore
from tenants.progress import step

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Candidate:
    object_id: str
    key: str
    bytes: int
    unreferenced_since: int
    reason: str


@dataclass(frozen=True)
class CollectReport:
    dry_run: bool
    purged: tuple[PurgeResult, ...]
    candidates: tuple[Candidate, ...]
    deleted_objects: int = 0
    deleted_bytes: int = 0
    resumed: int = 0
    seconds: dict[str, float] = field(default_factory=dict)


def find_garbage(tx: Tx, now: int, grace_us: int) -> list[Candidate]:
    """Every object no one references or pins, unreferenced for longer than the grace.

    ``now`` is the wall clock; ``since`` is a commit ts, never below the wall
    clock of its commit, so ``now - since`` never overstates the real age.
    """
    found = []
    for row in unreferenced_objects(tx):
        since = row["last_ref"] if row["last_ref"] is not None else row["created_ts"]
        if aged(since, grace_us, now):
            reason = (
                f"unreferenced since {since} by all {row['memberships']} table membership(s)"
                if row["memberships"]
                else "never referenced by a table"
            )
            found.append(Candidate(row["id"], row["object_key"], row["byte_size"], since, reason))
    return found


def collect(
    catalog: Catalog,
    objects: ObjectStore,
    *,
    grace_us: int = DEFAULT_GRACE_US,
    dry_run: bool = True,
) -> CollectReport:
    """Collect garbage objects; with ``dry_run`` (the default) only report them."""
    with catalog.transaction(rollback=dry_run) as tx:
        now = real_now(catalog)
        purged = expire_retention(tx)
        candidates = find_garbage(tx, now, grace_us)
        if not dry_run:
            record_pending(tx, [(c.object_id, c.key, c.bytes, now) for c in candidates])
    if dry_run:
        return CollectReport(True, tuple(purged), tuple(candidates))
    deleted, size, resumed = finish_pending(catalog, objects, {c.object_id for c in candidates})
    log.info(
        "gc: purged %d tenant(s), deleted %d object(s), %d bytes (%d resumed from an earlier run)",
        len(purged),
        deleted,
        size,
        resumed,
    )
    return CollectReport(False, tuple(purged), tuple(candidates), deleted, size, resumed)


def finish_pending(
    catalog: Catalog, objects: ObjectStore, fresh: set[str] | None = None
) -> tuple[int, int, int]:
    """Delete every recorded decision from the object store, then from the catalog."""
    with catalog.snapshot() as tx:
        pending = pending_deletions(tx)
    if not pending:
        return 0, 0, 0
    with step(
        f"deleting {len(pending)} objects", sum(int(r["byte_size"]) for r in pending)
    ) as deleting:

        def keys() -> Iterator[str]:
            for r in pending:
                yield r["object_key"]
                deleting.advance(int(r["byte_size"]))

        objects.delete_many(keys())
    ids = [r["object_id"] for r in pending]
    with catalog.transaction() as tx:
        forget_collected(tx, ids)
    resumed = len([i for i in ids if fresh is None or i not in fresh])
    return len(pending), sum(int(r["byte_size"]) for r in pending), resumed
