"""``rewind diff --to-parquet URI``: a diff's change set as one Parquet file.

The file holds the diff's columns as they stream (``__change``, the key
columns, ``before`` and ``after`` structs), in key order, with the schema
changes in its metadata, for DuckDB, polars, Spark or pandas to read. It is
written in pieces (memory is one batch and one upload part) and appears only
when complete: a failed diff leaves nothing at the URI. Like an export, the
file must lie outside the warehouse (GC deletes what its catalog does not
know there).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from engine.export.target import open_target
from tenants.config import S3Settings, Warehouse
from tenants.errors import AlreadyExists, InvalidArgument, ObjectMissing
from tenants.objects.writer import HashingSink


@dataclass(frozen=True)
class WrittenChanges:
    uri: str
    rows: int
    bytes: int


def split_file_uri(uri: str) -> tuple[str, str]:
    """``s3://b/p/changes.parquet`` -> (``s3://b/p``, ``changes.parquet``).

    Raises:
        InvalidArgument: the URI names no file (ends in ``/`` or has no folder).
    """
    root, slash, name = uri.rstrip().rpartition("/")
    if "://" not in uri or not slash or not name or root.endswith(":/") or root.endswith(":"):
        raise InvalidArgument(
            f"invalid --to-parquet {uri!r}: give a file URI, e.g. "
            "file:///srv/diffs/changes.parquet or s3://bucket/diffs/changes.parquet"
        )
    return root, name


def write_changes(
    batches: pa.RecordBatchReader, uri: str, s3: S3Settings | None, warehouse: Warehouse
) -> WrittenChanges:
    """Stream ``batches`` into one Parquet file at ``uri`` (see the module doc).

    Raises:
        InvalidArgument: a malformed URI, or one inside the warehouse.
        AlreadyExists: a file is at the URI already.
        StorageError: the destination cannot be written.
    """
    root, name = split_file_uri(uri)
    dest = open_target(root, s3, warehouse, "--to-parquet destination")
    try:
        dest.head(name)
    except ObjectMissing:
        pass
    else:
        raise AlreadyExists(
            f"--to-parquet {uri}: the file exists; remove it or name another (a diff never "
            "overwrites a file)"
        )
    output = dest.open_output(name)
    sink = HashingSink(output)
    rows = 0
    try:
        with pq.ParquetWriter(pa.PythonFile(sink, mode="w"), batches.schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
                rows += batch.num_rows
        output.commit()
    except BaseException:
        sink.discard = True
        output.abort()
        raise
    return WrittenChanges(f"{dest.warehouse.uri.rstrip('/')}/{name}", rows, sink.size)
