"""Snapshots: named, protected timestamps of a tenant. Rows only, no data copied.

Creating one is O(1) in data size: it inserts one row. A snapshot at "now"
takes the commit ts of its own transaction, so it sees every commit before
it. A snapshot at a past time is allowed only while that time is still
protected (by the PITR window, another snapshot, or being "now").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from tenants.catalog import Row, Tx
from tenants.catalog.snapshots import (
    delete_snapshot,
    insert_snapshot,
    newest_snapshot_names,
    snapshot_exists,
    snapshot_row,
    snapshot_rows,
)
from tenants.errors import AlreadyExists, InvalidArgument, InvalidName, NotFound
from tenants.names import did_you_mean
from tenants.tenancy import TenantRecord
from tenants.timeline.protection import protection
from tenants.times import check_ts

SnapshotKind = Literal["manual", "scheduled"]
SNAPSHOT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,127}")


def snapshot_name(name: str) -> str:
    if not isinstance(name, str) or not SNAPSHOT_NAME.fullmatch(name):
        raise InvalidName(
            f"invalid snapshot name {name!r}: use 1-128 characters, a letter or '_' first, "
            "then letters, digits, '_', '.' or '-'"
        )
    return name


@dataclass(frozen=True)
class SnapshotRecord:
    tenant_id: str
    name: str
    ts: int
    kind: SnapshotKind
    created_ts: int
    expires_at: int | None

    @classmethod
    def from_row(cls, row: Row) -> SnapshotRecord:
        return cls(
            row["tenant_id"],
            row["name"],
            row["ts"],
            row["kind"],
            row["created_ts"],
            row["expires_at"],
        )


def create_snapshot(
    tx: Tx,
    tenant: TenantRecord,
    name: str,
    *,
    at: int | None = None,
    kind: SnapshotKind = "manual",
    expires_at: int | None = None,
) -> SnapshotRecord:
    """Record a snapshot of ``tenant`` at ``at`` (default: this commit).

    Raises:
        AlreadyExists: the tenant has a snapshot of that name.
        UnprotectedTime: ``at`` is no longer protected; its history may be gone.
    """
    snapshot_name(name)
    if snapshot_exists(tx, tenant.id, name):
        raise AlreadyExists(f"tenant {tenant.name!r} already has a snapshot named {name!r}")
    if at is not None:
        protection(tx, tenant).require(check_ts(at))
    ts = tx.commit_ts()
    snap_ts = ts if at is None else at
    insert_snapshot(tx, tenant.id, name, snap_ts, kind, ts, expires_at)
    return SnapshotRecord(tenant.id, name, snap_ts, kind, ts, expires_at)


def list_snapshots(tx: Tx, tenant: TenantRecord) -> list[SnapshotRecord]:
    return [SnapshotRecord.from_row(r) for r in snapshot_rows(tx, tenant.id)]


def find_snapshot(tx: Tx, tenant: TenantRecord, name: str) -> SnapshotRecord:
    snapshot_name(name)
    row = snapshot_row(tx, tenant.id, name)
    if row is None:
        known = newest_snapshot_names(tx, tenant.id)
        close = did_you_mean(name, (s.name for s in list_snapshots(tx, tenant)))
        raise NotFound(
            f"tenant {tenant.name!r} has no snapshot {name!r}{close}; newest: "
            f"{', '.join(known) or 'none'}"
        )
    return SnapshotRecord.from_row(row)


def drop_snapshot(tx: Tx, tenant: TenantRecord, name: str) -> SnapshotRecord:
    record = find_snapshot(tx, tenant, name)
    delete_snapshot(tx, tenant.id, name)
    return record


def matching_snapshots(
    tx: Tx, tenant: TenantRecord, *, older_than: int | None = None, kind: SnapshotKind | None = None
) -> list[SnapshotRecord]:
    """The snapshots :func:`drop_snapshots` would drop: ts < ``older_than`` and/or of ``kind``.

    Raises:
        InvalidArgument: neither filter is given.
    """
    if older_than is None and kind is None:
        raise InvalidArgument("give a snapshot name, or a filter (older than, kind) to drop many")
    return [
        s
        for s in list_snapshots(tx, tenant)
        if (older_than is None or s.ts < older_than) and (kind is None or s.kind == kind)
    ]


def drop_snapshots(
    tx: Tx, tenant: TenantRecord, *, older_than: int | None = None, kind: SnapshotKind | None = None
) -> list[SnapshotRecord]:
    """Drop every snapshot with ts < ``older_than`` and/or of ``kind``."""
    doomed = matching_snapshots(tx, tenant, older_than=older_than, kind=kind)
    for record in doomed:
        delete_snapshot(tx, tenant.id, record.name)
    return doomed
