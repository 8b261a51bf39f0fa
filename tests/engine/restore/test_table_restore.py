"""Restoring one table or one database, and undropping a table (engine/restore/tables.py).

A table restore is a tenant restore at a smaller scope: the other tables keep
every write made after S; the replaced table stays readable before the
restore and can be restored to; writes to it are refused while the job runs.
"""

from __future__ import annotations

from typing import Any

import pytest

from engine.gc.run import run_gc
from engine.restore.cancel import cancel_restore
from engine.restore.job import restore_tenant, resume_restore
from engine.restore.journal import start_job
from engine.restore.table_plan import plan_database_restore, plan_table_restore
from engine.restore.tables import restore_database, restore_table, undrop_table
from tenants.errors import (
    AlreadyExists,
    InvalidName,
    NotFound,
    RestoreInProgress,
    TableBeingRestored,
    UnprotectedTime,
)
from tenants.store import TableStore
from tests.helpers.item_rows import SCHEMA, keys, pairs, rows


def content(store: TableStore, tenant: str, table: str, as_of: Any = None) -> list[tuple[int, str]]:
    database, name = table.split(".")
    return pairs(store.read(tenant, f"{database}.{name}", as_of))


@pytest.fixture
def shop(store: TableStore) -> TableStore:
    """Tenant ``acme`` (an hour of PITR): ``shop.orders`` and ``shop.users``, snapshot ``s`` after the
    first writes, then a bad delete on orders and a good write on users."""
    store.create_tenant("acme")
    store.set_pitr("acme", 3_600_000_000)  # an hour: every time since is protected
    store.create_table("acme", "shop.orders", SCHEMA)
    store.create_table("acme", "shop.users", SCHEMA)
    store.write("acme", "shop.orders", upserts=rows((1, "a"), (2, "b"), (3, "c")))
    store.write("acme", "shop.users", upserts=rows((1, "ann")))
    store.create_snapshot("acme", "s")
    store.write("acme", "shop.orders", deletes=keys(1, 2))
    store.write("acme", "shop.users", upserts=rows((2, "bob")))
    return store


def test_a_table_comes_back_and_the_other_tables_keep_their_later_writes(shop: TableStore) -> None:
    before = shop.now()
    outcome = restore_table(shop, "acme", "shop.orders", "s", executor="local")
    assert outcome.plan.scope == "table" and outcome.tenant.name == "acme"
    assert content(shop, "acme", "shop.orders") == [(1, "a"), (2, "b"), (3, "c")]
    assert content(shop, "acme", "shop.users") == [(1, "ann"), (2, "bob")]
    # the table as it was before the restore stays readable there, and restorable
    assert content(shop, "acme", "shop.orders", before) == [(3, "c")]
    restore_table(shop, "acme", "shop.orders", before, executor="local")
    assert content(shop, "acme", "shop.orders") == [(3, "c")]
    # and the restored table takes writes
    shop.write("acme", "shop.orders", upserts=rows((4, "d")))
    assert content(shop, "acme", "shop.orders") == [(3, "c"), (4, "d")]


def test_a_straddling_object_is_rewritten_and_the_rest_reused(shop: TableStore) -> None:
    shop.write("acme", "shop.orders", upserts=rows((4, "d")))
    shop.compact("acme", "shop.orders")  # objects across S
    outcome = restore_table(shop, "acme", "shop.orders", "s", executor="local", verify="full")
    assert outcome.rewritten >= 1 and outcome.tables_compared == 1
    assert content(shop, "acme", "shop.orders") == [(1, "a"), (2, "b"), (3, "c")]


def test_to_makes_a_new_table_beside_it_and_to_tenant_one_in_another_tenant(
    shop: TableStore,
) -> None:
    restore_table(shop, "acme", "shop.orders", "s", to="shop.orders_back", executor="local")
    assert content(shop, "acme", "shop.orders") == [(3, "c")]
    assert content(shop, "acme", "shop.orders_back") == [(1, "a"), (2, "b"), (3, "c")]
    shop.create_tenant("other")
    outcome = restore_table(shop, "acme", "shop.orders", "s", to_tenant="other", executor="local")
    assert outcome.tenant.name == "other"
    assert content(shop, "other", "shop.orders") == [(1, "a"), (2, "b"), (3, "c")]
    # zero copy: the clone's objects are the source's
    assert {o.id for _, o in shop.objects_of("other")} <= {o.id for _, o in shop.objects_of("acme")}
    with pytest.raises(AlreadyExists, match="already exists"):
        restore_table(shop, "acme", "shop.orders", "s", to_tenant="other", executor="local")


