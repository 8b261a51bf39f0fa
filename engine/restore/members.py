"""The objects a restore plan uses, listed from the catalog when they are needed.

A plan keeps counts and the straddling objects only (``engine.restore.plan``).
The objects it reuses are named here:

- ``pin_plan`` freezes them as the job's pins in the transaction that starts
  the job, with one ``INSERT ... SELECT``, and checks that they add up to the
  plan: if the source changed since planning (a write, a compaction), the job
  is not started and the caller plans again.
- ``pinned`` lists a job's pins with their records, for verify and the dump.
- ``live_members`` lists a plan's objects in the transaction that planned it,
  for a backup, which runs no job and so pins nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from engine.restore.plan import Action, RestorePlan, classify
from tenants.catalog import Tx
from tenants.catalog.pins import (
    has_legacy_pins,
    pin_table_members,
    pinned_key_sizes,
    pinned_member_tuples,
    pinned_rewrite_ids,
    pinned_totals,
)
from tenants.catalog.restore_plan import members_at_tuples
from tenants.errors import ConcurrentModification, InvalidArgument
from tenants.objects import ObjectRecord, record_from_tuple


class PlanOutdated(ConcurrentModification):
    """The source's objects changed between planning and starting the job."""


@dataclass(frozen=True)
class ObjectAction:
    action: Action
    object: ObjectRecord


Members = dict[str, list[ObjectAction]]  # source table id -> reused and rewritten objects


def pin_plan(tx: Tx, plan: RestorePlan) -> None:
    """Pin every object the job reuses or rewrites, as the plan counted them.

    Pins come from live membership, which GC never collects from, so an object
    GC is deleting cannot be pinned: the pins then fall short of the plan.

    Raises:
        PlanOutdated: the pinned objects do not add up to the plan's counts.
    """
    for table in plan.tables:
        pin_table_members(tx, plan.job_id, table.source_table_id, plan.at_ts)
    pinned_counts = pinned_totals(tx, plan.job_id)
    planned_counts = {
        (table.source_table_id, action): table.totals()[action]
        for table in plan.tables
        for action in ("reuse", "rewrite")
        if table.totals()[action][0]
    }
    rewrites = pinned_rewrite_ids(tx, plan.job_id)
    if pinned_counts != planned_counts or rewrites != {t.task_id for t in plan.tasks}:
        raise PlanOutdated(
            f"restore job {plan.job_id}: the objects of tenant {plan.source.ref} changed since "
            "the plan was made; plan again"
        )


def require_current_pins(tx: Tx, job_id: str, tenant_ref: str) -> None:
    """Refuse a job pinned before pins named their action (catalog step 6)."""
    if has_legacy_pins(tx, job_id):
        raise InvalidArgument(
            f"restore job {job_id} of tenant {tenant_ref} was started by an earlier Rewind "
            f"and cannot be resumed; cancel it with `--cancel {job_id}` and restore again"
        )


def pinned(tx: Tx, job_id: str, action: Action | None = None) -> Members:
    """A job's pinned objects with their records, per source table, oldest first."""
    return _grouped(
        (r[0], r[1], record_from_tuple(r[2:])) for r in pinned_member_tuples(tx, job_id, action)
    )


def pinned_sizes(tx: Tx, job_id: str, action: Action) -> list[tuple[str, int]]:
    """(key, bytes) of a job's pins: all that listing-based verification needs."""
    return pinned_key_sizes(tx, job_id, action)


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
