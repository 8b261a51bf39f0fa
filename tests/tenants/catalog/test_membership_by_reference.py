"""A restored table inherits its source's objects by reference (tenants/catalog/inherited.py).

A metadata-only restore writes a constant number of catalog rows per table,
however many objects the tenant holds; the inherited view stays isolated from
what either side does afterwards (writes, compaction, drops, purges, GC); and
the statements that read an inherited level stay on their indexes.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from engine.gc.flatten import MAX_DEPTH
from engine.gc.purge import purge_tenant
from engine.gc.run import run_gc
from engine.restore.job import restore_tenant
from tenants.catalog.inherited import flatten_deepest, levels, member_sources
from tenants.catalog.totals import counted, totals_of
from tenants.compaction import DEFAULT_TARGET_BYTES
from tenants.store import TableStore
from tests.helpers.item_rows import SCHEMA, rows
from tests.helpers.restores import catalog_rows

CATALOG_TABLES = (
    "tenants", "databases", "tables", "schema_versions", "objects", "membership",
    "membership_bases", "member_totals", "snapshots", "snapshot_schedules", "pitr_windows", "restore_jobs",
    "restore_plans", "restore_tasks", "job_pins", "gc_pending", "commits",
)  # fmt: skip


def row_counts(store: TableStore) -> dict[str, int]:
    with store.catalog.snapshot() as tx:
        return {t: int(tx.scalar(f"SELECT COUNT(*) FROM {t}")) for t in CATALOG_TABLES}


def tenant_of_objects(store: TableStore, name: str, objects: int) -> None:
    """A tenant of two tables holding ``objects`` objects each, then a snapshot."""
    store.create_tenant(name)
    for table in ("items", "more"):
        store.create_table(name, f"db.{table}", SCHEMA)
        for i in range(objects):
            store.write(name, f"db.{table}", upserts=rows((i, f"v{i}")))
    store.create_snapshot(name, "snap")


def written_by(store: TableStore, run: Callable[[], Any]) -> dict[str, int]:
    before = row_counts(store)
    run()
    after = row_counts(store)
    return {t: after[t] - before[t] for t in CATALOG_TABLES if after[t] != before[t]}


@pytest.mark.parametrize("in_place", [False, True], ids=["clone", "in-place"])
def test_a_metadata_only_restore_writes_the_same_rows_for_3_and_30_objects(
    store: TableStore, in_place: bool
) -> None:
    deltas = []
    for name, objects in (("small", 3), ("large", 30)):
        tenant_of_objects(store, name, objects)
        deltas.append(
            written_by(
                store,
                partial(
                    restore_tenant,
                    store,
                    name,
                    "snap",
                    to=None if in_place else f"{name}-copy",
                    executor="local",
                    verify="objects",
                ),
            )
        )
    small, large = deltas
    assert small == large
    # a constant per table: one base each (the plan's tables) and its totals (one
    # row per kind and schema: data objects of one schema here), no membership row
    assert small.get("membership", 0) == 0 and small["membership_bases"] == 2
    assert small["member_totals"] == 2 and small.get("job_pins", 0) == 0


STATEMENT_METHODS = ("execute", "executemany", "insert_many", "all", "tuples", "scalar", "batches")


def statements_run_by(
    store: TableStore, monkeypatch: pytest.MonkeyPatch, run: Callable[[], Any]
) -> int:
    """How many statements ``run`` sends to the catalog (``Tx.one`` goes through ``all``)."""
    seen = [0]
    tx_class = store.catalog.dialect.tx_class()
    with monkeypatch.context() as patch:
        for name in STATEMENT_METHODS:
            method = getattr(tx_class, name)

            def counted_call(self: Any, *args: Any, _method: Any = method, **kw: Any) -> Any:
                seen[0] += 1
                return _method(self, *args, **kw)

            patch.setattr(tx_class, name, counted_call)
        run()
    return seen[0]


@pytest.mark.parametrize("in_place", [False, True], ids=["clone", "in-place"])
def test_a_restore_sends_as_many_statements_for_12_tables_as_for_2(
    store: TableStore, monkeypatch: pytest.MonkeyPatch, in_place: bool
) -> None:
    # Planning, starting and installing read and write every table's rows in
    # statements over all the tables (IN lists, bulk inserts), not one per table:
    # a tenant of 100 tables restored on PostgreSQL paid ~10 round trips a table.
    counts = []
    for name, tables in (("few", 2), ("many", 12)):
        store.create_tenant(name)
        for t in range(tables):
            store.create_table(name, f"db.t{t:02d}", SCHEMA)
            store.write(name, f"db.t{t:02d}", upserts=rows((t, "a")))
        store.create_snapshot(name, "snap")
        restore_tenant(store, name, "snap", to=f"{name}-tmp", executor="local")  # a base to inherit
        counts.append(
            statements_run_by(
                store,
                monkeypatch,
                partial(
                    restore_tenant,
                    store,
                    f"{name}-tmp",
                    "snap",
                    to=None if in_place else f"{name}-copy",
                    executor="local",
                    verify="none",
                ),
            )
        )
    assert counts[0] == counts[1], counts


def test_clones_of_clones_stay_isolated_through_compaction_purge_and_gc(
    store: TableStore,
) -> None:
    store.create_tenant("a")
    store.create_table("a", "db.items", SCHEMA)
    for i in range(4):
        store.write("a", "db.items", upserts=rows((i, f"a{i}")))
    store.create_snapshot("a", "s1")
    expected_b = store.read("a", "db.items").to_pylist()
    restore_tenant(store, "a", "s1", to="b", executor="local")
    store.write("b", "db.items", upserts=rows((10, "b10")), deletes=rows((0, "")).select(["id"]))
    store.create_snapshot("b", "s2")
    expected_c = store.read("b", "db.items").to_pylist()
    restore_tenant(store, "b", "s2", to="c", executor="local")
    # depth 2: c inherits b (its own rows) and, through b, a
    [c_table] = store.tables("c")
    with store.catalog.snapshot() as tx:
        assert [lv.base is not None for lv in levels(tx, c_table.id)] == [False, True, True]

    # both sides go on: a writes and fully compacts (its members end), b compacts
    # its inherited objects (shadows), then b is dropped and purged
    store.write("a", "db.items", upserts=rows((1, "a-later")))
    store.compact("a", full=True, target_bytes=DEFAULT_TARGET_BYTES)
    store.compact("b", full=True, target_bytes=DEFAULT_TARGET_BYTES)
    assert store.read("b", "db.items").to_pylist() == expected_c
    dropped = store.drop_tenant("b")
    purge_tenant(store.catalog, dropped.ref)
    run_gc(store, dry_run=False, grace_us=0, allow_short_grace=True, compact=False)

    assert store.read("c", "db.items").to_pylist() == expected_c
    assert store.read("c", "db.items", as_of="s1").to_pylist() == expected_b
    assert store.read("a", "db.items").to_pylist()[1]["v"] == "a-later"
    present = {info.key for info in store.objects.list("tenants/")}
    assert {o.key for _, o in store.objects_of("c")} <= present

    # c compacts what it inherits from two levels; GC then frees what only b read
    store.compact("c", full=True, target_bytes=DEFAULT_TARGET_BYTES)
    run_gc(store, dry_run=False, grace_us=0, allow_short_grace=True, compact=False)
    assert store.read("c", "db.items").to_pylist() == expected_c


@pytest.mark.parametrize("new_catalog_uri", ["sqlite"], indirect=True)  # SQLite's query plans
@pytest.mark.parametrize("after", [False, True], ids=["view", "after-S"])
def test_every_part_of_an_inherited_view_is_read_through_indexes(
    store: TableStore, after: bool
) -> None:
    tenant_of_objects(store, "acme", 3)
    restore_tenant(store, "acme", "snap", to="copy", executor="local")
    table = store.tables("copy")[0]
    with store.catalog.snapshot() as tx:
        parts = member_sources(tx, table.id)
        assert len(parts) == 3  # its own rows; the source's live and ended ones
        for source, params in parts:
            where = " AND m.max_ts > ?" if after else ""
            plan = [
                str(step["detail"])
                for step in tx.all(
                    f"EXPLAIN QUERY PLAN SELECT o.id {source}{where}",
                    [*params, 0][: len(params) + after],
                )
            ]
            assert any("COVERING INDEX objects_plan" in step for step in plan), plan
            assert any("membership_view" in step for step in plan), plan
            assert not any(step.startswith("SCAN") for step in plan), plan


def test_member_totals_count_the_view_through_restores_compaction_and_drops(
    store: TableStore,
) -> None:
    tenant_of_objects(store, "a", 3)
    restore_tenant(store, "a", "snap", to="b", executor="local")
    store.write("b", "db.items", upserts=rows((7, "b7")))
    store.compact("b", full=True, target_bytes=DEFAULT_TARGET_BYTES)
    restore_tenant(store, "b", "snap", to="c", executor="local")
    store.compact("a", full=True, target_bytes=DEFAULT_TARGET_BYTES)
    tables = [t for tenant in ("a", "b", "c") for t in store.tables(tenant)]
    with store.catalog.snapshot() as tx:
        for table in tables:
            assert totals_of(tx, table.id) == counted(tx, table.id), table


def test_a_cancelled_job_leaves_no_base_behind(store: TableStore) -> None:
    from engine.restore.job import cancel_restore
    from engine.restore.journal import start_job
    from engine.restore.plan import plan_restore

    tenant_of_objects(store, "acme", 2)
    plan = plan_restore(store.catalog, "acme", "snap", to="copy")
    job = start_job(store.catalog, plan, executor="local", verify="objects")
    assert (
        len(catalog_rows(store, "SELECT * FROM membership_bases WHERE job_id = ?", (job.id,))) == 2
    )
    cancel_restore(store, job.id)
    assert catalog_rows(store, "SELECT * FROM membership_bases") == []


def chain_of(store: TableStore, tenant: str) -> int:
    [table] = store.tables(tenant)
    with store.catalog.snapshot() as tx:
        return len(levels(tx, table.id, own=False))


def everything_read(store: TableStore, tenant: str, snapshots: list[str]) -> dict[str | None, Any]:
    names: list[str | None] = [*snapshots, None]
    return {name: store.read(tenant, "db.items", as_of=name).to_pylist() for name in names}


def test_gc_flattens_a_deep_chain_and_drops_the_levels_a_full_compaction_emptied(
    store: TableStore,
) -> None:
    store.create_tenant("a")
    store.create_table("a", "db.items", SCHEMA)
    snapshots = []
    for i in range(6):  # each in-place restore from a table with rows of its own adds a level
        store.write("a", "db.items", upserts=rows((i, f"v{i}"), (100 + i, "x")))
        store.create_snapshot("a", f"s{i}")
        snapshots.append(f"s{i}")
        if i:
            restore_tenant(store, "a", f"s{i}", executor="local")
    assert chain_of(store, "a") == 5
    expected = everything_read(store, "a", snapshots)

    # a crash between two chunks of a flatten: the view is the same mid-way
    [table] = store.tables("a")
    with store.catalog.transaction() as tx:
        copied, after = flatten_deepest(tx, table.id, "", 1)
    assert copied == 1 and after is not None
    assert everything_read(store, "a", snapshots) == expected

    report = run_gc(store, dry_run=False, grace_us=0, allow_short_grace=True, compact=False)
    assert chain_of(store, "a") == MAX_DEPTH
    # two levels of this table went (and one of the retired tenant before it, 4 deep)
    mine = [f for f in report.flattened if f.table_id == table.id]
    assert len(mine) == 2 and sum(f.rows for f in mine) > 0
    assert everything_read(store, "a", snapshots) == expected
    with store.catalog.snapshot() as tx:
        assert totals_of(tx, table.id) == counted(tx, table.id)

    # a full compaction shadows everything inherited; GC then drops every level
    store.compact("a", full=True, target_bytes=DEFAULT_TARGET_BYTES)
    run_gc(store, dry_run=False, grace_us=0, allow_short_grace=True, compact=False)
    assert chain_of(store, "a") == 0
    assert everything_read(store, "a", snapshots) == expected
