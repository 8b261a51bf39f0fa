"""The change log: a write commit's own objects outlive compaction for the change horizon.

Diffs and reverts find what a commit did in its own key-sorted objects
(tenants.catalog.changes). GC keeps them while the tenant's change horizon
(the start of the PITR window; with none, the newest snapshot; with none, now)
is at or before the commit, and forgets them, raising the table's
``changes_from_ts`` in the same transaction, once it passes.
"""

from __future__ import annotations

from typing import Any

from engine.gc.purge import purge_tenant
from engine.gc.run import run_gc
from tenants.store import TableStore
from tests.helpers.gc import H, Timeline, bucket_listing, change_log_keys, keys_of
from tests.helpers.restores import SCHEMA, catalog_rows, keys, rows


def gc(store: TableStore) -> Any:
    return run_gc(store, dry_run=False, grace_us=0, allow_short_grace=True, compact=False)


def change_rows(store: TableStore) -> list[tuple[int, str]]:
    return [
        (r["ts"], r["kind"])
        for r in catalog_rows(
            store,
            "SELECT c.ts, o.kind FROM change_objects c JOIN objects o ON o.id = c.object_id "
            "ORDER BY c.ts, o.kind",
        )
    ]


def changes_from(store: TableStore) -> int:
    return int(catalog_rows(store, "SELECT changes_from_ts FROM tables")[0]["changes_from_ts"])


def test_a_write_logs_its_data_and_tombstone_objects_at_its_ts(store: TableStore) -> None:
    store.create_tenant("a")
    store.create_table("a", "db.items", SCHEMA)
    first = store.write("a", "db.items", upserts=rows((1, "x"), (2, "y")))
    second = store.write("a", "db.items", upserts=rows((3, "z")), deletes=keys(1))
    assert change_rows(store) == [(first.ts, "data"), (second.ts, "data"), (second.ts, "tomb")]
    # a table created with the log is complete from its creation
    assert changes_from(store) < first.ts


def test_compacted_commits_after_the_newest_snapshot_are_kept_then_forgotten(
    store: TableStore, clock: Any
) -> None:
    at = Timeline(clock)
    store.create_tenant("a")
    store.create_table("a", "db.items", SCHEMA)
    store.write("a", "db.items", upserts=rows((1, "x")))
    before = change_log_keys(store)
    snapshot = store.create_snapshot("a", "s")
    at(0.1)
    after = store.write("a", "db.items", upserts=rows((2, "y")), deletes=keys(1))
    logged = change_log_keys(store) - before
    assert len(logged) == 2
    store.compact("a")
    merged = logged - keys_of(store, "a")  # the data object (one tombstone is not merged)
    assert merged
    at(2)
    gc(store)
    # Before the horizon (the snapshot): forgotten and collected; after it: kept.
    listing = bucket_listing(store)
    assert logged <= listing
    assert not before & listing
    assert change_rows(store) == [(after.ts, "data"), (after.ts, "tomb")]
    assert changes_from(store) == snapshot.ts
    # Without the snapshot the horizon is now: the log goes, and its objects with it.
    store.drop_snapshot("a", "s")
    at(3)
    gc(store)
    assert change_rows(store) == []
    assert not merged & bucket_listing(store)
    assert changes_from(store) > after.ts


def test_the_pitr_window_is_the_horizon(store: TableStore, clock: Any) -> None:
    at = Timeline(clock)
    store.create_tenant("a")
    store.create_table("a", "db.items", SCHEMA)
    store.set_pitr("a", 2 * H)
    old = store.write("a", "db.items", upserts=rows((1, "x")))
    at(3)
    new = store.write("a", "db.items", upserts=rows((2, "y")))
    store.compact("a")
    at(4)
    gc(store)
    assert change_rows(store) == [(new.ts, "data")]
    assert old.ts < changes_from(store) <= new.ts


def test_a_purged_tenant_forgets_its_log(store: TableStore, clock: Any) -> None:
    at = Timeline(clock)
    store.create_tenant("a")
    store.create_table("a", "db.items", SCHEMA)
    store.create_snapshot("a", "s")
    store.write("a", "db.items", upserts=rows((1, "x")))
    logged = change_log_keys(store)
    purge_tenant(store.catalog, store.drop_tenant("a").ref)
    at(2)
    gc(store)
    assert change_rows(store) == []
    assert not logged & bucket_listing(store)
