"""A backup destination: a prefix in another bucket (or directory) holding backups.

Layout under the destination root::

    rewind-backups.json              marker: this prefix belongs to Rewind backups
    backups/<id>/manifest.json       one per complete backup, written last
    backups/<id>/tables/...          a logical backup's dump files
    objects/<object id>.parquet      a physical backup's objects, shared by all
                                     physical backups here (incremental)

Rewind writes into a destination only when it is empty or carries the marker.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tenants.errors import AlreadyExists, NotFound
from tenants.objectstore import ObjectStore, open_object_store

MARKER = "rewind-backups.json"


@dataclass(frozen=True)
class BackupEntry:
    backup_id: str
    complete: bool
    kind: str | None
    tenant: str | None
    at_ts: int | None
    at_label: str | None
    created_ts: int | None
    bytes: int


def open_destination(uri: str, *, create: bool) -> ObjectStore:
    """The store at ``uri``; with ``create``, claim an empty one with the marker."""
    dest = open_object_store(uri)
    keys = [info.key for info in _first_keys(dest)]
    if MARKER in keys or _has_marker(dest):
        return dest
    if keys:
        raise AlreadyExists(
            f"{dest.warehouse.uri} is not empty and is not a Rewind backup destination (no {MARKER}); "
            "choose an empty prefix"
        )
    if not create:
        raise NotFound(f"{dest.warehouse.uri} holds no Rewind backups")
    dest.put(MARKER, json.dumps({"format": "rewind-backups", "format_version": 1}).encode())
    return dest


def _first_keys(dest: ObjectStore) -> list:  # type: ignore[type-arg]
    found = []
    for info in dest.list(""):
        found.append(info)
        if len(found) >= 5:
            break
    return found


def _has_marker(dest: ObjectStore) -> bool:
    return any(info.key == MARKER for info in dest.list(MARKER))


def backup_root(backup_id: str) -> str:
    return f"backups/{backup_id}"


def list_backups(dest: ObjectStore) -> list[BackupEntry]:
    """Every backup at the destination, complete or not (no manifest = incomplete)."""
    sizes: dict[str, int] = {}
    complete: set[str] = set()
    for info in dest.list("backups/"):
        parts = info.key.split("/")
        if len(parts) < 3:
            continue
        sizes[parts[1]] = sizes.get(parts[1], 0) + info.size
        if parts[2] == "manifest.json" and len(parts) == 3:
            complete.add(parts[1])
    entries = []
    for backup_id in sorted(sizes):
        if backup_id in complete:
            raw = json.loads(dest.get(f"{backup_root(backup_id)}/manifest.json"))
            entries.append(
                BackupEntry(
                    backup_id,
                    True,
                    raw.get("kind", "logical"),
                    raw.get("source_tenant"),
                    raw.get("at_ts"),
                    raw.get("at_label"),
                    raw.get("created_ts"),
                    int(raw.get("stored_bytes", sizes[backup_id])),
                )
            )
        else:
            entries.append(
                BackupEntry(backup_id, False, None, None, None, None, None, sizes[backup_id])
            )
    return sorted(entries, key=lambda e: (e.created_ts or 0, e.backup_id))


def manifest_kind(dest: ObjectStore, backup_id: str) -> str:
    from tenants.errors import ObjectMissing

    try:
        raw = json.loads(dest.get(f"{backup_root(backup_id)}/manifest.json"))
    except ObjectMissing as e:
        raise NotFound(
            f"backup {backup_id} at {dest.warehouse.uri} does not exist or is incomplete (no manifest)"
        ) from e
    kind = raw.get("kind", "logical")
    if raw.get("format") == "rewind-dump":
        return "logical"
    return str(kind)
