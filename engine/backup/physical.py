"""Physical backups: the snapshot's objects, copied, plus a manifest.

Objects wholly inside the snapshot are copied as they are; straddling ones
are rewritten at S (rows with ``__ts <= S``), so a physical backup keeps MVCC
history up to S and the snapshots at or before it. Objects are immutable and
stored by id under ``objects/``: one already present at the destination (an
earlier backup) is referenced, not copied again, which makes backups
incremental by construction. A rewritten object's id derives from (input, S),
so the same straddler at the same S is stored once too.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, replace
from typing import Any, cast

from engine.backup.destination import (
    MARKER,
    backup_root,
    manifest_key,
    objects_digest,
    previous_link,
    read_manifest,
)
from engine.backup.vault import (
    LockPolicy,
    first_and_sole,
    first_versions,
    is_vault,
    lock_all,
    lock_written,
    pinned,
    recorded_versions,
    slack_us,
    track_versions,
    wall_now_us,
    write_versioned,
    written_version,
)
from engine.executors.task import rewrite_object
from engine.logical.reload import discard_staging
from engine.materialise import materialise_tenant
from engine.pipeline import RestorePlan
from engine.restore.members import ObjectAction, live_members
from engine.restore.plan import plan_backup
from tenants.catalog import Tx
from tenants.catalog.engine.staging import (
    activate_restored_tenant,
    insert_staging_tenant,
)
from tenants.catalog.tenants import active_holder_id
from tenants.errors import (
    AlreadyExists,
    ConcurrentModification,
    CorruptObject,
    InvalidArgument,
    NotFound,
)
from tenants.handover import hand_over_name
from tenants.objects.intents import new_intent, record_intent_in
from tenants.objects.io import copy_object, record_of
from tenants.objects.reader import digest_of
from tenants.objects.record import ObjectRecord, add_member, insert_object, object_key
from tenants.objectstore import ObjectStore
from tenants.objectstore.object_lock import Lock
from tenants.observe import events
from tenants.progress import step
from tenants.store import TableStore
from tenants.tenancy import TenantRecord, new_id, tenant_by_id
from tenants.times import AsOf

FORMAT = "rewind-backup"
FORMAT_VERSION = 2  # 2: each stored object names its table; plans are set-based
PENDING = "pending.json"


@dataclass(frozen=True)
class PhysicalResult:
    backup_id: str
    objects: int
    copied_objects: int
    copied_bytes: int
    referenced_objects: int
    rewritten_objects: int
    stored_bytes: int
    seconds: float


def _stored_path(object_id: str) -> str:
    return f"objects/{object_id}.parquet"


def create_physical(
    store: TableStore,
    tenant: str,
    as_of: AsOf,
    dest: ObjectStore,
    backup_id: str,
    *,
    lock: LockPolicy | None = None,
) -> PhysicalResult:
    """Copy ``tenant``'s objects as of ``as_of`` to ``dest`` (straddlers rewritten at S),
    then write the manifest; with ``lock`` (a vault), lock the version of every
    object the backup references and of its manifest (engine.backup.vault).

    Raises:
        NotFound, UnprotectedTime: an unknown tenant or an unprotected point.
        CorruptObject: a source object does not match its checksum; the backup
            stops before its manifest, so it is listed as incomplete.
    """
    started = time.perf_counter()
    with events.step("plan") as planning, store.catalog.snapshot() as tx:
        plan = plan_backup(tx, tenant, as_of)
        members = live_members(tx, plan)
        planning.objects = sum(len(items) for items in members.values())
        planning.bytes = sum(i.object.bytes for items in members.values() for i in items)
    created_us = wall_now_us()
    if lock is not None:
        track_versions(dest)
    # Keys, as an unlocked backup lists them: an object hidden by a delete marker is
    # copied again (a new version), never read through the marker by its key.
    present = {info.key: info.size for info in dest.list("objects/")}
    # Written first: a crash before the manifest leaves a listed, deletable, incomplete backup.
    planned = sorted(
        _stored_path(_rewritten_record(i.object, plan.at_ts).id if _rewrites(i) else i.object.id)
        for items in members.values()
        for i in items
    )
    dest.put(f"{backup_root(backup_id)}/{PENDING}", json.dumps({"objects": planned}).encode())
    stored: dict[str, dict[str, Any]] = {}
    copied = copied_bytes = referenced = rewritten = 0
    work = sum(i.object.bytes for items in members.values() for i in items)
    with (
        events.step("copy") as copying,
        step(f"backing up {plan.source.name}", work) as backing_up,
    ):
        for table in plan.tables:
            for item in members.get(table.source_table_id, []):
                record = item.object
                if _rewrites(item):
                    record = _rewritten_record(record, plan.at_ts)
                path = _stored_path(record.id)
                if present.get(path) == record.bytes and not _rewrites(item):
                    referenced += 1
                elif not _rewrites(item):
                    try:
                        copy_object(
                            store.objects, record.key, record.bytes, record.checksum, dest, path
                        )
                    except CorruptObject as e:
                        raise CorruptObject(f"{e.message}; backup stopped") from e
                    copied += 1
                    copied_bytes += record.bytes
                else:
                    # Stored already (an earlier backup at the same S): rewrite only to
                    # describe it, writing nowhere.
                    target = cast(ObjectStore, _Nowhere(dest)) if path in present else dest
                    record = _rewrite(
                        store, item.object, table.primary_key, plan.at_ts, target, path
                    )
                    if present.get(path) == record.bytes:
                        referenced += 1
                    else:
                        if path in present:  # a different size: write it after all
                            _rewrite(store, item.object, table.primary_key, plan.at_ts, dest, path)
                        copied += 1
                        copied_bytes += record.bytes
                    rewritten += 1
                stored[item.object.id] = {
                    "path": path,
                    "record": asdict(replace(record, key=path)),
                    "table": table.source_table_id,
                }
                backing_up.advance(item.object.bytes)
        copying.objects, copying.bytes = copied, copied_bytes
    with events.step("manifest") as writing:
        total = _write_manifest(dest, plan, backup_id, stored, present, created_us, lock)
        writing.objects, writing.bytes = len(stored), total
    return PhysicalResult(
        backup_id,
        len(stored),
        copied,
        copied_bytes,
        referenced,
        rewritten,
        total,
        time.perf_counter() - started,
    )


def _write_manifest(
    dest: ObjectStore,
    plan: RestorePlan,
    backup_id: str,
    stored: dict[str, dict[str, Any]],
    present: dict[str, int],
    created_us: int,
    lock: LockPolicy | None,
) -> int:
    """Lock the backup's object versions (a vault), write its manifest, forget its
    pending list; returns the bytes it stores."""
    total = sum(int(v["record"]["bytes"]) for v in stored.values())
    previous = previous_link(dest, plan.source.id)
    if lock is not None:
        # Each version: the one this backup's write got back (fresh: it has no lock
        # to read); for an object it referenced, the version the tenant's previous
        # backup recorded and locked (whatever was put over its key since); listed
        # only for the rest (an object first stored by another tenant's backup, or
        # a managed multipart copy S3 gave no version for).
        fresh = set()
        prior = previous_objects(dest, previous)
        for entry in stored.values():
            mine = written_version(dest, entry["path"])
            if mine is not None:
                entry["version_id"] = mine
                fresh.add(entry["path"])
            elif prior.get(entry["path"], {}).get("version_id"):
                entry["version_id"] = str(prior[entry["path"]]["version_id"])
        if any("version_id" not in e for e in stored.values()):
            written, only = first_and_sole(dest, "objects/")
            for entry in stored.values():
                if "version_id" not in entry:
                    entry["version_id"] = written[entry["path"]].version_id
                    if entry["path"] in only and entry["path"] not in present:
                        fresh.add(entry["path"])
        until = lock.until(created_us)
        pinned_objects = {(e["path"], e["version_id"]) for e in stored.values()}
        locks = lock_all(
            dest,
            sorted(pinned_objects),
            lock.mode,
            until,
            fresh=frozenset(fresh),
            known=recorded_locks(prior),
            slack=slack_us(lock.retain_us),
        )
        for entry in stored.values():
            ensured = locks[(entry["path"], entry["version_id"])]
            entry["lock"] = {"mode": ensured.mode, "until_us": ensured.until_us}
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "kind": "physical",
        "backup_id": backup_id,
        "source_tenant": plan.source.name,
        "source_tenant_id": plan.source.id,
        "at_ts": plan.at_ts,
        "at_label": plan.at_label,
        "created_ts": created_us,
        "stored_bytes": total,
        "plan": json.loads(plan.to_json()),
        "objects": stored,
        "objects_sha256": objects_digest(stored),
        "previous": previous,
        "lock": None if lock is None else lock.to_json(created_us),
    }
    key = manifest_key(backup_id)
    data = json.dumps(manifest, sort_keys=True).encode()
    if lock is None:
        dest.put(key, data)
    else:
        write_versioned(dest, key, data)
        lock_written(dest, key, lock.mode, lock.until(created_us))
        # The destination's marker too: without it the vault is not recognised as one.
        lock_written(
            dest, MARKER, lock.mode, lock.until(created_us), slack=slack_us(lock.retain_us)
        )
    dest.delete_many([f"{backup_root(backup_id)}/{PENDING}"])
    return total


def previous_objects(dest: ObjectStore, previous: dict[str, Any] | None) -> dict[str, Any]:
    """The object entries (by path) of the tenant's previous backup here, read at
    its manifest's first version; none if there is none (or it was deleted since)."""
    if previous is None:
        return {}
    try:
        objects = read_manifest(dest, str(previous["backup_id"])).get("objects") or {}
    except NotFound:
        return {}
    return {str(e["path"]): e for e in objects.values() if isinstance(e, dict) and "path" in e}


