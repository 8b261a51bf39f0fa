"""A tenant name's history: its lineage of tenant ids and the restore jobs around it."""

from __future__ import annotations

from dataclasses import dataclass

from engine.restore.journal import JobRecord, jobs_of
from tenants.catalog import Catalog
from tenants.tenancy import TenantRecord, find_tenant, tenant_by_id


@dataclass(frozen=True)
class History:
    lineage: tuple[TenantRecord, ...]  # newest first, including expired ancestors
    jobs: tuple[JobRecord, ...]


def history(catalog: Catalog, tenant: str) -> History:
    with catalog.snapshot() as tx:
        current = find_tenant(tx, tenant)
        lineage = [current]
        while len(lineage) < 1000:
            before = lineage[-1].previous_holder_id or lineage[-1].source_tenant_id
            if not before or any(t.id == before for t in lineage):
                break
            lineage.append(tenant_by_id(tx, before))
        others = tx.all(
            "SELECT * FROM tenants WHERE name = ? ORDER BY created_ts DESC", (current.name,)
        )
    known = {t.id for t in lineage}
    lineage += [TenantRecord.from_row(r) for r in others if r["id"] not in known]
    jobs = jobs_of(catalog, sorted({t.name for t in lineage}), [t.id for t in lineage])
    return History(tuple(lineage), tuple(jobs))
