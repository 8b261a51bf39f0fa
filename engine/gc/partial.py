"""Writes that never finished: incomplete S3 multipart uploads and ``file://`` temp files.

A writer killed mid-upload leaves an incomplete multipart upload on S3 (its
parts are stored and billed, but no listing of objects shows them) or a
``.<name>.<pid>.tmp`` file beside its target on a ``file://`` warehouse (the
object listing skips dotfiles). Neither is ever an object anyone reads, so GC
aborts / removes them once they are older than the orphan grace, by the
object store's clock against the wall clock (engine/gc/clocks.py), and only when the
key they were for is this catalog's (engine/gc/ownership.py). A write still in
flight is younger than the grace, so it is never cut off.

On S3, a lifecycle rule (``AbortIncompleteMultipartUpload``) is the
belt-and-braces for uploads GC does not see (another prefix, a GC that does not
run); docs/decisions.md has one.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.gc.clocks import aged, real_now
from engine.gc.ownership import Ownership
from tenants.catalog import Catalog
from tenants.objectstore import ObjectStore, PartialWrite

SWEPT_PREFIXES = ("tenants/", "staging/")


@dataclass(frozen=True)
class PartialReport:
    dry_run: bool
    listed: int
    stale: tuple[PartialWrite, ...]  # aborted / removed (or would be, in a dry run)
    too_young: int
    not_ours: int
    discarded: int = 0  # how many were still there to abort or remove

    def count(self, kind: str) -> int:
        return sum(1 for w in self.stale if w.kind == kind)


def sweep_partial_writes(
    catalog: Catalog,
    objects: ObjectStore,
    *,
    grace_us: int,
    owner: Ownership,
    dry_run: bool = True,
    prefixes: tuple[str, ...] = SWEPT_PREFIXES,
) -> PartialReport:
    """Abort our incomplete uploads and remove our temp files older than ``grace_us``
    under ``prefixes`` (all of ours by default: a deep pass; an ordinary pass
    sweeps ``staging/`` here and the tables' own under their writers' intents,
    engine/gc/intents.py, since on ``file://`` this walks every directory)."""
    found = [w for prefix in prefixes for w in objects.partial_writes(prefix)]
    now = real_now(catalog)
    stale = []
    too_young = not_ours = 0
    for write in found:
        if not owner.owns(write.key):
            not_ours += 1
        elif not aged(write.since_us, grace_us, now):
            too_young += 1
        else:
            stale.append(write)
    discarded = 0 if dry_run or not stale else objects.discard_partial(stale)
    return PartialReport(dry_run, len(found), tuple(stale), too_young, not_ours, discarded)
