"""The intent sweep: orphans found where writers said they would write, never by listing it all.

An orphan can only come from a write that uploaded and never committed. Every
writer records an intent before its first upload and ends it in the
transaction that registers its objects (tenants/objects/intents.py), so after the
orphan grace an intent still in the catalog is a writer that died, lost a race
and could not clean up, or is still running far too long. For each such
intent, oldest first, a pass:

1. revokes it (one short transaction): from then on the writer's commit fails
   (``IntentRevoked``), so no key of it can become live behind the sweep's back;
2. lists only its prefixes (``tenants/<tenant>/<table>/<kind>/<intent id>``,
   each table it named, each object kind its writer minted ids for: one
   request per table for a data-only commit), or for a cancelled restore job
   HEADs the keys its plan names; the page's temp files and incomplete uploads
   are found at once (on S3 one ListMultipartUploads under the page's common
   prefix, matched to the intents here);
3. asks the catalog which of those keys it knows (a registered object or a
   pending deletion: kept) and deletes the rest;
4. forgets the intent, unless a key was younger than the grace (the writer may
   still be uploading: the next pass lists again).

Cost: one LIST request per intent, table and object kind it recorded (one
for a write of upserts only, a load or a compaction of data; both kinds for an
intent from before they were recorded), one upload listing per page of
intents, the keys under stale intents and one indexed lookup per key, nothing
that grows with the warehouse. Keys written before intents existed are found
only by ``rewind gc --deep`` (engine/gc/deep.py), which GC asks for until one
has run on such a warehouse (``needs_deep``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import cast

from engine.gc.clocks import aged, real_now
from engine.gc.orphans import OUR_KEY
from engine.gc.ownership import Ownership
from engine.pipeline import RestorePlan
from engine.restore.journal import ACTIVE_STATES
from tenants.catalog import Catalog, Row
from tenants.catalog.intents import (
    count_stale_intents,
    forget_intents,
    job_state_and_plan,
    known_keys_among,
    needs_deep_sweep,
    object_kinds_of,
    revoke_intents,
    stale_intents,
    tables_of_intents,
)
from tenants.errors import ObjectMissing
from tenants.objects.record import ObjectKind, object_key
from tenants.objectstore import ObjectInfo, ObjectStore, PartialWrite, PrefixSet
from tenants.progress import step

log = logging.getLogger(__name__)

PAGE = 200
"""Stale intents swept per page: one transaction revokes them, one forgets them."""
LIST_WORKERS = 8
"""Intents of a page listed at once (a LIST request per table each: latency-bound on S3)."""
HEAD_WORKERS = 8
"""A cancelled job's planned outputs checked at once (one HEAD each)."""


@dataclass(frozen=True)
class IntentReport:
    dry_run: bool
    stale: int  # intents older than the grace (revoked and swept, or would be)
    forgotten: int  # swept and dropped
    waiting: int  # swept, kept for the next pass: a key was younger than the grace
    running_jobs: int  # stale intents of restore jobs still running or resumable: left alone
    listed: int  # keys found under the stale intents
    known: int  # of them, keys the catalog names (kept)
    orphans: tuple[ObjectInfo, ...]  # deleted (or, in a dry run, would be)
    partial: tuple[PartialWrite, ...]  # temp files / incomplete uploads discarded
    foreign: int = 0  # keys outside this catalog's tenants (never touched)
    needs_deep: bool = False  # the warehouse predates intents and no deep sweep ran yet
    stopped: bool = False  # --max-seconds ran out before every stale intent was swept

    @property
    def orphan_bytes(self) -> int:
        return sum(o.size for o in self.orphans)

    @classmethod
    def nothing(cls) -> IntentReport:
        """A sweep that found no stale intent."""
        return cls(True, 0, 0, 0, 0, 0, 0, (), ())


