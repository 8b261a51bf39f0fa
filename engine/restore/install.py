"""Install: one catalog transaction makes the restored tenant real.

Before this commit nothing visible has changed: the source stays readable
and writable. In the commit: the new tenant (with the DDL as of S, membership
of reused and rewritten objects, carried snapshots, PITR and schedule
settings, and lineage) appears: its tables inherit the reused objects, a few rows
however many there are; for an in-place restore the current holder
of the name is retired (kept for the retention period, undoable) and the
name passes to the new tenant; the job becomes done and its pins go. After
the commit, a write addressed to the retired tenant id fails.

A table or database restore installs into the tenant that exists: the
tables it replaces are dropped (kept, like a retired tenant, for as long as
the tenant's snapshots and PITR window reach back before the restore) and the
new ones created, in the same single transaction; the job's holds on them go with its pins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from engine.restore.journal import transition
from engine.restore.plan import RestorePlan
from engine.restore.rewrite import RewriteResult
from tenants.catalog import Catalog, Tx
from tenants.catalog.commits import record_commit
from tenants.catalog.install import (
    has_reuse_pins,
    insert_database,
    insert_restored_tenant,
    insert_schema_versions,
    insert_tables,
    install_reused_members,
)
from tenants.catalog.jobs import mark_installed
from tenants.catalog.pins import release_pins
from tenants.catalog.pitr import insert_pitr_window
from tenants.catalog.schedules import insert_schedule
from tenants.catalog.snapshots import insert_snapshots
from tenants.catalog.table_restore import (
    drop_replaced_tables,
    insert_restored_tables,
)
from tenants.catalog.tables import database_row_at
from tenants.catalog.tenants import active_holder_id
from tenants.catalog.totals import add_totals, recount
from tenants.errors import ConcurrentModification, InvalidArgument
from tenants.objects import add_member, insert_object
from tenants.tenancy import (
    DEFAULT_RETENTION_US,
    TenantRecord,
    retire_tenant,
    tenant_by_id,
    touch_tenant,
)


def install(
    catalog: Catalog,
    plan: RestorePlan,
    results: Sequence[RewriteResult],
    *,
    retention_us: int = DEFAULT_RETENTION_US,
    holder: str | None = None,
) -> tuple[TenantRecord, int]:
    """Install the restored tenant and mark the job done, in one transaction;
    return the tenant that holds the result and the install's commit ts.

    ``holder`` is the job's lease holder: a process that lost the lease (or
    whose job was cancelled meanwhile) installs nothing.
    """
    with catalog.transaction() as tx:
        transition(tx, plan.job_id, "done", expect=("installing",), holder=holder)
        ts = tx.commit_ts()
        if plan.into_existing_tenant:
            target = _install_tables(tx, plan, results, ts)
            release_pins(tx, plan.job_id)
            mark_installed(tx, plan.job_id, ts)
            return target, ts
        if plan.replaced_tenant_id is not None:
            replaced = tenant_by_id(tx, plan.replaced_tenant_id)
            if replaced.state != "active" or replaced.name != plan.target_name:
                raise ConcurrentModification(
                    f"restore job {plan.job_id}: tenant {replaced.ref} is no longer the active "
                    f"holder of {plan.target_name!r}; cancel the job and plan again"
                )
            retire_tenant(tx, replaced, ts, retention_us)
        elif active_holder_id(tx, plan.target_name) is not None:
            raise ConcurrentModification(
                f"restore job {plan.job_id}: the name {plan.target_name!r} was taken meanwhile; "
                "cancel the job and restore --to another name"
            )
        _create_tenant(tx, plan, ts)
        create_tables(
            tx, plan, plan.new_tenant_id, {name: db for name, (db, _) in plan.databases.items()}
        )
        _install_objects(tx, plan, results, ts)
        _carry_settings(tx, plan, ts)
        release_pins(tx, plan.job_id)
        mark_installed(tx, plan.job_id, ts)
        return tenant_by_id(tx, plan.new_tenant_id), ts


def _create_tenant(tx: Tx, plan: RestorePlan, ts: int) -> None:
    insert_restored_tenant(
        tx,
        tenant_id=plan.new_tenant_id,
        name=plan.target_name,
        ts=ts,
        source_tenant_id=plan.source.id,
        source_ts=plan.at_ts,
        job_id=plan.job_id,
        previous_holder_id=plan.replaced_tenant_id,
    )


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
    _insert_schema_versions(tx, plan)


def _install_tables(
    tx: Tx, plan: RestorePlan, results: Sequence[RewriteResult], ts: int
) -> TenantRecord:
    """A table or database restore: drop the tables it replaces (the job holds
    them) and create the new ones in the existing tenant, created at ``ts``
    with their schema history up to S and their lineage."""
    target = tenant_by_id(tx, plan.new_tenant_id)
    if target.state != "active":
        raise ConcurrentModification(
            f"restore job {plan.job_id}: tenant {target.ref} was dropped while the job ran; "
            "cancel the job"
        )
    drop_replaced_tables(tx, plan.job_id, plan.replaced_table_ids, ts)
    database_ids: dict[str, str] = {}
    for name, (planned_id, _) in plan.databases.items():
        live = database_row_at(tx, target.id, name, ts)
        if live is None:
            insert_database(tx, planned_id, target.id, name, ts)
        database_ids[name] = planned_id if live is None else str(live["id"])
    insert_restored_tables(
        tx,
        [
            (
                table.new_table_id,
                target.id,
                database_ids[table.out_database],
                table.out_name,
                ts,
                table.source_table_id,
                plan.at_ts,
                plan.job_id,
            )
            for table in plan.tables
        ],
    )
    _insert_schema_versions(tx, plan)
    _install_objects(tx, plan, results, ts)
    touch_tenant(tx, target.id, ts)
    for table_id in plan.replaced_table_ids:
        record_commit(tx, target.id, ts, table_id, "replace")
    written = {r.task_id: r.output for r in results}
    for table in plan.tables:
        reused, reused_bytes = table.totals()["reuse"]
        rewritten = [written[o.id] for o in table.rewrites if o.id in written]
        record_commit(
            tx,
            target.id,
            ts,
            table.new_table_id,
            "restore",
            objects=reused + len(rewritten),
            size=reused_bytes + sum(o.bytes for o in rewritten),
        )
    return tenant_by_id(tx, target.id)


def _insert_schema_versions(tx: Tx, plan: RestorePlan) -> None:
    """Every new table's schema versions up to S."""
    insert_schema_versions(
        tx,
        [
            (table.new_table_id, v.valid_from_ts, v.columns_json, v.primary_key_json, v.fingerprint)
            for table in plan.tables
            for v in table.schema_versions
        ],
    )