def recorded_locks(prior: dict[str, Any]) -> dict[tuple[str, str], Lock]:
    """The locks the previous backup ensured on its object versions, as its
    manifest recorded them; none if it was not locked."""
    known = {}
    for path, entry in prior.items():
        lock = entry.get("lock")
        if isinstance(lock, dict) and entry.get("version_id"):
            known[(path, str(entry["version_id"]))] = Lock(
                lock.get("mode"), lock.get("until_us"), False
            )
    return known


def _rewrites(item: ObjectAction) -> bool:
    """Whether the backup stores a rewritten copy of ``item``: a straddler, or a
    member its table holds with a cut (never copied as it is: it has rows the
    table does not hold)."""
    return item.action == "rewrite" or item.object.cut_ts is not None


def _rewritten_record(record: ObjectRecord, at_ts: int) -> ObjectRecord:
    """The id a straddler gets at S: derived from (input, S), so it is stored once
    (S or the member's cut, whichever is older: that decides its rows)."""
    derived = hashlib.sha256(f"{record.id}@{record.read_ts(at_ts)}".encode()).hexdigest()[:32]
    return replace(record, id=derived)


def _rewrite(
    store: TableStore,
    record: ObjectRecord,
    primary_key: tuple[str, ...],
    at_ts: int,
    dest: ObjectStore,
    path: str,
) -> ObjectRecord:
    """The straddler's rows at S streamed to ``path`` (tenants' rewrite), described."""
    written = rewrite_object(store.objects, record, at_ts, primary_key, dest, path)
    derived = _rewritten_record(record, at_ts)
    described = record_of(written, derived.id, record.kind, record.fingerprint, record.created_ts)
    return replace(described, key=record.key)