def test_a_table_dropped_since_s_comes_back(shop: TableStore) -> None:
    shop.drop_table("acme", "shop.orders")
    restore_table(shop, "acme", "shop.orders", "s", executor="local")
    assert content(shop, "acme", "shop.orders") == [(1, "a"), (2, "b"), (3, "c")]


def test_writes_to_the_table_are_refused_while_its_job_runs(shop: TableStore) -> None:
    plan = plan_table_restore(shop.catalog, "acme", "shop.orders", "s")
    start_job(shop.catalog, plan, executor="local", verify="objects")
    with pytest.raises(TableBeingRestored, match=plan.job_id):
        shop.write("acme", "shop.orders", upserts=rows((9, "z")))
    with pytest.raises(
        TableBeingRestored,
        match=rf"table shop\.orders of tenant 'acme' is being restored by job {plan.job_id}",
    ):
        shop.drop_table("acme", "shop.orders")
    shop.write("acme", "shop.users", upserts=rows((3, "cy")))  # other tables: fine
    with pytest.raises(
        RestoreInProgress, match=rf"tenant 'acme' already has restore job {plan.job_id}"
    ):
        restore_table(shop, "acme", "shop.users", "s", executor="local")
    resume_restore(shop, plan.job_id)
    assert content(shop, "acme", "shop.orders") == [(1, "a"), (2, "b"), (3, "c")]
    assert content(shop, "acme", "shop.users") == [(1, "ann"), (2, "bob"), (3, "cy")]
    shop.write("acme", "shop.orders", upserts=rows((9, "z")))  # released at install


def test_a_cancelled_table_restore_changes_nothing_and_releases_the_table(
    shop: TableStore,
) -> None:
    shop.compact("acme", "shop.orders", full=True)
    before = {o.id for _, o in shop.objects_of("acme")}
    plan = plan_table_restore(shop.catalog, "acme", "shop.orders", "s")
    start_job(shop.catalog, plan, executor="local", verify="objects")
    cancel_restore(shop, plan.job_id)
    assert content(shop, "acme", "shop.orders") == [(3, "c")]
    assert content(shop, "acme", "shop.users") == [(1, "ann"), (2, "bob")]
    assert {o.id for _, o in shop.objects_of("acme")} == before
    shop.write("acme", "shop.orders", upserts=rows((9, "z")))
    # every object of the tenant is still there (cancel deleted only the job's prefixes)
    for _, record in shop.objects_of("acme"):
        assert shop.objects.head(record.key) is not None


def test_a_database_restore_drops_later_tables_and_brings_back_dropped_ones(
    shop: TableStore,
) -> None:
    shop.drop_table("acme", "shop.users")
    shop.create_table("acme", "shop.later", SCHEMA)
    shop.write("acme", "shop.later", upserts=rows((7, "x")))
    shop.create_table("acme", "other.kept", SCHEMA)
    shop.write("acme", "other.kept", upserts=rows((8, "y")))
    before = shop.now()
    outcome = restore_database(shop, "acme", "shop", "s", executor="local")
    assert outcome.plan.scope == "database"
    names = {t.qualified for t in shop.tables("acme")}
    assert names == {"shop.orders", "shop.users", "other.kept"}
    assert content(shop, "acme", "shop.orders") == [(1, "a"), (2, "b"), (3, "c")]
    assert content(shop, "acme", "shop.users") == [(1, "ann")]
    assert content(shop, "acme", "other.kept") == [(8, "y")]
    assert content(shop, "acme", "shop.later", before) == [(7, "x")]


def test_a_database_restore_to_a_new_name_and_to_another_tenant(shop: TableStore) -> None:
    restore_database(shop, "acme", "shop", "s", to="shop_back", executor="local")
    assert content(shop, "acme", "shop_back.users") == [(1, "ann")]
    assert content(shop, "acme", "shop.users") == [(1, "ann"), (2, "bob")]
    with pytest.raises(AlreadyExists, match="database shop_back already exists"):
        plan_database_restore(shop.catalog, "acme", "shop", "s", to="shop_back")


