"""A tenant name's history: its lineage of tenant ids and the restore jobs around it.

The lineage is the one names and times resolve through (tenants.lineage),
purged and expired tenants included, so `rewind history` shows what the name
can reach. A clone's history stops at its cut: its own row names the source
and the cut, but the source's later life (its restores, drops, other clones)
belongs to the source, not to the clone.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.restore.journal import JobRecord, jobs_of
from tenants.catalog import Catalog
from tenants.catalog.install import tenants_named
from tenants.lineage import chain
from tenants.tenancy import TenantRecord, find_tenant


@dataclass(frozen=True)
class History:
    lineage: tuple[TenantRecord, ...]  # newest first, including purged and expired ancestors
    jobs: tuple[JobRecord, ...]


def history(catalog: Catalog, tenant: str) -> History:
    with catalog.snapshot() as tx:
        current = find_tenant(tx, tenant)
        lineage = [a.tenant for a in chain(tx, current) if a.until_ts is None]
        others = tenants_named(tx, current.name)
    known = {t.id for t in lineage}
    lineage += [TenantRecord.from_row(r) for r in others if r["id"] not in known]
    jobs = jobs_of(catalog, sorted({t.name for t in lineage}), [t.id for t in lineage])
    return History(tuple(lineage), tuple(jobs))
