"""Reload: load a dump into a new tenant, verify it, then swap names.

The new tenant is built in state ``staging``: it holds the target name but is
invisible to lookups by name, so nothing visible changes until the install
transaction, which (in place) retires the current holder of the name and
makes the staging tenant active, exactly as the physical path does. Data goes
through the normal write path, streamed (``tenants.loads.load_into``): one
commit per dump file, read batch by batch, so a file of any size becomes a
few sorted objects without being held. Counts and content hashes are checked
against the manifest, streamed as well, before the install. A rerun wipes a half-built
staging tenant and starts its load again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from engine.logical.manifest import (
    DumpManifest,
    TableCheck,
    check_file,
    part_record,
    verify_dump,
)
from engine.materialise import carry_settings
from engine.pipeline import RestorePlan
from tenants.catalog import Tx
from tenants.catalog.engine.staging import (
    activate_reloaded_tenant,
    delete_staging_rows,
    insert_staging_tenant,
    tenant_state,
    unfinished_restore_building,
)
from tenants.catalog.tenants import active_holder_id
from tenants.errors import (
    AlreadyExists,
    ConcurrentModification,
    CorruptObject,
    InvalidArgument,
    RewindError,
)
from tenants.handover import hand_over_name
from tenants.loads import load_into
from tenants.names import staging_id as checked_staging_id
from tenants.objects.reader import open_object
from tenants.objectstore import ObjectStore
from tenants.progress import step
from tenants.reads.visible import plan_read, stream_visible
from tenants.store import TableStore
from tenants.tenancy import (
    DEFAULT_RETENTION_US,
    TableRecord,
    TenantRecord,
    create_table,
    find_tenant,
    new_id,
    tenant_by_id,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReloadResult:
    tenant: TenantRecord
    manifest: DumpManifest
    rows: int
    seconds: float


def reload_dump(
    store: TableStore,
    dump: ObjectStore,
    root: str,
    *,
    target_name: str,
    replace_tenant_id: str | None = None,
    staging_id: str | None = None,
    job_id: str | None = None,
    retention_us: int = DEFAULT_RETENTION_US,
    on_swap: Callable[[Tx], None] | None = None,
    checkpoint: Callable[[], None] | None = None,
    settings_from: RestorePlan | None = None,
) -> ReloadResult:
    """Load the dump at ``root`` as tenant ``target_name``.

    ``replace_tenant_id`` (in place) names the active tenant to retire at the
    swap; without it the name must be free (a clone or a new deployment).
    ``on_swap`` runs inside the swap transaction (a restore job marks itself
    done there, so the swap and the job's end are one commit); ``checkpoint``
    runs between loaded files and may raise to stop the load. ``settings_from``
    (a restore job's plan) gives the new tenant the source's PITR window and
    schedule; not its snapshots, which no reloaded row is old enough to serve.

    Raises:
        AlreadyExists: ``target_name`` is taken and nothing is to be replaced.
        CorruptObject: a dump file or a reloaded table differs from the manifest;
            the staging tenant is discarded and nothing is installed.
        ConcurrentModification: the name changed hands while the dump loaded.
    """
    started = time.perf_counter()
    root = root.rstrip("/")
    if staging_id is not None:
        checked_staging_id(staging_id)  # it names tenants/<id>/: refused before any I/O
    manifest = verify_dump(dump, root)  # every file's size and hash, before anything is created
    staging_id = staging_id or new_id()
    with store.catalog.transaction() as tx:
        if replace_tenant_id is None and _active(tx, target_name):
            raise AlreadyExists(
                f"cannot load the dump as {target_name!r}: an active tenant has that name; "
                "choose another name"
            )
        wipe_staging(tx, staging_id)
        staging = _create_staging(tx, staging_id, target_name)
        targets = {
            (table.database, table.name): create_table(
                tx, staging, table.database, table.name, table.schema()
            )
            for table in manifest.tables
        }
    # Objects a killed earlier load wrote under this staging id: nothing references
    # them (the staging tenant was just rebuilt empty), and nothing is loaded yet.
    store.objects.delete_many(i.key for i in store.objects.list(f"tenants/{staging_id}/"))
    try:
        rows = _load(store, dump, root, manifest, staging, targets, checkpoint)
        _verify(store, manifest, staging)
    except RewindError:
        discard_staging(store, staging_id)
        raise
    with store.catalog.transaction() as tx:
        ts = tx.commit_ts()
        hand_over_name(
            tx,
            target_name,
            ts,
            replacing=replace_tenant_id,
            what=f"reloading dump {manifest.dump_id}",
            retention_us=retention_us,
        )
        activate_reloaded_tenant(
            tx,
            staging_id,
            source_tenant_id=manifest.source_tenant_id,
            source_ts=manifest.at_ts,
            job_id=job_id,
            ts=ts,
            previous_holder_id=replace_tenant_id,
        )
        if settings_from is not None:
            carry_settings(tx, settings_from, staging_id, ts, snapshots=False)
        if on_swap is not None:
            on_swap(tx)
        tenant = tenant_by_id(tx, staging_id)
    log.info("loaded dump %s (%d rows) as tenant %s", manifest.dump_id, rows, tenant.ref)
    return ReloadResult(tenant, manifest, rows, time.perf_counter() - started)


def _load(
    store: TableStore,
    dump: ObjectStore,
    root: str,
    manifest: DumpManifest,
    staging: TenantRecord,
    targets: dict[tuple[str, str], TableRecord],
    checkpoint: Callable[[], None] | None,
) -> int:
    rows = 0
    work = sum(entry.bytes for table in manifest.tables for entry in table.files)
    with step(f"reloading {manifest.source_tenant}", work) as reloading:
        for table in manifest.tables:
            target = targets[(table.database, table.name)]
            for entry in table.files:
                if checkpoint is not None:
                    checkpoint()
                if entry.rows:
                    # One commit per file, streamed: its size and sha256 are checked
                    # as it is read (open_object), its rows never held at once.
                    with open_object(dump, part_record(root, entry)) as reader:
                        batches = reader.batches(target.schema.names)
                        loaded = load_into(
                            store.catalog, store.objects, staging, target, batches, None
                        )
                    rows += loaded.upserted
                else:
                    check_file(dump, root, entry)
                reloading.advance(entry.bytes)
    return rows


def discard_staging(store: TableStore, staging_id: str) -> None:
    """Delete the objects a staging tenant wrote (nothing else shares them), then forget it.

    Objects first: a crash between the two leaves the staging row, which a rerun
    or ``tenant purge`` discards again; the other order would leave keys under a
    tenant id no catalog row names, which GC never deletes.
    """
    prefix = f"tenants/{staging_id}/"
    store.objects.delete_many(info.key for info in store.objects.list(prefix))
    with store.catalog.transaction() as tx:
        wipe_staging(tx, staging_id)


def discard_abandoned_staging(store: TableStore, ref: str) -> TenantRecord:
    """Discard a staging tenant that no unfinished restore job is building.

    A killed ``backup restore`` (which runs no job) leaves one behind; a rerun
    of the same restore also replaces it.

    Raises:
        InvalidArgument: ``ref`` is not a staging tenant, or a restore job owns it.
    """
    with store.catalog.snapshot() as tx:
        tenant = find_tenant(tx, ref)
        owner = unfinished_restore_building(tx, tenant.id)
    if tenant.state != "staging":
        raise InvalidArgument(
            f"tenant {tenant.ref} is {tenant.state}, not a half-loaded staging tenant"
        )
    if owner is not None:
        raise InvalidArgument(
            f"staging tenant {tenant.ref} belongs to unfinished restore job {owner}; "
            f"resume or cancel that job (`rewind restore-tenant {tenant.name} --cancel {owner}`)"
        )
    discard_staging(store, tenant.id)
    return tenant


def _active(tx: Tx, name: str) -> bool:
    return active_holder_id(tx, name) is not None


def _create_staging(tx: Tx, staging_id: str, name: str) -> TenantRecord:
    insert_staging_tenant(tx, staging_id, name, tx.commit_ts())
    return tenant_by_id(tx, staging_id)


def wipe_staging(tx: Tx, staging_id: str) -> None:
    """Forget a half-built staging tenant left by a crash (its objects become orphans)."""
    state = tenant_state(tx, staging_id)
    if state is None:
        return
    if state != "staging":
        raise ConcurrentModification(f"tenant id {staging_id} is already {state}")
    delete_staging_rows(tx, staging_id)


def _verify(store: TableStore, manifest: DumpManifest, staging: TenantRecord) -> None:
    for table in manifest.tables:
        table.schema()  # the fingerprint still matches its columns
        check = TableCheck(table)
        plan = plan_read(store.catalog, staging.ref, table.database, table.name)
        for rows in stream_visible(store.objects, plan):
            check.update(rows)
        if check.rows != table.rows or check.digest() != table.content_hash:
            raise CorruptObject(
                f"reloading dump {manifest.dump_id}: table {table.qualified} holds {check.rows} rows, "
                f"the manifest says {table.rows} (or their contents differ); nothing was installed"
            )
