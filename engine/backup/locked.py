"""Operations on the backups of a vault: delete (only what no lock protects) and legal holds.

In a vault every key is read by version, so deleting a backup means removing
its versions for good, not adding delete markers (a listing by version would
still show it). Nothing here sends a delete for a version a lock or hold
still protects: each version's lock is read first, and a protected one is
kept and counted, so the only refusals S3 ever answers are for races with
another writer's retention.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from engine.backup.destination import (
    BackupEntry,
    backup_root,
    manifest_key,
    open_destination,
    previous_link,
    read_manifest,
)
from engine.backup.physical import PENDING, read_physical_manifest
from engine.backup.vault import (
    LOCK_THREADS,
    LockPolicy,
    first_and_sole,
    first_version,
    first_versions,
    is_vault,
    lock_all,
    pinned,
    read_first,
    recorded_versions,
    refuse_delete,
    wall_now_us,
)
from engine.logical.dump import Seal
from tenants.errors import InvalidArgument, Locked
from tenants.names import backup_id as checked_backup_id
from tenants.objectstore import ObjectStore
from tenants.objectstore.object_lock import (
    Version,
    delete_version,
    lock_of,
    set_legal_hold,
    versions,
)
from tenants.tenancy import TenantRecord
from tenants.times import format_ts


@dataclass(frozen=True)
class VaultDeletion:
    """What deleting a vault backup removed, and what it had to keep."""

    deleted_versions: int
    kept_locked: int


def delete_from_vault(
    dest: ObjectStore,
    entries: dict[str, BackupEntry],
    backup_id: str,
    *,
    bypass_governance: bool,
    now_us: int,
) -> int:
    """Remove ``backup_id``'s versions from a vault, if its lock and hold allow;
    the number of versions removed (see :func:`engine.backup.api.delete_backup`)."""
    entry = entries[backup_id]
    raw: dict[str, Any] | None = read_manifest(dest, backup_id) if entry.complete else None
    refuse_delete(
        backup_id,
        None if raw is None else raw.get("lock"),
        bypass_governance=bypass_governance,
        now_us=now_us,
    )
    if lock_state(dest, backup_id).get("legal_hold"):
        raise Locked(
            f"backup {backup_id} is under a legal hold: release it first with "
            f"`rewind backup hold release {dest.warehouse.uri} {backup_id}`; nothing was deleted"
        )
    # What other backups use: complete ones' objects, and those an unfinished one
    # (perhaps copying now) planned. Every other object version under objects/ is
    # this backup's or a leftover of an earlier delete whose lock had not ended
    # (locks are set a little longer than asked): collected once no lock holds it.
    shared: set[str] = set()
    unknown = False
    for other in entries.values():
        if other.backup_id == backup_id:
            continue
        if other.kind == "physical" and other.complete:
            objects = read_physical_manifest(dest, other.backup_id)["objects"]
            shared.update(str(v["path"]) for v in objects.values())
        elif not other.complete:
            planned = planned_objects(dest, other.backup_id)
            if planned is None:
                unknown = True
            else:
                shared.update(planned)
    sweep = not unknown and not any(e.problem for e in entries.values() if e.backup_id != backup_id)
    root = list(versions(dest, f"{backup_root(backup_id)}/"))
    first = [v for v in root if v.key == manifest_key(backup_id)]  # never half-listed
    rest = [v for v in root if v.key != manifest_key(backup_id)]
    if sweep:  # else another manifest is unreadable: what it shares is unknown
        rest.extend(v for v in versions(dest, "objects/") if v.key not in shared)
    done = _delete_unlocked(dest, first, bypass_governance, now_us)
    if done.kept_locked:
        raise Locked(
            f"backup {backup_id}: its manifest is still locked or held by S3; nothing was deleted"
        )
    rest_done = _delete_unlocked(dest, rest, bypass_governance, now_us)
    return done.deleted_versions + rest_done.deleted_versions


def planned_objects(dest: ObjectStore, backup_id: str) -> set[str] | None:
    """The objects an unfinished physical backup recorded before copying (its
    pending record, read at its first version); None if the record cannot be
    read, so the caller sweeps nothing it cannot prove unused."""
    data = read_first(dest, f"{backup_root(backup_id)}/{PENDING}")
    if data is None:
        return set()  # a logical one, or one that crashed before planning: no objects
    try:
        return {str(path) for path in json.loads(data)["objects"]}
    except (ValueError, TypeError, KeyError):
        return None


def _delete_unlocked(
    dest: ObjectStore, found: list[Version], bypass_governance: bool, now_us: int
) -> VaultDeletion:
    """Delete each version no lock protects (delete markers too); keep the rest."""

    def one(version: Version) -> bool:
        if not version.deleted:
            lock = lock_of(dest, version.key, version.version_id)
            governance_only = lock.mode == "GOVERNANCE" and not lock.hold
            if lock.protects(now_us) and not (bypass_governance and governance_only):
                return False
        delete_version(dest, version.key, version.version_id, bypass_governance=bypass_governance)
        return True

    with ThreadPoolExecutor(LOCK_THREADS, thread_name_prefix="vault-delete") as pool:
        outcomes = list(pool.map(one, found))
    deleted = sum(outcomes)
    return VaultDeletion(deleted, len(outcomes) - deleted)


def backup_view(dest: ObjectStore, backup_id: str, raw: dict[str, Any]) -> ObjectStore:
    """Where a logical backup is read from: in a vault, by version (a locked one
    at the versions it recorded, an unlocked one at the first version of each
    of its keys; its manifest at its first version), whatever was put or
    hidden over them since; elsewhere at its keys."""
    if not is_vault(dest):
        return dest
    recorded = recorded_versions(raw)
    if not recorded:
        first = first_versions(dest, f"{backup_root(backup_id)}/")
        recorded = {key: (v.version_id, v.size) for key, v in first.items()}
    manifest = first_version(dest, manifest_key(backup_id))
    if manifest is not None:
        recorded[manifest.key] = (manifest.version_id, manifest.size)
    return pinned(dest, recorded)


def backup_seal(dest: ObjectStore, root: str, policy: LockPolicy | None) -> Seal:
    """What a logical backup adds to its dump's manifest, computed once every file
    is written: the link to the tenant's previous backup and, when locked, the
    lock and each file's version, every one of them locked first."""
    created_us = wall_now_us()

    def seal(holder: TenantRecord) -> dict[str, Any]:
        out: dict[str, Any] = {"previous": previous_link(dest, holder.id)}
        if policy is None:
            return out
        written, only = first_and_sole(dest, f"{root}/")
        files = {k: v for k, v in written.items() if not k.endswith("/manifest.json")}
        until = policy.until(created_us)
        lock_all(
            dest, [(k, v.version_id) for k, v in files.items()], policy.mode, until, fresh=only
        )
        versions = {k: [v.version_id, v.size] for k, v in sorted(files.items())}
        return out | {"lock": policy.to_json(created_us), "versions": versions}

    return seal


