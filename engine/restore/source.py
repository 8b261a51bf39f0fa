"""The source as of S, loaded once from what the job pinned.

Full verification compares each new table with the source read at S, and a
logical restore dumps the source at S. Both read this one value, built from
the job's pins (``engine.restore.members.pinned``): the objects each new
table inherits by reference, plus the straddlers the plan lists in full.
Neither resolves S again through the tenant's protection: a point that was
"now" when planned stops being protected at the source's next write, yet the
job's pins keep every row at or before it readable (a job that resumes a day
later reads the same rows).
"""

from __future__ import annotations

from engine.pipeline import RestorePlan, SourceAtS, SourceTable
from engine.restore.members import pinned
from tenants.catalog import Catalog


def source_at(catalog: Catalog, plan: RestorePlan) -> SourceAtS:
    """The plan's source tables as of S (those live at S), from the job's pins.

    Call it once the job has started (its bases and pins exist), in any process.
    """
    with catalog.snapshot() as tx:
        reused = pinned(tx, plan, "reuse")
    return SourceAtS(
        plan.job_id,
        plan.source,
        plan.at_ts,
        plan.at_label,
        tuple(
            SourceTable(table, tuple(o.object for o in reused.get(table.source_table_id, [])))
            for table in plan.tables
            if table.dropped_ts is None
        ),
    )
