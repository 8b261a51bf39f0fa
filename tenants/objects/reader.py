"""Reading one object batch by batch, its bytes checked against the catalog.

A whole-object read (a rewrite, a compaction, a backup) must not trust bytes
it has not checked, yet must not hold the object in memory. An ``s3://``
object is streamed once (one GET) to a spool file under ``REWIND_SPOOL_DIR``
or the system temp dir, hashed on the way, and Parquet reads row groups from
that file: memory is one batch, disk is one object. A ``file://`` object is
read in place while a thread hashes it alongside; the check's verdict comes
when the last batch has been read, so a consumer that reads every batch
(rewrite, compaction, backup) learns of damage before it publishes anything
made from them. Objects under :data:`IN_MEMORY_BYTES` are fetched into
memory and checked first, where a file would cost more than it saves.

A partial read (``verify=False``: a query that stops early) reads only the
row groups it needs, by ranged GETs; the whole-object checksum cannot be
checked then, but every page's CRC is (objects are written with page
checksums), so a damaged page still fails loudly. The footer of an object
this process has opened before comes from tenants.objects.footer_cache, not from
another request.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tenants.errors import CorruptObject, StorageError
from tenants.objects.codec import arrow_buffer
from tenants.objects.footer_cache import FOOTERS
from tenants.objects.read_ahead import reading_ahead
from tenants.objects.record import ObjectRecord
from tenants.objects.row_hash import RowHasher
from tenants.objects.sizes import BATCH_ROWS
from tenants.objectstore import ObjectStore
from tenants.schema import TS

BATCH_BYTES = 8 * 1024 * 1024
"""A batch handed to callers holds at most so many rows (``BATCH_ROWS``, from
tenants.objects.sizes), and about so many bytes (estimated per object from its
row groups' sizes), so wide rows come in proportionally fewer at a time."""
IN_MEMORY_BYTES = 8 * 1024 * 1024
CHUNK_BYTES = 1024 * 1024
"""Bytes per piece when an object is fetched or hashed whole."""
# Read buffer per column: pages are read through it instead of a whole column chunk.
BUFFER_BYTES = 1024 * 1024


def spool_dir() -> str | None:
    """Where fetched objects are spooled (None: the system temp dir)."""
    return os.environ.get("REWIND_SPOOL_DIR") or None


class ObjectReader:
    """Row groups of one object, with ``__ts`` on every batch (a commit object's
    rows inherit the ts its record carries, as ``read_object`` documents).

    A record held with a cut (``ObjectRecord.cut_ts``: a straddler an instant
    restore installed before rewriting it) yields only its rows at or before
    the cut, whoever reads it: a compaction, a backup, an export or a write's
    key lookup cannot see rows its table does not hold."""

    def __init__(
        self,
        record: ObjectRecord,
        parquet: pq.ParquetFile,
        where: str,
        check: Callable[[], None] | None = None,
    ) -> None:
        self.record = record
        self.parquet = parquet
        self.where = where
        self._check = check
        self._has_ts = TS in parquet.schema_arrow.names
        if not self._has_ts and record.min_ts != record.max_ts:
            raise CorruptObject(
                f"object {where} has no {TS} column, but the catalog records rows from ts "
                f"{record.min_ts} to {record.max_ts}: only one commit's rows may inherit their ts"
            )

    @property
    def schema(self) -> pa.Schema:
        """The rows' schema as batches carry it (``__ts`` last when inherited)."""
        schema = self.parquet.schema_arrow
        return schema if self._has_ts else schema.append(pa.field(TS, pa.int64(), False))

    @property
    def num_row_groups(self) -> int:
        return self.parquet.metadata.num_row_groups

    def batches(
        self,
        columns: Sequence[str] | None = None,
        *,
        row_groups: Sequence[int] | None = None,
        batch_rows: int | None = None,
        batch_bytes: int = BATCH_BYTES,
    ) -> Generator[pa.RecordBatch, None, None]:
        """The rows in stored ((pk, ts)) order; ``columns`` may name ``__ts``.

        Reading every row group ends with the object's checksum verdict: a
        damaged object raises ``CorruptObject`` instead of ending the iteration.
        """
        batch_rows = batch_rows or self.batch_rows(batch_bytes)
        cut = self.record.cut_ts if self._has_ts else None
        wanted = None if columns is None else [c for c in columns if c != TS or self._has_ts]
        if cut is not None and wanted is not None and TS not in wanted:
            wanted = [*wanted, TS]  # read to apply the cut, dropped after
        add_ts = not self._has_ts and (columns is None or TS in columns)
        try:
            for batch in self.parquet.iter_batches(
                batch_size=batch_rows, row_groups=row_groups, columns=wanted, use_threads=True
            ):
                if cut is not None:
                    batch = batch.filter(pc.less_equal(batch.column(TS), cut))
                    if columns is not None and TS not in columns:
                        batch = batch.drop_columns([TS])
                    if batch.num_rows == 0:
                        continue
                if add_ts:
                    batch = batch.append_column(
                        pa.field(TS, pa.int64(), False),
                        pa.repeat(pa.scalar(self.record.min_ts, pa.int64()), batch.num_rows),
                    )
                yield batch
        except (pa.ArrowInvalid, OSError) as e:
            if self._check is not None:
                self._check()  # damage explains a decoding failure best
            raise CorruptObject(f"object {self.where} is not readable Parquet: {e}") from e
        if row_groups is None and self._check is not None:
            self._check()

    def batch_rows(self, batch_bytes: int = BATCH_BYTES) -> int:
        """Rows per batch: :data:`BATCH_ROWS`, fewer where rows are wide."""
        metadata = self.parquet.metadata
        rows = metadata.num_rows
        size = sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups))
        if rows == 0 or size == 0:
            return BATCH_ROWS
        return max(1, min(BATCH_ROWS, int(batch_bytes * rows / size)))

    def read_all(self, columns: Sequence[str] | None = None) -> pa.Table:
        """Every row at once: only for objects known to be small."""
        return pa.Table.from_batches(list(self.batches(columns)), schema=self._schema_of(columns))

    def _schema_of(self, columns: Sequence[str] | None) -> pa.Schema:
        schema = self.schema
        return schema if columns is None else pa.schema([schema.field(c) for c in columns])