def test_undrop_brings_back_the_last_dropped_table_while_its_history_is_retained(
    shop: TableStore,
) -> None:
    shop.drop_table("acme", "shop.orders")
    shop.create_table("acme", "shop.orders", SCHEMA)
    shop.write("acme", "shop.orders", upserts=rows((5, "new")))
    with pytest.raises(AlreadyExists, match="--as"):
        undrop_table(shop, "acme", "shop.orders", executor="local")
    undrop_table(shop, "acme", "shop.orders", as_name="shop.orders_old", executor="local")
    assert content(shop, "acme", "shop.orders_old") == [(3, "c")]
    assert content(shop, "acme", "shop.orders") == [(5, "new")]
    with pytest.raises(NotFound, match="no dropped table"):
        undrop_table(shop, "acme", "shop.nothing", executor="local")


def test_undrop_retained_by_a_snapshot_alone_verifies_in_full(store: TableStore) -> None:
    # The drop ts - 1 is no protected time (no PITR): the snapshot before the
    # drop only retains the table. Undrop and its full verification still work.
    store.create_tenant("acme")
    store.create_table("acme", "db.t", SCHEMA)
    store.write("acme", "db.t", upserts=rows((1, "a")))
    store.create_snapshot("acme", "before")
    store.write("acme", "db.t", upserts=rows((2, "b")))
    store.drop_table("acme", "db.t")
    outcome = undrop_table(store, "acme", "db.t", executor="local", verify="full")
    assert outcome.tables_compared == 1
    # The point is the µs before the drop, and its label says so.
    assert outcome.plan.at_label.startswith("just before the drop of db.t (dropped at ")
    assert content(store, "acme", "db.t") == [(1, "a"), (2, "b")]


def test_undrop_refuses_once_no_protected_time_reaches_back_before_the_drop(
    store: TableStore,
) -> None:
    store.create_tenant("acme")
    store.create_table("acme", "db.t", SCHEMA)
    store.write("acme", "db.t", upserts=rows((1, "a")))
    store.drop_table("acme", "db.t")
    with pytest.raises(UnprotectedTime, match="no longer retained"):
        undrop_table(store, "acme", "db.t", executor="local")


def test_bad_input_changes_nothing(shop: TableStore) -> None:
    with pytest.raises(NotFound, match="did not exist"):
        restore_table(shop, "acme", "shop.nope", "s", executor="local")
    with pytest.raises(InvalidName, match="DB.TABLE"):
        restore_table(shop, "acme", "shop", "s", executor="local")
    with pytest.raises(
        AlreadyExists,
        match=r"table shop\.users already exists in tenant acme@\w+; choose another --to name",
    ):
        restore_table(shop, "acme", "shop.orders", "s", to="shop.users", executor="local")
    assert content(shop, "acme", "shop.orders") == [(3, "c")]


def test_gc_keeps_what_the_restored_table_and_the_undo_window_need(shop: TableStore) -> None:
    restore_table(shop, "acme", "shop.orders", "s", executor="local")
    before = shop.now()
    shop.compact("acme", "shop.orders", full=True)
    run_gc(shop, dry_run=False, grace_us=0, allow_short_grace=True, compact=False)
    assert content(shop, "acme", "shop.orders") == [(1, "a"), (2, "b"), (3, "c")]
    assert content(shop, "acme", "shop.orders", before) == [(1, "a"), (2, "b"), (3, "c")]
    assert content(shop, "acme", "shop.orders", "s") == [(1, "a"), (2, "b"), (3, "c")]


def test_a_tenant_restore_carries_a_database_whose_tables_were_all_dropped(
    store: TableStore,
) -> None:
    # DDL as of S includes an empty database; a later database restore into it works
    store.create_tenant("acme")
    store.create_table("acme", "empty.t", SCHEMA)
    store.drop_table("acme", "empty.t")
    store.create_snapshot("acme", "s")
    restore_tenant(store, "acme", "s", to="copy", executor="local")
    with store.catalog.snapshot() as tx:
        names = [r[0] for r in tx.tuples(
            "SELECT d.name FROM databases d JOIN tenants t ON t.id = d.tenant_id WHERE t.name = ?",
            ("copy",),
        )]  # fmt: skip
    assert names == ["empty"]
    outcome = restore_database(store, "copy", "empty", "now", executor="local")
    assert outcome.plan.tables == ()
