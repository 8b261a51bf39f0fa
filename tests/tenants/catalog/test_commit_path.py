"""The commit path on both catalog backends: bytes move before the transaction.

A commit uploads its objects with no catalog transaction open, then installs
them in one short transaction with compare-and-set checks (tenants/writes.py).
These tests pause a commit inside its upload (a hook on the real S3 store's
``put``) and act from a second ``TableStore`` (its own connection) meanwhile:
another tenant's commands must not wait, and a change to the tenant or table
the commit relied on must make it start over, never land on stale ground.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.restore.job import restore_tenant
from tenants.errors import ConcurrentModification, CorruptObject, SchemaMismatch
from tenants.objects.io import read_object, write_commit_object
from tenants.objects.record import ObjectRecord
from tenants.objectstore.embedded import EmbeddedS3
from tenants.schema import TS, Column, TableSchema
from tenants.store import TableStore
from tenants.tenancy import new_id
from tenants.writes import WRITE_ATTEMPTS

SCHEMA = TableSchema((Column("id", "int64", False), Column("v", "string")), ("id",))


def rows(ids: range, value: str = "x") -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "v": [value] * len(ids)})


@pytest.fixture
def two_stores(
    new_catalog_uri: Callable[[], str], s3_server: EmbeddedS3, bucket: str
) -> Iterator[tuple[TableStore, TableStore]]:
    """Two handles on one catalog and warehouse, as two hosts would have."""
    uri = new_catalog_uri()
    warehouse = f"s3://{bucket}/wh"
    first = TableStore.open(uri, warehouse, s3=s3_server.settings)
    second = TableStore.open(uri, warehouse, s3=s3_server.settings)
    yield first, second
    first.close()
    second.close()


class _Landed:
    """A streamed write whose ``after(key)`` runs once its bytes have landed."""

    def __init__(self, inner: Any, key: str, after: Callable[[str], None]) -> None:
        self.inner, self.key, self.after = inner, key, after

    def commit(self) -> None:
        self.inner.commit()
        self.after(self.key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def after_uploads(store: TableStore, after: Callable[[str], None]) -> None:
    """Call ``after(key)`` inside every object upload of ``store``, once the bytes land."""
    open_output = store.objects.open_output

    def hooked(key: str) -> Any:
        return _Landed(open_output(key), key, after)

    store.objects.open_output = hooked  # type: ignore[method-assign]


def during_upload(store: TableStore, action: Callable[[], Any], times: int = 1) -> list[Any]:
    """Run ``action`` inside the next ``times`` uploads of ``store`` (after the bytes land)."""
    results: list[Any] = []

    def hook(key: str) -> None:
        if key.startswith("tenants/") and len(results) < times:
            results.append(action())

    after_uploads(store, hook)
    return results


def test_other_tenant_commands_run_while_a_commit_uploads(
    two_stores: tuple[TableStore, TableStore],
) -> None:
    writer, other = two_stores
    for name in ("a", "b"):
        writer.create_tenant(name)
        writer.create_table(name, "db.t", SCHEMA)
    other.write("b", "db.t", upserts=rows(range(3)))
    release = threading.Event()
    uploading = threading.Event()

    def slow(key: str) -> None:
        uploading.set()
        assert release.wait(60), "the test never released the upload"

    after_uploads(writer, slow)
    load = threading.Thread(target=lambda: writer.write("a", "db.t", upserts=rows(range(100))))
    load.start()
    try:
        assert uploading.wait(30)
        started = time.monotonic()
        # Before the change the upload ran inside the write transaction, so
        # these waited for it (60 s, then CatalogBusy).
        snap = other.create_snapshot("b", "while-a-uploads")
        other.write("b", "db.t", upserts=rows(range(3, 6)))
        read = other.read("b", "db.t")
        assert time.monotonic() - started < 20
        assert read.num_rows == 6
    finally:
        release.set()
        load.join(60)
    assert writer.read("a", "db.t").num_rows == 100
    assert other.read("b", "db.t", as_of=snap.name).num_rows == 3


def test_a_commit_that_lost_its_table_starts_over_on_the_new_schema(
    two_stores: tuple[TableStore, TableStore],
) -> None:
    writer, other = two_stores
    writer.create_tenant("a")
    writer.create_table("a", "db.t", SCHEMA)
    during_upload(writer, lambda: other.alter_table("a", "db.t", drop=["v"]))
    with pytest.raises(SchemaMismatch, match="unexpected columns \\['v'\\]"):
        writer.write("a", "db.t", upserts=rows(range(5)))
    assert writer.read("a", "db.t").num_rows == 0
    assert writer.objects_of("a") == [], "the first attempt's upload is deleted"
    assert [i.key for i in writer.objects.list("tenants/")] == []


def test_a_commit_to_a_tenant_restored_meanwhile_lands_in_the_new_tenant(
    two_stores: tuple[TableStore, TableStore],
) -> None:
    writer, other = two_stores
    writer.create_tenant("a")
    writer.create_table("a", "db.t", SCHEMA)
    writer.write("a", "db.t", upserts=rows(range(3)))
    old = writer.tenant("a")
    snap = writer.create_snapshot("a", "s")
    during_upload(writer, lambda: restore_tenant(other, "a", snap.name, executor="local"))
    result = writer.write("a", "db.t", upserts=rows(range(10, 12)))
    new = writer.tenant("a")
    assert new.id != old.id
    records = {o.id: o for _, o in writer.objects_of("a")}
    assert records[result.object_ids[0]].key.startswith(f"tenants/{new.id}/")
    assert writer.read("a", "db.t").num_rows == 5
    assert writer.read(old.ref, "db.t").num_rows == 3


def test_only_present_delete_reads_again_when_the_tenant_changed(
    two_stores: tuple[TableStore, TableStore],
) -> None:
    writer, other = two_stores
    writer.create_tenant("a")
    writer.create_table("a", "db.t", SCHEMA)
    writer.write("a", "db.t", upserts=rows(range(4)))
    # While the delete of keys 0..5 uploads, key 4 appears and key 0 goes:
    # counted against the stale read, the delete would report 4 keys deleted.
    during_upload(
        writer,
        lambda: other.write(
            "a", "db.t", upserts=rows(range(4, 5)), deletes=rows(range(1)).select(["id"])
        ),
    )
    keys = pa.table({"id": pa.array(range(6), pa.int64())})
    result = writer.write("a", "db.t", deletes=keys, only_present=True)
    assert result.deleted == 4  # keys 1, 2, 3 and 4, read again after the conflict
    assert writer.read("a", "db.t").num_rows == 0


def test_a_commit_that_keeps_losing_gives_up_with_a_clear_error(
    two_stores: tuple[TableStore, TableStore],
) -> None:
    writer, other = two_stores
    writer.create_tenant("a")
    writer.create_table("a", "db.t", SCHEMA)
    writer.write("a", "db.t", upserts=rows(range(4)))
    counter = iter(range(100, 200))
    during_upload(
        writer,
        lambda: other.write("a", "db.t", upserts=rows(range(next(counter), 200))),
        times=WRITE_ATTEMPTS,
    )
    keys = pa.table({"id": pa.array(range(2), pa.int64())})
    with pytest.raises(ConcurrentModification, match="tenant a@"):
        writer.write("a", "db.t", deletes=keys, only_present=True)
    assert writer.read("a", "db.t").num_rows > 4  # the other writer's rows, none deleted
    registered = {o.key for _, o in writer.objects_of("a")}
    assert {i.key for i in writer.objects.list("tenants/")} == registered


def test_commit_objects_inherit_their_commit_ts(store: TableStore) -> None:
    store.create_tenant("a")
    store.create_table("a", "db.t", SCHEMA)
    first = store.write("a", "db.t", upserts=rows(range(3)))
    store.create_snapshot("a", "first")
    second = store.write("a", "db.t", upserts=rows(range(2), "y"))
    records = {o.id: o for _, o in store.objects_of("a")}
    for result in (first, second):
        record = records[result.object_ids[0]]
        assert (record.min_ts, record.max_ts, record.created_ts) == (result.ts,) * 3
        raw = store.objects.get(record.key)
        assert pq.read_schema(pa.BufferReader(raw)).names == ["id", "v"]  # no ts column
        events = read_object(store.objects, record)
        assert events.column(TS).to_pylist() == [result.ts] * events.num_rows
        assert len(raw) == record.bytes
    assert store.read("a", "db.t", as_of="first").column("v").to_pylist() == ["x"] * 3


def test_a_ts_less_object_recorded_with_a_ts_range_is_corrupt(store: TableStore) -> None:
    tenant = store.create_tenant("a")
    table = store.create_table("a", "db.t", SCHEMA)
    record = write_commit_object(
        store.objects,
        rows(range(3)),
        tenant_id=tenant.id,
        table_id=table.id,
        kind="data",
        fingerprint=SCHEMA.fingerprint,
        primary_key=["id"],
        object_id=new_id(),
    )
    bad = ObjectRecord(**{**record.to_json(), "min_ts": 5, "max_ts": 9})
    with pytest.raises(CorruptObject, match="only one commit's rows may inherit"):
        read_object(store.objects, bad)


def test_uniqueness_is_the_databases_to_enforce(two_stores: tuple[TableStore, TableStore]) -> None:
    """Inserts that skip the friendly check still meet the constraint: the same
    domain error, nothing written (as two writers racing past a check would)."""
    from tenants.catalog.snapshots import insert_snapshot
    from tenants.catalog.tables import insert_database, insert_table
    from tenants.catalog.tenants import insert_tenant
    from tenants.errors import AlreadyExists

    store, _ = two_stores
    tenant = store.create_tenant("a")
    table = store.create_table("a", "db.t", SCHEMA)
    store.create_snapshot("a", "s")
    before = (store.tenants(), store.tables("a"), store.snapshots("a"))
    with pytest.raises(AlreadyExists, match="active tenant named 'a'"):
        with store.catalog.transaction() as tx:
            insert_tenant(tx, "f" * 32, "a", tx.commit_ts())
    with pytest.raises(AlreadyExists, match="snapshot named 's'"):
        with store.catalog.transaction() as tx:
            insert_snapshot(tx, tenant.id, "s", 1, "manual", tx.commit_ts(), None)
    with pytest.raises(AlreadyExists, match="database named 'db'"):
        with store.catalog.transaction() as tx:
            insert_database(tx, "e" * 32, tenant.id, "db", tx.commit_ts())
    with pytest.raises(AlreadyExists, match="table named 't'"):
        with store.catalog.transaction() as tx:
            insert_table(tx, "d" * 32, tenant.id, table.database_id, "t", tx.commit_ts())
    assert (store.tenants(), store.tables("a"), store.snapshots("a")) == before
