"""The restore path's catalog layer: SQL only under tenants/catalog/, hot queries on their indexes.

The restore planner reads a table's members after S: on SQLite that stays
fast only while it stays on ``membership_view``'s range. This test reads
SQLite's own query plan for the exact statements the catalog function runs,
so a rewrite of the layer (another library, another dialect) that loses an
index fails here, not in a benchmark.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from tenants.catalog import Tx
from tenants.catalog.engine.restore_plan import members_after_tuples
from tenants.store import TableStore
from tests.helpers.item_rows import SCHEMA, rows


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
    table = store.create_table("acme", "db.items", SCHEMA)
    for i in range(3):
        store.write("acme", "db.items", upserts=rows((i, "x")))
    with store.catalog.snapshot() as tx:
        recording = RecordingTx(tx)
        run(recording, table.id, tx.last_ts())
        assert recording.statements
        return [
            str(step["detail"])
            for sql, params in recording.statements
            for step in tx.all(f"EXPLAIN QUERY PLAN {sql}", params)
        ]


@pytest.mark.parametrize("new_catalog_uri", ["sqlite"], indirect=True)  # SQLite's query plans
def test_restore_planning_reads_only_the_members_after_s_through_one_index_range(
    store: TableStore,
) -> None:
    plan = query_plan(store, lambda tx, table, ts: members_after_tuples(tx, table, ts))
    assert any(
        "COVERING INDEX membership_view (table_id=? AND removed_ts=? AND max_ts>?)" in step
        for step in plan
    ), plan
    assert not any(step.startswith("SCAN") for step in plan), plan
