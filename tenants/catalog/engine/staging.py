"""Staging tenants: the rows a restore builds under a new id before it swaps names.

A staging tenant holds its target name but no lookup by name sees it (they
ask for ``state = 'active'``). Its row is inserted before any byte is written
under its id, so GC counts the keys as this catalog's; it is either swapped to
active in the install transaction (which also retires the name's current
holder) or wiped, rows only: the caller deletes its keys first.
"""

from __future__ import annotations

from tenants.catalog.base import Tx


def tenant_state(tx: Tx, tenant_id: str) -> str | None:
    """The state of tenant ``tenant_id`` (``staging``, ``active``, ``dropped``), or
    None if no row has that id."""
    row = tx.one("SELECT state FROM tenants WHERE id = ?", (tenant_id,))
    return None if row is None else str(row["state"])


def insert_staging_tenant(tx: Tx, tenant_id: str, name: str, ts: int) -> None:
    """Record tenant ``tenant_id`` as a staging tenant for ``name``, created at ``ts``.

    Commit it before writing any key under ``tenants/<tenant_id>/``: GC deletes
    only keys under tenant ids the catalog minted.
    """
    tx.execute(
        "INSERT INTO tenants (id, name, state, created_ts, last_change_ts) "
        "VALUES (?, ?, 'staging', ?, ?)",
        (tenant_id, name, ts, ts),
    )


def unfinished_restore_building(tx: Tx, tenant_id: str) -> str | None:
    """The id of the unfinished restore job whose new tenant is ``tenant_id``, if any
    (its staging tenant is in use, not abandoned)."""
    row = tx.one(
        "SELECT id FROM restore_jobs WHERE new_tenant_id = ? "
        "AND state IN ('planned', 'rewriting', 'verifying', 'installing', 'failed')",
        (tenant_id,),
    )
    return None if row is None else str(row["id"])


def delete_staging_rows(tx: Tx, staging_id: str) -> None:
    """Forget every row of tenant ``staging_id``: its tables' memberships, schema
    versions and tables, its databases, the tenant, and each of its objects that no
    other membership references.

    The caller checks the tenant is still ``staging`` in the same transaction;
    keys under its id become orphans unless the caller deleted them first.
    """
    table_ids = [
        r["id"] for r in tx.all("SELECT id FROM tables WHERE tenant_id = ?", (staging_id,))
    ]
    for table_id in table_ids:
        object_ids = [
            r["object_id"]
            for r in tx.all("SELECT object_id FROM membership WHERE table_id = ?", (table_id,))
        ]
        tx.execute("DELETE FROM membership WHERE table_id = ?", (table_id,))
        for object_id in object_ids:
            tx.execute(
                "DELETE FROM objects WHERE id = ? AND id NOT IN (SELECT object_id FROM membership)",
                (object_id,),
            )
        tx.execute("DELETE FROM schema_versions WHERE table_id = ?", (table_id,))
        tx.execute("DELETE FROM member_totals WHERE table_id = ?", (table_id,))
    tx.execute("DELETE FROM tables WHERE tenant_id = ?", (staging_id,))
    tx.execute("DELETE FROM databases WHERE tenant_id = ?", (staging_id,))
    tx.execute("DELETE FROM tenants WHERE id = ?", (staging_id,))


def activate_reloaded_tenant(
    tx: Tx,
    staging_id: str,
    *,
    source_tenant_id: str,
    source_ts: int,
    job_id: str | None,
    ts: int,
    previous_holder_id: str | None,
) -> int:
    """Swap a reloaded (logical) staging tenant to active at ``ts``, recording where it
    came from; ``created_ts`` stays the staging row's. Returns the rows changed
    (0: it is no longer staging).

    Run in the transaction that retires ``previous_holder_id``: the name never has
    two active holders.
    """
    return tx.execute(
        "UPDATE tenants SET state = 'active', source_tenant_id = ?, source_ts = ?, "
        "restore_job_id = ?, last_change_ts = ?, previous_holder_id = ? "
        "WHERE id = ? AND state = 'staging'",
        (source_tenant_id, source_ts, job_id, ts, previous_holder_id, staging_id),
    )


def activate_restored_tenant(
    tx: Tx,
    tenant_id: str,
    name: str,
    *,
    source_tenant_id: str,
    source_ts: int,
    backup_id: str,
    ts: int,
    previous_holder_id: str | None,
) -> int:
    """Swap a staging tenant restored from a physical backup to active as ``name``,
    created at ``ts``. Returns the rows changed: 0 means the staging row is gone or
    was renamed or swapped meanwhile (another restore of the same backup).

    Run in the transaction that retires ``previous_holder_id`` and installs the
    tenant's rows (tenants/catalog/engine/install.py).
    """
    return tx.execute(
        "UPDATE tenants SET state = 'active', created_ts = ?, last_change_ts = ?, "
        "source_tenant_id = ?, source_ts = ?, restore_job_id = ?, previous_holder_id = ? "
        "WHERE id = ? AND name = ? AND state = 'staging'",
        (ts, ts, source_tenant_id, source_ts, backup_id, previous_holder_id, tenant_id, name),
    )
