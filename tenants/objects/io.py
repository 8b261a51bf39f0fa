"""Putting Arrow tables into the object store as objects, and reading them back.

Reads verify the recorded checksum, so a truncated or tampered object fails
loudly with its key instead of returning wrong rows.

Two layouts. An object written by a user commit holds one commit's rows and
no ts column: it is uploaded *before* its commit ts exists (no catalog
transaction is open while bytes move), and every row inherits the ts the
commit records for it (``min_ts == max_ts``), as Iceberg's data files inherit
their snapshot's sequence number. Objects that mix commits (compaction,
restore rewrites) carry a ``__ts`` column. ``read_object`` returns both with
the column, so no reader sees the difference.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace

import pyarrow as pa

from tenants.errors import CorruptObject
from tenants.objects.reader import CHUNK_BYTES, open_object
from tenants.objects.record import (
    ObjectKind,
    ObjectRecord,
    object_key,
    sort_by_key,
    sort_by_key_and_ts,
)
from tenants.objects.writer import ObjectWriter, WrittenObject
from tenants.objectstore import ObjectStore
from tenants.tenancy import new_id

UNSTAMPED = 0
"""The ts of a commit object between its upload and its commit (see ``stamp``)."""


def write_object(
    objects: ObjectStore,
    rows: pa.Table,
    *,
    tenant_id: str,
    table_id: str,
    kind: ObjectKind,
    fingerprint: str,
    primary_key: Sequence[str],
    created_ts: int,
    object_id: str | None = None,
) -> ObjectRecord:
    """Sort ``rows`` by (pk, ts), upload them and describe the object.

    ``object_id`` lets a caller derive the id (and so the key) deterministically,
    which makes a retried task overwrite its own output instead of leaking one.
    """
    rows = sort_by_key_and_ts(rows, primary_key)
    key = object_key(tenant_id, table_id, kind, object_id := object_id or new_id())
    return _upload(objects, rows, object_id, key, kind, fingerprint, primary_key, created_ts)


def write_commit_object(
    objects: ObjectStore,
    rows: pa.Table,
    *,
    tenant_id: str,
    table_id: str,
    kind: ObjectKind,
    fingerprint: str,
    primary_key: Sequence[str],
    object_id: str,
) -> ObjectRecord:
    """Upload one commit's rows (no ts column, sorted by key) before the commit exists,
    as ``object_id`` (minted by the writer's intent: tenants/objects/intents.py).

    The record's ts fields are ``UNSTAMPED`` until the commit's transaction
    gives them its ts (``stamp``); until then no catalog row names the key, so
    a commit that never lands leaves an orphan GC removes after its grace.
    """
    rows = sort_by_key(rows, primary_key)
    key = object_key(tenant_id, table_id, kind, object_id)
    return _upload(
        objects, rows, object_id, key, kind, fingerprint, primary_key, UNSTAMPED, ts=UNSTAMPED
    )


def _upload(
    objects: ObjectStore,
    rows: pa.Table,
    object_id: str,
    key: str,
    kind: ObjectKind,
    fingerprint: str,
    primary_key: Sequence[str],
    created_ts: int,
    *,
    ts: int | None = None,
) -> ObjectRecord:
    """Stream sorted ``rows`` to ``key`` and describe them (``ts``: the one ts of
    rows without a ts column)."""
    with ObjectWriter(objects, key, rows.schema, primary_key, ts=ts) as writer:
        writer.write(rows)
        written = writer.finish()
    return record_of(written, object_id, kind, fingerprint, created_ts)


def record_of(
    written: WrittenObject, object_id: str, kind: ObjectKind, fingerprint: str, created_ts: int
) -> ObjectRecord:
    """The catalog's record of an object an :class:`ObjectWriter` wrote."""
    return ObjectRecord(
        id=object_id,
        key=written.key,
        kind=kind,
        fingerprint=fingerprint,
        rows=written.rows,
        bytes=written.bytes,
        min_ts=written.min_ts,
        max_ts=written.max_ts,
        min_pk=written.min_pk,
        max_pk=written.max_pk,
        sorted=True,
        checksum=written.checksum,
        created_ts=created_ts,
    )


def copy_object(
    source: ObjectStore,
    key: str,
    size: int,
    checksum: str,
    dest: ObjectStore,
    dest_key: str,
    what: str = "object",
) -> None:
    """Stream ``key`` of ``source`` to ``dest_key`` of ``dest``, a chunk at a time;
    the copy is published only if its size and sha256 are the ones recorded.

    Raises:
        CorruptObject: the source's bytes do not match (nothing is published).
    """
    output = dest.open_output(dest_key)
    sha = hashlib.sha256()
    copied = 0
    try:
        for chunk in source.stream(key, CHUNK_BYTES):
            sha.update(chunk)
            copied += len(chunk)
            output.write(chunk)
        if copied != size or sha.hexdigest() != checksum:
            raise CorruptObject(
                f"{what} {source.warehouse.uri}/{key} does not match its record ({copied} bytes, "
                f"expected {size}, or its sha256 differs); nothing was copied"
            )
    except BaseException:
        output.abort()
        raise
    output.commit()


def stamp(record: ObjectRecord, ts: int) -> ObjectRecord:
    """A commit object's record as its commit at ``ts`` registers it."""
    return replace(record, min_ts=ts, max_ts=ts, created_ts=ts)


def read_object(objects: ObjectStore, record: ObjectRecord) -> pa.Table:
    """The object's rows with their ``__ts``, after checking its size and checksum.

    Whole, in memory: for callers that need every row at once (small objects,
    the in-memory oracle paths). Streaming callers use ``open_object``.
    """
    with open_object(objects, record) as reader:
        return reader.read_all()
