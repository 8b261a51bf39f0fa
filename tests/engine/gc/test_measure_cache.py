"""GC reads a table's objects again only when what it measured there may have changed.

A pass keeps each table's measurement (what full compaction would drop) in the
catalog and reuses it while the table's members and the protected times that
decide for it are unchanged (engine/gc/reclaim.py). Here every test counts the
objects a pass reads (``ReadCountingStore``), and checks that what the pass
reports, kept or measured, equals a fresh measurement of every table
(``scan(fresh=True)``): reusing is never allowed to make the numbers wrong.
Both catalogs; a ``file://`` warehouse; the clock is frozen and moved.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.gc import reclaim
from engine.gc.collect import collect
from engine.gc.reclaim import Reclaimable, scan
from engine.gc.run import run_gc
from tenants.store import TableStore
from tests.helpers.gc import H, ReadCountingStore, Timeline, catalog_dump
from tests.helpers.restores import SCHEMA, keys, rows


@pytest.fixture
def store(new_catalog_uri: Callable[[], str], tmp_path: Path, clock: Any) -> Iterator[TableStore]:
    """A fresh catalog of the test's backend and a ``file://`` warehouse."""
    opened = TableStore.open(new_catalog_uri(), f"file://{tmp_path / 'wh'}", clock=clock)
    yield opened
    opened.close()


def write(store: TableStore, tenant: str, table: str, version: str, ids: range) -> None:
    """One commit upserting ``ids`` (so each later one supersedes the earlier versions)."""
    store.write(tenant, table, upserts=rows(*[(i, f"{version}-{i}") for i in ids]))


def world(store: TableStore) -> None:
    """Tenant ``a`` with tables ``db.t1`` and ``db.t2``, tenant ``b`` with ``db.t1``;
    each table three commits overwriting most of its keys (history to reclaim)."""
    for tenant, tables in (("a", ("db.t1", "db.t2")), ("b", ("db.t1",))):
        store.create_tenant(tenant)
        for table in tables:
            store.create_table(tenant, table, SCHEMA)
            for version in ("v1", "v2", "v3"):
                write(store, tenant, table, version, range(8))


def table_id(store: TableStore, tenant: str, table: str) -> str:
    return next(t.id for t in store.tables(tenant) if t.qualified == table)


def every_table(store: TableStore) -> set[str]:
    return {t.id for tenant in ("a", "b") for t in store.tables(tenant)}


def measured(store: TableStore, **kwargs: Any) -> tuple[list[Reclaimable], set[str]]:
    """One scan (keeping what it measures unless told not to): what it reports and
    the ids of the tables whose objects it read."""
    counting = ReadCountingStore(store.objects)
    found = scan(store.catalog, counting, **kwargs)  # type: ignore[arg-type]
    return found, counting.tables_read()


def fresh(store: TableStore) -> list[Reclaimable]:
    """Every table measured from its objects, nothing kept."""
    return scan(store.catalog, store.objects, fresh=True, remember=False)


def kept_tables(store: TableStore) -> set[str]:
    """Ids of the tables GC keeps a measurement of."""
    with store.catalog.snapshot() as tx:
        return {str(r[0]) for r in tx.tuples("SELECT table_id FROM table_measures")}


def of(found: list[Reclaimable], table: str) -> Reclaimable:
    [item] = [r for r in found if r.table.id == table]
    return item


def test_a_second_pass_over_an_unchanged_warehouse_opens_no_object(
    store: TableStore, clock: Any
) -> None:
    at = Timeline(clock)
    world(store)
    at(1)
    counting = ReadCountingStore(store.objects)
    gc = TableStore(store.catalog, counting)  # type: ignore[arg-type]
    # Threshold 1: nothing is compacted (every table keeps its current rows).
    first = run_gc(gc, dry_run=False, threshold=1.0)
    assert not first.compacted
    assert counting.tables_read() == every_table(store)
    assert all(r.reclaimable_rows for r in first.reclaimable)

    at(2)
    counting.opened.clear()
    second = run_gc(gc, dry_run=False, threshold=1.0)
    assert counting.opened == []
    assert second.reclaimable == first.reclaimable
    assert list(second.reclaimable) == fresh(store)


def test_a_table_gc_compacted_is_read_once_more_then_not(store: TableStore, clock: Any) -> None:
    at = Timeline(clock)
    world(store)
    store.write("b", "db.t1", upserts=rows(*[(i, "v4") for i in range(8, 40)]))  # mostly live
    b1 = table_id(store, "b", "db.t1")
    at(1)
    counting = ReadCountingStore(store.objects)
    gc = TableStore(store.catalog, counting)  # type: ignore[arg-type]
    report = run_gc(gc, dry_run=False, threshold=0.5)
    compacted = {r.table.id for r, _ in report.compacted}
    assert compacted == every_table(store) - {b1}

    counting.opened.clear()
    again = run_gc(gc, dry_run=False, threshold=0.5)
    assert counting.tables_read() == compacted  # their members changed: measured again
    assert not again.compacted and all(
        r.reclaimable_rows == 0 for r in again.reclaimable if r.table.id in compacted
    )
    assert list(again.reclaimable) == fresh(store)

    counting.opened.clear()
    run_gc(gc, dry_run=False, threshold=0.5)
    assert counting.opened == []


