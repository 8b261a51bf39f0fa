"""Writing one object as its rows stream in, in memory bounded by a row group.

Rows arrive in (pk, ts) order, as a filter of a stored object or a merge of
several yields them; they are buffered up to one row group, encoded, and the
Parquet bytes go straight to the object store's output (a temp file, a multipart
upload), hashed on the way for the object's checksum. Row count, ts range and
key range are gathered as batches pass, and, when asked, the rows' content
hash (tenants.objects.row_hash), so nothing reads the object back to describe it.

Encoding (Parquet pages, zstd) runs on a thread of its own, behind the
caller: while row groups are encoded and written, the caller decodes, filters
or merges the next rows. pyarrow releases the GIL while it encodes, so on two
cores a rewrite or a merge costs about what its slower half costs, not the sum
of both. The row groups in flight are slices of rows the caller has already
made; the caller waits when more than ``flight_bytes`` of them are queued
(one row group, or more for a merge round, which hands over several at
once), which bounds the memory they hold.
An object of one row group is encoded on the caller's thread (no thread).

Nothing sorts here: the order is the caller's promise. With
``REWIND_CHECK_ORDER=1`` (the test suite sets it) every batch is checked,
and a violation is a bug, raised as ``AssertionError``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tenants.objects.row_hash import RowHasher
from tenants.objectstore import ObjectOutput, ObjectStore
from tenants.schema import TS

ROW_GROUP_ROWS = int(os.environ.get("REWIND_ROW_GROUP_ROWS", 128 * 1024))
ROW_GROUP_BYTES = 16 * 1024 * 1024
"""A row group closes at whichever comes first: so many rows, or so many bytes of
Arrow data. The writer holds one row group, so the bytes bound its memory
whatever the width of the rows."""

FLIGHT_BYTES = ROW_GROUP_BYTES
"""Row group bytes queued for the encoder (the one encoding included) before
the caller waits: double buffering for a caller that writes batch by batch. A
merge, which hands over a round's rows at once, queues more (``flight_bytes``)."""
SINK_BYTES = 1024 * 1024  # Parquet bytes gathered before they go to the object store's output

CHECK_ORDER = os.environ.get("REWIND_CHECK_ORDER", "") == "1"

PAGE_BYTES = 256 * 1024
"""Data pages and dictionary pages close at this many bytes (pyarrow's default
is 1 MiB for each). A reader holds one decompressed data page per column, and
the column's dictionary page while it reads a column chunk: a merge reading
forty objects of five columns at once held 7.3 MiB per object with 1 MiB
pages, 1.7 MiB with these. The objects also came out 10% smaller and read 20%
faster (a high-cardinality column gives up on its dictionary sooner), so
nothing is paid for it (docs/decisions.md)."""


def parquet_options() -> dict[str, object]:
    """How every object and dump part is encoded."""
    return {
        "compression": "zstd",
        "write_page_checksum": True,
        "data_page_size": PAGE_BYTES,
        "dictionary_pagesize_limit": PAGE_BYTES,
    }


class HashingSink:
    """The file object ParquetWriter writes to: counts and hashes the bytes and
    passes them to the object store's output. (ParquetWriter writes on the calling
    thread and asks ``tell`` for offsets; it never seeks.)"""

    def __init__(self, output: ObjectOutput) -> None:
        self.output = output
        self.sha = hashlib.sha256()
        self.size = 0
        self.closed = False
        self.discard = False  # an aborted write: what is left to flush goes nowhere

    def write(self, data: bytes | memoryview) -> int:
        view = memoryview(data)
        if self.discard:
            return view.nbytes
        self.sha.update(view)
        self.output.write(view)
        self.size += view.nbytes
        return view.nbytes

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        pass

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True


@dataclass(frozen=True)
class WrittenObject:
    """What a finished write knows about its object."""

    key: str
    rows: int
    bytes: int
    checksum: str
    min_ts: int
    max_ts: int
    min_pk: str
    max_pk: str
    row_hash: str | None


def key_json(batch: pa.RecordBatch | pa.Table, index: int, primary_key: Sequence[str]) -> str:
    """A row's primary key as the catalog stores it (JSON list)."""
    return json.dumps([batch.column(k)[index].as_py() for k in primary_key], default=str)


def check_sorted(
    batch: pa.RecordBatch, sort_keys: Sequence[str], previous: pa.RecordBatch | None, where: str
) -> None:
    """Raise AssertionError unless ``batch`` is in ``sort_keys`` order and does not
    start before ``previous`` (the last row of the batch before it) ends."""
    rows = pa.Table.from_batches([previous, batch]) if previous is not None else batch
    order = pc.sort_indices(rows, sort_keys=[(k, "ascending") for k in sort_keys])
    if not order.equals(pa.array(range(rows.num_rows), type=order.type)):
        raise AssertionError(f"{where}: rows are not in ({', '.join(sort_keys)}) order")


