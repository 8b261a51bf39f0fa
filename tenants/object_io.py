"""Putting Arrow tables into the store as objects, and reading them back.

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

from collections.abc import Sequence
from dataclasses import replace

import pyarrow as pa

from tenants.errors import CorruptObject
from tenants.objects import (
    ObjectKind,
    ObjectRecord,
    object_key,
    row_stats,
    sort_by_key,
    sort_by_key_and_ts,
)
from tenants.objectstore import ObjectStore
from tenants.parquet_codec import decode, encode
from tenants.schema import TS
from tenants.tenancy import new_id

UNSTAMPED = 0
"""The ts of a commit object between its upload and its commit (see ``stamp``)."""


def write_object(
    store: ObjectStore,
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
    return _upload(store, rows, object_id, key, kind, fingerprint, primary_key, created_ts)


def write_commit_object(
    store: ObjectStore,
    rows: pa.Table,
    *,
    tenant_id: str,
    table_id: str,
    kind: ObjectKind,
    fingerprint: str,
    primary_key: Sequence[str],
) -> ObjectRecord:
    """Upload one commit's rows (no ts column, sorted by key) before the commit exists.

    The record's ts fields are ``UNSTAMPED`` until the commit's transaction
    gives them its ts (``stamp``); until then no catalog row names the key, so
    a commit that never lands leaves an orphan GC removes after its grace.
    """
    rows = sort_by_key(rows, primary_key)
    key = object_key(tenant_id, table_id, kind, object_id := new_id())
    return _upload(
        store, rows, object_id, key, kind, fingerprint, primary_key, UNSTAMPED, ts=UNSTAMPED
    )


def _upload(
    store: ObjectStore,
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
    """Encode sorted ``rows``, put them at ``key`` and describe them (``ts``: the
    one ts of rows without a ts column)."""
    data, checksum = encode(rows)
    store.put(key, data)
    stats = row_stats(rows, primary_key, is_sorted=True, ts=ts)
    return ObjectRecord(
        id=object_id,
        key=key,
        kind=kind,
        fingerprint=fingerprint,
        rows=stats.rows,
        bytes=len(data),
        min_ts=stats.min_ts,
        max_ts=stats.max_ts,
        min_pk=stats.min_pk,
        max_pk=stats.max_pk,
        sorted=True,
        checksum=checksum,
        created_ts=created_ts,
    )


def stamp(record: ObjectRecord, ts: int) -> ObjectRecord:
    """A commit object's record as its commit at ``ts`` registers it."""
    return replace(record, min_ts=ts, max_ts=ts, created_ts=ts)


def read_object(store: ObjectStore, record: ObjectRecord) -> pa.Table:
    """The object's rows with their ``__ts``, after checking its size and checksum.

    A commit object's rows get the ts its record carries (see the module doc).
    """
    data = store.get(record.key)
    where = f"{store.warehouse.uri}/{record.key}"
    if len(data) != record.bytes:
        raise CorruptObject(
            f"object {where} has {len(data)} bytes, the catalog records {record.bytes}"
        )
    rows = decode(data, where, record.checksum)
    if TS in rows.column_names:
        return rows
    if record.min_ts != record.max_ts:
        raise CorruptObject(
            f"object {where} has no {TS} column, but the catalog records rows from ts "
            f"{record.min_ts} to {record.max_ts}: only one commit's rows may inherit their ts"
        )
    return rows.append_column(
        pa.field(TS, pa.int64(), False),
        pa.repeat(pa.scalar(record.min_ts, pa.int64()), rows.num_rows),
    )
