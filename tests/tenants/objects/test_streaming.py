"""Streamed objects: writes in pieces, checked reads, one content hash for the same rows.

Real stores (a ``file://`` directory and the moto HTTP server). The suite runs
with tiny row groups and batches (conftest), so every object here spans many.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from engine.executors.task import run_task
from engine.pipeline import RewriteTask
from tenants.errors import CorruptObject
from tenants.objects import reader as object_reader
from tenants.objects.io import read_object, record_of, write_object
from tenants.objects.reader import object_row_hash, open_object
from tenants.objects.record import ObjectRecord, object_key, sort_by_key_and_ts
from tenants.objects.row_hash import HASH_ROWS, RowHasher, rows_hash
from tenants.objects.writer import ObjectWriter
from tenants.objectstore import ObjectStore, open_object_store
from tenants.objectstore import s3 as s3_module
from tenants.objectstore.embedded import EmbeddedS3
from tenants.schema import TS
from tenants.tenancy import new_id


def versions(n: int, *, seed: int = 0, text: int = 8) -> pa.Table:
    """``n`` row versions in (id, __ts) order: two or three versions per id, some nulls."""
    rng = random.Random(seed)
    ids: list[int] = []
    stamps: list[int] = []
    key = 0
    while len(ids) < n:
        for ts in sorted(rng.sample(range(1, 100), rng.randint(1, 3))):
            ids.append(key)
            stamps.append(ts)
        key += 1
    ids, stamps = ids[:n], stamps[:n]
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "v": [None if rng.random() < 0.1 else "x" * rng.randint(0, text) for _ in ids],
            "f": [None if rng.random() < 0.1 else rng.random() for _ in ids],
            TS: pa.array(stamps, pa.int64()),
        }
    )


def put(
    store: ObjectStore,
    rows: pa.Table,
    *,
    tenant: str = "t",
    table: str = "tbl",
    kind: str = "data",
    created_ts: int = 0,
) -> ObjectRecord:
    """``rows`` stored as one object (sorted on the way in, as write_object does)."""
    return write_object(
        store, rows, tenant_id=tenant, table_id=table, kind=kind,  # type: ignore[arg-type]
        fingerprint="fp", primary_key=["id"], created_ts=created_ts,
    )  # fmt: skip


def rechunk(table: pa.Table, seed: int) -> list[pa.RecordBatch]:
    """The same rows cut at random places."""
    rng = random.Random(seed)
    batches, start = [], 0
    while start < table.num_rows:
        size = rng.randint(1, max(1, table.num_rows // 3))
        batches.extend(table.slice(start, size).to_batches())
        start += size
    return batches


# --- the content hash ------------------------------------------------------------------------


def test_row_hash_depends_on_rows_not_on_their_chunking() -> None:
    table = versions(HASH_ROWS * 2 + 123)  # several canonical runs, a short last one
    expected = rows_hash(table)
    for seed in range(3):
        assert rows_hash(rechunk(table, seed), table.schema) == expected
    # Nullability and metadata are not part of the rows.
    relaxed = table.cast(pa.schema([pa.field(f.name, f.type, True) for f in table.schema]))
    assert rows_hash(relaxed.replace_schema_metadata({"a": "b"})) == expected
    # Any change of a value, of the order or of a type changes it.
    assert rows_hash(table.slice(1)) != expected
    assert rows_hash(table.take(list(range(table.num_rows))[::-1])) != expected
    changed = table.set_column(1, "v", pc.if_else(pc.equal(table["id"], 7), "changed", table["v"]))
    assert rows_hash(changed) != expected
    assert rows_hash(table.cast(table.schema.set(2, pa.field("f", pa.float32())))) != expected


def test_an_empty_hash_names_the_columns() -> None:
    assert RowHasher(pa.schema([("a", pa.int64())])).hexdigest() != (
        RowHasher(pa.schema([("b", pa.int64())])).hexdigest()
    )


# --- streamed writes -------------------------------------------------------------------------


def test_a_streamed_object_spans_row_groups_and_is_described_as_it_passed(
    object_store: ObjectStore,
) -> None:
    rows = versions(500)
    key = object_key("t", "tbl", "data", "streamed")
    with ObjectWriter(object_store, key, rows.schema, ["id"], hash_rows=True) as writer:
        for batch in rechunk(rows, 1):
            writer.write(batch)
        written = writer.finish()
    data = object_store.get(key)
    assert written.bytes == len(data)
    assert written.checksum == hashlib.sha256(data).hexdigest()
    assert written.rows == 500
    assert (written.min_ts, written.max_ts) == (
        pc.min(rows[TS]).as_py(),
        pc.max(rows[TS]).as_py(),
    )
    assert (written.min_pk, written.max_pk) == ("[0]", f"[{rows['id'][-1].as_py()}]")
    assert written.row_hash == rows_hash(rows)
    metadata = pq.ParquetFile(pa.BufferReader(data)).metadata
    assert metadata.num_row_groups > 5  # 40 rows a group in the suite
    assert {metadata.row_group(i).num_rows for i in range(metadata.num_row_groups - 1)} == {40}

    record = record_of(written, "streamed", "data", "fp", 0)
    assert read_object(object_store, record).equals(rows)
    assert object_row_hash(object_store, record) == written.row_hash


def test_a_failed_streamed_write_leaves_nothing(object_store: ObjectStore) -> None:
    rows = versions(200)
    key = object_key("t", "tbl", "data", "failed")
    with pytest.raises(RuntimeError, match="boom"):
        with ObjectWriter(object_store, key, rows.schema, ["id"]) as writer:
            writer.write(rows)
            raise RuntimeError("boom")
    assert list(object_store.list("t/")) == [] and list(object_store.list("tenants/")) == []
    assert list(object_store.partial_writes("tenants/")) == []


def test_rows_out_of_order_are_refused_and_nothing_is_published(object_store: ObjectStore) -> None:
    rows = versions(100)
    shuffled = rows.take(list(range(50, 100)) + list(range(50)))
    key = object_key("t", "tbl", "data", "unsorted")
    with pytest.raises(AssertionError, match="order"):
        with ObjectWriter(object_store, key, rows.schema, ["id"]) as writer:
            for batch in shuffled.to_batches(max_chunksize=50):
                writer.write(batch)
    assert list(object_store.list("tenants/")) == []


def test_a_large_s3_object_goes_up_in_parts_and_an_abort_removes_the_upload(
    s3_server: EmbeddedS3, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(s3_module, "PART_BYTES", 5 * 1024 * 1024)  # S3's smallest part
    store = open_object_store(f"s3://{bucket}/warehouse", s3_server.settings)
    noise = pa.table({"b": [random.randbytes(1 << 20) for _ in range(12)]})  # ~12 MiB
    output = store.open_output("big/one")
    for value in noise["b"].to_pylist():
        output.write(value)
    assert [w.kind for w in store.partial_writes("big/")] == ["multipart"]
    assert list(store.list("big/")) == []  # invisible until committed
    output.abort()
    assert list(store.partial_writes("big/")) == [] and list(store.list("big/")) == []

    key = object_key("t", "tbl", "data", "parts")
    schema = pa.schema([("id", pa.int64()), ("b", pa.binary()), (TS, pa.int64())])
    rows = pa.table({"id": range(12), "b": noise["b"], TS: [1] * 12}, schema=schema)
    with ObjectWriter(store, key, schema, ["id"]) as writer:
        writer.write(rows)
        written = writer.finish()
    assert written.bytes > 10 * 1024 * 1024
    assert store.head(key).size == written.bytes
    assert list(store.partial_writes("tenants/")) == []
    assert read_object(store, record_of(written, "parts", "data", "fp", 0)).equals(rows)


# --- checked reads ---------------------------------------------------------------------------


@pytest.mark.parametrize("in_memory", [True, False], ids=["in-memory", "spooled"])
def test_a_damaged_object_fails_its_checksum_by_name(
    object_store: ObjectStore, in_memory: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(object_reader, "IN_MEMORY_BYTES", 1 << 30 if in_memory else 0)
    spool = tmp_path / "spool"
    spool.mkdir()
    monkeypatch.setenv("REWIND_SPOOL_DIR", str(spool))
    rows = versions(300)
    record = put(object_store, rows)
    data = bytearray(object_store.get(record.key))
    data[len(data) // 2] ^= 0xFF
    object_store.put(record.key, bytes(data))
    with pytest.raises(CorruptObject, match=record.key):
        with open_object(object_store, record) as reader:
            list(reader.batches())
    assert list(spool.iterdir()) == []  # the spool file went with the failure


# --- one hash whichever path wrote the rows --------------------------------------------------


def test_the_same_rows_hash_the_same_whichever_path_wrote_them(object_store: ObjectStore) -> None:
    rows = versions(700, seed=3)
    cut = 50
    kept = rows.filter(pc.less_equal(rows[TS], cut))
    # An object as a compaction or backup writes it (a table, sorted on the way in) ...
    whole = put(object_store, rows.take(list(range(rows.num_rows))[::-1]))
    # ... the rewrite of it at the cut, streamed ...
    task = RewriteTask("task", "job", whole, ("id",), cut, "t2", "tbl2")
    result = run_task(object_store, task)
    # ... and the kept rows written whole by another writer.
    direct = put(object_store, kept, tenant="t3", table="tbl3")
    expected = rows_hash(sort_by_key_and_ts(kept, ["id"]))
    assert result.content_hash == expected
    assert object_row_hash(object_store, result.output) == expected
    assert object_row_hash(object_store, direct) == expected
    assert result.output.rows == kept.num_rows
    assert read_object(object_store, result.output).equals(kept)


def test_a_commit_objects_rows_inherit_their_ts_batch_by_batch(object_store: ObjectStore) -> None:
    from tenants.objects.io import stamp, write_commit_object

    rows = pa.table({"id": pa.array(range(90), pa.int64()), "v": [str(i) for i in range(90)]})
    record = stamp(
        write_commit_object(
            object_store,
            rows,
            tenant_id="t",
            table_id="tbl",
            kind="data",
            fingerprint="fp",
            primary_key=["id"],
            object_id=new_id(),
        ),
        77,
    )
    with open_object(object_store, record) as reader:
        batches = list(reader.batches())
        assert len(batches) > 3
        assert reader.schema.names == ["id", "v", TS]
        assert {b.column(TS).to_pylist().count(77) for b in batches} == {
            b.num_rows for b in batches
        }
        ids = list(reader.batches(["id"], row_groups=[1]))
        assert pa.Table.from_batches(ids)["id"].to_pylist() == list(range(40, 80))


def test_an_object_record_roundtrips_through_a_streamed_write(object_store: ObjectStore) -> None:
    rows = versions(120)
    record = put(object_store, rows, kind="tomb", created_ts=5)
    assert isinstance(record, ObjectRecord) and record.sorted and record.kind == "tomb"
    assert record.bytes == object_store.head(record.key).size


# --- streamed loads --------------------------------------------------------------------------


@pytest.fixture
def table_store(new_catalog_uri, tmp_path: Path):  # type: ignore[no-untyped-def]
    from tenants.schema import Column, TableSchema
    from tenants.store import TableStore

    store = TableStore.open(new_catalog_uri(), f"file://{tmp_path / 'warehouse'}")
    store.create_tenant("acme")
    schema = TableSchema((Column("id", "int64", nullable=False), Column("v", "string")), ("id",))
    store.create_table("acme", "db.t", schema)
    return store


def test_a_load_in_chunks_is_one_commit_of_several_objects(table_store) -> None:  # type: ignore[no-untyped-def]
    from tenants.loads import load

    ids = list(range(1000))
    random.Random(2).shuffle(ids)
    batches = [
        pa.table(
            {"id": pa.array(ids[i : i + 70], pa.int64()), "v": [str(x) for x in ids[i : i + 70]]}
        )
        for i in range(0, 1000, 70)
    ]
    result = load(
        table_store.catalog, table_store.objects, "acme", "db", "t", iter(batches), chunk_bytes=3000
    )
    assert result.upserted == 1000 and len(result.object_ids) > 3
    rows = table_store.read("acme", "db.t")
    assert rows["id"].to_pylist() == list(range(1000))
    assert {o.min_ts for _, o in table_store.objects_of("acme")} == {result.ts}


def test_a_key_in_two_chunks_fails_the_load_and_leaves_nothing(table_store) -> None:  # type: ignore[no-untyped-def]
    from tenants.errors import KeyViolation
    from tenants.loads import load

    first = pa.table({"id": pa.array(range(100), pa.int64()), "v": ["a"] * 100})
    second = pa.table({"id": pa.array(range(99, 200), pa.int64()), "v": ["b"] * 101})
    with pytest.raises(KeyViolation, match=r"duplicate key.*\[99\]"):
        load(
            table_store.catalog,
            table_store.objects,
            "acme",
            "db",
            "t",
            iter([first, second]),
            chunk_bytes=100,
        )
    assert table_store.objects_of("acme") == []
    assert list(table_store.objects.list("tenants/")) == []
    assert table_store.read("acme", "db.t").num_rows == 0


# --- key ranges --------------------------------------------------------------------------


def test_a_key_range_reads_what_a_filter_of_everything_shows(table_store) -> None:  # type: ignore[no-untyped-def]
    from tenants.reads.key_range import KeyRange
    from tenants.reads.visible import stream_visible

    for start in range(0, 600, 150):  # four commits, key-disjoint objects
        ids = list(range(start, start + 150))
        table_store.write(
            "acme",
            "db.t",
            upserts=pa.table({"id": pa.array(ids, pa.int64()), "v": [f"v{i}" for i in ids]}),
        )
    table_store.write("acme", "db.t", deletes=pa.table({"id": pa.array([200, 201], pa.int64())}))
    everything = table_store.read("acme", "db.t")
    plan = table_store.plan_read("acme", "db.t")
    key_schema = plan.table.schema.key_arrow()
    for low, high in [("190", "260"), (None, "5"), ("590", None), ("1000", "2000"), ("300", "300")]:
        keys = KeyRange.parse(low, high, key_schema)
        got = pa.concat_tables(
            [everything.slice(0, 0), *stream_visible(table_store.objects, plan, keys=keys)]
        )
        lo = int(low) if low else -1
        hi = int(high) if high else 10**9
        expected = everything.filter(
            pc.and_(pc.greater_equal(everything["id"], lo), pc.less_equal(everything["id"], hi))
        )
        assert got.equals(expected), (low, high)
    # Objects and row groups outside the range are skipped before they are read.
    keys = KeyRange.parse("190", "260", key_schema)
    assert keys is not None
    held = [o for o in plan.objects if keys.may_hold(o, key_schema)]
    assert 2 <= len(held) < len(plan.objects)
    with open_object(table_store.objects, held[0]) as reader:
        groups = keys.row_groups(reader.parquet, "id")
        assert groups is not None and 0 < len(groups) < reader.num_row_groups


def test_a_multi_column_key_range_compares_as_tuples() -> None:
    from tenants.reads.key_range import KeyRange

    key_schema = pa.schema([("a", pa.int64()), ("b", pa.string())])
    rows = pa.table({"a": [1, 1, 2, 2, 3], "b": ["x", "z", "a", "m", "a"]})
    keys = KeyRange.parse('[1, "y"]', '[2, "m"]', key_schema)
    assert keys is not None
    assert rows.filter(keys.mask(rows, ["a", "b"])).to_pylist() == [
        {"a": 1, "b": "z"},
        {"a": 2, "b": "a"},
        {"a": 2, "b": "m"},
    ]
    prefix = KeyRange.parse("2", "2", key_schema)  # one column: every key starting with 2
    assert prefix is not None
    assert rows.filter(prefix.mask(rows, ["a", "b"]))["b"].to_pylist() == ["a", "m"]


def test_an_object_is_skipped_only_when_its_keys_all_lie_outside_the_range() -> None:
    """Bounds shorter than the key are prefixes: ``--to 3`` on (id, region) keeps an
    object that starts at (3, "eu"). Keys the catalog records as text that does
    not sort like them (decimals) never decide a skip (both were skipped before)."""
    from decimal import Decimal

    from tenants.objects.record import ObjectRecord
    from tenants.reads.key_range import KeyRange

    def record(first: str, last: str) -> ObjectRecord:
        return ObjectRecord("o", "k", "data", "f", 1, 1, 1, 1, first, last, True, "c", 1)

    pair = pa.schema([("id", pa.int64()), ("region", pa.string())])
    starts_at_3 = record('[3, "eu"]', '[4, "us"]')
    assert KeyRange(None, (3,)).may_hold(starts_at_3, pair)
    assert KeyRange((4,), None).may_hold(starts_at_3, pair)
    assert not KeyRange(None, (2,)).may_hold(starts_at_3, pair)
    assert not KeyRange((5,), None).may_hold(starts_at_3, pair)
    assert not KeyRange(None, (3, "ab")).may_hold(starts_at_3, pair)
    decimals = pa.schema([("price", pa.decimal128(6, 2))])
    assert KeyRange((Decimal("9.5"),), None).may_hold(record('["9.50"]', '["10.00"]'), decimals)


def test_a_key_that_is_not_of_the_key_type_is_refused() -> None:
    from tenants.errors import InvalidArgument
    from tenants.reads.key_range import KeyRange

    with pytest.raises(InvalidArgument, match="not a int64 for key column 'id'"):
        KeyRange.parse("abc", None, pa.schema([("id", pa.int64())]))
    with pytest.raises(InvalidArgument, match="up to 1 value"):
        KeyRange.parse("[1, 2]", None, pa.schema([("id", pa.int64())]))


# --- threads: read ahead, encode behind -------------------------------------------------------


class _FailingOutput:
    """A store output whose third write fails, as a full disk or a lost upload would."""

    def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
        self.inner, self.writes = inner, 0

    def write(self, data) -> None:  # type: ignore[no-untyped-def]
        self.writes += 1
        if self.writes == 3:
            raise OSError("disk full")
        self.inner.write(data)

    def commit(self) -> None:
        self.inner.commit()

    def abort(self) -> None:
        self.inner.abort()


def test_an_encoding_failure_on_the_encoder_thread_fails_the_write_and_leaves_nothing(
    object_store: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tenants.objects import writer as object_writer

    opened = object_store.open_output
    monkeypatch.setattr(object_store, "open_output", lambda key: _FailingOutput(opened(key)))
    monkeypatch.setattr(object_writer, "SINK_BYTES", 1)  # every page reaches the output
    rows = versions(2_000)  # 50 row groups of 40 rows (tests/conftest.py)
    key = object_key("t", "tbl", "data", "encoder-failure")
    with pytest.raises(OSError, match="disk full"):
        with ObjectWriter(object_store, key, rows.schema, ["id"]) as writer:
            for batch in rows.to_batches(max_chunksize=7):
                writer.write(batch)
            writer.finish()
    assert list(object_store.list("tenants/")) == []
    assert list(object_store.partial_writes("tenants/")) == []


def test_read_ahead_yields_everything_in_order_and_raises_where_the_stream_did() -> None:
    from tenants.objects.read_ahead import read_ahead, reading_ahead

    assert list(read_ahead(iter(range(100)))) == list(range(100))

    def failing():  # type: ignore[no-untyped-def]
        yield 1
        yield 2
        raise CorruptObject("damaged at the end")

    seen = []
    with pytest.raises(CorruptObject, match="damaged"):
        for item in read_ahead(failing()):
            seen.append(item)
    assert seen == [1, 2]

    closed = []

    def tracked():  # type: ignore[no-untyped-def]
        try:
            yield from range(10)
        finally:
            closed.append(True)

    with reading_ahead(tracked()) as items:
        assert next(items) == 0  # leave early: the stream is closed, its read finished
    assert closed == [True]


def test_read_ahead_inside_read_ahead_reads_directly_instead_of_waiting_on_itself() -> None:
    from tenants.objects.read_ahead import read_ahead

    def outer():  # type: ignore[no-untyped-def]
        # A stream that itself reads ahead, run on the read-ahead thread.
        yield from read_ahead(iter(range(5)))

    assert list(read_ahead(outer())) == list(range(5))
