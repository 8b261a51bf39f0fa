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

from collections.abc import Sequence
from dataclasses import replace

from engine.materialise import insert_schema_history, materialise_tenant
from engine.pipeline import Installed, RestorePlan, RewriteResult
from engine.restore.journal import transition
from tenants.catalog import Catalog, Tx
from tenants.catalog.commits import record_commit
from tenants.catalog.engine.install import insert_database, insert_restored_tenant
from tenants.catalog.engine.jobs import mark_installed
from tenants.catalog.engine.pins import release_pins
from tenants.catalog.engine.table_restore import (
    drop_replaced_tables,
    insert_restored_tables,
    release_locks,
)
from tenants.catalog.objects import insert_cut_members
from tenants.catalog.tables import database_row_at
from tenants.catalog.totals import add_totals
from tenants.errors import ConcurrentModification, InvalidArgument
from tenants.handover import hand_over_name
from tenants.objects.record import add_member, insert_object
from tenants.tenancy import (
    DEFAULT_RETENTION_US,
    TenantRecord,
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
    instant: bool = False,
) -> Installed:
    """Install the restored tenant (or tables) and mark the job done, in one transaction.

    ``holder`` is the job's lease holder: a process that lost the lease (or
    whose job was cancelled meanwhile) installs nothing.

    ``instant``: install before the rewrite. Each straddler joins its new table
    as it is, held with a cut at S (readers keep its rows at or before S); the
    job moves on to ``rewriting`` instead of ``done`` and keeps its pins (not its
    holds on the replaced tables and database), and ``engine.restore.swap``
    later replaces each by its rewritten copy.

    Raises:
        LeaseLost: another process holds the job, or it is no longer installing.
        ConcurrentModification: the name, the replaced tenant or the target
            tenant changed while the job ran; nothing is installed.
    """
    with catalog.transaction() as tx:
        transition(
            tx,
            plan.job_id,
            "rewriting" if instant else "done",
            expect=("installing",),
            holder=holder,
        )
        ts = tx.commit_ts()
        if plan.into_existing_tenant:
            target = _install_tables(tx, plan, results, ts, instant)
        else:
            hand_over_name(
                tx,
                plan.target_name,
                ts,
                replacing=plan.replaced_tenant_id,
                what=f"restore job {plan.job_id}",
                retention_us=retention_us,
            )
            _create_tenant(tx, plan, ts)
            materialise_tenant(
                tx,
                plan,
                plan.new_tenant_id,
                ts,
                {name: db for name, (db, _) in plan.databases.items()},
            )
            _install_objects(tx, plan, results, ts, instant)
            target = tenant_by_id(tx, plan.new_tenant_id)
        if instant:
            # Its straddlers stay pinned until it is done, but the install replaced
            # what it held against writers and DDL: the database is live again.
            release_locks(tx, plan.job_id)
        else:
            release_pins(tx, plan.job_id)
        mark_installed(tx, plan.job_id, ts)
        return Installed(target, ts)


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


def _install_tables(
    tx: Tx, plan: RestorePlan, results: Sequence[RewriteResult], ts: int, instant: bool
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
    insert_schema_history(tx, plan)
    _install_objects(tx, plan, results, ts, instant)
    touch_tenant(tx, target.id, ts)
    for table_id in plan.replaced_table_ids:
        record_commit(tx, target.id, ts, table_id, "replace")
    written = {r.task_id: r.output for r in results}
    for table in plan.tables:
        reused, reused_bytes = table.totals()["reuse"]
        rewritten = (
            list(table.rewrites)  # held with a cut until swapped
            if instant
            else [written[o.id] for o in table.rewrites if o.id in written]
        )
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


def _install_objects(
    tx: Tx, plan: RestorePlan, results: Sequence[RewriteResult], ts: int, instant: bool = False
) -> None:
    """Reused objects are inherited (the job's bases, written when it started), and
    counted in the new tables' totals from the plan; rewritten ones are new objects,
    or, ``instant``, the straddlers themselves held with a cut at S."""
    add_totals(
        tx, ((table.new_table_id, *group) for table in plan.tables for group in table.reuse_groups)
    )
    out_table = {task.task_id: task.out_table_id for task in plan.tasks}
    if instant:
        insert_cut_members(
            tx,
            [
                (task.out_table_id, task.input, task.input.read_ts(plan.at_ts))
                for task in plan.tasks
            ],
            ts,
        )
        return
    missing = set(out_table) - {r.task_id for r in results}
    if missing:
        raise InvalidArgument(
            f"restore job {plan.job_id}: {len(missing)} rewrite task(s) have no result "
            f"(e.g. input object {min(missing)}); resume the job to finish them"
        )
    for result in results:
        insert_object(tx, replace(result.output, created_ts=ts))
        add_member(tx, out_table[result.task_id], result.output.id, ts)
