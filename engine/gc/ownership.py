"""Which keys of the warehouse GC may touch: only those its own catalog wrote.

The warehouse marker must name this catalog (tenants/warehouse_owner.py;
GC never adopts). Even then a key is this catalog's only if it lies under a
tenant id this catalog minted (``tenants/<tenant id>/...``: its tenants in any
state, purged ones included, and the new tenants of its restore jobs) or under
one of its restore jobs' staging prefixes (``staging/<job id>/...``). Ids are
random 128-bit hex, so another catalog's keys never fall under ours, and keys
another catalog wrote into this warehouse (before an adoption, or by sharing it
against the rules) are kept, listed and counted, never deleted.
"""

from __future__ import annotations

from dataclasses import dataclass

from tenants.catalog import Catalog
from tenants.catalog.moved import refuse_if_moved
from tenants.catalog.ownership import own_job_ids, own_tenant_ids
from tenants.objectstore import ObjectStore
from tenants.warehouse_owner import claim_warehouse


@dataclass(frozen=True)
class Ownership:
    catalog_id: str
    tenant_ids: frozenset[str]
    job_ids: frozenset[str]

    def owns(self, key: str) -> bool:
        """Is ``key`` under a tenant or staging prefix this catalog created?"""
        parts = key.split("/", 2)
        if len(parts) < 3 or not parts[2]:
            return False
        if parts[0] == "tenants":
            return parts[1] in self.tenant_ids
        if parts[0] == "staging":
            return parts[1] in self.job_ids
        return False


def ownership(catalog: Catalog, objects: ObjectStore) -> Ownership:
    """Check the warehouse is this catalog's (claiming it if new), then read the ids it minted.

    Ids are read once, before any listing: a tenant created after this counts
    as not ours for this run, so its keys are kept (the safe direction).

    Raises:
        WarehouseOwned: the warehouse's marker names another catalog.
        ForeignWarehouse: no marker, and it holds data this catalog never wrote.
        CatalogMoved: ``rewind catalog copy`` moved this catalog: its successor
            owns the warehouse now, and this one's view of it is stale.
    """
    with catalog.snapshot() as tx:
        refuse_if_moved(tx, catalog.uri, "GC, even a dry run")
    marker = claim_warehouse(catalog, objects, adopt=False)
    with catalog.snapshot() as tx:
        return Ownership(marker.owner, frozenset(own_tenant_ids(tx)), frozenset(own_job_ids(tx)))