class ObjectWriter:
    """Stream sorted rows into one object at ``key`` (see the module doc).

    ``ts``: the one ts of rows written without a ``__ts`` column (a commit
    object). ``hash_rows``: also compute the rows' content hash.
    Use as a context manager: an exception aborts the write.
    """

    def __init__(
        self,
        objects: ObjectStore,
        key: str,
        schema: pa.Schema,
        primary_key: Sequence[str],
        *,
        ts: int | None = None,
        hash_rows: bool = False,
        flight_bytes: int = FLIGHT_BYTES,
    ) -> None:
        self.key = key
        self.schema = schema
        self.primary_key = tuple(primary_key)
        self._where = f"{objects.warehouse.uri}/{key}"
        self._ts = ts
        self._sort_keys = [*self.primary_key] + ([] if ts is not None else [TS])
        self._sink = HashingSink(objects.open_output(key))
        # Pages gather in a native buffer and reach the Python sink a few MiB at
        # a time: each call into the sink takes the GIL, which the merging thread
        # holds between its calls into Arrow, so a write per page would wait.
        self._buffered = pa.BufferedOutputStream(pa.PythonFile(self._sink, mode="w"), SINK_BYTES)
        self._writer = pq.ParquetWriter(self._buffered, schema, **parquet_options())
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._pending_bytes = 0
        self._hasher = RowHasher(schema) if hash_rows else None
        self._rows = 0
        self._min_ts: int | None = None
        self._max_ts: int | None = None
        self._first: str | None = None
        self._last_row: pa.RecordBatch | None = None
        self._done = False
        self._encoder: ThreadPoolExecutor | None = None
        self._flight: deque[tuple[Future[None], int]] = deque()  # row groups queued, bytes
        self._flight_bytes = 0
        self._most_in_flight = flight_bytes

    def write(self, rows: pa.RecordBatch | pa.Table) -> None:
        for batch in rows.to_batches() if isinstance(rows, pa.Table) else [rows]:
            if batch.num_rows:
                self._take(batch)

    def _take(self, batch: pa.RecordBatch) -> None:
        if batch.schema != self.schema:
            batch = pa.RecordBatch.from_arrays(batch.columns, schema=self.schema)
        if CHECK_ORDER:
            check_sorted(batch, self._sort_keys, self._last_row, self._where)
        if self._first is None:
            self._first = key_json(batch, 0, self.primary_key)
        self._last_row = batch.slice(batch.num_rows - 1, 1)
        if self._ts is None:
            bounds = pc.min_max(batch.column(TS))
            low, high = bounds["min"].as_py(), bounds["max"].as_py()
            self._min_ts = low if self._min_ts is None else min(self._min_ts, low)
            self._max_ts = high if self._max_ts is None else max(self._max_ts, high)
        if self._hasher is not None:
            self._hasher.update(batch)
        self._rows += batch.num_rows
        self._pending.append(batch)
        self._pending_rows += batch.num_rows
        self._pending_bytes += batch.nbytes
        while self._pending_rows >= ROW_GROUP_ROWS or self._pending_bytes >= ROW_GROUP_BYTES:
            per_row = self._pending_bytes / self._pending_rows
            self._flush(max(1, min(ROW_GROUP_ROWS, int(ROW_GROUP_BYTES / per_row))))

    def _flush(self, count: int, last: bool = False) -> None:
        """Encode the first ``count`` pending rows as a row group: queued for the
        encoder thread, or here, once the queue is done, when ``last``."""
        table = pa.Table.from_batches(self._pending, schema=self.schema)
        count = min(count, table.num_rows)
        group = table.slice(0, count)
        self._pending = table.slice(count).to_batches()
        self._pending_rows -= count
        self._pending_bytes = sum(b.nbytes for b in self._pending)
        if last:
            self._wait(0)
            self._encode(group)
            return
        if self._encoder is None:
            self._encoder = ThreadPoolExecutor(1, thread_name_prefix="rewind-encode")
        size = group.nbytes
        self._flight.append((self._encoder.submit(self._encode, group), size))
        self._flight_bytes += size
        self._wait(self._most_in_flight)

    def _encode(self, group: pa.Table) -> None:
        self._writer.write_table(group, row_group_size=group.num_rows)

    def _wait(self, most: int) -> None:
        """Wait until at most ``most`` bytes of row groups are queued; a failed
        encoding is raised here."""
        while self._flight and (self._flight_bytes > most or self._flight[0][0].done()):
            encoding, size = self._flight.popleft()
            self._flight_bytes -= size
            encoding.result()

    def _stop(self) -> None:
        if self._encoder is not None:
            encoder, self._encoder = self._encoder, None
            encoder.shutdown(wait=True)

    def finish(self) -> WrittenObject:
        """Encode what is left, publish the object and describe it."""
        if self._rows == 0:
            raise ValueError(f"{self._where}: an object needs at least one row")
        try:
            if self._pending_rows:
                self._flush(self._pending_rows, last=True)
            self._wait(0)
        finally:
            self._stop()
        self._writer.close()
        self._buffered.close()  # the last bytes, to the sink
        self._sink.output.commit()
        self._done = True
        assert self._last_row is not None and self._first is not None
        low = self._ts if self._ts is not None else self._min_ts
        high = self._ts if self._ts is not None else self._max_ts
        assert low is not None and high is not None
        return WrittenObject(
            key=self.key,
            rows=self._rows,
            bytes=self._sink.size,
            checksum=self._sink.sha.hexdigest(),
            min_ts=int(low),
            max_ts=int(high),
            min_pk=self._first,
            max_pk=key_json(self._last_row, 0, self.primary_key),
            row_hash=self._hasher.hexdigest() if self._hasher is not None else None,
        )

    @property
    def rows(self) -> int:
        return self._rows

    def abort(self) -> None:
        if not self._done:
            self._done = True
            try:
                self._wait(0)  # a row group being encoded cannot be interrupted
            except Exception:  # noqa: BLE001 - the abort below is what matters
                pass
            self._stop()
            self._sink.discard = True
            try:
                self._writer.close()
                self._buffered.close()
            except Exception:  # noqa: BLE001 - the abort below is what matters
                pass
            self._sink.output.abort()

    def __enter__(self) -> ObjectWriter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if kind is not None:
            self.abort()
