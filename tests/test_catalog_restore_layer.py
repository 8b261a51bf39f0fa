"""The restore path's catalog layer: SQL only under tenants/catalog/, hot queries on their indexes.

The restore planner, the job's pins and the install's reused membership are
the statements that touch 10^5-10^6 rows; on SQLite they are fast only while
they stay on the covering ``objects_plan`` index (``INDEXED BY``) and on the
pins' primary key. These tests read SQLite's own query plan for the exact
statements the catalog functions run, so a rewrite of the layer (another
library, another dialect) that loses an index fails here, not in a benchmark.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from item_rows import SCHEMA, rows

from tenants.catalog import Tx
from tenants.catalog.install import install_reused_members
from tenants.catalog.pins import pin_table_members, pinned_totals
from tenants.catalog.restore_plan import member_action_totals
from tenants.store import TableStore


class RecordingTx:
    """A real transaction that records the statements it is handed instead of running them."""

    def __init__(self, tx: Tx) -> None:
        self.tx = tx
        self.statements: list[tuple[str, tuple[Any, ...]]] = []

    def _record(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        self.statements.append((sql, tuple(params)))
        return []

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        self._record(sql, params)
        return 0

    tuples = all = _record


def query_plan(store: TableStore, run: Callable[[Any, str, int], object]) -> list[str]:
    """SQLite's plan (one line per step) for every statement ``run(tx, table_id, ts)`` issues."""
    store.create_tenant("acme")
    table = store.create_table("acme", "db", "items", SCHEMA)
    for i in range(3):
        store.write("acme", "db", "items", upserts=rows((i, "x")))
    with store.catalog.snapshot() as tx:
        recording = RecordingTx(tx)
        run(recording, table.id, tx.last_ts())
        assert recording.statements
        return [
            str(step["detail"])
            for sql, params in recording.statements
            for step in tx.all(f"EXPLAIN QUERY PLAN {sql}", params)
        ]


JOB = "j" * 32


@pytest.mark.parametrize("new_catalog_uri", ["sqlite"], indirect=True)  # SQLite's query plans
@pytest.mark.parametrize(
    "run",
    [
        pytest.param(lambda tx, table, ts: member_action_totals(tx, table, ts), id="plan-classify"),
        pytest.param(lambda tx, table, ts: pin_table_members(tx, JOB, table, ts), id="pin-plan"),
        pytest.param(lambda tx, table, ts: pinned_totals(tx, JOB), id="pinned-totals"),
    ],
)
def test_restore_plan_and_pin_queries_read_objects_through_the_covering_index(
    store: TableStore, run: Callable[[Any, str, int], object]
) -> None:
    plan = query_plan(store, run)
    assert any("COVERING INDEX objects_plan" in step for step in plan), plan
    assert not any(step.startswith("SCAN") for step in plan), plan


@pytest.mark.parametrize("new_catalog_uri", ["sqlite"], indirect=True)  # SQLite's query plans
def test_install_joins_reused_objects_from_the_pins_primary_key(store: TableStore) -> None:
    plan = query_plan(
        store, lambda tx, table, ts: install_reused_members(tx, JOB, table, "n" * 32, ts)
    )
    assert any(step.startswith("SEARCH job_pins USING INDEX") for step in plan), plan
    assert not any(step.startswith("SCAN") for step in plan), plan
