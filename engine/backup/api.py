"""Backup operations: create, list, show, verify, delete, restore.

``logical`` backups are dumps (engine.logical); ``physical`` ones are the
snapshot's objects (engine.backup.physical). Either restores into any catalog
and warehouse, so a backup outlives the source bucket and deployment.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import time
from dataclasses import dataclass, replace
from typing import Any

from engine.backup.destination import (
    MARKER,
    BackupEntry,
    backup_root,
    list_backups,
    manifest_key,
    manifest_kind,
    open_destination,
    read_manifest,
)
from engine.backup.evidence import findings
from engine.backup.locked import backup_seal, backup_view, delete_from_vault, lock_state
from engine.backup.physical import (
    PENDING,
    create_physical,
    read_physical_manifest,
    restore_physical,
    verify_physical,
)
from engine.backup.vault import (
    LockPolicy,
    is_vault,
    lock_written,
    refuse_delete,
    slack_us,
    wall_now_us,
)
from engine.logical.dump import dump_tenant
from engine.logical.manifest import verify_dump
from engine.logical.reload import reload_dump
from engine.operations.runs import journaled
from engine.pipeline import Kind as Kind
from tenants.catalog.engine.staging import tenant_state
from tenants.catalog.tenants import active_holder_id
from tenants.errors import CorruptObject, InvalidArgument, NotFound
from tenants.names import backup_id as checked_backup_id
from tenants.names import tenant_name
from tenants.objectstore import ObjectStore
from tenants.observe import events
from tenants.store import TableStore
from tenants.tenancy import TenantRecord, new_id
from tenants.times import AsOf


@dataclass(frozen=True)
class BackupResult:
    backup_id: str
    kind: str
    uri: str
    objects: int
    copied_objects: int
    copied_bytes: int
    referenced_objects: int
    rows: int | None
    seconds: float


def create_backup(
    store: TableStore,
    tenant: str,
    as_of: AsOf,
    uri: str,
    *,
    kind: str = "physical",
    reader: str = "local",
    lock: str | None = None,
    retain: str | None = None,
) -> BackupResult:
    """Back up ``tenant`` as of ``as_of`` to the destination at ``uri``: ``physical``
    (its objects, incremental) or ``logical`` (a portable dump).

    With ``lock`` (``"compliance"`` or ``"governance"``) and ``retain`` (a
    duration, ``"30d"``), the backup is written to an S3 bucket with Object
    Lock and every object version it references, and its manifest, is locked
    until ``retain`` from now: nobody can delete it before then, not even with
    the credentials that wrote it (docs/vault.md).

    Raises:
        InvalidArgument: an unknown kind, or a malformed ``uri``; a lock on a
            destination that cannot lock (``file://``, a bucket without Object
            Lock) or a malformed ``lock``/``retain``: nothing is written.
        NotFound, UnprotectedTime: an unknown tenant or an unprotected point;
            nothing is written to the destination.
        AlreadyExists: ``uri`` holds data that is not a Rewind backup.
        CorruptObject, ObjectMissing: a source object is damaged or gone; the
            backup stays incomplete (listed as such) and can be deleted.
    """
    if kind not in ("logical", "physical"):
        raise InvalidArgument(f"unknown backup kind {kind!r}: use logical or physical")
    policy = LockPolicy.parse(lock, retain)
    point = store.resolve_time(tenant, as_of)  # unknown tenant or unprotected point: claim nothing
    dest = open_destination(uri, create=True, lockable=policy is not None)
    backup_id = new_id()
    with (
        events.job("backup", tenant, backup_id),
        journaled(
            store.catalog,
            "backup",
            tenant=tenant,
            target=uri,
            method=kind,
            point_ts=point,
            backup_id=backup_id,
        ) as run,
    ):
        result = _create_backup(
            store, tenant, as_of, dest, backup_id, kind=kind, reader=reader, policy=policy, uri=uri
        )
        run.bytes, run.objects, run.row_count = result.copied_bytes, result.objects, result.rows
        return result


def _create_backup(
    store: TableStore,
    tenant: str,
    as_of: AsOf,
    dest: ObjectStore,
    backup_id: str,
    *,
    kind: str,
    reader: str,
    policy: LockPolicy | None,
    uri: str,
) -> BackupResult:
    """:func:`create_backup` once its arguments are checked: a dump, or the
    objects (engine.backup.physical), each step an event."""
    if kind == "logical":
        with events.step("dump") as dumping:
            result = dump_tenant(
                store,
                tenant,
                as_of,
                dest,
                backup_root(backup_id),
                reader="spark" if reader == "spark" else "local",
                dump_id=backup_id,
                seal=backup_seal(dest, backup_root(backup_id), policy),
            )
            if policy is not None:
                until = policy.until(wall_now_us())
                lock_written(dest, manifest_key(backup_id), policy.mode, until)
                lock_written(dest, MARKER, policy.mode, until, slack=slack_us(policy.retain_us))
            files = sum(len(t.files) for t in result.manifest.tables)
            dumping.objects, dumping.bytes = files, result.manifest.bytes
            dumping.rows = result.manifest.rows
        return BackupResult(
            backup_id,
            kind,
            uri,
            files,
            files,
            result.manifest.bytes,
            0,
            result.manifest.rows,
            result.seconds,
        )
    phys = create_physical(store, tenant, as_of, dest, backup_id, lock=policy)
    return BackupResult(
        backup_id,
        kind,
        uri,
        phys.objects,
        phys.copied_objects,
        phys.copied_bytes,
        phys.referenced_objects,
        None,
        phys.seconds,
    )


def backups(uri: str) -> list[BackupEntry]:
    """Every backup at ``uri``, oldest first; in a vault, with each one's legal hold
    as S3 reports it now (its lock mode and retain-until come from its manifest)."""
    dest = open_destination(uri, create=False)
    entries = list_backups(dest)
    if not is_vault(dest):
        return entries
    return [
        replace(e, legal_hold=bool(lock_state(dest, e.backup_id).get("legal_hold")))
        if e.complete
        else e
        for e in entries
    ]


def show_backup(uri: str, backup_id: str) -> dict[str, Any]:
    """The backup's manifest without its plan and file list.

    Raises:
        InvalidName: ``backup_id`` is not an id (a path, ``..``): nothing is read.
        NotFound: no such complete backup at ``uri``.
    """
    checked_backup_id(backup_id)
    dest = open_destination(uri, create=False)
    raw = read_manifest(dest, backup_id)
    raw.pop("plan", None)
    objects = raw.pop("objects", None)
    if objects is not None:
        raw["object_count"] = len(objects)
    return raw | lock_state(dest, backup_id)


def verify_backup(uri: str, backup_id: str) -> int:
    """Re-read every file of the backup and check sizes and hashes; loads nothing.
    A physical backup's manifest is also checked against its own object-list
    digest and the tenant's chain of manifests, and in a vault every recorded
    version must still be there, not overwritten or hidden (engine.backup.evidence).

    Raises:
        InvalidName: ``backup_id`` is not an id (a path, ``..``): nothing is read.
    """
    checked_backup_id(backup_id)
    dest = open_destination(uri, create=False)
    raw = read_manifest(dest, backup_id)
    if manifest_kind(dest, backup_id) == "logical":
        manifest = verify_dump(backup_view(dest, backup_id, raw), backup_root(backup_id))
        verified = sum(len(t.files) for t in manifest.tables)
    else:
        verified = verify_physical(dest, backup_id)
    found = findings(dest, backup_id, raw, wall_now_us())
    if found:
        more = f"; and {len(found) - 3} more" if len(found) > 3 else ""
        raise CorruptObject(
            f"backup {backup_id} at {uri} was tampered with: {'; '.join(found[:3])}{more}"
        )
    return verified


def delete_backup(
    uri: str, backup_id: str, *, bypass_governance: bool = False, now_us: int | None = None
) -> int:
    """Delete a backup: its manifest first (so it is never half-listed), then its files.

    Objects of a physical backup are deleted only if no other physical backup
    at the destination references them. In a vault (a bucket with Object
    Lock) the backup's versions are removed for good, and only once no lock
    protects them: a locked backup is refused before its retain-until date
    (a governance one unless ``bypass_governance``), a held one until its
    hold is released, and no object another backup's lock still covers is
    touched.

    Raises:
        InvalidName: ``backup_id`` is not an id (a path, ``..``): nothing is read.
        NotFound: no backup ``backup_id`` at ``uri``.
        Locked: the backup's lock or legal hold still protects it; nothing is deleted.
        InvalidArgument: ``bypass_governance`` on a compliance or unlocked backup.
    """
    checked_backup_id(backup_id)
    dest = open_destination(uri, create=False)
    now = wall_now_us() if now_us is None else now_us
    if is_vault(dest):  # its own lock first: refused before every manifest is read
        try:
            own = read_manifest(dest, backup_id).get("lock")
        except NotFound:
            own = None  # incomplete, or no such backup: said below
        refuse_delete(backup_id, own, bypass_governance=bypass_governance, now_us=now)
    entries = {e.backup_id: e for e in list_backups(dest)}
    if backup_id not in entries:
        raise NotFound(f"no backup {backup_id} at {uri}")
    if is_vault(dest):
        return delete_from_vault(
            dest,
            entries,
            backup_id,
            bypass_governance=bypass_governance,
            now_us=now,
        )
    refuse_delete(backup_id, None, bypass_governance=bypass_governance, now_us=0)
    shared: set[str] = set()
    mine: set[str] = set()
    for other in entries.values():
        if other.kind == "physical" and other.complete:
            paths = {
                v["path"] for v in read_physical_manifest(dest, other.backup_id)["objects"].values()
            }
            (mine if other.backup_id == backup_id else shared).update(paths)
    root = backup_root(backup_id)
    keys = [i.key for i in dest.list(f"{root}/")]
    if not entries[backup_id].complete and f"{root}/{PENDING}" in keys:
        mine |= _pending_objects(dest, f"{root}/{PENDING}")
    if any(e.problem for e in entries.values() if e.backup_id != backup_id):
        # Another backup's manifest is unreadable: the shared objects it uses
        # are unknown, so none is deleted (never delete what we cannot prove
        # unused). The unreadable one's own objects stay too, for the same reason.
        mine = set()
    manifest = f"{root}/manifest.json"
    deleted = dest.delete_many([k for k in keys if k == manifest])
    deleted += dest.delete_many([k for k in keys if k != manifest] + sorted(mine - shared))
    return deleted


def _pending_objects(dest: ObjectStore, key: str) -> set[str]:
    """The objects a crashed physical backup recorded; none if the record is unreadable."""
    try:
        raw = json.loads(dest.get(key))
        return {str(path) for path in raw["objects"]}
    except (ValueError, TypeError, KeyError):
        return set()


def staging_id_for(store: TableStore, backup_id: str, name: str) -> str:
    """The staging tenant id for restoring ``backup_id`` as ``name``, stable across reruns.

    The n-th restore of one backup under one name gets the n-th id of a fixed
    sequence: the first that no installed tenant took. A rerun after a kill
    therefore lands on the half-loaded staging tenant and replaces it.
    """
    with store.catalog.snapshot() as tx:
        for n in itertools.count():
            candidate = hashlib.sha256(
                f"backup-restore/{backup_id}/{name}/{n}".encode()
            ).hexdigest()
            state = tenant_state(tx, candidate[:32])
            if state is None or state == "staging":
                return candidate[:32]
    raise AssertionError("unreachable")


def restore_backup(
    store: TableStore, uri: str, backup_id: str, *, tenant: str | None = None, replace: bool = False
) -> tuple[TenantRecord, float]:
    """Restore a backup into this store's catalog and warehouse as ``tenant``.

    Raises:
        InvalidName: ``backup_id`` is not an id (a path, ``..``): nothing is read.
    """
    checked_backup_id(backup_id)
    started = time.perf_counter()
    dest = open_destination(uri, create=False)
    record = restore_from(store, dest, backup_id, tenant=tenant, replace=replace)
    return record, time.perf_counter() - started


def restore_from(
    store: TableStore,
    dest: ObjectStore,
    backup_id: str,
    *,
    tenant: str | None = None,
    replace: bool = False,
) -> TenantRecord:
    """:func:`restore_backup` from a destination already open (a restore drill
    opens it once for its choice, its checks and its restore)."""
    checked_backup_id(backup_id)
    kind = manifest_kind(dest, backup_id)
    raw = read_manifest(dest, backup_id)
    name = tenant_name(tenant or raw["source_tenant"])
    with events.job("backup_restore", name, backup_id):
        if kind == "logical":
            holder = None
            if replace:
                with store.catalog.snapshot() as tx:
                    holder = active_holder_id(tx, name)
            with events.step("reload") as reloading:
                result = reload_dump(
                    store,
                    backup_view(dest, backup_id, raw),
                    backup_root(backup_id),
                    target_name=name,
                    replace_tenant_id=holder,
                    # One staging id per (backup, name): a rerun after a kill replaces the
                    # half-loaded staging tenant instead of leaving it behind.
                    staging_id=staging_id_for(store, backup_id, name),
                    job_id=backup_id,
                )
                reloading.bytes, reloading.rows = result.manifest.bytes, result.rows
            return result.tenant
        return restore_physical(
            store,
            dest,
            backup_id,
            name,
            replace_existing=replace,
            tenant_id=staging_id_for(store, backup_id, name),
        )
