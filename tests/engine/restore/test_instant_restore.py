"""Instant restore: the tenant is installed before its straddlers are rewritten.

Each object that straddles S joins the restored table held with a cut at S;
every reader keeps only its rows at or before the cut; the same job then
rewrites and swaps each for its copy (docs/membership.md). These tests check
the tenant reads as the rewrite-first restore would, before, during and after
the rewrite, through every reader and writer that meets a cut member.
"""

from __future__ import annotations

from typing import Any

import pytest

from engine.gc.run import run_gc
from engine.restore.job import cancel_restore, restore_tenant, resume_restore
from engine.restore.journal import load_job
from engine.restore.tables import restore_database, restore_table
from tenants.compaction import DEFAULT_TARGET_BYTES
from tenants.errors import InvalidArgument, ObjectMissing
from tenants.store import TableStore
from tests.helpers.restores import SCHEMA, rows


def straddling_tenant(store: TableStore, name: str = "acme") -> None:
    """A tenant whose every object straddles snapshot ``s``: writes before and
    after it, fully compacted after it."""
    store.create_tenant(name)
    store.create_table(name, "db.items", SCHEMA)
    for i in range(3):
        store.write(name, "db.items", upserts=rows((i, f"v{i}"), (i + 10, f"w{i}")))
    store.create_snapshot(name, "s")
    store.write(name, "db.items", upserts=rows((0, "late"), (99, "new")))
    store.write(name, "db.items", deletes=rows((1, "")).select(["id"]))
    store.compact(name, full=True, target_bytes=DEFAULT_TARGET_BYTES)


def cut_members(store: TableStore, tenant: str) -> list[Any]:
    return [o for _, o in store.objects_of(tenant) if o.cut_ts is not None]


def test_an_instant_restore_reads_as_of_s_before_and_after_its_rewrite(
    store: TableStore,
) -> None:
    straddling_tenant(store)
    expected = store.read("acme", "db.items", as_of="s").to_pylist()
    seen: dict[str, Any] = {}

    def usable(installed: Any) -> None:
        # installed, nothing rewritten yet: every straddler is read through its cut
        seen["cut"] = len(cut_members(store, "acme"))
        seen["rows"] = store.read("acme", "db.items").to_pylist()

    outcome = restore_tenant(
        store, "acme", "s", to="copy", executor="local", instant=True, on_installed=lambda i: None
    )
    assert outcome.instant and not outcome.rewrite_pending
    assert store.read("copy", "db.items").to_pylist() == expected
    assert cut_members(store, "copy") == []  # all swapped
    outcome = restore_tenant(
        store, "acme", "s", executor="local", instant=True, on_installed=usable
    )
    assert seen["cut"] >= 1 and seen["rows"] == expected
    assert store.read("acme", "db.items").to_pylist() == expected
    assert load_job(store.catalog, outcome.job_id).state == "done"


def test_no_wait_leaves_a_usable_tenant_and_the_rewrite_for_resume(store: TableStore) -> None:
    straddling_tenant(store)
    expected = store.read("acme", "db.items", as_of="s").to_pylist()
    outcome = restore_tenant(
        store, "acme", "s", to="copy", executor="local", instant=True, wait=False
    )
    assert outcome.rewrite_pending
    assert load_job(store.catalog, outcome.job_id).state == "rewriting"
    cut = cut_members(store, "copy")
    assert cut and all(o.cut_ts == outcome.plan.at_ts for o in cut)
    assert store.read("copy", "db.items").to_pylist() == expected

    # writes and compaction during the pending rewrite; the swap never conflicts
    store.write("copy", "db.items", upserts=rows((500, "during")))
    expected_after = store.read("copy", "db.items").to_pylist()
    resumed = resume_restore(store, outcome.job_id)
    assert resumed.instant and resumed.rewritten == len(cut)
    assert cut_members(store, "copy") == []
    assert store.read("copy", "db.items").to_pylist() == expected_after


def test_a_compaction_merging_a_cut_member_keeps_only_its_rows_up_to_the_cut(
    store: TableStore,
) -> None:
    straddling_tenant(store)
    expected = store.read("acme", "db.items", as_of="s").to_pylist()
    outcome = restore_tenant(
        store, "acme", "s", to="copy", executor="local", instant=True, wait=False
    )
    store.compact("copy", full=True, target_bytes=DEFAULT_TARGET_BYTES)
    assert cut_members(store, "copy") == []  # merged away: its copy is not needed
    assert store.read("copy", "db.items").to_pylist() == expected
    resume_restore(store, outcome.job_id)
    assert store.read("copy", "db.items").to_pylist() == expected
    assert load_job(store.catalog, outcome.job_id).state == "done"
    # the unneeded copies are gone, not left as orphans
    keys = {o.key for _, o in store.objects_of("copy")}
    listed = {i.key for i in store.objects.list("tenants/")}
    job = load_job(store.catalog, outcome.job_id)
    assert not any(t.out_key in listed and t.out_key not in keys for t in job.plan.tasks)


