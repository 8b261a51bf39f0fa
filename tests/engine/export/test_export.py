"""``rewind export`` (engine.export): tables at a snapshot as plain Parquet or Iceberg.

Real parts only: the moto S3 server (the warehouse, and export destinations
in other buckets of it), ``file://`` destinations where an engine reads the
files, the suite's SQLite or PostgreSQL catalog (``store`` runs on both) and
an Iceberg SQL catalog on the same kind of database. Every export reads
back, through DuckDB, polars, pyarrow or pyiceberg's own scan, exactly the
rows ``store.read`` returns at that time.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.export import export_tables
from engine.export.iceberg_catalog import sql_uri
from engine.export.parquet import POINTER
from tenants.errors import (
    AlreadyExists,
    ConcurrentModification,
    InvalidArgument,
    MissingDependency,
    NotFound,
    StorageError,
    UnprotectedTime,
)
from tenants.objects.codec import arrow_buffer
from tenants.objectstore import ObjectStore, open_object_store
from tenants.objectstore.embedded import EmbeddedS3
from tenants.reads.wholly_visible import wholly_visible
from tenants.schema import Column, TableSchema
from tenants.store import TableStore
from tests.helpers.cli import as_json, ok

# Not the catalog's behaviour: on SQLite alone (conftest.py, one_catalog).
pytestmark = pytest.mark.one_catalog

ORDERS = TableSchema(
    (
        Column("id", "int64"),
        Column("region", "string"),
        Column("qty", "int32", nullable=False),
        Column("note", "string"),
    ),
    ("id", "region"),
)
PK = ("id", "region")


def orders(ids: range | list[int], qty: int = 1, region: str = "eu") -> pa.Table:
    return pa.Table.from_pylist(
        [{"id": i, "region": region, "qty": qty, "note": f"n{i}"} for i in ids],
        schema=ORDERS.arrow(),
    )


def keys(ids: list[int], region: str = "eu") -> pa.Table:
    return pa.Table.from_pylist(
        [{"id": i, "region": region} for i in ids], schema=ORDERS.key_arrow()
    )


@pytest.fixture
def iceberg_catalog(
    default_catalog_uri: str, tmp_path: Path, request: pytest.FixtureRequest
) -> str:
    """An empty Iceberg SQL catalog on the test's kind of database: a SQLite file,
    or a fresh schema of the run's PostgreSQL database."""
    if default_catalog_uri.startswith("postgresql"):
        make: Callable[[], str] = request.getfixturevalue("new_pg_catalog_uri")
        return make()
    return f"sqlite:///{tmp_path / 'iceberg.db'}"


@pytest.fixture
def lake(s3_server: EmbeddedS3) -> str:
    """Another bucket on the same S3 endpoint: where exports go."""
    name = f"rewind-lake-{uuid.uuid4().hex[:12]}"
    s3_server.create_bucket(name)
    return f"s3://{name}/lake"


def compacted(store: TableStore, tenant: str = "acme") -> None:
    """``shop.orders``: keys 0..299 in six commits, fully compacted into ~6
    disjoint objects; then, before snapshot ``mon``, an update of keys 5 and 6
    and a delete of key 7 (one object's range); then more writes and ``tue``."""
    store.create_tenant(tenant)
    store.create_table(tenant, "shop.orders", ORDERS)
    for start in range(0, 300, 50):
        store.write(tenant, "shop.orders", upserts=orders(range(start, start + 50)))
    store.compact(tenant, full=True, target_bytes=1_800)
    store.write(tenant, "shop.orders", upserts=orders([5, 6], qty=9))
    store.write(tenant, "shop.orders", deletes=keys([7]))
    store.create_snapshot(tenant, "mon")
    store.write(tenant, "shop.orders", upserts=orders([400, 401], qty=4, region="us"))
    store.write(tenant, "shop.orders", deletes=keys([100]))
    store.create_snapshot(tenant, "tue")


