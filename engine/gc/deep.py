"""``rewind gc --deep``: the full orphan sweep, streamed.

The same decisions as the orphan sweep of engine/gc/orphans.py (read its
docstring: what the catalog knows, which keys are ours, the grace by the
object store's clock, finished jobs' ``staging/`` dumps), made without holding
the warehouse: the object store's listing, in key order (the contract of
``ObjectStore.list``), is merged against the catalog's known keys, streamed in
the same byte order from one read snapshot (``known_keys_in_order``). Memory is
one listing page, one catalog batch, the outputs of active restore jobs' plans
(few) and what the report lists (orphans, keys not ours), never the warehouse.

Orphans are deleted in batches as they are found. Before a batch goes, its keys
are looked up in the catalog one more time (the same snapshot): a merge is only
as right as the two orders agree, and a key the lookup finds stops the sweep
instead of being deleted. A listing out of order stops it too, before the key
out of place is judged; what was deleted before either was judged in order.

Costs (docs/gc.md): one full listing of ``tenants/`` and ``staging/`` (the
object store's LIST requests, or a walk and a stat per file) and one ordered
read of the ``objects`` and ``gc_pending`` keys, which PostgreSQL sorts on its
side; the catalog snapshot stays open for the whole sweep.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import islice

from engine.gc.clocks import aged, real_now
from engine.gc.orphans import OUR_KEY, OrphanReport
from engine.gc.ownership import Ownership, ownership
from engine.pipeline import RestorePlan
from engine.restore.journal import ACTIVE_STATES
from tenants.catalog import Catalog
from tenants.catalog.base import Tx
from tenants.catalog.engine.gc import (
    job_ids_in,
    known_among,
    known_keys_in_order,
    plans_of_jobs_in,
)
from tenants.catalog.intents import intent_ids
from tenants.errors import ObjectMissing, RewindError, StorageError
from tenants.objects.intents import INTENT_ID_CHARS
from tenants.objectstore import ObjectInfo, ObjectStore

PAGE = 1_000  # listed keys judged against one reading of the clock
DELETE_BATCH = 1_000  # orphans per delete_many: one S3 DeleteObjects request
CATALOG_BATCH = 10_000  # known keys per fetch from the catalog
PREFIXES = ("tenants/", "staging/")  # in the order today's sweep lists them

Listed = tuple[str, ObjectInfo | None]  # a key and, when the listing gave it, its info
Merged = tuple[str, ObjectInfo | None, bool]  # ... and whether the catalog knows the key


@dataclass
class _Tally:
    """What the sweep found so far: the report's fields, filled as keys go by."""

    listed: int = 0
    known: int = 0
    orphans: list[ObjectInfo] = field(default_factory=list)
    too_young: int = 0
    not_ours: list[str] = field(default_factory=list)
    foreign: dict[str, int] = field(default_factory=dict)


def deep_sweep(
    catalog: Catalog,
    objects: ObjectStore,
    *,
    grace_us: int,
    dry_run: bool = True,
    owner: Ownership | None = None,
) -> OrphanReport:
    """Delete (or, in a dry run, list) our unknown keys older than ``grace_us``,
    reading the whole warehouse as a stream: the report ``sweep_orphans`` would give.

    Raises:
        WarehouseOwned, ForeignWarehouse: the warehouse is not this catalog's.
        StorageError: the object store listed a key out of order (nothing from it
            on is judged or deleted).
        RewindError: a key the merge found unknown is in the catalog (the two
            orders disagree); it is not deleted, and the sweep stops.
    """
    owner = owner or ownership(catalog, objects)
    tally = _Tally()
    doomed: list[ObjectInfo] = []  # orphans found and not yet deleted
    with catalog.snapshot() as tx:  # after the ids: a key registered since is known
        planned = _outputs_of_active_plans(tx)
        running = job_ids_in(tx, ACTIVE_STATES)
        writers = intent_ids(tx)
        for prefix in PREFIXES:
            listing: Iterable[Listed] = objects.listing(prefix)
            if prefix == "staging/":  # only dumps of our jobs that no longer run
                listing = (
                    i for i in listing if owner.owns(i[0]) and i[0].split("/", 2)[1] not in running
                )
            known = known_keys_in_order(tx, prefix, CATALOG_BATCH)
            for page in _pages(_merged(listing, known, planned, objects)):
                now = real_now(catalog)  # after listing the page: no key looks younger
                found = len(tally.orphans)
                for key, info, is_known in page:
                    _judge(key, info, is_known, now, grace_us, owner, tally, objects, writers)
                doomed += tally.orphans[found:]
                if len(doomed) >= DELETE_BATCH:
                    _delete(tx, objects, doomed, dry_run)
                    doomed = []
        _delete(tx, objects, doomed, dry_run)
    return OrphanReport(
        dry_run,
        tally.listed,
        tally.known,
        tuple(tally.orphans),
        tally.too_young,
        tuple(tally.not_ours),
        sum(tally.foreign.values()),
        tuple(sorted(tally.foreign)),
    )


@dataclass
class SweepBeside:
    """A :func:`deep_sweep` running in a thread on a catalog connection of its own:
    take its :meth:`result`, and :meth:`close` it whatever happens."""

    future: Future[OrphanReport]
    catalog: Catalog
    pool: ThreadPoolExecutor

    def result(self) -> OrphanReport:
        return self.future.result()

    def close(self) -> None:
        """Wait for the sweep (it is never abandoned half way), then close its connection."""
        self.pool.shutdown(wait=True)
        self.catalog.close()


