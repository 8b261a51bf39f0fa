"""The restore install's statements: the rows that make a restored tenant real.

All of them run in one write transaction (``engine.restore.install``), which
also retires the replaced tenant, moves the job to ``done`` and releases its
pins: before its commit no reader sees any of the new rows, after it all.
Reused objects are not written: the new tables inherit them through the bases
the job wrote when it started (``tenants.catalog.inherited``), and their member
totals come from the plan.

Also here: the tenant rows a restore reads back to tell whether a job
installed its tenant, and the tenants that held a name (a restore in place
hands the name from tenant to tenant).
"""

from __future__ import annotations

from collections.abc import Sequence

from tenants.catalog.base import Row, Tx


def insert_restored_tenant(
    tx: Tx,
    *,
    tenant_id: str,
    name: str,
    ts: int,
    source_tenant_id: str,
    source_ts: int,
    job_id: str,
    previous_holder_id: str | None,
) -> None:
    """The restored tenant, active from ``ts``, with its lineage: restored from
    ``source_tenant_id`` as of ``source_ts`` by ``job_id``, in place of
    ``previous_holder_id`` (``None`` for a clone)."""
    tx.execute(
        "INSERT INTO tenants (id, name, state, created_ts, last_change_ts, source_tenant_id, "
        "source_ts, restore_job_id, previous_holder_id) VALUES (?, ?, 'active', ?, ?, ?, ?, ?, ?)",
        (tenant_id, name, ts, ts, source_tenant_id, source_ts, job_id, previous_holder_id),
    )


def insert_database(tx: Tx, database_id: str, tenant_id: str, name: str, created_ts: int) -> None:
    """A database of the restored tenant, keeping its original creation ts."""
    tx.execute(
        "INSERT INTO databases (id, tenant_id, name, created_ts) VALUES (?, ?, ?, ?)",
        (database_id, tenant_id, name, created_ts),
    )


def insert_tables(tx: Tx, rows: Sequence[tuple[str, str, str, str, int, int | None]]) -> None:
    """Tables of the restored tenant as (id, tenant_id, database_id, name,
    created_ts, dropped_ts) tuples, keeping their creation (and drop, if at or
    before the restore point) ts: one bulk insert however many tables. Their
    change log starts now: what they hold came by the install, not by commits
    (tenants.catalog.changes)."""
    now = tx.commit_ts()
    tx.insert_many(
        "tables",
        ("id", "tenant_id", "database_id", "name", "created_ts", "dropped_ts", "changes_from_ts"),
        [(*row, now) for row in rows],
    )


def insert_schema_versions(tx: Tx, rows: Sequence[tuple[str, int, str, str, str]]) -> None:
    """Schema versions as (table_id, valid_from_ts, columns_json, primary_key_json,
    fingerprint) tuples."""
    tx.insert_many(
        "schema_versions",
        ("table_id", "valid_from_ts", "columns_json", "primary_key_json", "fingerprint"),
        rows,
    )


def installed_tenant(tx: Tx, tenant_id: str) -> Row | None:
    """``id``, ``name``, ``state`` of the tenant if it exists outside staging: a
    job whose new tenant this finds has installed it."""
    return tx.one(
        "SELECT id, name, state FROM tenants WHERE id = ? AND state <> 'staging'",
        (tenant_id,),
    )


def tenants_named(tx: Tx, name: str) -> list[Row]:
    """Every tenant row that ever held ``name``, in any state, newest first."""
    return tx.all("SELECT * FROM tenants WHERE name = ? ORDER BY created_ts DESC", (name,))