def rows_at(store: TableStore, snapshot: str, tenant: str = "acme") -> list[dict[str, Any]]:
    return store.read(tenant, "shop.orders", as_of=snapshot).to_pylist()


def listing(objects: ObjectStore) -> dict[str, int]:
    return {info.key: info.size for info in objects.list("")}


def by_key(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: tuple(r[k] for k in PK))


def open_iceberg(catalog: str, s3: EmbeddedS3) -> Any:
    from pyiceberg.catalog import load_catalog

    return load_catalog("default", uri=sql_uri(catalog), type="sql", **s3.settings.to_pyiceberg())


# --- parquet ----------------------------------------------------------------------------------


def test_a_parquet_export_reads_in_duckdb_polars_and_pyarrow_as_the_table_at_its_snapshot(
    store: TableStore, tmp_path: Path
) -> None:
    compacted(store)
    to = f"file://{tmp_path / 'out'}"
    result = export_tables(store, "acme", "shop.orders", "mon", to)
    expected = rows_at(store, "mon")
    assert result.rows == len(expected) and result.snapshot == "mon"
    pointer = json.loads((tmp_path / "out" / POINTER).read_text())
    folder = tmp_path / "out" / pointer["tables"]["shop.orders"]["path"]
    assert pointer["snapshot"] == "mon" and pointer["at_ts"] == result.at_ts
    files = sorted(folder.glob("*.parquet"))
    assert files and all(pq.read_schema(f).names == ORDERS.names for f in files)  # no __ts
    rows = duckdb.sql(f"SELECT * FROM read_parquet('{folder}/*.parquet') ORDER BY id, region")
    assert rows.fetchall() == [tuple(r.values()) for r in expected]
    assert pl.read_parquet(f"{folder}/*.parquet").to_dicts() == expected  # files in key order
    assert pq.read_table(folder).to_pylist() == expected
    manifest = json.loads((folder.parent.parent / "manifest.json").read_text())
    assert manifest["at_label"] == "mon" and manifest["tables"][0]["rows"] == len(expected)

    # A later snapshot replaces it; the previous export stays until the next one.
    again = export_tables(store, "acme", "shop.orders", "tue", to)
    pointer = json.loads((tmp_path / "out" / POINTER).read_text())
    assert pointer["previous"] == f"exports/{result.export_id}"
    folder = tmp_path / "out" / pointer["tables"]["shop.orders"]["path"]
    assert pq.read_table(folder).to_pylist() == rows_at(store, "tue") and again.snapshot == "tue"
    third = export_tables(store, "acme", "shop.orders", "mon", to)
    held = {key.split("/")[1] for key in listing(open_object_store(to)) if key != POINTER}
    assert held == {again.export_id, third.export_id}  # the first one's files are gone


def test_a_parquet_export_to_another_bucket_holds_every_table_of_the_tenant(
    store: TableStore, s3_server: EmbeddedS3, lake: str
) -> None:
    compacted(store)
    store.create_table("acme", "crm.people", TableSchema.of([("id", "int64")], ["id"]))
    store.create_snapshot("acme", "wed")
    result = export_tables(store, "acme", "*", "wed", lake)
    assert [t.table for t in result.tables] == ["crm.people", "shop.orders"]
    dest = open_object_store(lake, s3_server.settings)
    pointer = json.loads(dest.get(POINTER))
    for table, expected in (("shop.orders", rows_at(store, "wed")), ("crm.people", [])):
        path = pointer["tables"][table]["path"]
        parts = sorted(i.key for i in dest.list(f"{path}/"))
        read = [pq.read_table(pa.BufferReader(arrow_buffer(dest.get(k)))) for k in parts]
        assert pa.concat_tables(read).to_pylist() == expected, table


# --- iceberg ----------------------------------------------------------------------------------