def sweep_intents(
    catalog: Catalog,
    objects: ObjectStore,
    *,
    grace_us: int,
    owner: Ownership,
    dry_run: bool = True,
    stop: Callable[[], bool] = lambda: False,
) -> IntentReport:
    """Sweep every intent begun more than ``grace_us`` ago (see the module doc), a
    page at a time, until ``stop()`` (checked between pages: ``rewind gc --max-seconds``)."""
    now = real_now(catalog)
    cutoff = now - grace_us + 1 if grace_us > 0 else now + 1
    with catalog.snapshot() as tx:
        deep = needs_deep_sweep(tx)
        total = count_stale_intents(tx, cutoff)
    done: list[_Swept] = []
    stopped = False
    with step(f"sweeping {total} stale write intent(s)", total) as sweeping:
        for page in _stale_pages(catalog, cutoff):
            if stop():
                stopped = True
                break
            done += _sweep_page(catalog, objects, page, owner, grace_us, now, dry_run)
            sweeping.advance(len(page))
    orphans = tuple(o for d in done for o in d.orphans)
    if orphans and not dry_run:
        log.info(
            "gc: swept %d stale write intent(s): deleted %d orphan(s), %d bytes",
            len(done),
            len(orphans),
            sum(o.size for o in orphans),
        )
    return IntentReport(
        dry_run,
        stale=len(done),
        forgotten=sum(d.outcome == "forgotten" for d in done),
        waiting=sum(d.outcome == "waiting" for d in done),
        running_jobs=sum(d.outcome == "running" for d in done),
        listed=sum(d.listed for d in done),
        known=sum(d.known for d in done),
        orphans=orphans,
        partial=tuple(w for d in done for w in d.partial),
        foreign=sum(d.foreign for d in done),
        needs_deep=deep,
        stopped=stopped,
    )


@dataclass(frozen=True)
class _Swept:
    """What sweeping one intent found and did."""

    outcome: str  # forgotten | waiting (a key was young) | running (a live job's) | gone
    listed: int = 0
    known: int = 0
    orphans: tuple[ObjectInfo, ...] = ()
    partial: tuple[PartialWrite, ...] = ()
    foreign: int = 0


@dataclass(frozen=True)
class _Found:
    """An intent's keys and partial writes, listed (or HEADed) after its revocation."""

    intent_id: str
    keys: list[ObjectInfo]
    writes: list[PartialWrite]


def _sweep_page(
    catalog: Catalog,
    objects: ObjectStore,
    page: list[Row],
    owner: Ownership,
    grace_us: int,
    now: int,
    dry_run: bool,
) -> list[_Swept]:
    """Revoke a page of stale intents (one transaction), list what each left (in
    parallel, with one listing of the page's partial writes), delete what the
    catalog does not know, forget them (one transaction)."""
    swept: list[_Swept] = []
    jobs: dict[str, list[str]] = {}  # intent id -> a stopped job's planned keys
    ids: list[str] = []
    for row in page:
        if row["job_id"] is None:
            ids.append(str(row["id"]))
            continue
        keys = _job_outputs(catalog, str(row["job_id"]))
        if keys is None:  # the job still runs or can resume: its outputs are in use
            swept.append(_Swept("running"))
        else:
            jobs[str(row["id"])] = keys
            ids.append(str(row["id"]))
    if not dry_run and ids:
        with catalog.transaction() as tx:
            alive = revoke_intents(tx, ids)  # from here no commit of theirs can land
        swept += [_Swept("gone") for i in ids if i not in alive]  # committed or gave up
        ids = [i for i in ids if i in alive]
    with catalog.snapshot() as tx:
        tables = tables_of_intents(tx, [i for i in ids if i not in jobs])
    kinds = {str(row["id"]): object_kinds_of(row) for row in page}
    prefixes = {i: _prefixes(i, tables[i], kinds[i]) for i in tables}
    intent_of = {p: i for i, ps in prefixes.items() for p in ps}  # no prefix is under another
    under = PrefixSet(intent_of)

    def find(intent_id: str) -> list[ObjectInfo]:
        if intent_id in jobs:
            return _existing(objects, jobs[intent_id])
        return [info for prefix in prefixes[intent_id] for info in objects.list(prefix)]

    def partial() -> dict[str, list[PartialWrite]]:
        """The page's partial writes by intent, from one listing."""
        writes: dict[str, list[PartialWrite]] = {}
        for write in objects.partial_writes_under(under):
            prefix = under.match(write.key)
            if prefix is not None:
                writes.setdefault(intent_of[prefix], []).append(write)
        return writes

    with ThreadPoolExecutor(LIST_WORKERS, thread_name_prefix="rewind-gc-intents") as pool:
        partial_writes = pool.submit(partial)
        listed = list(pool.map(find, ids))
        by_intent = partial_writes.result()
    found = [_Found(i, keys, by_intent.get(i, [])) for i, keys in zip(ids, listed, strict=True)]
    ours = {f.intent_id: [i for i in f.keys if _owned(owner, i.key)] for f in found}
    with catalog.snapshot() as tx:
        known = known_keys_among(tx, [i.key for keys in ours.values() for i in keys])
    forget: list[str] = []
    doomed: list[ObjectInfo] = []
    discard: list[PartialWrite] = []
    for f in found:
        unknown = [i for i in ours[f.intent_id] if i.key not in known]
        writes = [w for w in f.writes if _owned(owner, w.key)]
        young = any(not aged(i.last_modified_us, grace_us, now) for i in unknown) or any(
            not aged(w.since_us, grace_us, now) for w in writes
        )
        swept.append(
            _Swept(
                "waiting" if young and not dry_run else "forgotten",
                len(f.keys),
                len(ours[f.intent_id]) - len(unknown),
                tuple(unknown),
                tuple(writes),
                len(f.keys) - len(ours[f.intent_id]),
            )
        )
        doomed += unknown
        discard += writes
        if not young:  # else its writer may still upload: the next pass lists it again
            forget.append(f.intent_id)
    if dry_run:
        return swept
    if doomed:
        objects.delete_many(i.key for i in doomed)
    if discard:
        objects.discard_partial(discard)
    if forget:
        with catalog.transaction() as tx:
            forget_intents(tx, forget)
    return swept


