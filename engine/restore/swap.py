"""The swap: an instant job's rewritten copies replace the straddlers its install cut.

An instant restore installs first: each object that straddles S joins its new
table as it is, held with a cut at S (``tenants.catalog.objects.insert_cut_members``),
so the tenant is usable before a byte is rewritten. The same job then
rewrites the straddlers (the planner's tasks, any executor) and verifies the
copies; this module puts them in, ``BATCH`` per transaction. Each swap ends the
cut member and adds its copy at one commit ts: a reader sees one or the other,
never both and never neither, and both hold the same rows.

A swap is conditional twice: on the job's lease (a process that lost it swaps
nothing) and on the cut member still being live. A write never conflicts with
it: a commit adds its own members, and a compaction that merged a cut member
first ended it, so its copy is not installed and is deleted before the job ends
(one that read the cut member before its swap replaces the copy instead:
``tenants.compaction``). The last transaction also moves the job to ``done``
and releases its pins. A kill between transactions leaves every table correct
(each straddler read through its cut or replaced), and a resumed job verifies
and swaps only the straddlers still held with a cut (``still_cut``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace

from engine.pipeline import RestorePlan, RewriteResult
from engine.restore.journal import transition
from tenants.catalog import Catalog
from tenants.catalog.engine.pins import release_pins
from tenants.catalog.objects import live_cut_members, registered_keys, swap_cut_member
from tenants.objectstore import ObjectStore
from tenants.progress import step

log = logging.getLogger(__name__)
# Straddlers swapped per transaction: short transactions, few round trips.
BATCH = 200


def swap_rewrites(
    catalog: Catalog,
    objects: ObjectStore,
    plan: RestorePlan,
    results: Sequence[RewriteResult],
    *,
    holder: str,
    checkpoint: Callable[[], None] | None = None,
) -> int:
    """Swap every result's copy in for its straddler, then finish the job; returns
    how many copies were installed (a straddler its table no longer holds keeps
    none: its copy is deleted). ``checkpoint`` runs before each batch (the
    lease's poll: a stop request ends the swap there).

    Raises:
        LeaseLost: another process holds the job, or it is no longer installing.
    """
    tasks = {task.task_id: task for task in plan.tasks}
    ordered = sorted(results, key=lambda r: r.task_id)
    swapped = 0
    total = sum(r.output.bytes for r in ordered)
    with step(f"swapping {len(ordered)} rewritten object(s) in", total) as swapping:
        for start in range(0, len(ordered), BATCH):
            if checkpoint is not None:
                checkpoint()  # a cancel is seen between batches
            batch = ordered[start : start + BATCH]
            with catalog.transaction() as tx:
                # Still ours, still installing: a lost lease or a cancel swaps nothing.
                transition(tx, plan.job_id, "installing", expect=("installing",), holder=holder)
                ts = tx.commit_ts()
                for result in batch:
                    task = tasks[result.task_id]
                    copy = replace(result.output, created_ts=ts)
                    if swap_cut_member(tx, task.out_table_id, task.input.id, copy, ts):
                        swapped += 1
            swapping.advance(sum(r.output.bytes for r in batch))
    # Copies no table took (their straddler was compacted or dropped first): no swap
    # installs one from here on (each needs its cut member live, and nothing makes
    # one live again), so they go before the job is done. A failed delete fails the
    # job, resumable, with the copies still known by its plan, not a done job with
    # copies no one will delete until GC's orphan sweep.
    unused = unswapped_outputs(catalog, plan)
    if unused:
        objects.delete_many(unused)
    with catalog.transaction() as tx:
        transition(tx, plan.job_id, "done", expect=("installing",), holder=holder)
        release_pins(tx, plan.job_id)
    log.info(
        "tenant %s: restore job %s swapped %d rewritten object(s) in (%d not needed)",
        plan.target_name,
        plan.job_id,
        swapped,
        len(unused),
    )
    return swapped


def still_cut(
    catalog: Catalog, plan: RestorePlan, results: Sequence[RewriteResult]
) -> list[RewriteResult]:
    """The results whose straddler its table still holds with a cut: the copies a
    swap may yet install. A resumed job verifies only these: a copy swapped in was
    verified before, and may since have been merged by a compaction and collected
    by GC; a copy whose straddler was merged away is never installed."""
    tasks = {task.task_id: task for task in plan.tasks}
    with catalog.snapshot() as tx:
        live = live_cut_members(tx, sorted({task.out_table_id for task in plan.tasks}))
    return [
        r for r in results if (tasks[r.task_id].out_table_id, tasks[r.task_id].input.id) in live
    ]


def unswapped_outputs(catalog: Catalog, plan: RestorePlan) -> list[str]:
    """The keys of the job's rewrite outputs the catalog does not know: what
    abandoning an instant job's rewrite deletes (a swapped copy is a member)."""
    with catalog.snapshot() as tx:
        known = registered_keys(tx, [t.out_key for t in plan.tasks])
    return [t.out_key for t in plan.tasks if t.out_key not in known]
