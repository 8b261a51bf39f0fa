"""Every path that builds a tenant keeps its protection settings (issue 16).

A physical restore, a logical restore and a physical backup's restore each
end in one transaction that hands the name over and materialises the tenant
through the same functions (``engine.materialise``, ``tenants.handover``).
The backup restore used to drop the tenant's PITR window and snapshot
schedule; a logical restore did too.
"""

from __future__ import annotations

import uuid

import pytest

from engine.backup.api import create_backup, restore_backup
from engine.pipeline import Method
from engine.restore.job import restore_tenant
from tenants.objectstore.embedded import EmbeddedS3
from tenants.store import TableStore
from tests.helpers.backups import build_source

H = 3_600_000_000
WINDOW = 72 * H


def protect(store: TableStore, name: str) -> None:
    store.set_pitr(name, WINDOW)
    store.set_schedule(
        name,
        first_at_us=0,
        interval_us=6 * H,
        retain_age_us=48 * H,
        retain_count=5,
        name_prefix="six",
    )


def assert_protected_like_the_source(store: TableStore, name: str) -> None:
    pitr = store.pitr(name)
    assert pitr is not None and pitr.window_us == WINDOW
    schedule = store.schedule(name)
    assert schedule is not None
    assert (schedule.interval_us, schedule.retain_age_us, schedule.retain_count) == (
        6 * H,
        48 * H,
        5,
    )
    assert schedule.name_prefix == "six"


@pytest.fixture
def uri(s3_server: EmbeddedS3) -> str:
    bucket = f"rewind-backups-{uuid.uuid4().hex[:12]}"
    s3_server.create_bucket(bucket)
    return f"s3://{bucket}/backups"


def test_physical_backup_restore_keeps_pitr_window_schedule_and_snapshots(
    store: TableStore, uri: str
):
    build_source(store)
    protect(store, "acme")
    result = create_backup(store, "acme", "mon", uri, kind="physical")

    restore_backup(store, uri, result.backup_id, tenant="back")

    assert_protected_like_the_source(store, "back")
    assert [s.name for s in store.snapshots("back")] == ["sun", "mon"]


def test_backup_restore_with_replace_retires_the_holder_for_the_default_retention(
    store: TableStore, uri: str
):
    build_source(store)
    protect(store, "acme")
    old = store.tenant("acme")
    result = create_backup(store, "acme", "mon", uri, kind="physical")

    restore_backup(store, uri, result.backup_id, replace=True)

    retired = store.tenant(old.ref)
    assert retired.state == "dropped"
    assert_protected_like_the_source(store, "acme")


@pytest.mark.parametrize("method", ["physical", "logical"])
def test_restore_keeps_pitr_window_and_schedule(store: TableStore, method: Method):
    build_source(store)
    protect(store, "acme")

    outcome = restore_tenant(store, "acme", "mon", to="copy", method=method, executor="local")

    assert outcome.method == method
    assert_protected_like_the_source(store, "copy")