def test_iceberg_exports_of_two_snapshots_are_two_iceberg_snapshots_with_time_travel(
    store: TableStore, s3_server: EmbeddedS3, lake: str, iceberg_catalog: str
) -> None:
    compacted(store)
    first = export_tables(
        store, "acme", "shop.orders", "mon", lake, format="iceberg", iceberg_catalog=iceberg_catalog
    )
    second = export_tables(
        store, "acme", "shop.orders", "tue", lake, format="iceberg", iceberg_catalog=iceberg_catalog
    )
    catalog = open_iceberg(iceberg_catalog, s3_server)
    try:
        table = catalog.load_table("shop.orders")
        assert table.metadata.location == f"{lake}/shop/orders"
        schema = table.schema()
        assert [f.name for f in schema.fields] == ORDERS.names
        assert sorted(schema.identifier_field_names()) == sorted(PK)
        assert [f.required for f in schema.fields] == [True, True, True, False]
        snapshots = table.snapshots()
        assert [s.snapshot_id for s in snapshots] == [
            first.tables[0].iceberg_snapshot_id,
            second.tables[0].iceberg_snapshot_id,
        ]
        for snapshot, name, result in zip(snapshots, ("mon", "tue"), (first, second), strict=True):
            summary = snapshot.summary.additional_properties
            assert summary["rewind.snapshot"] == name
            assert summary["rewind.ts"] == str(result.at_ts)
            assert summary["rewind.tenant"] == "acme" and summary["rewind.table"] == "shop.orders"
            rows = table.scan(snapshot_id=snapshot.snapshot_id).to_arrow().to_pylist()
            assert by_key(rows) == rows_at(store, name), name
        assert by_key(table.scan().to_arrow().to_pylist()) == rows_at(store, "tue")
    finally:
        catalog.close()
    # Exported again at the same snapshot: nothing copied anew, every object's file kept.
    third = export_tables(
        store, "acme", "shop.orders", "tue", lake, format="iceberg", iceberg_catalog=iceberg_catalog
    )
    assert third.tables[0].reused_files == second.tables[0].reused_files > 0
    assert third.copied_bytes == 0


def test_an_iceberg_export_reads_in_a_fresh_process_that_knows_only_pyiceberg(
    store: TableStore, s3_server: EmbeddedS3, lake: str, iceberg_catalog: str, tmp_path: Path
) -> None:
    compacted(store)
    export_tables(
        store, "acme", "shop.orders", "mon", lake, format="iceberg", iceberg_catalog=iceberg_catalog
    )
    script = (
        "import json, sys\n"
        "from pyiceberg.catalog import load_catalog\n"
        "catalog = load_catalog('default', **json.loads(sys.argv[1]))\n"
        "table = catalog.load_table('shop.orders')\n"
        "rows = table.scan().to_arrow().to_pylist()\n"
        "assert 'tenants' not in sys.modules and 'engine' not in sys.modules\n"
        "print(json.dumps({'rows': rows, 'summary': table.current_snapshot().summary.additional_properties,\n"
        "                  'keys': sorted(table.schema().identifier_field_names())}))\n"
    )
    properties = {"uri": sql_uri(iceberg_catalog), **s3_server.settings.to_pyiceberg()}
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps(properties)],
        cwd=tmp_path,  # not the checkout: Rewind cannot be imported there
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout)
    assert by_key(seen["rows"]) == rows_at(store, "mon")
    assert seen["summary"]["rewind.snapshot"] == "mon"
    assert seen["keys"] == sorted(PK)


