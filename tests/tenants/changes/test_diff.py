"""A diff reads only what changed, and says the same as comparing two whole reads.

The change-log path (keys of the commits between A and B, point-read at both)
is checked against the scan path and against two full reads, over compacted
tables, and across restores that give a table content without commits.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from engine import restore_tenant
from tenants.changes.diff import plan_diff, stream_diff
from tenants.store import TableStore
from tests.helpers.item_rows import SCHEMA, keys, rows


def by_reads(store: TableStore, table: str, a: Any, b: Any = None) -> list[tuple[str, int]]:
    """(kind, id) of every key whose row differs between two full reads."""
    before = {r["id"]: r for r in store.read("t", table, a).to_pylist()}
    after = {r["id"]: r for r in store.read("t", table, b).to_pylist()}
    out = []
    for key in sorted(before.keys() | after.keys()):
        if key not in before:
            out.append(("insert", key))
        elif key not in after:
            out.append(("delete", key))
        elif before[key] != after[key]:
            out.append(("update", key))
    return out


def by_diff(store: TableStore, table: str, a: Any, b: Any = None) -> list[tuple[str, int]]:
    return [(r["__change"], r["id"]) for r in store.diff("t", table, a, b).read_all().to_pylist()]


def forget_log(store: TableStore) -> None:
    """Make every table's change log look forgotten, forcing the scan path."""
    with store.catalog.transaction() as tx:
        tx.execute("UPDATE tables SET changes_from_ts = ?", (tx.last_ts() + 1,))


def test_the_change_log_path_equals_two_full_reads_and_the_scan_after_compaction(
    store: TableStore,
) -> None:
    store.create_tenant("t")
    store.create_table("t", "db.items", SCHEMA)
    store.set_pitr("t", 3_600_000_000)
    for start in range(0, 400, 100):  # disjoint objects, like a compacted table
        store.write(
            "t", "db.items", upserts=rows(*[(i, f"v{i}") for i in range(start, start + 100)])
        )
    a = store.create_snapshot("t", "a").ts
    store.write(
        "t", "db.items", upserts=rows((5, "new"), (150, "v150"), (999, "x")), deletes=keys(7)
    )
    store.write("t", "db.items", deletes=keys(5, 300))
    store.write("t", "db.items", upserts=rows((300, "back")))
    store.compact("t")
    plan = plan_diff(store.catalog, "t", "db.items", a)
    assert not plan.scans and len(plan.changes or ()) == 4
    expected = by_reads(store, "db.items", a)
    # 150 was upserted with the value it had: no change; 300 deleted and put back: an update
    assert expected == [("delete", 5), ("delete", 7), ("update", 300), ("insert", 999)]
    assert by_diff(store, "db.items", a) == expected
    forget_log(store)
    assert plan_diff(store.catalog, "t", "db.items", a).scans
    assert by_diff(store, "db.items", a) == expected


def test_a_diff_reads_only_the_objects_holding_changed_keys(
    store: TableStore, monkeypatch: Any
) -> None:
    import tenants.reads.visible as visible

    store.create_tenant("t")
    store.create_table("t", "db.items", SCHEMA)
    store.set_pitr("t", 3_600_000_000)
    for start in range(0, 1000, 100):
        store.write("t", "db.items", upserts=rows(*[(i, "v") for i in range(start, start + 100)]))
    a = store.create_snapshot("t", "a").ts
    store.write("t", "db.items", upserts=rows((510, "changed")))
    opened: list[str] = []
    real = visible.open_object

    def counting(objects: Any, record: Any, **kwargs: Any) -> Any:
        opened.append(record.id)
        return real(objects, record, **kwargs)

    monkeypatch.setattr(visible, "open_object", counting)
    assert by_diff(store, "db.items", a) == [("update", 510)]
    # at A: the object holding 500..599; at B: the commit's own object (the log)
    assert len(opened) == 2