class _Nowhere:
    """A destination that takes a stream's bytes and keeps none of them."""

    def __init__(self, dest: ObjectStore) -> None:
        self.warehouse = dest.warehouse

    def open_output(self, key: str) -> _Nowhere:
        return self

    def write(self, data: bytes | memoryview) -> int:
        return len(data)

    def commit(self) -> None:
        pass

    def abort(self) -> None:
        pass


def read_physical_manifest(dest: ObjectStore, backup_id: str) -> dict[str, Any]:
    raw = read_manifest(dest, backup_id)
    if raw.get("format") != FORMAT or raw.get("format_version") != FORMAT_VERSION:
        raise InvalidArgument(
            f"backup {backup_id} has format {raw.get('format')!r} version {raw.get('format_version')!r}; "
            f"this Rewind reads {FORMAT} version {FORMAT_VERSION}"
        )
    return raw


def objects_of(dest: ObjectStore, raw: dict[str, Any]) -> ObjectStore:
    """Where a backup's objects are read: in a vault, by version (a locked
    backup's at the versions its manifest recorded, an unlocked one's at the
    first version of each key), never the latest of a key, which anyone may
    have replaced or hidden; elsewhere at their keys."""
    recorded = recorded_versions(raw)
    if is_vault(dest) and len(recorded) < len(raw["objects"]):
        first = first_versions(dest, "objects/")
        for e in raw["objects"].values():
            path = str(e["path"])
            if path not in recorded and path in first:
                recorded[path] = (first[path].version_id, first[path].size)
    return pinned(dest, recorded) if recorded or is_vault(dest) else dest


def verify_physical(dest: ObjectStore, backup_id: str) -> int:
    """Re-read every object of the backup; sizes and sha256 must match.

    Raises:
        CorruptObject: a stored object's size or sha256 differs from the manifest.
    """
    raw = read_physical_manifest(dest, backup_id)
    objects = objects_of(dest, raw)
    for entry in raw["objects"].values():
        record = entry["record"]
        if digest_of(objects, entry["path"]) != (record["bytes"], record["checksum"]):
            raise CorruptObject(
                f"backup {backup_id}: object {dest.warehouse.uri}/{entry['path']} does not match the manifest"
            )
    return len(raw["objects"])


