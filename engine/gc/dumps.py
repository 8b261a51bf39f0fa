"""Leftover dumps: ``staging/<job id>/`` keys of logical restores that finished.

A logical restore dumps the source under ``staging/<its job id>/`` and reloads
it; a process that died right after the swap leaves the dump there. Only
dumps live under ``staging/``, so listing it costs what it holds (the dumps of
running jobs and the leftovers), never the warehouse. A key there is an orphan
once its job is no longer running or resumable and the grace has passed, by
its real age (engine/gc/clocks.py); the warehouse's owner marker and other
catalogs' keys are never touched (engine/gc/ownership.py).
"""

from __future__ import annotations

from engine.gc.clocks import aged, real_now
from engine.gc.orphans import OrphanReport, active_job_ids
from engine.gc.ownership import Ownership
from tenants.catalog import Catalog
from tenants.objectstore import ObjectStore

PREFIX = "staging/"


def sweep_dumps(
    catalog: Catalog,
    objects: ObjectStore,
    *,
    grace_us: int,
    owner: Ownership,
    dry_run: bool = True,
) -> OrphanReport:
    """Delete (or, in a dry run, list) the dumps of stopped jobs older than the grace."""
    running = active_job_ids(catalog)
    listed = [
        info
        for info in objects.list(PREFIX)
        if owner.owns(info.key) and info.key.split("/", 2)[1] not in running
    ]
    now = real_now(catalog)  # after listing: no key can look younger than it is
    orphans = [info for info in listed if aged(info.last_modified_us, grace_us, now)]
    if not dry_run and orphans:
        objects.delete_many(o.key for o in orphans)
    return OrphanReport(dry_run, len(listed), 0, tuple(orphans), len(listed) - len(orphans), ())
