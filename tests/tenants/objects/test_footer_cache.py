"""Parquet footers kept per process (tenants.objects.footer_cache): an object opened
again is read without fetching its footer, and the cache can never hand one
object's footer to another or hide damage."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tenants.errors import CorruptObject
from tenants.objects.footer_cache import FOOTERS, FooterCache
from tenants.objects.io import write_object
from tenants.objects.reader import open_object
from tenants.objects.record import ObjectRecord
from tenants.objectstore import ObjectStore
from tenants.schema import TS


@pytest.fixture(autouse=True)
def empty_cache() -> Iterator[None]:
    FOOTERS.clear()
    yield
    FOOTERS.clear()


def put(store: ObjectStore, n: int, *, offset: int = 0) -> ObjectRecord:
    rows = pa.table(
        {
            "id": pa.array(range(offset, offset + n), pa.int64()),
            "v": [f"value-{i}" for i in range(n)],
            TS: pa.array([5] * n, pa.int64()),
        }
    )
    return write_object(
        store, rows, tenant_id="t", table_id="tbl", kind="data",
        fingerprint="fp", primary_key=["id"], created_ts=0,
    )  # fmt: skip


class Reads:
    """The byte ranges read from objects the store opens (observed, not faked:
    each read still goes to the real store)."""

    def __init__(self, store: ObjectStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.ranges: list[tuple[int, int]] = []
        opened = store.open_input

        def open_input(key: str) -> Any:
            return pa.PythonFile(_Counting(opened(key), self.ranges), mode="r")

        monkeypatch.setattr(store, "open_input", open_input)


class _Counting:
    def __init__(self, source: Any, ranges: list[tuple[int, int]]) -> None:
        self._source, self._ranges = source, ranges

    def __getattr__(self, name: str) -> Any:
        return getattr(self._source, name)

    def read(self, nbytes: int = -1) -> bytes:
        start = self._source.tell()
        data = self._source.read(nbytes)
        self._ranges.append((start, len(data)))
        return bytes(data)

    def read_buffer(self, nbytes: int = -1) -> pa.Buffer:
        start = self._source.tell()
        data = self._source.read_buffer(nbytes)
        self._ranges.append((start, data.size))
        return data


def first_rows(store: ObjectStore, record: ObjectRecord) -> pa.RecordBatch:
    with open_object(store, record, verify=False) as reader:
        return next(reader.batches(batch_rows=10))


def test_an_object_opened_again_is_read_without_fetching_its_footer(
    object_store: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = put(object_store, 2_000)
    footer_start = record.bytes - 8 - pq.ParquetFile(pa.BufferReader(
        object_store.get(record.key))).metadata.serialized_size  # fmt: skip
    reads = Reads(object_store, monkeypatch)
    first = first_rows(object_store, record)
    assert any(start + size > footer_start for start, size in reads.ranges)
    reads.ranges.clear()
    again = first_rows(object_store, record)
    assert again.equals(first)
    assert reads.ranges, "the rows were read"
    assert all(start + size <= footer_start for start, size in reads.ranges), reads.ranges


def test_a_damaged_object_is_still_found_after_its_footer_was_kept(
    object_store: ObjectStore,
) -> None:
    record = put(object_store, 2_000)
    first_rows(object_store, record)
    assert len(FOOTERS) == 1
    data = bytearray(object_store.get(record.key))
    data[len(data) // 3] ^= 0xFF
    object_store.put(record.key, bytes(data))
    with pytest.raises(CorruptObject, match=record.key):
        with open_object(object_store, record) as reader:
            list(reader.batches())


def test_a_footer_is_kept_for_one_record_not_for_its_key(object_store: ObjectStore) -> None:
    """Another record naming the same key (other bytes, other checksum) never gets
    the footer read for the first: the cache's key is the whole record."""
    record = put(object_store, 2_000)
    first_rows(object_store, record)
    other = put(object_store, 50, offset=10_000)
    object_store.put(record.key, object_store.get(other.key))
    moved = dataclasses.replace(other, key=record.key)
    assert first_rows(object_store, moved).column("id")[0].as_py() == 10_000


def test_the_cache_keeps_the_most_recent_footers_and_no_large_one() -> None:
    footer = pq.ParquetFile(pa.BufferReader(_parquet(10))).metadata
    cache = FooterCache(entries=2, max_footer_bytes=footer.serialized_size)
    for name in ("a", "b"):
        cache.put(("w", name, 1, "c"), footer)
    assert cache.get(("w", "a", 1, "c")) is footer  # a is now the most recent
    cache.put(("w", "c", 1, "c"), footer)
    assert cache.get(("w", "b", 1, "c")) is None
    assert cache.get(("w", "a", 1, "c")) is footer
    wide = pq.ParquetFile(pa.BufferReader(_parquet(10, columns=50))).metadata
    cache.put(("w", "wide", 1, "c"), wide)
    assert cache.get(("w", "wide", 1, "c")) is None
    assert len(cache) == 2


def _parquet(rows: int, columns: int = 1) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({f"c{i}": list(range(rows)) for i in range(columns)}), sink)
    return sink.getvalue().to_pybytes()