def restore_physical(
    store: TableStore,
    dest: ObjectStore,
    backup_id: str,
    name: str,
    *,
    replace_existing: bool,
    tenant_id: str | None = None,
) -> TenantRecord:
    """Copy the backup's objects into this warehouse and install them as tenant ``name``.

    The new tenant's id is recorded (as a ``staging`` tenant) before any byte is
    copied under it, so its keys are this catalog's: a kill mid-copy leaves a
    staging tenant that a rerun with the same ``tenant_id`` or ``tenant purge``
    discards, and GC can see. The install turns it active.

    Raises:
        AlreadyExists: ``name`` is taken and ``replace_existing`` is false.
        CorruptObject: the backup fails verification; nothing is installed.
        ConcurrentModification: the staging tenant or the name changed meanwhile.
    """
    raw = read_physical_manifest(dest, backup_id)
    with store.catalog.snapshot() as tx:
        if not replace_existing and _active_name(tx, name):
            raise AlreadyExists(
                f"tenant {name!r} exists; restore the backup under another --tenant name, "
                "or pass --replace"
            )
    with events.step("verify") as verifying:
        verifying.objects = verify_physical(dest, backup_id)
    dest = objects_of(dest, raw)
    plan = RestorePlan.from_json(json.dumps(raw["plan"]))
    stored = raw["objects"]
    tenant_id = tenant_id or new_id()
    discard_staging(store, tenant_id)  # a killed earlier run's copy, if any
    # Fresh table ids: the same backup may be restored more than once into one catalog.
    fresh = {t.new_table_id: new_id() for t in plan.tables}
    plan = replace(
        plan, tables=tuple(replace(t, new_table_id=fresh[t.new_table_id]) for t in plan.tables)
    )
    # The copies' keys, for GC if this dies: of the kinds the backup holds.
    intent = new_intent("backup-restore", {entry["record"]["kind"] for entry in stored.values()})
    with store.catalog.transaction() as tx:
        insert_staging_tenant(tx, tenant_id, name, tx.commit_ts())
        record_intent_in(
            tx,
            intent,
            store.catalog.clock(),
            [(tenant_id, t.new_table_id) for t in plan.tables],
        )
    new_table_of = {t.source_table_id: t.new_table_id for t in plan.tables}
    installed: dict[str, list[ObjectRecord]] = {}
    work = sum(int(entry["record"]["bytes"]) for entry in stored.values())
    with (
        events.step("copy") as copying,
        step(f"restoring backup {backup_id}", work) as restoring,
    ):
        for entry in stored.values():
            table_id = new_table_of[entry["table"]]
            record = ObjectRecord(**entry["record"])
            object_id = intent.new_object_id(record.kind)
            key = object_key(tenant_id, table_id, record.kind, object_id)
            copy_object(
                dest,
                entry["path"],
                record.bytes,
                record.checksum,
                store.objects,
                key,
                "backup object",
            )
            installed.setdefault(table_id, []).append(replace(record, id=object_id, key=key))
            restoring.advance(record.bytes)
        copying.objects, copying.bytes = len(stored), work
    with events.step("install") as installing, store.catalog.transaction() as tx:
        tx.observe_ts(plan.at_ts)  # this deployment's clock may be behind the source's
        ts = tx.commit_ts()
        holder = active_holder_id(tx, name)
        if holder and not replace_existing:
            raise AlreadyExists(
                f"tenant {name!r} exists; restore the backup under another --tenant name, or pass --replace"
            )
        hand_over_name(tx, name, ts, replacing=holder, what=f"restoring backup {backup_id}")
        _install(tx, plan, tenant_id, name, installed, ts, backup_id, holder)
        intent.finish(tx)
        installing.objects, installing.bytes = len(stored), work
        return tenant_by_id(tx, tenant_id)


def _active_name(tx: Tx, name: str) -> bool:
    return active_holder_id(tx, name) is not None


def _install(
    tx: Tx,
    plan: RestorePlan,
    tenant_id: str,
    name: str,
    installed: dict[str, list[ObjectRecord]],
    ts: int,
    backup_id: str,
    previous_holder: str | None,
) -> None:
    changed = activate_restored_tenant(
        tx,
        tenant_id,
        name,
        source_tenant_id=plan.source.id,
        source_ts=plan.at_ts,
        backup_id=backup_id,
        ts=ts,
        previous_holder_id=previous_holder,
    )
    if changed != 1:
        raise ConcurrentModification(
            f"restoring backup {backup_id} as {name!r}: its staging tenant {tenant_id} was "
            "discarded meanwhile (another restore of the same backup?); restore again"
        )
    # The backup's objects keep their __ts, so its snapshots at or before S read
    # here as they did at the source; the PITR window and schedule go on from now.
    materialise_tenant(tx, plan, tenant_id, ts, {db: new_id() for db in plan.databases})
    for table in plan.tables:
        for record in installed.get(table.new_table_id, []):
            insert_object(tx, replace(record, created_ts=ts))
            add_member(tx, table.new_table_id, record.id, ts)