@contextmanager
def open_object(
    objects: ObjectStore,
    record: ObjectRecord,
    *,
    verify: bool = True,
    buffer_bytes: int = BUFFER_BYTES,
) -> Iterator[ObjectReader]:
    """An :class:`ObjectReader` over ``record``'s object (see the module doc).

    ``buffer_bytes``: the read buffer per column (a merge of many objects at
    once gives each a smaller one)."""
    where = f"{objects.warehouse.uri}/{record.key}"
    check: Callable[[], None] | None = None
    with ExitStack() as stack:
        local = objects.local_file(record.key)
        if not verify:
            source: object = stack.enter_context(objects.open_input(record.key))
        elif record.bytes <= IN_MEMORY_BYTES:
            source = pa.BufferReader(arrow_buffer(_fetch_checked(objects, record, where)))
        elif local is None:
            source = stack.enter_context(_spooled(objects, record, where))
        else:
            checksum = _Checksum(objects, record, where)
            stack.callback(checksum.join)
            source, check = local, checksum.verdict
        footer_key = (objects.warehouse.uri, record.key, record.bytes, record.checksum)
        try:
            parquet = pq.ParquetFile(
                source,  # type: ignore[arg-type]
                metadata=FOOTERS.get(footer_key),  # None: read from the object
                page_checksum_verification=True,
                # pre_buffer would fetch every row group iter_batches is given at once.
                pre_buffer=False,
                buffer_size=buffer_bytes,
            )
        except (pa.ArrowInvalid, OSError) as e:
            if check is not None:
                check()
            raise CorruptObject(f"object {where} is not readable Parquet: {e}") from e
        stack.callback(parquet.close)
        FOOTERS.put(footer_key, parquet.metadata)
        yield ObjectReader(record, parquet, where, check)


