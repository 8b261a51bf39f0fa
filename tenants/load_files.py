"""A local Parquet or CSV file read for a load, whole or in batches.

``rewind load`` and ``rewind delete --keys`` read their FILE through here, as
the Python API's callers may: the rules for CSV (PostgreSQL's ``COPY ... CSV``
nulls, text columns read as text) live in one place, beside nothing of the CLI.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from tenants.errors import InvalidArgument
from tenants.progress import SILENT, Share, Step

MIB = 1024 * 1024
CSV_MAX_ROW_BYTES = 1024 * MIB
CSV_BLOCK_BYTES = MIB  # a streamed CSV's read block (rows longer than it: see load)
CSV_SUFFIXES = (".csv", ".csv.gz", ".csv.bz2", ".csv.zst")
PARQUET_SUFFIXES = (".parquet", ".pq")


def read_file(path: Path, target: pa.Schema) -> pa.Table:
    """Read a Parquet or CSV file into Arrow, ready for the write path.

    CSV types are inferred, except that columns the table stores as text (or
    bytes) are read as text: inference would turn ``007`` into 7 before the
    write path could cast it back to a string. Everything else is cast (and
    checked) by the write path, so CSV and Parquet follow the same rules.

    CSV nulls follow PostgreSQL's ``COPY ... CSV``: only an unquoted empty field
    is null, in every column. A quoted empty field (``""``) is the empty string,
    and any other text is data: ``nan``, ``NULL`` or ``N/A`` stay text in a
    text column, and ``nan`` is NaN in a float column. pyarrow's ``write_csv``
    writes exactly this way, so its files round-trip.

    Raises:
        InvalidArgument: unknown extension, the file cannot be parsed, or two of
            its columns share a name.
    """
    name = path.name.lower()
    try:
        if name.endswith(PARQUET_SUFFIXES):
            return _unique_columns(path, pq.read_table(path))
        if name.endswith(CSV_SUFFIXES):
            return _unique_columns(path, _read_csv(path, target))
    except (pa.ArrowInvalid, OSError) as e:
        raise InvalidArgument(f"cannot read {path}: {_short(str(e))}") from e
    raise InvalidArgument(
        f"cannot tell the format of {path}: use a file ending in "
        f"{', '.join(PARQUET_SUFFIXES + CSV_SUFFIXES)}"
    )


class RowTooLong(InvalidArgument):
    """A CSV row longer than the reader's block (see ``read_batches``)."""


def read_batches(
    path: Path,
    target: pa.Schema,
    block_bytes: int = CSV_BLOCK_BYTES,
    progress: Step = SILENT,
) -> Iterator[pa.Table]:
    """A Parquet or CSV file as batches, for a streamed load (tenants.loads).

    CSV follows :func:`read_file`'s rules, with one difference that streaming
    forces: a streaming reader fixes each column's type from its first block,
    so a column the table has is read as text and cast by the write path
    (``007`` stays text in a text column; ``1.5`` after a block of integers is
    not an error). Columns the table lacks keep an inferred type, and the write
    path names them.

    ``progress`` advances by the file's bytes read.

    Raises:
        InvalidArgument: unknown extension, a parse error, a repeated column
            (``RowTooLong`` for a row longer than ``block_bytes``).
    """
    name = path.name.lower()
    try:
        if name.endswith(PARQUET_SUFFIXES):
            parquet = pq.ParquetFile(path)
            _unique_names(path, parquet.schema_arrow.names)
            share = Share(progress, path.stat().st_size, parquet.metadata.num_rows)
            for batch in parquet.iter_batches(batch_size=64 * 1024):
                share.rows(batch.num_rows)
                yield pa.Table.from_batches([batch])
            share.finish()
            return
        if name.endswith(CSV_SUFFIXES):
            types = {f.name: _csv_type(f.type) for f in target}
            size = path.stat().st_size
            with pa.input_stream(str(path)) as stream:
                reader = pa_csv.open_csv(
                    stream,
                    read_options=pa_csv.ReadOptions(block_size=block_bytes, use_threads=False),
                    convert_options=_csv_convert(types),
                )
                _unique_names(path, reader.schema.names)
                done = 0
                try:
                    for batch in reader:
                        # What the reader has taken so far. It reads ahead of its
                        # batches on a thread of its own, so the position is read
                        # once: two reads may differ, and what lies between them
                        # would be counted by neither advance.
                        taken = stream.tell()
                        progress.advance(taken - done)
                        done = taken
                        yield pa.Table.from_batches([batch])
                finally:
                    progress.advance(max(0, size - done))
            return
    except (pa.ArrowInvalid, OSError) as e:
        if "straddl" in str(e):
            if block_bytes >= CSV_MAX_ROW_BYTES:
                raise InvalidArgument(
                    f"cannot read {path}: a row is longer than {CSV_MAX_ROW_BYTES // MIB} MiB; "
                    "load such values from a Parquet file"
                ) from e
            raise RowTooLong(f"cannot read {path}: a row is longer than a block") from e
        raise InvalidArgument(f"cannot read {path}: {_short(str(e))}") from e
    raise InvalidArgument(
        f"cannot tell the format of {path}: use a file ending in "
        f"{', '.join(PARQUET_SUFFIXES + CSV_SUFFIXES)}"
    )


def _csv_type(kind: pa.DataType) -> pa.DataType:
    """How a table column is read from CSV: text as itself (binary as text), the rest as text
    for the write path to cast."""
    return (
        pa.string()
        if pa.types.is_binary(kind)
        else (kind if pa.types.is_string(kind) or pa.types.is_large_string(kind) else pa.string())
    )


def _csv_convert(types: dict[str, pa.DataType]) -> pa_csv.ConvertOptions:
    return pa_csv.ConvertOptions(
        column_types=types,
        null_values=[""],
        strings_can_be_null=True,
        quoted_strings_can_be_null=False,
    )


def _unique_names(path: Path, names: list[str]) -> None:
    """Refuse a file naming a column twice: which of the two would be the value?"""
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise InvalidArgument(
            f"cannot load {path}: column(s) {repeated} appear more than once in its header; "
            "give each column once"
        )


def _read_csv(path: Path, target: pa.Schema) -> pa.Table:
    text_types = {
        f.name: pa.string() if pa.types.is_binary(f.type) else f.type
        for f in target
        if pa.types.is_string(f.type)
        or pa.types.is_large_string(f.type)
        or pa.types.is_binary(f.type)
    }
    convert = _csv_convert(text_types)
    try:
        return pa_csv.read_csv(path, convert_options=convert)
    except pa.ArrowInvalid as e:
        # A row longer than pyarrow's block (1 MiB) fails with this message, the
        # only sign pyarrow gives (no error code). Such rows are rare, so only
        # then read again with blocks as large as the largest row we accept.
        if "straddl" not in str(e):
            raise
    try:
        return pa_csv.read_csv(
            path,
            read_options=pa_csv.ReadOptions(block_size=CSV_MAX_ROW_BYTES),
            convert_options=convert,
        )
    except pa.ArrowInvalid as e:
        if "straddl" not in str(e):
            raise
        raise InvalidArgument(
            f"cannot read {path}: a row is longer than {CSV_MAX_ROW_BYTES // MIB} MiB; "
            "load such values from a Parquet file"
        ) from e


def _unique_columns(path: Path, rows: pa.Table) -> pa.Table:
    _unique_names(path, rows.column_names)
    return rows


def _short(message: str, limit: int = 300) -> str:
    """pyarrow quotes the offending row, which may be megabytes long."""
    return message if len(message) <= limit else f"{message[:limit]}... (cut)"
