"""Materialising a tenant from a plan: its databases, tables, schema history
and protection settings.

Three paths build a tenant beside the one they replace: a physical restore's
install (``engine.restore.install``), a logical reload (``engine.logical``) and
a backup restore (``engine.backup``). Each writes the same rows from the same
plan (``engine.pipeline.RestorePlan``) through these functions, inside the
transaction that hands the name over (``tenants.handover``): the DDL as of S,
and the snapshots, PITR window and schedule the source had at S. Only the
objects differ: inherited by reference, loaded anew, or copied from a backup.
"""

from __future__ import annotations

from collections.abc import Mapping

from engine.pipeline import RestorePlan
from tenants.catalog import Tx
from tenants.catalog.engine.install import insert_database, insert_schema_versions, insert_tables
from tenants.catalog.pitr import insert_pitr_window
from tenants.catalog.schedules import insert_schedule
from tenants.catalog.snapshots import insert_snapshots


def materialise_tenant(
    tx: Tx, plan: RestorePlan, tenant_id: str, ts: int, database_ids: Mapping[str, str]
) -> None:
    """Tenant ``tenant_id`` as the plan's source was at S, but for its objects: the
    databases (under ``database_ids``, by name), tables and schema history, and
    the snapshots, PITR window and schedule (``carry_settings``). The caller adds
    the objects (inherited, rewritten or copied) in the same transaction."""
    create_tables(tx, plan, tenant_id, database_ids)
    carry_settings(tx, plan, tenant_id, ts)


def create_tables(
    tx: Tx, plan: RestorePlan, tenant_id: str, database_ids: Mapping[str, str]
) -> None:
    """The plan's databases (under ``database_ids``, by name), tables and schema
    versions, in ``tenant_id``: a restore's install, and a physical backup's
    (which mints fresh database ids, the plan's being the source deployment's)."""
    for name, (_, created_ts) in plan.databases.items():
        insert_database(tx, database_ids[name], tenant_id, name, created_ts)
    insert_tables(
        tx,
        [
            (
                table.new_table_id,
                tenant_id,
                database_ids[table.database],
                table.name,
                table.created_ts,
                table.dropped_ts,
            )
            for table in plan.tables
        ],
    )
    insert_schema_history(tx, plan)


def insert_schema_history(tx: Tx, plan: RestorePlan) -> None:
    """Every new table's schema versions up to S."""
    insert_schema_versions(
        tx,
        [
            (table.new_table_id, v.valid_from_ts, v.columns_json, v.primary_key_json, v.fingerprint)
            for table in plan.tables
            for v in table.schema_versions
        ],
    )


def carry_settings(
    tx: Tx, plan: RestorePlan, tenant_id: str, ts: int, *, snapshots: bool = True
) -> None:
    """Give ``tenant_id`` the protection its source had at S: the snapshots at or
    before S (``snapshots=False`` for a logical reload, whose rows are written
    anew after S, so no earlier snapshot could read them), the PITR window and
    the snapshot schedule, both set at ``ts`` (the install). A physical restore,
    a logical one and a backup restore all come here."""
    if snapshots:
        insert_snapshots(
            tx, [(tenant_id, s.name, s.ts, s.kind, ts, s.expires_at) for s in plan.snapshots]
        )
    if plan.pitr_window_us is not None:
        insert_pitr_window(tx, tenant_id, plan.pitr_window_us, ts)
    if plan.schedule is not None:
        s = plan.schedule
        insert_schedule(
            tx,
            tenant_id,
            first_at_us=s["first_at_us"],
            interval_us=s["interval_us"],
            retain_age_us=s["retain_age_us"],
            retain_count=s["retain_count"],
            name_prefix=s["name_prefix"],
            set_ts=ts,
        )