def test_cancelling_the_rewrite_keeps_the_tenant_reading_through_cuts(store: TableStore) -> None:
    straddling_tenant(store)
    expected = store.read("acme", "db.items", as_of="s").to_pylist()
    outcome = restore_tenant(
        store, "acme", "s", to="copy", executor="local", instant=True, wait=False
    )
    job = cancel_restore(store, outcome.job_id)
    assert job.state == "cancelled" and job.installed_ts is not None
    assert store.read("copy", "db.items").to_pylist() == expected
    assert cut_members(store, "copy")
    # GC with no grace keeps the straddlers the cut members hold, even once the
    # source is retired and compacted away
    store.compact("acme", full=True, target_bytes=DEFAULT_TARGET_BYTES)
    run_gc(store, dry_run=False, grace_us=0, allow_short_grace=True, compact=False)
    assert store.read("copy", "db.items").to_pylist() == expected


def test_a_restore_from_a_tenant_with_cut_members_reads_through_them(store: TableStore) -> None:
    straddling_tenant(store)
    expected = store.read("acme", "db.items", as_of="s").to_pylist()
    restore_tenant(store, "acme", "s", to="copy", executor="local", instant=True, wait=False)
    # copy's rewrite is pending: it may be cancelled, then copy restored again
    pending = load_job_of(store, "copy")
    cancel_restore(store, pending)
    store.create_snapshot("copy", "c1")
    store.write("copy", "db.items", upserts=rows((700, "later")))
    restore_tenant(store, "copy", "c1", to="again", executor="local")
    assert store.read("again", "db.items").to_pylist() == expected
    restore_tenant(store, "copy", "c1", to="again2", executor="local", instant=True)
    assert store.read("again2", "db.items").to_pylist() == expected


def load_job_of(store: TableStore, tenant: str) -> str:
    with store.catalog.snapshot() as tx:
        return str(
            tx.scalar(
                "SELECT id FROM restore_jobs WHERE target_name = ? ORDER BY created_ts DESC",
                (tenant,),
            )
        )


def test_no_wait_without_instant_and_instant_logical_are_refused(store: TableStore) -> None:
    straddling_tenant(store)
    with pytest.raises(InvalidArgument, match="add --instant"):
        restore_tenant(store, "acme", "s", to="copy", wait=False)
    with pytest.raises(InvalidArgument, match="instant restore is physical"):
        restore_tenant(store, "acme", "s", to="copy", instant=True, method="logical")


def test_an_instant_table_restore_in_place_reads_as_of_s_and_keeps_other_tables(
    store: TableStore,
) -> None:
    straddling_tenant(store)
    store.create_table("acme", "db.other", SCHEMA)
    store.write("acme", "db.other", upserts=rows((1, "kept")))
    expected = store.read("acme", "db.items", as_of="s").to_pylist()
    outcome = restore_table(store, "acme", "db.items", "s", instant=True, wait=False)
    assert outcome.rewrite_pending
    assert store.read("acme", "db.items").to_pylist() == expected
    store.write("acme", "db.items", upserts=rows((800, "during")))
    resume_restore(store, outcome.job_id)
    assert store.read("acme", "db.items").to_pylist() == sorted(
        [*expected, {"id": 800, "v": "during"}], key=lambda r: r["id"]
    )
    assert store.read("acme", "db.other").to_pylist() == [{"id": 1, "v": "kept"}]
    assert cut_members(store, "acme") == []


def test_an_instant_restore_installs_nothing_when_an_object_it_would_read_is_missing(
    store: TableStore,
) -> None:
    straddling_tenant(store)
    [(_, straddler)] = [p for p in store.objects_of("acme") if p[1].kind == "data"][:1]
    store.objects.delete_many([straddler.key])
    with pytest.raises(ObjectMissing, match="was not installed"):
        restore_tenant(store, "acme", "s", to="copy", executor="local", instant=True)
    assert "copy" not in {t.name for t in store.tenants()}


def test_an_instant_database_restore_opens_its_database_to_ddl_at_install(
    store: TableStore,
) -> None:
    """Found by the table-restore model: an instant database restore kept its hold
    on the database past its install, until its rewrite ended, so creating a
    table in the restored (live) database was refused with TableBeingRestored."""
    straddling_tenant(store)
    expected = store.read("acme", "db.items", as_of="s").to_pylist()
    outcome = restore_database(store, "acme", "db", "s", executor="local", instant=True, wait=False)
    assert outcome.rewrite_pending and cut_members(store, "acme")
    store.create_table("acme", "db.fresh", SCHEMA)
    store.write("acme", "db.fresh", upserts=rows((1, "new")))
    resume_restore(store, outcome.job_id)
    assert store.read("acme", "db.fresh").to_pylist() == [{"id": 1, "v": "new"}]
    assert store.read("acme", "db.items").to_pylist() == expected
