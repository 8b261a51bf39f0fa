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

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from engine.backup.vault import first_version, first_versions, is_vault, read_first, require_vault
from tenants.config import S3Settings
from tenants.errors import AlreadyExists, CorruptObject, NotFound, ObjectMissing
from tenants.names import backup_id as checked_backup_id
from tenants.objectstore import ObjectStore, open_object_store
from tenants.spark.credentials import environment_settings

MARKER = "rewind-backups.json"


@dataclass(frozen=True)
class BackupEntry:
    """One backup as listed. ``complete`` only if its manifest is there and readable;
    ``problem`` says why a backup with a manifest is not (it is not restorable)."""

    backup_id: str
    complete: bool
    kind: str | None
    tenant: str | None
    at_ts: int | None
    at_label: str | None
    created_ts: int | None
    bytes: int
    problem: str | None = None
    tenant_id: str | None = None
    lock_mode: str | None = None
    retain_until_us: int | None = None
    legal_hold: bool | None = None  # asked of S3 by ``backups()`` in a vault; None: not asked


def open_destination(
    uri: str, *, create: bool, s3: S3Settings | None = None, lockable: bool = False
) -> ObjectStore:
    """The object store at ``uri``; with ``create``, claim an empty one with the marker.

    Args:
        uri: ``s3://bucket/prefix`` or ``file:///path``.
        create: claim an empty destination (write the marker) instead of refusing it.
        s3: how an ``s3://`` destination reaches S3; the destination reads no
            environment of its own. Default, for convenience at this public
            entry: ``environment_settings(backup=True)``, the one source of S3
            settings (tenants.spark.credentials): the destination's own
            ``REWIND_BACKUP_AWS_*`` variables (another account, profile or
            endpoint than the warehouse's) when any is set, else the AWS ones,
            completed under spark-submit as the warehouse's are.

    Raises:
        AlreadyExists: ``uri`` holds other data and no marker.
        NotFound: no marker there and not ``create``.
        InvalidArgument: ``lockable`` and the bucket cannot lock (checked before
            anything is written).
    """
    if s3 is None:
        s3 = environment_settings(backup=True)
    dest = open_object_store(uri, s3, what="backup destination")
    if lockable:
        require_vault(dest)
    keys = [info.key for info in _first_keys(dest)]
    if MARKER in keys or _has_marker(dest):
        return dest
    if is_vault(dest) and first_version(dest, MARKER) is not None:
        return dest  # a vault whose keys someone hid behind delete markers
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
    """``backups/<id>``; ``InvalidName`` if the id could name anything else."""
    return f"backups/{checked_backup_id(backup_id)}"


def read_manifest(dest: ObjectStore, backup_id: str) -> dict[str, Any]:
    """The backup's manifest as a JSON object.

    Raises:
        NotFound: no manifest (no such backup, or an incomplete one).
        CorruptObject: the manifest is there but is not a JSON object.
    """
    key = manifest_key(backup_id)
    data = manifest_bytes(dest, backup_id)
    try:
        raw = json.loads(data)
    except (UnicodeDecodeError, ValueError) as e:  # JSONDecodeError is a ValueError
        raise CorruptObject(
            f"backup {backup_id}: manifest {dest.warehouse.uri}/{key} is not valid JSON ({e}); "
            f"the backup cannot be restored: delete it with "
            f"`rewind backup delete {dest.warehouse.uri} {backup_id}`"
        ) from e
    if not isinstance(raw, dict):
        raise CorruptObject(
            f"backup {backup_id}: manifest {dest.warehouse.uri}/{key} is not a JSON object; "
            f"the backup cannot be restored: delete it with "
            f"`rewind backup delete {dest.warehouse.uri} {backup_id}`"
        )
    return raw


def manifest_key(backup_id: str) -> str:
    return f"{backup_root(backup_id)}/manifest.json"


def manifest_bytes(dest: ObjectStore, backup_id: str) -> bytes:
    """The manifest as written: in a vault, the first version of its key (Rewind
    writes a manifest once; a newer version or a delete marker is someone else's).

    Raises:
        NotFound: no manifest (no such backup, or an incomplete one).
    """
    key = manifest_key(backup_id)
    missing = NotFound(
        f"backup {backup_id} at {dest.warehouse.uri} does not exist or is incomplete (no manifest)"
    )
    if is_vault(dest):
        data = read_first(dest, key)
        if data is None:
            raise missing
        return data
    try:
        return dest.get(key)
    except ObjectMissing as e:
        raise missing from e