def test_zero_copy_copies_the_wholly_visible_objects_inside_s3_and_rewrites_only_the_rest(
    store: TableStore, s3_server: EmbeddedS3, lake: str, iceberg_catalog: str
) -> None:
    """A compacted table: every object but the one whose keys an update and a
    delete touched before the snapshot is wholly visible, copied by CopyObject
    (byte for byte: its sha256 is the object's); the touched one and the
    commits on it are rewritten into one file. The table reads back exactly."""
    compacted(store)
    plan = store.plan_read("acme", "shop.orders", "mon")
    split = wholly_visible(store.objects, plan)
    rest = sorted(o.min_pk for o in split.rest.objects)
    # The compacted object holding keys 5 to 7, the update of 5 and 6, the delete of 7.
    assert rest == ['[0, "eu"]', '[5, "eu"]', '[7, "eu"]'], rest
    assert len(split.whole) >= 4 and {o.kind for o in split.whole} == {"data"}
    assert any(o.min_ts != o.max_ts for o in split.whole)  # merged commits: keys were read
    assert 0 < split.checked_bytes < sum(o.bytes for o in split.whole) / 2  # key columns only

    result = export_tables(
        store, "acme", "shop.orders", "mon", lake, format="iceberg", iceberg_catalog=iceberg_catalog
    )
    table = result.tables[0]
    assert (table.reused_files, table.rewritten_files) == (len(split.whole), 1)
    assert table.copied_bytes == split.whole_bytes
    assert table.written_bytes < split.whole_bytes / 2
    dest = open_object_store(table.location, s3_server.settings)
    for record in split.whole:
        copy = dest.get(f"data/{record.id}.parquet")
        assert hashlib.sha256(copy).hexdigest() == record.checksum
    catalog = open_iceberg(iceberg_catalog, s3_server)
    try:
        rows = catalog.load_table("shop.orders").scan().to_arrow()
        assert "__ts" not in rows.column_names
        assert by_key(rows.to_pylist()) == rows_at(store, "mon")
    finally:
        catalog.close()

    # Without zero copy every row is rewritten, and reads the same.
    again = export_tables(
        store,
        "acme",
        "shop.orders",
        "mon",
        lake,
        format="iceberg",
        iceberg_catalog=iceberg_catalog,
        namespace="full",
        zero_copy=False,
    )
    assert (again.tables[0].reused_files, again.copied_bytes) == (0, 0)
    assert again.tables[0].rows == result.tables[0].rows


def test_schema_changes_between_exports_follow_in_iceberg_and_old_snapshots_keep_theirs(
    store: TableStore, s3_server: EmbeddedS3, lake: str, iceberg_catalog: str
) -> None:
    compacted(store)
    export_tables(
        store, "acme", "shop.orders", "mon", lake, format="iceberg", iceberg_catalog=iceberg_catalog
    )
    store.alter_table("acme", "shop.orders", add=[Column("paid", "bool")], drop=["note"])
    store.write(
        "acme",
        "shop.orders",
        upserts=pa.Table.from_pylist(
            [{"id": 1, "region": "eu", "qty": 3, "paid": True}],
            schema=store.plan_read("acme", "shop.orders").table.schema.arrow(),
        ),
    )
    store.create_snapshot("acme", "wed")
    export_tables(
        store, "acme", "shop.orders", "wed", lake, format="iceberg", iceberg_catalog=iceberg_catalog
    )
    catalog = open_iceberg(iceberg_catalog, s3_server)
    try:
        table = catalog.load_table("shop.orders")
        assert [f.name for f in table.schema().fields] == ["id", "region", "qty", "paid"]
        old, new = table.snapshots()
        assert by_key(table.scan(snapshot_id=old.snapshot_id).to_arrow().to_pylist()) == rows_at(
            store, "mon"
        )
        assert by_key(table.scan().to_arrow().to_pylist()) == rows_at(store, "wed")
    finally:
        catalog.close()


# --- refused, and nothing left half-written ---------------------------------------------------


