"""What a catalog can call its own: its id, the tenant and job ids it minted, its adoptions.

A catalog's id is a row of its ``meta`` table (``catalog_id``), created the first
time anyone asks. Two processes opening a fresh catalog at once agree on one id:
the insert is ``ON CONFLICT DO NOTHING`` on the key's primary key, inside a
write transaction, and both read the id back afterwards, so the first insert
wins and no one ever sees two ids.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from tenants.catalog.base import Catalog, Tx

CATALOG_ID = "catalog_id"
ADOPTIONS = "warehouse_adoptions"


def catalog_id(catalog: Catalog) -> str:
    """This catalog's stable id, created (race-safe) on first use."""
    with catalog.snapshot() as tx:
        found = tx.scalar("SELECT value FROM meta WHERE key = ?", (CATALOG_ID,))
    if found is not None:
        return str(found)  # the common case: no write lock for a read-only command
    with catalog.transaction() as tx:
        tx.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
            (CATALOG_ID, uuid.uuid4().hex),
        )
        return str(tx.scalar("SELECT value FROM meta WHERE key = ?", (CATALOG_ID,)))


def own_tenant_ids(tx: Tx) -> set[str]:
    """Every tenant id this catalog ever minted: its tenants in any state (purged and
    staging too) and the new tenant of every restore job it journaled, whose
    outputs are written under that id before the tenant row exists."""
    return {
        str(r["id"])
        for r in tx.all("SELECT id FROM tenants UNION SELECT new_tenant_id FROM restore_jobs")
    }


def own_job_ids(tx: Tx) -> set[str]:
    """Every restore job id this catalog journaled (a logical restore stages under it)."""
    return {str(r["id"]) for r in tx.all("SELECT id FROM restore_jobs")}


def adoptions(catalog: Catalog) -> list[dict[str, Any]]:
    """The warehouses this catalog took over from another owner, oldest first."""
    with catalog.snapshot() as tx:
        raw = tx.scalar("SELECT value FROM meta WHERE key = ?", (ADOPTIONS,))
    return list(json.loads(raw)) if raw else []


def record_adoption(
    catalog: Catalog, warehouse_uri: str, previous_owner: str | None, at: str
) -> None:
    """Append an adoption to the catalog's history (read-modify-write under the write lock)."""
    entry = {"warehouse": warehouse_uri, "previous_owner": previous_owner, "at": at}
    with catalog.transaction() as tx:
        raw = tx.scalar("SELECT value FROM meta WHERE key = ?", (ADOPTIONS,))
        history = [*(json.loads(raw) if raw else []), entry]
        value = json.dumps(history, sort_keys=True)
        if tx.execute("UPDATE meta SET value = ? WHERE key = ?", (value, ADOPTIONS)) == 0:
            tx.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (ADOPTIONS, value))
