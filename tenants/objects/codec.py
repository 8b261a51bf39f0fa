"""Parquet bytes in memory, for what is small by nature.

Objects stream (tenants.objects.writer, tenants.objects.reader); this module is
left with what fits in memory by definition: an empty dump file and an object
under a few MB fetched whole. Reads hand Arrow only Arrow-owned memory, never a
Python object: see :func:`arrow_buffer` for why. (Writes need no such care: the
writer runs on the calling thread and is closed before ``encode`` returns.)
"""

from __future__ import annotations

import hashlib
import io

import pyarrow as pa
import pyarrow.parquet as pq

from tenants.errors import CorruptObject

ROW_GROUP_ROWS = 128 * 1024


def encode(table: pa.Table) -> tuple[bytes, str]:
    """Parquet bytes for ``table`` (zstd) and their sha256 checksum."""
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd", row_group_size=ROW_GROUP_ROWS)
    data = sink.getvalue()
    return data, hashlib.sha256(data).hexdigest()


def arrow_buffer(data: bytes) -> pa.Buffer:
    """A copy of ``data`` in memory Arrow allocated and owns.

    ``pq.read_table`` scans asynchronously: Arrow's worker threads hold the
    source and the buffers read from it, and may drop the last reference after
    ``read_table`` has returned. Had the source been a Python object (an
    ``io.BytesIO``, or ``bytes`` wrapped by ``pa.py_buffer``/``pa.BufferReader``),
    that release takes the GIL; if the interpreter has begun to finalize,
    CPython ends the thread with ``pthread_exit`` and its unwinding through
    Arrow's worker loop calls ``std::terminate``: the process aborts (exit 134,
    "terminate called without an active exception") after the command's work
    is done. An Arrow-owned copy is released without Python. The copy costs a
    memcpy, small beside the sha256 and the Parquet decoding of the same bytes.
    """
    buffer = pa.allocate_buffer(len(data))
    memoryview(buffer).cast("B")[:] = data
    return buffer


def decode(data: bytes, where: str, checksum: str | None = None) -> pa.Table:
    """Parse Parquet bytes; a checksum mismatch or a parse failure is ``CorruptObject``."""
    if checksum is not None and hashlib.sha256(data).hexdigest() != checksum:
        raise CorruptObject(f"object {where} does not match its recorded checksum")
    try:
        return pq.read_table(pa.BufferReader(arrow_buffer(data)))
    except (pa.ArrowInvalid, OSError) as e:
        raise CorruptObject(f"object {where} is not readable Parquet: {e}") from e