def test_after_a_write_to_one_table_only_that_table_is_read(store: TableStore, clock: Any) -> None:
    at = Timeline(clock)
    world(store)
    at(1)
    measured(store)
    at(2)
    write(store, "a", "db.t2", "v4", range(4))  # "now" of tenant a moves too
    found, read = measured(store)
    assert read == {table_id(store, "a", "db.t2")}
    assert found == fresh(store)
    assert measured(store)[1] == set()


def test_after_dropping_a_snapshot_only_tables_with_rows_after_it_are_read(
    store: TableStore, clock: Any
) -> None:
    at = Timeline(clock)
    world(store)
    at(1)
    store.create_snapshot("a", "s")
    store.create_snapshot("b", "s")
    at(2)
    write(store, "a", "db.t1", "v4", range(8))  # after s: s keeps v3 of db.t1
    at(3)
    before, _ = measured(store)
    t1 = table_id(store, "a", "db.t1")

    store.drop_snapshot("a", "s")
    found, read = measured(store)
    assert read == {t1}  # a's db.t2 and b's table have no row after s
    assert of(found, t1).reclaimable_rows > of(before, t1).reclaimable_rows
    assert found == fresh(store)
    assert measured(store)[1] == set()

    store.drop_snapshot("b", "s")  # b's only table has no row after it: nothing to read
    found, read = measured(store)
    assert read == set()
    assert found == fresh(store)


def test_a_pitr_tenant_idle_for_longer_than_its_window_is_not_read_again(
    store: TableStore, clock: Any
) -> None:
    at = Timeline(clock)
    store.create_tenant("a")
    store.set_pitr("a", H)
    store.create_table("a", "db.t1", SCHEMA)
    for version in ("v1", "v2", "v3"):
        write(store, "a", "db.t1", version, range(8))
    t1 = table_id(store, "a", "db.t1")
    at(0.5)
    inside, read = measured(store)
    assert read == {t1} and of(inside, t1).reclaimable_rows == 0  # the window keeps them all

    at(2)  # the window has moved past every row: its versions are free now
    found, read = measured(store)
    assert read == {t1}
    assert of(found, t1).reclaimable_rows == 16
    assert found == fresh(store)

    for hours in (3, 10, 48):  # the window goes on moving; nothing it passes is the table's
        at(hours)
        found, read = measured(store)
        assert read == set()
        assert found == fresh(store)


def test_the_numbers_a_dry_run_shows_stay_true_and_it_keeps_nothing(
    store: TableStore, clock: Any
) -> None:
    at = Timeline(clock)
    world(store)
    at(1)
    store.create_snapshot("a", "s")
    at(2)
    write(store, "a", "db.t1", "v4", range(8))
    at(3)
    run_gc(store, dry_run=False, threshold=1.0)  # keeps every table's measurement
    t1 = table_id(store, "a", "db.t1")

    store.drop_snapshot("a", "s")
    at(4)
    before = catalog_dump(store)
    counting = ReadCountingStore(store.objects)
    dry = run_gc(TableStore(store.catalog, counting))  # type: ignore[arg-type]
    assert counting.tables_read() == {t1}
    assert list(dry.reclaimable) == fresh(store)
    assert catalog_dump(store) == before  # measured, shown, not kept
    assert measured(store)[1] == {t1}  # so a real pass measures it again


def test_a_table_whose_ended_members_gc_forgot_is_measured_again(
    store: TableStore, clock: Any
) -> None:
    """Every row deleted, then a full compaction that keeps nothing: the table's
    members end with no new one added, and once GC collected them not even
    their membership rows are left to show it. The view's totals do."""
    at = Timeline(clock)
    world(store)
    store.write("a", "db.t2", deletes=keys(*range(8)))
    at(1)
    measured(store)
    t2 = table_id(store, "a", "db.t2")
    [result] = store.compact("a", "db.t2", full=True)
    assert result.outputs == 0
    collect(store.catalog, store.objects, grace_us=0, dry_run=False)
    assert kept_tables(store) == every_table(store) - {t2}  # forgotten with the rows
    with store.catalog.snapshot() as tx:
        assert not tx.tuples("SELECT 1 FROM membership WHERE table_id = ?", (t2,))

    found, read = measured(store)
    assert t2 not in {r.table.id for r in found}  # it holds nothing: nothing to measure
    assert read == set()
    assert found == fresh(store)


def test_measurements_taken_while_another_pass_collected_are_not_kept(
    store: TableStore, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a pass measures, another compacts a table the pass has measured
    already and collects (and forgets) what that replaced: the only sign left of
    the change may be the totals, so the pass keeps none of what it measured."""
    at = Timeline(clock)
    world(store)
    at(1)
    last = table_id(store, "b", "db.t1")  # measured last: tenants by name, then tables
    real = reclaim.measure

    def measure(objects: Any, tenant: str, table: Any, records: Any, guard: Any) -> Any:
        if table.id == last:
            store.compact("a", "db.t2")
            collect(store.catalog, store.objects, grace_us=0, dry_run=False)
        return real(objects, tenant, table, records, guard)

    monkeypatch.setattr(reclaim, "measure", measure)
    measured(store)
    monkeypatch.undo()
    assert kept_tables(store) == set()
    found, read = measured(store)
    assert read == every_table(store)
    assert found == fresh(store)


def test_measurements_of_dropped_tables_and_tenants_are_forgotten(
    store: TableStore, clock: Any
) -> None:
    at = Timeline(clock)
    world(store)
    at(1)
    measured(store)
    store.drop_table("a", "db.t2")
    store.drop_tenant("b")
    measured(store)
    assert kept_tables(store) == {table_id(store, "a", "db.t1")}