def test_each_bad_request_is_refused_with_the_destination_untouched(
    store: TableStore, s3_server: EmbeddedS3, lake: str, iceberg_catalog: str, tmp_path: Path
) -> None:
    compacted(store)
    dest = open_object_store(lake, s3_server.settings)
    export_tables(store, "acme", "shop.orders", "mon", lake)
    before = listing(dest)

    def refused(error: type[Exception], match: str, *args: Any, **kwargs: Any) -> None:
        with pytest.raises(error, match=match):
            export_tables(store, *args, **kwargs)
        assert listing(dest) == before

    refused(NotFound, "shop.nope", "acme", "shop.nope", "mon", lake)
    refused(
        NotFound,
        r"Z \(ts \d+\) \(did you mean 'shop.orders'\?\)",
        "acme",
        "shop.order",
        "mon",
        lake,
    )
    refused(NotFound, "no snapshot 'sun'", "acme", "shop.orders", "sun", lake)
    refused(NotFound, "tenant", "nobody", "shop.orders", "mon", lake)
    refused(UnprotectedTime, "not protected|recoverable", "acme", "shop.orders", 1_000_000, lake)
    refused(
        InvalidArgument, "unknown export format", "acme", "shop.orders", "mon", lake, format="csv"
    )
    refused(
        InvalidArgument, "needs its catalog", "acme", "shop.orders", "mon", lake, format="iceberg"
    )
    # Another tenant's export there: refused unless replace.
    store.create_tenant("zeta")
    store.create_table("zeta", "shop.orders", ORDERS)
    store.create_snapshot("zeta", "mon")
    refused(AlreadyExists, "of tenant 'acme'.*--replace", "zeta", "shop.orders", "mon", lake)
    # The export lacks a table the destination's has.
    store.create_table("acme", "crm.people", TableSchema.of([("id", "int64")], ["id"]))
    store.create_snapshot("acme", "wed")
    export_tables(store, "acme", "*", "wed", lake)
    before = listing(dest)
    refused(AlreadyExists, "crm.people.*does not have", "acme", "shop.orders", "wed", lake)
    # Not Rewind's: refused unless replace, and then left as it is.
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "theirs.csv").write_text("x\n1\n")
    with pytest.raises(AlreadyExists, match="theirs.csv and no Rewind export"):
        export_tables(store, "acme", "shop.orders", "mon", f"file://{foreign}")
    assert sorted(p.name for p in foreign.iterdir()) == ["theirs.csv"]
    export_tables(store, "acme", "shop.orders", "mon", f"file://{foreign}", replace=True)
    assert (foreign / "theirs.csv").read_text() == "x\n1\n" and (foreign / POINTER).exists()
    # Unwritable, or inside the warehouse: refused before any row is read.
    read: list[str] = []
    store.objects = _Watched(store.objects, read)  # type: ignore[assignment]
    with pytest.raises(StorageError, match="cannot write to the export destination s3://no-such"):
        export_tables(store, "acme", "shop.orders", "mon", "s3://no-such-bucket-x1/out")
    (tmp_path / "a-file").write_text("")
    with pytest.raises(StorageError, match="cannot write to the export destination file://"):
        export_tables(store, "acme", "shop.orders", "mon", f"file://{tmp_path / 'a-file' / 'x'}")
    warehouse = store.objects.warehouse.uri
    with pytest.raises(InvalidArgument, match="inside the warehouse"):
        export_tables(store, "acme", "shop.orders", "mon", f"{warehouse}/exports")
    with pytest.raises(StorageError, match="Iceberg table location s3://no-such-bucket-x1"):
        export_tables(
            store,
            "acme",
            "shop.orders",
            "mon",
            "s3://no-such-bucket-x1/lake",
            format="iceberg",
            iceberg_catalog=iceberg_catalog,
        )
    assert read == []


