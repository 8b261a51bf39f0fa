"""Tamper evidence: what ``backup verify`` checks beyond the bytes of the objects.

A physical manifest records the sha256 of its own object list and of the
manifest of the tenant's previous backup at the destination (a chain). So
a manifest whose object list was edited no longer matches its own digest,
and one replaced or removed is caught by the next backup's link. In a vault
the versions themselves are evidence: Rewind writes each key once, so a
second version of a manifest (an overwrite) or a delete marker over it or
over a recorded object (a hidden key) is named, even though restores still
read the versions the backup recorded.
"""

from __future__ import annotations

import hashlib
from typing import Any

from engine.backup.destination import (
    backup_root,
    list_backups,
    manifest_bytes,
    manifest_key,
    objects_digest,
    read_manifest,
)
from engine.backup.vault import is_vault, recorded_versions
from tenants.errors import NotFound
from tenants.objectstore import ObjectStore
from tenants.objectstore.object_lock import versions


def findings(dest: ObjectStore, backup_id: str, raw: dict[str, Any], now_us: int) -> list[str]:
    """Every sign that the backup's manifest, its chain or, in a vault, its
    recorded versions were changed since it was written; empty if none."""
    where = dest.warehouse.uri
    found: list[str] = []
    digest = raw.get("objects_sha256")
    if digest is not None and objects_digest(raw.get("objects", {})) != digest:
        found.append(
            f"the object list in {where}/{manifest_key(backup_id)} was "
            "edited (it no longer matches its recorded sha256)"
        )
    found += _chain(dest, backup_id, raw.get("previous"), now_us)
    found += _successor(dest, backup_id)
    if is_vault(dest):
        found += _versions(dest, backup_id, raw)
    return found


def _chain(dest: ObjectStore, backup_id: str, link: Any, now_us: int) -> list[str]:
    """The previous backup's manifest must be there and hash as recorded."""
    if not isinstance(link, dict):
        return []
    previous = str(link.get("backup_id"))
    try:
        data = manifest_bytes(dest, previous)
    except NotFound:
        if int(link.get("retain_until_us") or 0) <= now_us:
            return []  # unlocked, or its lock ended: deleting it was allowed
        return [
            f"the manifest of the tenant's previous backup {previous} "
            f"({dest.warehouse.uri}/{manifest_key(previous)}) was removed while still locked"
        ]
    if hashlib.sha256(data).hexdigest() != link.get("manifest_sha256"):
        return [
            f"the manifest of the tenant's previous backup {previous} "
            f"({dest.warehouse.uri}/{manifest_key(previous)}) was replaced"
        ]
    return []


def _successor(dest: ObjectStore, backup_id: str) -> list[str]:
    """A later backup that links to this one must find this manifest as it was."""
    data = manifest_bytes(dest, backup_id)
    mine = hashlib.sha256(data).hexdigest()
    found = []
    for entry in list_backups(dest):
        if not entry.complete or entry.backup_id == backup_id:
            continue
        link = read_manifest(dest, entry.backup_id).get("previous")
        if isinstance(link, dict) and link.get("backup_id") == backup_id:
            if link.get("manifest_sha256") != mine:
                found.append(
                    f"its manifest {dest.warehouse.uri}/"
                    f"{manifest_key(backup_id)} was replaced (backup {entry.backup_id} "
                    "recorded another)"
                )
    return found


def _versions(dest: ObjectStore, backup_id: str, raw: dict[str, Any]) -> list[str]:
    """Overwritten or hidden keys among the manifest and the recorded objects."""
    found = []
    key = manifest_key(backup_id)
    manifest_versions = list(v for v in versions(dest, key) if v.key == key)
    if sum(1 for v in manifest_versions if not v.deleted) > 1:
        found.append(f"manifest {dest.warehouse.uri}/{key} was overwritten")
    if manifest_versions and manifest_versions[0].deleted:
        found.append(f"manifest {dest.warehouse.uri}/{key} is hidden by a delete marker")
    recorded = {key: version for key, (version, _) in recorded_versions(raw).items()}
    latest: dict[str, tuple[str, bool]] = {}
    present: set[tuple[str, str]] = set()
    prefix = "objects/" if raw.get("objects") is not None else f"{backup_root(backup_id)}/"
    for version in versions(dest, prefix):
        if version.latest:
            latest[version.key] = (version.version_id, version.deleted)
        if not version.deleted:
            present.add((version.key, version.version_id))
    for path, version_id in sorted(recorded.items()):
        if (path, version_id) not in present:
            found.append(f"object {dest.warehouse.uri}/{path} version {version_id} was removed")
        elif latest.get(path, ("", False))[1]:
            found.append(f"{dest.warehouse.uri}/{path} is hidden by a delete marker")
        elif latest.get(path, (version_id, False))[0] != version_id:
            found.append(
                f"{dest.warehouse.uri}/{path} was overwritten "
                f"(its recorded version {version_id} is no longer the latest)"
            )
    return found
