"""The runs journal: every backup and GC pass is one row, running then done or failed.

What ``rewind status`` and ``rewind metrics`` read (docs/operations.md); a run
killed mid-way stays ``running`` with a lease that runs out (stale).
"""

from __future__ import annotations

import time

import pytest

from engine.backup.api import create_backup
from engine.gc.run import run_gc
from engine.operations.runs import journaled
from tenants.catalog.base import wall_clock_us
from tenants.catalog.engine.runs import recent_runs, run_row
from tenants.errors import NotFound
from tenants.store import TableStore
from tests.helpers.backups import build_source

pytestmark = pytest.mark.usefixtures("s3_server")


def test_a_backup_is_one_done_run_with_its_size_point_and_redacted_destination(
    store: TableStore, bucket: str
) -> None:
    build_source(store)
    uri = f"s3://{bucket}/backups?secret_key=hunter2"
    result = create_backup(store, "acme", "mon", uri.split("?")[0])
    with store.catalog.snapshot() as tx:
        (run,) = recent_runs(tx, "backup")
    assert run["state"] == "done" and run["tenant_name"] == "acme"
    assert run["backup_id"] == result.backup_id and run["method"] == "physical"
    assert run["bytes"] == result.copied_bytes and run["objects"] == result.objects
    assert run["point_ts"] == store.resolve_time("acme", "mon")
    assert run["started_us"] <= run["ended_us"] <= wall_clock_us()
    assert run["error"] is None


def test_a_failed_run_records_its_redacted_one_line_error(store: TableStore) -> None:
    with pytest.raises(NotFound):
        with journaled(store.catalog, "backup", tenant="acme", target="s3://b/p?token=abc"):
            raise NotFound("tenant 'acme' not found\nsecond line token=abc")
    with store.catalog.snapshot() as tx:
        (run,) = recent_runs(tx)
    assert run["state"] == "failed" and run["target"] == "s3://b/p?token=***"
    assert run["error"] == "NotFound: tenant 'acme' not found"


def test_a_gc_pass_is_journaled_and_a_dry_run_is_not(store: TableStore) -> None:
    build_source(store)
    run_gc(store, dry_run=True)
    with store.catalog.snapshot() as tx:
        assert recent_runs(tx) == []
    run_gc(store, dry_run=False)
    with store.catalog.snapshot() as tx:
        (run,) = recent_runs(tx, "gc")
    assert run["state"] == "done" and run["method"] == "default" and run["tenant_name"] is None


def test_a_running_run_holds_a_renewed_lease(
    store: TableStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REWIND_JOB_LEASE_SECONDS", "0.6")
    with journaled(store.catalog, "drill", tenant="acme") as run:
        with store.catalog.snapshot() as tx:
            first = run_row(tx, run.run_id)
        assert first is not None and first["state"] == "running"
        time.sleep(0.8)
        with store.catalog.snapshot() as tx:
            later = run_row(tx, run.run_id)
        assert later is not None and later["lease_expires_us"] > first["lease_expires_us"]
        assert later["lease_expires_us"] > wall_clock_us()


def test_a_run_of_this_process_is_live_to_a_reader_in_this_process(store: TableStore) -> None:
    from engine.restore.lease import holder_alive

    with journaled(store.catalog, "gc") as run:
        with store.catalog.snapshot() as tx:
            row = run_row(tx, run.run_id)
        assert row is not None and holder_alive(row["lease_holder"]) is True
    assert holder_alive(row["lease_holder"]) is False