def test_an_iceberg_table_that_is_not_an_earlier_export_is_refused_unless_replace(
    store: TableStore, s3_server: EmbeddedS3, lake: str, iceberg_catalog: str
) -> None:
    compacted(store)
    catalog = open_iceberg(iceberg_catalog, s3_server)
    try:
        catalog.create_namespace("shop")
        theirs = catalog.create_table(
            "shop.orders",
            pa.schema([pa.field("id", pa.string()), pa.field("other", pa.float64())]),
            location=f"{lake}/theirs",
        )
        theirs.append(pa.table({"id": ["x"], "other": [1.5]}))
        with pytest.raises(AlreadyExists, match="was not written by Rewind.*--replace"):
            export_tables(
                store,
                "acme",
                "shop.orders",
                "mon",
                lake,
                format="iceberg",
                iceberg_catalog=iceberg_catalog,
            )
        table = catalog.load_table("shop.orders")
        assert len(table.snapshots()) == 1
        export_tables(
            store,
            "acme",
            "shop.orders",
            "mon",
            lake,
            format="iceberg",
            iceberg_catalog=iceberg_catalog,
            replace=True,
        )
        table = catalog.load_table("shop.orders")
        assert [f.name for f in table.schema().fields] == ORDERS.names
        assert by_key(table.scan().to_arrow().to_pylist()) == rows_at(store, "mon")
        before, after = table.snapshots()
        assert table.scan(snapshot_id=before.snapshot_id).to_arrow().to_pylist() == [
            {"id": "x", "other": 1.5}
        ]
        # Now it is an export of acme/shop.orders: another tenant's is refused.
        store.create_tenant("zeta")
        store.create_table("zeta", "shop.orders", ORDERS)
        store.create_snapshot("zeta", "mon")
        with pytest.raises(AlreadyExists, match="holds acme/shop.orders"):
            export_tables(
                store,
                "zeta",
                "shop.orders",
                "mon",
                lake,
                format="iceberg",
                iceberg_catalog=iceberg_catalog,
            )
        assert len(catalog.load_table("shop.orders").snapshots()) == 2
    finally:
        catalog.close()