def backup_versions(dest: ObjectStore, backup_id: str) -> list[tuple[str, str]]:
    """(key, version id) of everything a locked backup consists of: its files at
    their recorded versions and its manifest's first version."""
    recorded = recorded_versions(read_manifest(dest, backup_id))
    if not recorded:
        raise InvalidArgument(f"backup {backup_id} recorded no versions: it is not locked")
    pinned_keys = {(key, version) for key, (version, _) in recorded.items()}
    manifest = first_version(dest, manifest_key(backup_id))
    if manifest is not None:
        pinned_keys.add((manifest.key, manifest.version_id))
    return sorted(pinned_keys)


def set_hold(uri: str, backup_id: str, on: bool) -> int:
    """Put (``on``) or release a legal hold on every version a backup consists of;
    the number of versions. A hold is independent of retention: a held backup
    cannot be deleted, even after its retain-until, until the hold is released.

    Raises:
        InvalidArgument: the destination is not a vault (no Object Lock).
        NotFound: no such complete backup.
    """
    checked_backup_id(backup_id)
    dest = open_destination(uri, create=False)
    if not is_vault(dest):
        raise InvalidArgument(
            f"{dest.warehouse.uri} is not a vault: legal holds need an S3 bucket with Object "
            "Lock enabled"
        )
    pinned = backup_versions(dest, backup_id)
    with ThreadPoolExecutor(LOCK_THREADS, thread_name_prefix="vault-hold") as pool:
        list(pool.map(lambda kv: set_legal_hold(dest, kv[0], kv[1], on), pinned))
    return len(pinned)


def lock_state(dest: ObjectStore, backup_id: str) -> dict[str, Any]:
    """The lock a backup's manifest version carries now, as S3 reports it:
    mode, retain-until (µs and ISO) and legal hold; empty outside a vault."""
    if not is_vault(dest):
        return {}
    manifest = first_version(dest, manifest_key(backup_id))
    if manifest is None:
        return {}
    lock = lock_of(dest, manifest.key, manifest.version_id)
    return {
        "lock_mode": None if lock.mode is None else lock.mode.lower(),
        "retain_until_us": lock.until_us,
        "retain_until": None if lock.until_us is None else format_ts(lock.until_us),
        "legal_hold": lock.hold,
    }
