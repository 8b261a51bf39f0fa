"""What restoring a physical backup installs: a tenant's databases, tables, schema
history and snapshots, as the backup's manifest recorded them.

All of them are inserted in the one transaction that swaps the staging tenant to
active (tenants/catalog/staging.py), with the objects and memberships
(tenants/objects.py): a reader sees the whole restored tenant or none of it.
Timestamps come from the source deployment; the caller has already moved this
catalog's clock past them (``tx.observe_ts``).
"""

from __future__ import annotations

from tenants.catalog.base import Tx


def insert_restored_database(
    tx: Tx, database_id: str, tenant_id: str, name: str, created_ts: int
) -> None:
    """Record database ``name`` of tenant ``tenant_id``, created at ``created_ts``."""
    tx.execute(
        "INSERT INTO databases (id, tenant_id, name, created_ts) VALUES (?, ?, ?, ?)",
        (database_id, tenant_id, name, created_ts),
    )


def insert_restored_table(
    tx: Tx,
    table_id: str,
    tenant_id: str,
    database_id: str,
    name: str,
    created_ts: int,
    dropped_ts: int | None,
) -> None:
    """Record table ``name`` in database ``database_id``, dropped already if
    ``dropped_ts`` is set (history a snapshot still reads)."""
    tx.execute(
        "INSERT INTO tables (id, tenant_id, database_id, name, created_ts, dropped_ts) VALUES (?, ?, ?, ?, ?, ?)",
        (table_id, tenant_id, database_id, name, created_ts, dropped_ts),
    )


def insert_restored_schema_version(
    tx: Tx,
    table_id: str,
    valid_from_ts: int,
    columns_json: str,
    primary_key_json: str,
    fingerprint: str,
) -> None:
    """Record one schema of table ``table_id``, valid from ``valid_from_ts``."""
    tx.execute(
        "INSERT INTO schema_versions (table_id, valid_from_ts, columns_json, primary_key_json, fingerprint) "
        "VALUES (?, ?, ?, ?, ?)",
        (table_id, valid_from_ts, columns_json, primary_key_json, fingerprint),
    )


def insert_restored_snapshot(
    tx: Tx,
    tenant_id: str,
    name: str,
    ts: int,
    kind: str,
    created_ts: int,
    expires_at: int | None,
) -> None:
    """Record snapshot ``name`` of tenant ``tenant_id`` at ``ts`` (a point the backup
    kept), created at ``created_ts``."""
    tx.execute(
        "INSERT INTO snapshots (tenant_id, name, ts, kind, created_ts, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
        (tenant_id, name, ts, kind, created_ts, expires_at),
    )
