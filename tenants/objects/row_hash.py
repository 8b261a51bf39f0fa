"""One content hash for rows, computed as they stream past.

Verification compares the rows a task kept with the rows a fresh read finds,
and a dump compares what it wrote with what a reload reads. Both sides see
the same rows through different chunkings (Parquet row groups, reader
batches, Spark partitions, filter outputs), so the hash must depend on the
rows and their order only, never on how they arrived, and it must be
computable without holding them all.

The canonical form: the column names and types (no metadata, no
nullability), then the rows cut into runs of :data:`HASH_ROWS` counted from
the first row, each run made contiguous (zero offsets, no validity bitmap
without nulls: ``pa.concat_arrays`` normalises both) and serialised as one
Arrow IPC record batch message. sha256 over those bytes. Memory is one run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import pyarrow as pa

HASH_ROWS = 4096
"""Rows per canonical run: part of the hash's definition (changing it changes every
hash). Small, so a run of wide rows stays small; large enough that the per-run
cost is lost in the hashing (1.6 GB/s of Arrow data on the project's machines)."""


def canonical_schema(schema: pa.Schema) -> pa.Schema:
    """Names and types only: nullability and metadata differ between writers."""
    return pa.schema([pa.field(f.name, f.type) for f in schema])


class RowHasher:
    """sha256 of rows in the order they are fed, independent of their batching."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = canonical_schema(schema)
        self._sha = hashlib.sha256(self.schema.serialize().to_pybytes())
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self.rows = 0

    def update(self, rows: pa.RecordBatch | pa.Table) -> None:
        batches = rows.to_batches() if isinstance(rows, pa.Table) else [rows]
        for batch in batches:
            if batch.num_rows:
                self._pending.append(batch)
                self._pending_rows += batch.num_rows
                self.rows += batch.num_rows
        while self._pending_rows >= HASH_ROWS:
            self._emit(HASH_ROWS)

    def _emit(self, count: int) -> None:
        table = pa.Table.from_batches(self._pending)
        run, rest = table.slice(0, count), table.slice(count)
        columns = [pa.concat_arrays(column.chunks) for column in run.columns]
        batch = pa.RecordBatch.from_arrays(columns, schema=self.schema)
        self._sha.update(batch.serialize())
        self._pending = rest.to_batches()
        self._pending_rows -= count

    def hexdigest(self) -> str:
        """The hash of every row fed so far (call once, at the end)."""
        if self._pending_rows:
            self._emit(self._pending_rows)
        return self._sha.hexdigest()


def rows_hash(rows: pa.Table | Iterable[pa.RecordBatch], schema: pa.Schema | None = None) -> str:
    """The canonical hash of rows already in their canonical order."""
    if isinstance(rows, pa.Table):
        hasher = RowHasher(rows.schema)
        hasher.update(rows)
        return hasher.hexdigest()
    if schema is None:
        raise ValueError("rows_hash of batches needs their schema")
    hasher = RowHasher(schema)
    for batch in rows:
        hasher.update(batch)
    return hasher.hexdigest()
