"""Orphan sweep: delete keys under the warehouse that the catalog never knew.

Orphans come from writes that crashed between upload and commit, or from
compactions that lost their swap. A key is deleted only when all of these hold:

- the catalog does not know it (objects, pending deletions, outputs of
  unfinished restore jobs, whose journal names them);
- it is recognisably an object key (``tenants/<id>/<id>/data|tomb/<id>.parquet``);
- its tenant id is one this catalog minted (engine/gc/ownership.py): keys of
  another catalog's tenants are kept and counted, even after an adoption;
- its real age (the object store's last-modified time against the wall clock, never
  the catalog's commit clock: engine/gc/clocks.py) exceeds the grace.

Anything else is reported as kept. Under ``staging/<job id>/`` (a logical
restore's dump) a key is an orphan once its job is done or cancelled and the
grace has passed: a process that died right after the swap leaves its dump
there. The marker is never an orphan.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.gc.clocks import aged, real_now
from engine.gc.ownership import Ownership, ownership
from engine.pipeline import RestorePlan
from engine.restore.journal import ACTIVE_STATES
from tenants.catalog import Catalog
from tenants.catalog.engine.gc import job_ids_in, known_object_keys, plans_of_jobs_in
from tenants.objectstore import ObjectInfo, ObjectStore

OUR_KEY = re.compile(
    r"tenants/(?P<tenant>[0-9a-f]{32})/[0-9a-f]{32}/(data|tomb)/[0-9a-f]{32}\.parquet"
)


@dataclass(frozen=True)
class OrphanReport:
    dry_run: bool
    listed: int
    known: int
    orphans: tuple[ObjectInfo, ...]
    too_young: int
    not_ours: tuple[str, ...]  # keys not in our object-key pattern
    foreign: int = 0  # object keys under tenant ids this catalog never created
    foreign_tenants: tuple[str, ...] = ()

    @property
    def orphan_bytes(self) -> int:
        return sum(o.size for o in self.orphans)


def known_keys(catalog: Catalog) -> set[str]:
    with catalog.snapshot() as tx:
        keys = known_object_keys(tx)
        plans = plans_of_jobs_in(tx, ACTIVE_STATES)
    for plan_json in plans:
        keys |= {task.out_key for task in RestorePlan.from_json(plan_json).tasks}
    return keys


def active_job_ids(catalog: Catalog) -> set[str]:
    """Restore jobs still running or resumable: their staging dumps are in use."""
    with catalog.snapshot() as tx:
        return job_ids_in(tx, ACTIVE_STATES)


def sweep_orphans(
    catalog: Catalog,
    objects: ObjectStore,
    *,
    grace_us: int,
    dry_run: bool = True,
    owner: Ownership | None = None,
) -> OrphanReport:
    """Delete (or, in a dry run, list) our unknown object keys older than ``grace_us``.

    Raises:
        WarehouseOwned, ForeignWarehouse: the warehouse is not this catalog's.
    """
    owner = owner or ownership(catalog, objects)
    known = known_keys(catalog)  # after the ids: a key registered since is known
    running = active_job_ids(catalog)
    listed = list(objects.list("tenants/"))
    listed += [
        info
        for info in objects.list("staging/")
        if owner.owns(info.key) and info.key.split("/", 2)[1] not in running
    ]
    now = real_now(catalog)  # after listing: no key can look younger than it is
    orphans = []
    too_young = 0
    not_ours = []
    foreign: dict[str, int] = {}
    hits = 0
    for info in listed:
        if info.key in known:
            hits += 1
            continue
        match = OUR_KEY.fullmatch(info.key)
        if info.key.startswith("staging/"):  # a finished job's leftover dump
            if aged(info.last_modified_us, grace_us, now):
                orphans.append(info)
            else:
                too_young += 1
        elif match is None:
            not_ours.append(info.key)
        elif match["tenant"] not in owner.tenant_ids:
            foreign[match["tenant"]] = foreign.get(match["tenant"], 0) + 1
        elif not aged(info.last_modified_us, grace_us, now):
            too_young += 1
        else:
            orphans.append(info)
    if not dry_run and orphans:
        objects.delete_many(o.key for o in orphans)
    return OrphanReport(
        dry_run,
        len(listed),
        hits,
        tuple(orphans),
        too_young,
        tuple(not_ours),
        sum(foreign.values()),
        tuple(sorted(foreign)),
    )