def _install_objects(tx: Tx, plan: RestorePlan, results: Sequence[RewriteResult], ts: int) -> None:
    """Reused objects are inherited (the job's bases, written when it started), and
    counted in the new tables' totals from the plan; rewritten ones are new objects.
    A job an earlier Rewind started has its reused objects in its pins instead."""
    add_totals(
        tx, ((table.new_table_id, *group) for table in plan.tables for group in table.reuse_groups)
    )
    if has_reuse_pins(tx, plan.job_id):
        for table in plan.tables:
            if install_reused_members(
                tx, plan.job_id, table.source_table_id, table.new_table_id, ts
            ):
                recount(tx, table.new_table_id)
    out_table = {task.task_id: task.out_table_id for task in plan.tasks}
    missing = set(out_table) - {r.task_id for r in results}
    if missing:
        raise InvalidArgument(
            f"restore job {plan.job_id}: {len(missing)} rewrite task(s) have no result "
            f"(e.g. input object {min(missing)}); resume the job to finish them"
        )
    for result in results:
        insert_object(tx, replace(result.output, created_ts=ts))
        add_member(tx, out_table[result.task_id], result.output.id, ts)


def _carry_settings(tx: Tx, plan: RestorePlan, ts: int) -> None:
    insert_snapshots(
        tx,
        [(plan.new_tenant_id, s.name, s.ts, s.kind, ts, s.expires_at) for s in plan.snapshots],
    )
    if plan.pitr_window_us is not None:
        insert_pitr_window(tx, plan.new_tenant_id, plan.pitr_window_us, ts)
    if plan.schedule is not None:
        # the carried schedule starts at the install, like the PITR window
        s = plan.schedule
        insert_schedule(
            tx,
            plan.new_tenant_id,
            first_at_us=s["first_at_us"],
            interval_us=s["interval_us"],
            retain_age_us=s["retain_age_us"],
            retain_count=s["retain_count"],
            name_prefix=s["name_prefix"],
            set_ts=ts,
        )
