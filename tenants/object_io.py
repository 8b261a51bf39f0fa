"""Putting Arrow tables into the store as objects, and reading them back.

Reads verify the recorded checksum, so a truncated or tampered object fails
loudly with its key instead of returning wrong rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from tenants.errors import CorruptObject
from tenants.objects import ObjectKind, ObjectRecord, object_key, row_stats, sort_by_key_and_ts
from tenants.objectstore import ObjectStore
from tenants.parquet_codec import decode, encode
from tenants.tenancy import new_id


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
    data, checksum = encode(rows)
    object_id = object_id or new_id()
    key = object_key(tenant_id, table_id, kind, object_id)
    store.put(key, data)
    stats = row_stats(rows, primary_key, is_sorted=True)
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


def read_object(store: ObjectStore, record: ObjectRecord) -> pa.Table:
    """The object's rows, after checking its size and checksum."""
    data = store.get(record.key)
    where = f"{store.warehouse.uri}/{record.key}"
    if len(data) != record.bytes:
        raise CorruptObject(
            f"object {where} has {len(data)} bytes, the catalog records {record.bytes}"
        )
    return decode(data, where, record.checksum)