def test_snapshots_before_an_in_place_restore_diff_as_they_read(store: TableStore) -> None:
    """A restored tenant holds its content by install, not by commits: a diff between
    two times its tables existed at but before their install must not trust the log."""
    store.create_tenant("t")
    store.create_table("t", "db.items", SCHEMA)
    store.write("t", "db.items", upserts=rows((1, "a"), (2, "b")))
    store.create_snapshot("t", "one")
    store.write("t", "db.items", upserts=rows((3, "c")), deletes=keys(1))
    store.create_snapshot("t", "two")
    store.write("t", "db.items", upserts=rows((4, "d")))
    restore_tenant(store, "t", "two", executor="local")
    store.write("t", "db.items", upserts=rows((5, "e")))
    assert by_diff(store, "db.items", "one", "two") == by_reads(store, "db.items", "one", "two")
    assert by_diff(store, "db.items", "one", "two") == [("delete", 1), ("insert", 3)]
    assert by_diff(store, "db.items", "two") == [("insert", 5)]
    assert by_diff(store, "db.items", "one") == by_reads(store, "db.items", "one")


def test_schema_changes_are_shown_not_refused(store: TableStore) -> None:
    from tenants.schema import Column

    store.create_tenant("t")
    store.create_table("t", "db.items", SCHEMA)
    store.set_pitr("t", 3_600_000_000)
    store.write("t", "db.items", upserts=rows((1, "a"), (2, "b")))
    a = store.create_snapshot("t", "a").ts
    store.alter_table("t", "db.items", add=[Column("n", "int64", True, 7)])
    store.write("t", "db.items", upserts=pa.table({"id": [2, 3], "v": ["b", "c"], "n": [7, 8]}))
    store.alter_table("t", "db.items", drop=["v"])
    plan = plan_diff(store.catalog, "t", "db.items", a)
    assert plan.added == ["n"] and plan.dropped == ["v"]
    got = [b.to_pylist() for b in stream_diff(store.objects, plan)]
    # 2 was rewritten with its old value and n = its default: no change
    assert [r for part in got for r in part] == [
        {"__change": "insert", "id": 3, "before": None, "after": {"n": 8, "v": None}}
    ]


def test_a_commit_right_after_a_snapshot_is_reverted_without_a_pitr_window(
    store: TableStore,
) -> None:
    """No PITR: the time just before the commit is not protected, but the table did not
    change between the snapshot and the commit, so the snapshot holds its state then."""
    store.create_tenant("t")
    store.create_table("t", "db.items", SCHEMA)
    store.write("t", "db.items", upserts=rows((1, "a"), (2, "b"), (3, "c")))
    store.create_snapshot("t", "before")
    bad = store.write("t", "db.items", deletes=keys(2, 3))
    store.write("t", "db.items", upserts=rows((4, "d")))
    store.compact("t", full=True)  # nothing protects ts - 1 itself
    result = store.revert("t", "db.items", bad.ts)
    assert result.upserted == 2 and not result.conflicts.num_rows
    got = store.read("t", "db.items").to_pylist()
    assert [r["id"] for r in got] == [1, 2, 3, 4]


def test_a_commit_with_an_earlier_one_since_the_snapshot_needs_a_range_revert(
    store: TableStore,
) -> None:
    import pytest

    from tenants.errors import UnprotectedTime

    store.create_tenant("t")
    store.create_table("t", "db.items", SCHEMA)
    store.write("t", "db.items", upserts=rows((1, "a"), (2, "b")))
    store.create_snapshot("t", "before")
    store.write("t", "db.items", upserts=rows((5, "e")))
    bad = store.write("t", "db.items", deletes=keys(2))
    with pytest.raises(UnprotectedTime, match=r"--from SNAPSHOT --to \d+"):
        store.revert("t", "db.items", bad.ts)
    result = store.revert("t", "db.items", from_as_of="before", to_as_of=bad.ts)
    assert result.upserted == 1 and result.deleted == 1  # the range undoes both
