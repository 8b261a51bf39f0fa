"""Restore drills: prove that a backup restores, without touching what it protects.

A backup nobody has restored is a hope. A drill restores one backup into a
scratch deployment of its own, a temporary SQLite catalog and a fresh prefix
``drill-<id>/`` of a scratch warehouse (a temporary ``file://`` directory by
default), then checks the restored tenant against the backup's manifest. The
tenant the backup came from is never opened: its catalog gets one row, the
drill's entry in the runs journal (kind ``drill``), and nothing else. The
scratch area is removed whatever happens, so a drill every night leaves
nothing behind.

What a drill proves, by kind (the checks of ``restore-tenant --verify full``,
with the manifest in place of the live source, which a disaster may have
taken):

- both: the manifest is intact (``backup verify``'s tamper evidence: its
  object list's digest, the tenant's chain of manifests and, in a vault, the
  recorded versions), and every object or dump file has its recorded size
  and sha256 as it is copied or loaded;
- ``physical``: each restored table holds exactly the manifest's objects for
  it (by size and checksum), each object's Parquet footer holds the rows its
  record promises, and every table reads back through MVCC (its rows counted);
- ``logical``: each table's row count and content hash, read back from the
  reloaded tenant, equal the manifest's (the reload's own full verify).
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from engine.backup.api import restore_from
from engine.backup.destination import (
    BackupEntry,
    backup_root,
    list_backups,
    open_destination,
    read_manifest,
)
from engine.backup.evidence import findings
from engine.backup.locked import backup_view
from engine.backup.vault import wall_now_us
from engine.logical.manifest import read_manifest as read_dump_manifest
from engine.operations.runs import journaled
from engine.pipeline import RestorePlan
from tenants.config import S3Settings, Warehouse
from tenants.errors import CorruptObject, InvalidArgument, NotFound, RewindError
from tenants.names import backup_id as checked_backup_id
from tenants.names import tenant_name
from tenants.objects.reader import open_object
from tenants.objectstore import ObjectStore, open_object_store
from tenants.reads.visible import plan_read, stream_visible
from tenants.redaction import redact
from tenants.store import TableStore
from tenants.tenancy import new_id

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DrillResult:
    """A drill that passed: what it restored and checked, and how long it took."""

    run_id: str  # the drill's row in the runs journal
    backup_id: str
    uri: str  # the destination, redacted
    tenant: str  # the backed-up tenant's name
    kind: str  # physical or logical
    at_ts: int  # the point the backup holds
    at_label: str | None
    objects: int  # objects (physical) or dump files (logical) checked
    bytes: int
    tables: int
    rows: int  # rows the restored tables hold
    table_rows: dict[str, int]
    seconds: float
    scratch: str  # where it restored (removed since), redacted


def choose_backup(
    uri: str, backup_id: str | None = None, *, tenant: str | None = None
) -> BackupEntry:
    """The backup a drill checks: ``backup_id``, or the newest complete backup at
    ``uri`` (of ``tenant`` when given).

    Raises:
        InvalidName: ``backup_id`` or ``tenant`` is malformed; nothing is read.
        NotFound: ``uri`` holds no backups, no such complete backup, or none of ``tenant``.
        InvalidArgument: ``backup_id`` is a backup of another tenant than ``tenant``.
    """
    _check_names(backup_id, tenant)
    return _choose(open_destination(uri, create=False), backup_id, tenant)


def _check_names(backup_id: str | None, tenant: str | None) -> None:
    if backup_id is not None:
        checked_backup_id(backup_id)
    if tenant is not None:
        tenant_name(tenant)


def _choose(dest: ObjectStore, backup_id: str | None, tenant: str | None) -> BackupEntry:
    where = dest.warehouse.uri
    entries = list_backups(dest)
    if backup_id is not None:
        found = [e for e in entries if e.backup_id == backup_id]
        if not found:
            raise NotFound(f"no backup {backup_id} at {where} (`rewind backup list {where}`)")
        entry = found[0]
        if not entry.complete:
            why = entry.problem or "it has no manifest: it never finished"
            raise NotFound(
                f"backup {backup_id} at {where} is not complete ({why}); nothing to drill"
            )
        if tenant is not None and entry.tenant != tenant:
            raise InvalidArgument(
                f"backup {backup_id} at {where} is of tenant {entry.tenant!r}, not {tenant!r}"
            )
        return entry
    complete = [e for e in entries if e.complete and (tenant is None or e.tenant == tenant)]
    if not complete:
        of = "" if tenant is None else f" of tenant {tenant!r}"
        raise NotFound(f"no complete backup{of} at {where} (`rewind backup list {where}`)")
    return complete[-1]  # list_backups sorts by creation: the newest last


def drill_backup(
    store: TableStore,
    uri: str,
    backup_id: str | None = None,
    *,
    tenant: str | None = None,
    scratch: str | None = None,
) -> DrillResult:
    """Restore a backup into a scratch deployment, check it against its manifest,
    journal the drill in ``store``'s catalog and remove the scratch area.

    Args:
        store: the deployment whose runs journal records the drill; nothing
            else of it is read or written.
        uri: the backup destination.
        backup_id: the backup to drill; default the newest complete one (of
            ``tenant`` when given).
        tenant: only backups of this tenant.
        scratch: where the restored objects go, a warehouse URI (``s3://bucket/prefix``
            or ``file:///path``): the drill writes under a fresh ``drill-<id>/``
            prefix there and deletes it. Default: a temporary directory. It may not
            lie inside ``store``'s warehouse or the destination.

    Returns:
        What was restored and checked: objects, bytes, rows per table, seconds.

    Raises:
        InvalidName, InvalidArgument, NotFound: bad input (a malformed id, tenant or
            scratch URI; no such backup): refused before anything is journaled.
        CorruptObject, ObjectMissing: the backup differs from its manifest, naming
            the object or table; the drill is journaled ``failed``.
    """
    started = time.perf_counter()
    _check_names(backup_id, tenant)
    area = _scratch_area(store, uri, scratch)
    # Opened once: each opening of an s3:// destination builds a boto3 client.
    dest = open_destination(uri, create=False)
    entry = _choose(dest, backup_id, tenant)
    with journaled(
        store.catalog,
        "drill",
        tenant=entry.tenant,
        target=uri,
        method=entry.kind,
        point_ts=entry.at_ts,
        backup_id=entry.backup_id,
    ) as run:
        try:
            with _scratch_store(area) as restored_into:
                checked = _restore_and_check(restored_into, dest, entry)
        except RewindError as e:
            # The one line a failed drill ends with names the backup, then what differs.
            raise type(e)(f"drill of backup {entry.backup_id} ({entry.tenant}): {e.message}") from e
        run.bytes, run.objects, run.row_count = checked.bytes, checked.objects, checked.rows
    return DrillResult(
        run.run_id,
        entry.backup_id,
        redact(uri),
        str(entry.tenant),
        str(entry.kind),
        int(entry.at_ts or 0),
        entry.at_label,
        checked.objects,
        checked.bytes,
        len(checked.table_rows),
        checked.rows,
        checked.table_rows,
        time.perf_counter() - started,
        redact(area.where),
    )


# --- the scratch deployment ------------------------------------------------------------------


@dataclass(frozen=True)
class _Area:
    """Where a drill restores: a temporary directory (its catalog, and the
    warehouse unless one was given) and the warehouse's fresh prefix."""

    warehouse: Warehouse | None  # None: under the temporary directory
    drill_id: str

    @property
    def where(self) -> str:
        if self.warehouse is None:
            return "a temporary directory"
        return f"{self.warehouse.uri}/drill-{self.drill_id}"


def _scratch_area(store: TableStore, uri: str, scratch: str | None) -> _Area:
    """The scratch warehouse, checked before anything is written: never inside the
    warehouse the drill protects or the destination it reads."""
    if scratch is None:
        return _Area(None, new_id())
    settings = store.objects.warehouse.s3
    chosen = Warehouse.parse(scratch, settings, what="scratch warehouse")
    own = store.objects.warehouse
    dest = Warehouse.parse(uri, settings, what="backup destination")
    for other, what in ((own, "the warehouse"), (dest, "the backup destination")):
        if _inside(chosen, other):
            raise InvalidArgument(
                f"--scratch {chosen.uri} lies inside {what} {other.uri}: give a place of its "
                "own, e.g. another prefix or bucket (a drill deletes what it writes there)"
            )
    return _Area(chosen, new_id())


def _inside(inner: Warehouse, outer: Warehouse) -> bool:
    if (inner.scheme, inner.bucket) != (outer.scheme, outer.bucket):
        return False
    i, o = inner.prefix.strip("/"), outer.prefix.strip("/")
    return o == "" or i == o or i.startswith(f"{o}/")


@contextmanager
def _scratch_store(area: _Area) -> Iterator[TableStore]:
    """A fresh deployment for one drill, removed on the way out, however it ends."""
    folder = tempfile.mkdtemp(prefix="rewind-drill-")
    catalog_uri = f"sqlite:///{folder}/catalog.db"
    warehouse = (
        f"file://{folder}/warehouse"
        if area.warehouse is None
        else f"{area.warehouse.uri}/drill-{area.drill_id}"
    )
    s3 = S3Settings() if area.warehouse is None else area.warehouse.s3
    objects: ObjectStore | None = None
    opened: TableStore | None = None
    try:
        objects = open_object_store(warehouse, s3, what="scratch warehouse")
        opened = TableStore.open(catalog_uri, warehouse, s3=s3, create=True)
        yield opened
    except BaseException:
        _clean(opened, objects if area.warehouse is not None else None, folder, quiet=True)
        raise
    # A drill that passed but left its scratch behind has not finished: that raises.
    _clean(opened, objects if area.warehouse is not None else None, folder, quiet=False)


def _clean(
    opened: TableStore | None, objects: ObjectStore | None, folder: str, *, quiet: bool
) -> None:
    """Close the scratch catalog, delete the scratch prefix (``objects``: one the
    user gave) and the temporary directory. ``quiet``: the drill already failed,
    and its own error is the one to report; a failure here is only logged."""
    try:
        if opened is not None:
            opened.close()
        if objects is not None:
            _remove(objects)
        shutil.rmtree(folder)
    except Exception:
        if not quiet:
            raise
        log.warning("drill scratch %s: could not remove all of it", folder, exc_info=True)


def _remove(objects: ObjectStore) -> None:
    """Every key under the scratch prefix, and any upload a killed write left."""
    objects.delete_many(info.key for info in objects.list(""))
    objects.discard_partial(objects.partial_writes(""))
    if objects.warehouse.scheme == "file":
        shutil.rmtree(objects.warehouse.prefix, ignore_errors=True)  # the empty folders


# --- restore and check -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Checked:
    objects: int
    bytes: int
    rows: int
    table_rows: dict[str, int]


def _restore_and_check(scratch: TableStore, dest: ObjectStore, entry: BackupEntry) -> _Checked:
    backup_id = entry.backup_id
    raw = read_manifest(dest, backup_id)
    found = findings(dest, backup_id, raw, wall_now_us())
    if found:
        more = f"; and {len(found) - 3} more" if len(found) > 3 else ""
        raise CorruptObject(f"the backup was tampered with: {'; '.join(found[:3])}{more}")
    # Every object's or file's size and sha256 are checked as the restore copies or loads it.
    restored = restore_from(scratch, dest, backup_id)
    if entry.kind == "logical":
        manifest = read_dump_manifest(backup_view(dest, backup_id, raw), backup_root(backup_id))
        # The reload compared each table's rows and content hash with these, or failed.
        return _Checked(
            sum(len(t.files) for t in manifest.tables),
            manifest.bytes,
            manifest.rows,
            {t.qualified: t.rows for t in manifest.tables},
        )
    return _check_physical(scratch, restored.name, raw, dest.warehouse.uri)


def _check_physical(scratch: TableStore, tenant: str, raw: dict[str, Any], where: str) -> _Checked:
    """Each restored table against the manifest: its objects, their rows, its read."""
    plan = RestorePlan.from_json(json.dumps(raw["plan"]))
    entries: dict[str, Any] = raw["objects"]
    promised: dict[str, list[tuple[str, int, int]]] = {}
    path_of: dict[str, str] = {}  # checksum -> the object's path at the destination
    for stored in entries.values():
        record = stored["record"]
        promised.setdefault(str(stored["table"]), []).append(
            (str(record["checksum"]), int(record["bytes"]), int(record["rows"]))
        )
        path_of[str(record["checksum"])] = f"{where}/{stored['path']}"
    table_rows: dict[str, int] = {}
    for table in plan.tables:
        read = plan_read(scratch.catalog, tenant, table.database, table.name)
        held = sorted((o.checksum, o.bytes, o.rows) for o in read.objects)
        expected = sorted(promised.get(table.source_table_id, []))
        if held != expected:
            raise CorruptObject(
                f"table {table.qualified} was restored with {len(held)} object(s), the manifest "
                f"lists {len(expected)} (or their sizes or checksums differ)"
            )
        for record in read.objects:
            with open_object(scratch.objects, record, verify=False) as reader:
                footer_rows = reader.parquet.metadata.num_rows
            if footer_rows != record.rows:
                raise CorruptObject(
                    f"object {path_of.get(record.checksum, record.key)} of table "
                    f"{table.qualified} holds {footer_rows} rows, the manifest says {record.rows}"
                )
        # Every row through the MVCC merge, each object's checksum verified as it is read.
        table_rows[table.qualified] = sum(r.num_rows for r in stream_visible(scratch.objects, read))
    return _Checked(
        len(entries),
        sum(int(e["record"]["bytes"]) for e in entries.values()),
        sum(table_rows.values()),
        table_rows,
    )