def _prefixes(intent_id: str, tables: list[tuple[str, str]], kinds: tuple[str, ...]) -> list[str]:
    """The key prefixes an intent's writer could have used: its id under each table
    and object kind it named."""
    return [
        object_key(tenant_id, table_id, cast("ObjectKind", kind), intent_id).removesuffix(
            ".parquet"
        )
        for tenant_id, table_id in tables
        for kind in kinds
    ]


def _stale_pages(catalog: Catalog, cutoff: int) -> Iterator[list[Row]]:
    """Intents begun before ``cutoff``, oldest first, a page at a time (never all in
    memory; what one page forgets does not move the next page's start)."""
    after: tuple[int, str] | None = None
    while True:
        with catalog.snapshot() as tx:
            page = stale_intents(tx, cutoff, after, PAGE)
        if not page:
            return
        yield page
        if len(page) < PAGE:
            return
        after = (int(page[-1]["started_us"]), str(page[-1]["id"]))


def _job_outputs(catalog: Catalog, job_id: str) -> list[str] | None:
    """The keys a stopped restore job's plan names (None while it still runs or
    can resume; none if the job or its plan is gone)."""
    with catalog.snapshot() as tx:
        found = job_state_and_plan(tx, job_id)
    if found is None:
        return []
    state, plan_json = found
    if state in ACTIVE_STATES:
        return None
    if plan_json is None:
        return []
    return [task.out_key for task in RestorePlan.from_json(plan_json).tasks]


def _existing(objects: ObjectStore, keys: list[str]) -> list[ObjectInfo]:
    """Those of ``keys`` the store holds (a HEAD each, several at once)."""

    def head(key: str) -> ObjectInfo | None:
        try:
            return objects.head(key)
        except ObjectMissing:
            return None

    with ThreadPoolExecutor(HEAD_WORKERS, thread_name_prefix="rewind-gc-head") as pool:
        return [info for info in pool.map(head, keys) if info is not None]


def _owned(owner: Ownership, key: str) -> bool:
    """An object key under a tenant id this catalog minted (never another's)."""
    match = OUR_KEY.fullmatch(key)
    return match is not None and match["tenant"] in owner.tenant_ids
