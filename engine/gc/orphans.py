"""Orphan sweep: delete keys under the warehouse that the catalog never knew.

Orphans come from writes that crashed between upload and commit, or from
compactions that lost their swap. Only keys that are recognisably ours
(``tenants/<id>/<id>/data|tomb/<id>.parquet``) and older than the grace period
(by the store's last-modified time) are deleted; anything else is reported as
kept. Outputs of unfinished restore jobs are known (their journal names
them). If the catalog knows none of the keys listed, the warehouse prefix is
probably wrong, and the sweep refuses to delete anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.restore.journal import ACTIVE_STATES
from engine.restore.plan import RestorePlan
from tenants.catalog import Catalog
from tenants.errors import RewindError
from tenants.objectstore import ObjectInfo, ObjectStore
from tenants.protection import wall_now

OUR_KEY = re.compile(r"tenants/[0-9a-f]{32}/[0-9a-f]{32}/(data|tomb)/[0-9a-f]{32}\.parquet")


class SweepRefused(RewindError):
    """The sweep will not delete: the listing does not look like this catalog's warehouse."""


@dataclass(frozen=True)
class OrphanReport:
    dry_run: bool
    listed: int
    known: int
    orphans: tuple[ObjectInfo, ...]
    too_young: int
    not_ours: tuple[str, ...]

    @property
    def orphan_bytes(self) -> int:
        return sum(o.size for o in self.orphans)


def known_keys(catalog: Catalog) -> set[str]:
    with catalog.snapshot() as tx:
        keys = {r["object_key"] for r in tx.all("SELECT object_key FROM objects")}
        keys |= {r["object_key"] for r in tx.all("SELECT object_key FROM gc_pending")}
        marks = ", ".join("?" for _ in ACTIVE_STATES)
        jobs = tx.all(
            "SELECT p.plan_json FROM restore_jobs j JOIN restore_plans p ON p.job_id = j.id "
            f"WHERE j.state IN ({marks})",
            ACTIVE_STATES,
        )
    for job in jobs:
        keys |= {task.out_key for task in RestorePlan.from_json(job["plan_json"]).tasks}
    return keys


def check_prefix(store: ObjectStore, known: set[str]) -> None:
    """Refuse to collect anything when the warehouse listing is not this catalog's."""
    seen = 0
    for info in store.list("tenants/"):
        if info.key in known:
            return
        seen += 1
        if seen >= 1000:
            break
    if seen:
        raise SweepRefused(
            f"gc refused: the catalog knows none of the first {seen} key(s) listed under "
            f"{store.warehouse.uri}/tenants/; check --warehouse and --catalog belong together"
        )


def sweep_orphans(
    catalog: Catalog, store: ObjectStore, *, grace_us: int, dry_run: bool = True
) -> OrphanReport:
    known = known_keys(catalog)
    with catalog.snapshot() as tx:
        now = wall_now(tx)
    listed = list(store.list("tenants/"))
    hits = sum(1 for info in listed if info.key in known)
    if listed and hits == 0:
        raise SweepRefused(
            f"orphan sweep refused: the catalog knows none of the {len(listed)} key(s) listed under "
            f"{store.warehouse.uri}/tenants/ (e.g. {listed[0].key}); check --warehouse and --catalog "
            "belong together"
        )
    orphans = []
    too_young = 0
    not_ours = []
    for info in listed:
        if info.key in known:
            continue
        if not OUR_KEY.fullmatch(info.key):
            not_ours.append(info.key)
        elif info.last_modified_us + grace_us > now:
            too_young += 1
        else:
            orphans.append(info)
    if not dry_run and orphans:
        store.delete_many(o.key for o in orphans)
    return OrphanReport(dry_run, len(listed), hits, tuple(orphans), too_young, tuple(not_ours))
