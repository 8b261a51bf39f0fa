"""The objects a restore plan uses, listed from the catalog when they are needed.

A plan keeps counts and the straddling objects only (``engine.restore.plan``).
The objects it reuses are named here:

- ``pin_plan`` pins them by time in the transaction that starts the job: each
  table the install will create inherits its source table as read at the
  plan's snapshot (``tenants.catalog.inherited``), a few rows however many objects
  the table has, and the straddlers get one pin each. If GC decided to delete
  objects after the plan read the catalog, it may have taken one the plan
  counted: the job is not started and the caller plans again.
- ``pinned`` lists a job's objects with their records, for verify and the dump.
- ``live_members`` lists a plan's objects in the transaction that planned it,
  for a backup, which runs no job and so pins nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from engine.pipeline import Action, RestorePlan, classify
from tenants.catalog import Tx
from tenants.catalog.engine.gc import gc_decided_since
from tenants.catalog.engine.pins import (
    inherited_key_sizes,
    inherited_member_tuples,
    pin_rewrites,
    pinned_member_tuples,
)
from tenants.catalog.engine.restore_plan import members_at_tuples
from tenants.catalog.inherited import insert_job_bases
from tenants.errors import ConcurrentModification
from tenants.objects.record import ObjectRecord, record_from_tuple


class PlanOutdated(ConcurrentModification):
    """The source's objects changed between planning and starting the job."""


@dataclass(frozen=True)
class ObjectAction:
    action: Action
    object: ObjectRecord


Members = dict[str, list[ObjectAction]]  # source table id -> reused and rewritten objects


def pin_plan(tx: Tx, plan: RestorePlan) -> None:
    """Pin what the job reuses by time and what it rewrites by object.

    The tables the job will install inherit their sources as the plan read them
    (at ``read_ts``); from this transaction's commit GC keeps all of it. Before
    it, only a GC decision can have taken an object the plan counted.

    Raises:
        PlanOutdated: GC decided to delete objects after the plan read the catalog.
    """
    if gc_decided_since(tx, plan.read_ts):
        raise PlanOutdated(
            f"restore job {plan.job_id}: garbage collection ran after the plan of tenant "
            f"{plan.source.ref} was made, and may have taken objects it counted on; plan again"
        )
    insert_job_bases(
        tx,
        plan.job_id,
        [(t.new_table_id, t.source_table_id) for t in plan.tables],
        plan.read_ts,
        plan.at_ts,
    )
    source_of = {t.new_table_id: t.source_table_id for t in plan.tables}
    pin_rewrites(tx, plan.job_id, [(source_of[t.out_table_id], t.task_id) for t in plan.tasks])


def pinned(tx: Tx, plan: RestorePlan, action: Action | None = None) -> Members:
    """A job's objects with their records, per source table, oldest first: what
    its tables inherit (``reuse``) and its pins (``rewrite``)."""
    rows: list[tuple[str, Action, ObjectRecord]] = []
    if action != "reuse":
        rows.extend(
            (r[0], r[1], record_from_tuple(r[2:]))
            for r in pinned_member_tuples(tx, plan.job_id, action)
        )
    if action in (None, "reuse"):
        rows.extend(
            (table.source_table_id, "reuse", record_from_tuple(r))
            for table in plan.tables
            for r in inherited_member_tuples(tx, table.new_table_id)
        )
    return _grouped(rows)


def reused_sizes(tx: Tx, plan: RestorePlan) -> list[tuple[str, int]]:
    """(key, bytes) of the objects a job's tables inherit: all that listing-based
    verification needs of what it reuses."""
    return [size for table in plan.tables for size in inherited_key_sizes(tx, table.new_table_id)]


def live_members(tx: Tx, plan: RestorePlan) -> Members:
    """The objects ``plan`` reuses or rewrites, per source table, oldest first.

    Call it in the transaction that made the plan: only there are the members
    the ones it counted.
    """
    rows = (
        (table.source_table_id, classify(record, plan.at_ts), record)
        for table in plan.tables
        for record in (
            record_from_tuple(r) for r in members_at_tuples(tx, table.source_table_id, plan.at_ts)
        )
    )
    return _grouped(rows)


def _grouped(rows: Iterable[tuple[str, Action, ObjectRecord]]) -> Members:
    out: Members = defaultdict(list)
    for table_id, action, record in rows:
        out[table_id].append(ObjectAction(action, record))
    for items in out.values():
        items.sort(key=lambda item: (item.object.min_ts, item.object.id))
    return dict(out)