def deep_sweep_beside(
    catalog: Catalog,
    objects: ObjectStore,
    *,
    grace_us: int,
    dry_run: bool,
    owner: Ownership,
) -> SweepBeside | None:
    """Start :func:`deep_sweep` beside the caller's work, or ``None`` when the
    catalog cannot open a second connection (run it in turn then).

    Why: at 10^6 objects a deep pass is two long halves, the listing merge
    (Python, walking the warehouse) and the garbage audit (one statement the
    database runs, the interpreter's lock released), and neither needs the
    other's result. Beside each other they take about as long as the longer.
    Safe beside collection, flattening and nothing else: those create no
    object, and collection deletes a key before it forgets its row, so the
    sweep's snapshot either knows a garbage key (kept) or the key is gone.
    Compaction and the intent sweep, which do create or delete unknown keys,
    run before it starts.
    """
    open_again = getattr(catalog, "open_again", None)  # a test's wrapper may lack it
    other = open_again() if open_again is not None else None
    if other is None:
        return None
    pool = ThreadPoolExecutor(1, thread_name_prefix="gc-deep")
    context = contextvars.copy_context()  # the pass's event job, for any log line
    future = pool.submit(
        context.run,
        lambda: deep_sweep(other, objects, grace_us=grace_us, dry_run=dry_run, owner=owner),
    )
    return SweepBeside(future, other, pool)


def _outputs_of_active_plans(tx: Tx) -> set[str]:
    """Keys the catalog knows before it installs them: outputs of unfinished restore
    jobs' plans (few next to the warehouse, so a set)."""
    return {
        task.out_key
        for plan_json in plans_of_jobs_in(tx, ACTIVE_STATES)
        for task in RestorePlan.from_json(plan_json).tasks
    }


def _merged(
    listing: Iterable[Listed], known: Iterator[str], planned: set[str], objects: ObjectStore
) -> Iterator[Merged]:
    """Each listed key, its info if the listing gave it, and whether the catalog
    knows it: a sorted merge of the listing against the catalog's keys (both
    ascending), plus the active plans' outputs. A listed key not after the one
    before stops it, unjudged."""
    next_known = next(known, None)
    previous = ""
    for key, info in listing:
        if key <= previous:
            raise StorageError(
                f"{objects.warehouse.uri} listed {key!r} after {previous!r}: not in key "
                "order, which gc --deep needs (tenants/objectstore/base.py); nothing from "
                f"{key!r} on was judged or deleted"
            )
        previous = key
        while next_known is not None and next_known < key:
            next_known = next(known, None)
        yield key, info, next_known == key or key in planned


def _pages(items: Iterator[Merged]) -> Iterator[list[Merged]]:
    while page := list(islice(items, PAGE)):
        yield page


def _judge(
    key: str,
    listed: ObjectInfo | None,
    is_known: bool,
    now: int,
    grace_us: int,
    owner: Ownership,
    tally: _Tally,
    objects: ObjectStore,
    writers: set[str],
) -> None:
    """One key's verdict, as engine/gc/orphans.py's ``sweep_orphans`` gives it, but
    for a key under an intent the catalog holds (``writers``): that is the intent
    sweep's to judge, which revokes the intent before it deletes, so a writer
    slower than the grace can never commit a key deleted here. Such a key is
    counted as too young.

    A known key needs no more; an unknown one its size and age, which a listing
    without them (``file://``) gets with one stat here: the few unknown keys,
    not the warehouse, pay for it."""
    if is_known:
        tally.listed += 1
        tally.known += 1
        return
    try:
        info = listed or objects.head(key)
    except ObjectMissing:  # deleted since it was listed: nothing left to judge
        return
    tally.listed += 1
    match = OUR_KEY.fullmatch(info.key)
    if info.key.startswith("staging/"):  # a finished job's leftover dump
        if aged(info.last_modified_us, grace_us, now):
            tally.orphans.append(info)
        else:
            tally.too_young += 1
    elif match is None:
        tally.not_ours.append(info.key)
    elif match["tenant"] not in owner.tenant_ids:
        tally.foreign[match["tenant"]] = tally.foreign.get(match["tenant"], 0) + 1
    elif info.key.rsplit("/", 1)[1][:INTENT_ID_CHARS] in writers or not aged(
        info.last_modified_us, grace_us, now
    ):
        tally.too_young += 1  # a writer's keys: the intent sweep revokes, then deletes
    else:
        tally.orphans.append(info)


def _delete(tx: Tx, objects: ObjectStore, doomed: list[ObjectInfo], dry_run: bool) -> None:
    """Delete a batch of orphans (a dry run only checks them), after looking each key
    up in the catalog: a key found there was misjudged, and stops the sweep."""
    if not doomed:
        return
    keys = [o.key for o in doomed]
    misjudged = known_among(tx, keys)
    if misjudged:
        raise RewindError(
            f"gc --deep found {len(misjudged)} key(s) unknown to catalog {tx.catalog.uri} by "
            f"merging it against {objects.warehouse.uri}, but the catalog has them, e.g. "
            f"{min(misjudged)!r}: the listing's order and the catalog's disagree; none of "
            "this batch was deleted"
        )
    if not dry_run:
        objects.delete_many(keys)