def _listing(dest: ObjectStore, prefix: str) -> Iterator[tuple[str, int]]:
    """(key, size) under ``prefix``: in a vault, every key with a surviving version."""
    if is_vault(dest):
        for key, version in sorted(first_versions(dest, prefix).items()):
            yield key, version.size
        return
    for info in dest.list(prefix):
        yield info.key, info.size


def list_backups(dest: ObjectStore) -> list[BackupEntry]:
    """Every backup at the destination, complete or not (no manifest = incomplete).

    One unreadable manifest does not hide the others: that backup is listed
    with its ``problem`` and the listing goes on.
    """
    sizes: dict[str, int] = {}
    complete: set[str] = set()
    for key, size in _listing(dest, "backups/"):
        parts = key.split("/")
        if len(parts) < 3:
            continue
        sizes[parts[1]] = sizes.get(parts[1], 0) + size
        if parts[2] == "manifest.json" and len(parts) == 3:
            complete.add(parts[1])
    entries = []
    for backup_id in sorted(sizes):
        if backup_id in complete:
            entries.append(_listed(dest, backup_id, sizes[backup_id]))
        else:
            entries.append(
                BackupEntry(backup_id, False, None, None, None, None, None, sizes[backup_id])
            )
    return sorted(entries, key=lambda e: (e.created_ts or 0, e.backup_id))


def _listed(dest: ObjectStore, backup_id: str, size: int) -> BackupEntry:
    """The entry of a backup with a manifest; a flagged one if it cannot be read."""
    try:
        raw = read_manifest(dest, backup_id)
        return BackupEntry(
            backup_id,
            True,
            str(raw.get("kind", "logical")),
            _optional(raw.get("source_tenant"), str),
            _optional(raw.get("at_ts"), int),
            _optional(raw.get("at_label"), str),
            _optional(raw.get("created_ts"), int),
            int(raw.get("stored_bytes", size)),
            tenant_id=_optional(raw.get("source_tenant_id"), str),
            lock_mode=_optional((raw.get("lock") or {}).get("mode"), str),
            retain_until_us=_optional((raw.get("lock") or {}).get("retain_until_us"), int),
        )
    except (CorruptObject, NotFound) as e:  # NotFound: deleted since it was listed
        problem = e.message
    except (TypeError, ValueError) as e:
        problem = f"backup {backup_id}: its manifest has a field of the wrong type ({e})"
    return BackupEntry(backup_id, False, None, None, None, None, None, size, problem)


def _optional(value: Any, kind: type) -> Any:
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        raise TypeError(f"{value!r} is not {kind.__name__}")
    return value


def manifest_kind(dest: ObjectStore, backup_id: str) -> str:
    raw = read_manifest(dest, backup_id)
    kind = raw.get("kind", "logical")
    if raw.get("format") == "rewind-dump":
        return "logical"
    return str(kind)


def objects_digest(objects: dict[str, Any]) -> str:
    """sha256 of a manifest's object list as canonical JSON: what the manifest
    says the backup holds, so a list edited later no longer matches."""
    return hashlib.sha256(json.dumps(objects, sort_keys=True).encode()).hexdigest()


def previous_link(dest: ObjectStore, tenant_id: str) -> dict[str, Any] | None:
    """The link of a new manifest to the newest complete backup of the same tenant
    here: its id, the sha256 of its manifest as written and, if it is locked,
    its retain-until. The manifests of one tenant form a chain: replacing one
    is detected by the next (``backup verify``), and so is removing a locked
    one before its date (removing an unlocked backup, or a lock that ended,
    is an ordinary ``backup delete``)."""
    mine = [e for e in list_backups(dest) if e.complete and e.tenant_id == tenant_id]
    if not mine:
        return None
    last = mine[-1]  # list_backups sorts by creation
    digest = hashlib.sha256(manifest_bytes(dest, last.backup_id)).hexdigest()
    link: dict[str, Any] = {"backup_id": last.backup_id, "manifest_sha256": digest}
    if last.retain_until_us is not None:  # removing it before then can only be an attack
        link["retain_until_us"] = last.retain_until_us
    return link