class _Watched:
    """The real object store, recording every object whose bytes are read."""

    def __init__(self, inner: ObjectStore, read: list[str]) -> None:
        self._inner = inner
        self._read = read
        self.warehouse = inner.warehouse

    def open_input(self, key: str) -> Any:
        self._read.append(key)
        return self._inner.open_input(key)

    def get(self, key: str) -> bytes:
        self._read.append(key)
        return self._inner.get(key)

    def stream(self, key: str, chunk_bytes: int) -> Iterator[bytes]:
        self._read.append(key)
        return self._inner.stream(key, chunk_bytes)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _FailingDest:
    """A real destination whose ``after``-th write fails (a full disk, a lost
    connection), or that commits a rival change to the Iceberg table first."""

    def __init__(
        self, inner: ObjectStore, after: int, before_write: Callable[[], None] | None = None
    ) -> None:
        self._inner = inner
        self.warehouse = inner.warehouse
        self._left = after
        self._before_write = before_write

    def _tick(self) -> None:
        self._left -= 1
        if self._left == 0:
            if self._before_write is not None:
                self._before_write()
                return
            raise StorageError(f"cannot write {self.warehouse.uri}: injected failure")

    def open_output(self, key: str) -> Any:
        self._tick()
        return self._inner.open_output(key)

    def copy_from(self, source: ObjectStore, source_key: str, dest_key: str) -> bool:
        self._tick()
        return self._inner.copy_from(source, source_key, dest_key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_a_parquet_export_that_fails_midway_leaves_the_previous_export_as_it_was(
    store: TableStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import engine.export.api as api

    compacted(store)
    to = f"file://{tmp_path / 'out'}"
    export_tables(store, "acme", "shop.orders", "mon", to, target_bytes=500)
    before = listing(open_object_store(to))
    real = api.open_target
    monkeypatch.setattr(api, "open_target", lambda *a: _FailingDest(real(*a), after=2))
    with pytest.raises(StorageError, match="injected failure"):
        export_tables(store, "acme", "shop.orders", "tue", to, target_bytes=500)
    assert listing(open_object_store(to)) == before


def test_an_iceberg_export_that_fails_or_loses_a_race_leaves_the_table_and_its_folder_as_they_were(
    store: TableStore,
    s3_server: EmbeddedS3,
    lake: str,
    iceberg_catalog: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import engine.export.iceberg as iceberg

    compacted(store)
    export_tables(
        store, "acme", "shop.orders", "mon", lake, format="iceberg", iceberg_catalog=iceberg_catalog
    )
    dest = open_object_store(lake, s3_server.settings)
    store.write("acme", "shop.orders", upserts=orders(range(500, 520)))
    store.compact("acme", full=True, target_bytes=1_800)  # new objects: copies to make
    store.create_snapshot("acme", "wed")
    real = iceberg.open_target

    def rival() -> None:  # another writer commits a snapshot to the table first
        catalog = open_iceberg(iceberg_catalog, s3_server)
        try:
            table = catalog.load_table("shop.orders")
            table.overwrite(table.scan().to_arrow())
        finally:
            catalog.close()

    lost_race = (
        r"the Iceberg table shop\.orders changed while it was exported: .*; "
        r"nothing of this export was kept, export again"
    )
    for failing, error, message in (
        (None, StorageError, "injected failure"),
        (rival, ConcurrentModification, lost_race),
    ):
        monkeypatch.setattr(
            iceberg, "open_target", lambda *a, f=failing: _FailingDest(real(*a), 2, f)
        )
        with pytest.raises(error, match=message):
            export_tables(
                store,
                "acme",
                "shop.orders",
                "wed",
                lake,
                format="iceberg",
                iceberg_catalog=iceberg_catalog,
            )
        catalog = open_iceberg(iceberg_catalog, s3_server)
        try:
            table = catalog.load_table("shop.orders")
            assert all(s.summary.get("rewind.snapshot") != "wed" for s in table.snapshots())
            assert by_key(table.scan().to_arrow().to_pylist()) == rows_at(store, "mon")
            # Every data file and manifest in the folder belongs to a snapshot: the
            # failed export's were deleted (an unreferenced metadata.json may stay).
            files = {f"{lake}/{k}" for k in listing(dest) if k.endswith((".parquet", ".avro"))}
            assert files - referenced(table) == set()
        finally:
            catalog.close()


def referenced(table: Any) -> set[str]:
    """Every data file, manifest and manifest list some snapshot of ``table`` names."""
    found = set()
    for snapshot in table.snapshots():
        found.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(table.io):
            found.add(manifest.manifest_path)
            found |= {e.data_file.file_path for e in manifest.fetch_manifest_entry(table.io)}
    return found


# --- the command ------------------------------------------------------------------------------


def test_rewind_export_prints_a_table_or_json_and_refuses_bad_input_on_one_line(
    rewind: Callable[..., Any], uris: tuple[str, str], tmp_path: Path, iceberg_catalog: str
) -> None:
    from tests.helpers.cli import items_tenant

    items_tenant(rewind, tmp_path)
    out = tmp_path / "out"
    shown = ok(rewind("export", "acme", "shop.items", "--snapshot", "mon", "--to", f"file://{out}"))
    assert "acme at mon" in shown.stdout and "shop.items" in shown.stdout
    pointer = json.loads((out / POINTER).read_text())
    assert pq.read_table(out / pointer["tables"]["shop.items"]["path"]).to_pylist() == [
        {"id": 1, "v": "a"},
        {"id": 2, "v": "b"},
    ]
    result = as_json(
        rewind(
            "export", "acme", "--all", "--at", "now", "--to", f"file://{tmp_path / 'ice'}",
            "--format", "iceberg", "--iceberg-catalog", iceberg_catalog, "--json",
        )
    )  # fmt: skip
    assert result["format"] == "iceberg" and result["rows"] == 2 and result["snapshot"] is None
    assert result["tables"][0]["target"] == "shop.items" and "at" in result

    def one_line_error(*args: str, match: str) -> None:
        done = rewind(*args)
        assert done.exit_code == 1, done.output
        assert len(done.stderr.strip().splitlines()) == 1 and match in done.stderr, done.stderr
        failed = rewind("--json", *args)
        assert failed.exit_code == 1
        assert match in json.loads(failed.stdout)["error"]["message"]

    to = ("--to", f"file://{tmp_path / 'bad'}")
    one_line_error("export", "acme", "shop.nope", "--snapshot", "mon", *to, match="shop.nope")
    one_line_error("export", "acme", "shop.items", "--snapshot", "sun", *to, match="'sun'")
    one_line_error("export", "acme", "shop.items", "--at", "1000000", *to, match="1000000")
    one_line_error("export", "acme", "--snapshot", "mon", *to, match="exactly one of DB.TABLE")
    one_line_error("export", "acme", "shop.items", *to, match="exactly one of --snapshot")
    one_line_error(
        "export", "acme", "shop.items", "--snapshot", "mon", *to, "--format", "csv",
        match="unknown export format",
    )  # fmt: skip
    one_line_error(
        "export", "acme", "shop.items", "--snapshot", "mon", "--to", f"file://{out}", "--format",
        "iceberg", match="needs its catalog",
    )  # fmt: skip
    one_line_error(
        "export", "acme", "shop.items", "--snapshot", "mon", "--to", f"{uris[1]}/x",
        match="inside the warehouse",
    )  # fmt: skip
    assert not (tmp_path / "bad").exists()


def test_an_iceberg_export_without_pyiceberg_names_the_extra_before_anything_is_written(
    store: TableStore, lake: str, s3_server: EmbeddedS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    compacted(store)
    for module in ("pyiceberg", "pyiceberg.catalog"):
        monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    with pytest.raises(MissingDependency, match=r"pip install 'rewind-tables\[iceberg\]'"):
        export_tables(
            store, "acme", "shop.orders", "mon", lake, format="iceberg", iceberg_catalog="sqlite://"
        )
    assert listing(open_object_store(lake, s3_server.settings)) == {}


def test_types_iceberg_stores_otherwise_are_rewritten_and_nanoseconds_refused(
    store: TableStore, s3_server: EmbeddedS3, lake: str, iceberg_catalog: str
) -> None:
    """int16 becomes int and millisecond times µs: such a table is rewritten whole
    (its objects' Parquet is not what Iceberg reads) and reads back the same
    values; nanoseconds would be cut, so they are refused before anything is written."""
    odd = TableSchema.of([("id", "int16"), ("at", "timestamp[ms, tz=UTC]")], ["id"])
    store.create_tenant("acme")
    store.create_table("acme", "shop.odd", odd)
    rows = pa.Table.from_pylist(
        [{"id": 1, "at": 1_700_000_000_123}, {"id": 2, "at": None}], schema=odd.arrow()
    )
    store.write("acme", "shop.odd", upserts=rows)
    store.create_table("acme", "shop.fine", TableSchema.of([("t", "timestamp[ns]")], ["t"]))
    store.create_snapshot("acme", "mon")
    result = export_tables(
        store, "acme", "shop.odd", "mon", lake, format="iceberg", iceberg_catalog=iceberg_catalog
    )
    assert (result.tables[0].reused_files, result.tables[0].rewritten_files) == (0, 1)
    catalog = open_iceberg(iceberg_catalog, s3_server)
    try:
        read = catalog.load_table("shop.odd").scan().to_arrow()
        assert [str(f.type) for f in read.schema] == ["int32", "timestamp[us, tz=UTC]"]
        assert (
            read.cast(
                pa.schema([pa.field("id", pa.int16()), pa.field("at", pa.timestamp("ms", "UTC"))])
            ).to_pylist()
            == rows.to_pylist()
        )
    finally:
        catalog.close()
    dest = open_object_store(lake, s3_server.settings)
    before = listing(dest)
    with pytest.raises(InvalidArgument, match=r"column 't'.*timestamp\[ns\].*--format parquet"):
        export_tables(
            store,
            "acme",
            "shop.fine",
            "mon",
            lake,
            format="iceberg",
            iceberg_catalog=iceberg_catalog,
        )
    assert listing(dest) == before