def stream_object(
    objects: ObjectStore,
    record: ObjectRecord,
    columns: Sequence[str] | None = None,
    *,
    buffer_bytes: int = BUFFER_BYTES,
    batch_bytes: int = BATCH_BYTES,
) -> Generator[pa.RecordBatch, None, None]:
    """The object's batches, its reader (and spool file) closed as soon as the last
    is read: a merge of many objects holds only the ones it is reading. Each
    batch is decoded while the caller works on the one before (tenants.objects.read_ahead):
    one more batch in memory."""
    with open_object(objects, record, buffer_bytes=buffer_bytes) as reader:
        with reading_ahead(reader.batches(columns, batch_bytes=batch_bytes)) as batches:
            yield from batches


def object_row_hash(objects: ObjectStore, record: ObjectRecord) -> str:
    """The content hash (tenants.objects.row_hash) of the object's rows, with ``__ts``,
    in stored order, streamed."""
    with open_object(objects, record) as reader:
        hasher = RowHasher(reader.schema)
        for batch in reader.batches():
            hasher.update(batch)
        return hasher.hexdigest()


def digest_of(objects: ObjectStore, key: str) -> tuple[int, str]:
    """The size and sha256 of ``key``'s bytes, streamed."""
    sha = hashlib.sha256()
    size = 0
    for chunk in objects.stream(key, CHUNK_BYTES):
        sha.update(chunk)
        size += len(chunk)
    return size, sha.hexdigest()


def _mismatch(where: str, size: int, record: ObjectRecord) -> CorruptObject:
    return CorruptObject(f"object {where} has {size} bytes, the catalog records {record.bytes}")


def _fetch_checked(objects: ObjectStore, record: ObjectRecord, where: str) -> bytes:
    data = objects.get(record.key)
    _verify(hashlib.sha256(data), len(data), record, where)
    return data


def _verify(sha: Any, size: int, record: ObjectRecord, where: str) -> None:
    if size != record.bytes:
        raise _mismatch(where, size, record)
    if sha.hexdigest() != record.checksum:
        raise CorruptObject(f"object {where} does not match its recorded checksum")


class _Checksum:
    """The object's bytes hashed in a thread (hashlib releases the GIL), while
    the caller decodes the same bytes; :meth:`verdict` waits and judges."""

    def __init__(self, objects: ObjectStore, record: ObjectRecord, where: str) -> None:
        self._objects, self._record, self._where = objects, record, where
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rewind-checksum", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            sha = hashlib.sha256()
            size = 0
            for chunk in self._objects.stream(self._record.key, CHUNK_BYTES):
                if self._stop.is_set():
                    return
                sha.update(chunk)
                size += len(chunk)
            _verify(sha, size, self._record, self._where)
        except BaseException as e:  # noqa: BLE001 - handed to the reader's thread
            self._error = e

    def verdict(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error

    def join(self) -> None:
        """Stop early (the reader is done with the object) and wait."""
        self._stop.set()
        self._thread.join()


@contextmanager
def _spooled(objects: ObjectStore, record: ObjectRecord, where: str) -> Iterator[str]:
    """The object copied to a local spool file, checked on the way; removed after."""
    directory = tempfile.mkdtemp(prefix="rewind-spool-", dir=spool_dir())
    try:
        path = Path(directory) / "object.parquet"
        sha = hashlib.sha256()
        size = 0
        try:
            with open(path, "wb") as out:
                for chunk in objects.stream(record.key, CHUNK_BYTES):
                    sha.update(chunk)
                    out.write(chunk)
                    size += len(chunk)
        except OSError as e:
            raise StorageError(f"cannot spool {where} to {directory}: {e}") from e
        _verify(sha, size, record, where)
        yield str(path)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
