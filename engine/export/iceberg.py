"""``--format iceberg``: one Iceberg snapshot per export, objects copied where they can be.

Per table, in this order:

1. **Before any row is read** (all tables first, so a refused table leaves no
   other exported): the Iceberg table is looked up; one that is not an
   earlier export of the same Rewind table is refused unless ``replace``
   (engine.export.iceberg_schema); its location (an existing table's own, or
   ``<to>/<namespace>/<table>``) is proven writable and outside the
   warehouse; a new table's location must hold nothing else.
2. **Zero copy.** The objects wholly visible at the time
   (tenants.reads.wholly_visible) are copied as they are into the table's
   ``data/`` folder, inside the object store (S3 CopyObject, a file copy):
   their bytes never pass through Rewind, and the export owns its copies,
   so GC or compaction in Rewind never breaks the Iceberg table. Each copy's
   footer is read back (its size and Parquet metadata, the Iceberg data
   file's statistics). Only for a table whose every column is native.
3. **The rest is rewritten**, streamed: the visible rows of the other
   objects (the plan without the copied ones) in key order, cast to the
   Iceberg types, in files of about 128 MiB with field ids.
4. **Publish: one Iceberg commit.** A new table is created with its first
   snapshot in one commit; an existing one gets its schema followed and one
   overwrite snapshot (every file of the previous export out, this export's
   in). The snapshot's summary carries the Rewind tenant, table, snapshot
   name, ts and time, so exports of several snapshots into one table are
   its time travel. A failure before or during the commit deletes the files
   this export wrote (data files and the manifests of its commit) and an
   namespace it created; the table stays as it was.

Each table is its own commit: pyiceberg has no commit across tables, so a
failure after some tables were committed leaves those exported (each whole)
and the others as they were.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa

from engine.export.iceberg_catalog import close_catalog, open_iceberg_catalog, pyiceberg
from engine.export.iceberg_files import current_files, describe_file, snapshot_summary
from engine.export.iceberg_schema import (
    NAME_MAPPING,
    arrow_target,
    follow,
    native,
    new_schema,
    properties,
    why_different,
)
from engine.export.plan import ExportPlan
from engine.export.result import TableExported
from engine.export.target import open_target
from engine.logical.dump import DEFAULT_TARGET_BYTES
from tenants.config import S3Settings
from tenants.errors import (
    AlreadyExists,
    ConcurrentModification,
    CorruptObject,
    InvalidArgument,
    RewindError,
    StorageError,
)
from tenants.names import object_name
from tenants.objects.io import copy_object
from tenants.objects.record import ObjectRecord
from tenants.objects.writer import ObjectWriter
from tenants.objectstore import ObjectStore
from tenants.progress import Share, Step, step
from tenants.reads.visible import ReadPlan, stream_visible
from tenants.reads.wholly_visible import VisibleSplit, wholly_visible
from tenants.store import TableStore

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.manifest import DataFile

log = logging.getLogger(__name__)

DATA = "data"
METADATA = "metadata"


CopyKind = Literal["kept", "there", "server-side", "streamed"]
"""How a wholly visible object became a data file of the table: kept (the
current snapshot has it), there (an older snapshot's file, taken again),
copied server-side, or streamed through Rewind (no server-side copy between
the two stores)."""


@dataclass(frozen=True)
class Reused:
    record: ObjectRecord
    data_file: DataFile
    how: CopyKind


@dataclass(frozen=True)
class IcebergTarget:
    """One table's destination, checked (step 1 of the module doc)."""

    read: ReadPlan
    identifier: tuple[str, str]
    existing: Any
    """The Iceberg table (pyiceberg ``Table``) to add a snapshot to; None: create it."""
    location: str
    dest: ObjectStore
    replace: bool
    """The existing table is not an earlier export of this table: replace its
    schema (``--replace``)."""

    @property
    def name(self) -> str:
        return ".".join(self.identifier)


def export_iceberg(
    store: TableStore,
    plan: ExportPlan,
    *,
    catalog: str,
    catalog_name: str,
    to: str,
    namespace: str | None,
    s3: S3Settings | None,
    replace: bool,
    zero_copy: bool,
    target_bytes: int = DEFAULT_TARGET_BYTES,
) -> tuple[TableExported, ...]:
    """Export each planned table as an Iceberg table (the module doc).

    Raises:
        MissingDependency: pyiceberg is not installed.
        InvalidArgument: a bad catalog, namespace or location; a type Iceberg
            cannot hold; two tables that would land on one Iceberg table.
        AlreadyExists: (unless ``replace``) an Iceberg table that is not an
            earlier export of the same table, or a new table's location holding files.
        StorageError: a location Rewind cannot write; the catalog failing a commit.
        ConcurrentModification: someone else committed to the table meanwhile.
    """
    if namespace is not None:
        object_name(namespace, "namespace")
    opened = open_iceberg_catalog(
        catalog,
        s3=s3 if s3 is not None else store.objects.warehouse.s3,
        warehouse=to,
        name=catalog_name,
        own=store.catalog.uri,
    )
    try:
        targets = [
            _check_target(store, opened, plan, read, to, namespace, s3, replace)
            for read in plan.reads
        ]
        names = [t.name for t in targets]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise InvalidArgument(
                f"two tables would be exported to the Iceberg table {twice[0]}: export them to "
                "different namespaces (--namespace), one at a time"
            )
        return tuple(
            _export_table(store, opened, plan, target, zero_copy, target_bytes)
            for target in targets
        )
    finally:
        close_catalog(opened)


def _check_target(
    store: TableStore,
    catalog: Catalog,
    plan: ExportPlan,
    read: ReadPlan,
    to: str,
    namespace: str | None,
    s3: S3Settings | None,
    replace: bool,
) -> IcebergTarget:
    """Step 1 of the module doc, for one table: nothing read, nothing written but a probe."""
    exceptions = pyiceberg("pyiceberg.exceptions")
    table = read.table
    identifier = (namespace or table.database, table.name)
    name = ".".join(identifier)
    where = f"{plan.holder.name}/{table.qualified}"
    native(table.schema, where)  # refuses a type Iceberg cannot hold, before anything else
    try:
        existing = catalog.load_table(identifier)
    except exceptions.NoSuchTableError:
        existing = None
    except Exception as e:  # noqa: BLE001 - a catalog's error, reported as such
        raise StorageError(f"cannot look up the Iceberg table {name}: {e}") from e
    different = None
    if existing is not None:
        different = why_different(existing, table.schema, _source(plan, read), where)
        if different is not None and not replace:
            raise AlreadyExists(
                f"the Iceberg table {name} {different}: pass --replace to replace its "
                f"contents and schema with {where} (its older snapshots stay), or export to "
                "another namespace (--namespace)"
            )
        location = str(existing.metadata.location).rstrip("/")
    else:
        location = f"{to.rstrip('/')}/{identifier[0]}/{identifier[1]}"
    dest = open_target(location, s3, store.objects.warehouse, "Iceberg table location")
    if existing is None and not replace:
        for info in dest.list(""):
            if info.key.startswith(f"{METADATA}/") and info.key.endswith(".metadata.json"):
                continue  # a failed export's (a commit writes it before the catalog says no)
            raise AlreadyExists(
                f"the location {dest.warehouse.uri} of the new Iceberg table {name} already "
                f"holds {info.key}: choose another --to, or pass --replace to write there anyway"
            )
    return IcebergTarget(read, identifier, existing, location, dest, different is not None)


def _source(plan: ExportPlan, read: ReadPlan) -> str:
    return f"{plan.holder.name}/{read.table.qualified}"


def _export_table(
    store: TableStore,
    catalog: Catalog,
    plan: ExportPlan,
    target: IcebergTarget,
    zero_copy: bool,
    target_bytes: int,
) -> TableExported:
    """Steps 2 to 4 of the module doc, for one table."""
    read = target.read
    where = f"{plan.holder.name}/{read.table.qualified}"
    split = None
    if zero_copy and native(read.table.schema, where):
        with step(f"finding the objects of {where} to copy"):  # key columns only
            split = wholly_visible(store.objects, read)
    before = {info.key for info in target.dest.list(f"{METADATA}/")}
    commit_uuid = uuid.uuid4()
    written: list[str] = []
    made_namespace = False
    try:
        if target.existing is None:
            made_namespace = _ensure_namespace(catalog, target.identifier[0])
            schema = new_schema(read.table.schema, where)
            txn = catalog.create_table_transaction(
                target.identifier,
                schema,
                location=target.location,
                properties=properties(schema, _source(plan, read), read.table.schema.primary_key),
            )
        else:
            txn = target.existing.transaction()
            follow(txn, read.table.schema, where, replace=target.replace)
            schema = txn.table_metadata.schema()
            previous = target.existing.properties.get(NAME_MAPPING)
            txn.set_properties(
                properties(schema, _source(plan, read), read.table.schema.primary_key, previous)
            )
        current = {str(f.file_path): f for f in current_files(target.existing)}
        total = sum(o.bytes for o in read.objects)
        with step(f"exporting {where}", total) as exporting:
            reused = _copy_whole(store, target, split, current, written, exporting, txn)
            rest = split.rest if split is not None else read
            arrow = arrow_target(txn.table_metadata.schema(), read.table.schema, where)
            rewritten = _rewrite_rest(
                store, target, plan, rest, arrow, target_bytes, written, exporting
            )
        files = [r.data_file for r in reused]
        files += [describe_file(txn.table_metadata, target.dest, key) for key, _ in rewritten]
        paths = {str(f.file_path) for f in files}
        summary = snapshot_summary(plan, read, len(reused), len(rewritten))
        with txn.update_snapshot(snapshot_properties=summary).overwrite(commit_uuid) as overwrite:
            for path, old in current.items():
                if path not in paths:
                    overwrite.delete_data_file(old)
            for data_file in files:
                if str(data_file.file_path) not in current:
                    overwrite.append_data_file(data_file)
        committed = _commit(txn, target)
    except BaseException:
        _discard(target, written, before, commit_uuid)
        if made_namespace:
            _drop_namespace(catalog, target.identifier[0])
        raise
    after = {info.key: info.size for info in target.dest.list(f"{METADATA}/")}
    snapshot = committed.current_snapshot()
    return TableExported(
        table=read.table.qualified,
        target=target.name,
        location=target.location,
        rows=sum(int(f.record_count) for f in files),
        files=len(files),
        reused_files=len(reused),
        rewritten_files=len(rewritten),
        copied_bytes=sum(r.record.bytes for r in reused if r.how == "server-side"),
        written_bytes=sum(size for _, size in rewritten)
        + sum(r.record.bytes for r in reused if r.how == "streamed"),
        metadata_bytes=sum(size for key, size in after.items() if key not in before),
        checked_bytes=split.checked_bytes if split is not None else 0,
        iceberg_snapshot_id=None if snapshot is None else int(snapshot.snapshot_id),
    )


def _ensure_namespace(catalog: Catalog, namespace: str) -> bool:
    """Create the namespace if it is not there; whether it was created."""
    exceptions = pyiceberg("pyiceberg.exceptions")
    try:
        catalog.create_namespace(namespace)
        return True
    except exceptions.NamespaceAlreadyExistsError:
        return False


def _drop_namespace(catalog: Catalog, namespace: str) -> None:
    try:
        catalog.drop_namespace(namespace)
    except Exception as e:  # noqa: BLE001 - the export's own error is the one to report
        log.warning("cannot drop the Iceberg namespace %s after a failed export: %s", namespace, e)


def _copy_whole(
    store: TableStore,
    target: IcebergTarget,
    split: VisibleSplit | None,
    current: dict[str, DataFile],
    written: list[str],
    exporting: Step,
    txn: Any,
) -> list[Reused]:
    """Step 2: each wholly visible object as a data file of the table, copied only
    if the table's folder does not hold it yet.

    A copy is named after the object (``data/<object id>.parquet``): objects are
    immutable, so an object an earlier export copied is the same file, which
    the new snapshot keeps (it is in the current one) or takes again (an older
    snapshot's); only new objects are copied. A file this export did not copy
    is never deleted by its failure: older snapshots may need it.
    """
    if split is None or not split.whole:
        return []
    present = {info.key: info.size for info in target.dest.list(f"{DATA}/")}
    reused: list[Reused] = []
    for record in split.whole:
        key = f"{DATA}/{record.id}.parquet"
        path = f"{target.dest.warehouse.uri}/{key}"
        if path in current and present.get(key) == record.bytes:
            reused.append(Reused(record, current[path], "kept"))
        else:
            how: CopyKind = "there"
            if present.get(key) != record.bytes:
                written.append(key)
                how = "server-side"
                if not target.dest.copy_from(store.objects, record.key, key):
                    # Another endpoint or account: through this process, checked.
                    copy_object(
                        store.objects, record.key, record.bytes, record.checksum, target.dest, key
                    )
                    how = "streamed"
            data_file = describe_file(txn.table_metadata, target.dest, key)
            if (data_file.file_size_in_bytes, data_file.record_count) != (
                record.bytes,
                record.rows,
            ):
                raise CorruptObject(
                    f"the copy {path} of object {record.key} has {data_file.file_size_in_bytes} "
                    f"bytes and {data_file.record_count} rows; the catalog records "
                    f"{record.bytes} and {record.rows}"
                )
            reused.append(Reused(record, data_file, how))
        exporting.advance(record.bytes)
    return reused


def _rewrite_rest(
    store: TableStore,
    target: IcebergTarget,
    plan: ExportPlan,
    rest: ReadPlan,
    arrow: pa.Schema,
    target_bytes: int,
    written: list[str],
    exporting: Step,
) -> list[tuple[str, int]]:
    """Step 3: the other visible rows, streamed into files of about ``target_bytes``;
    (key, bytes) of each."""
    stored = sum(o.bytes for o in rest.objects)
    rows = sum(o.rows for o in rest.objects)
    capacity = max(1, int(target_bytes / max(1.0, stored / max(1, rows))))
    share = Share(exporting, stored, rows)
    keys: list[tuple[str, int]] = []
    writer: ObjectWriter | None = None
    pk = rest.table.schema.primary_key
    try:
        for visible in _cast(stream_visible(store.objects, rest), arrow):
            share.rows(visible.num_rows)
            while visible.num_rows:
                if writer is None:
                    key = f"{DATA}/{plan.export_id}-r{len(keys):05d}.parquet"
                    written.append(key)
                    writer = ObjectWriter(target.dest, key, arrow, pk, ts=0)
                room = capacity - writer.rows
                writer.write(visible.slice(0, room))
                visible = visible.slice(room)
                if writer.rows >= capacity:
                    done = writer.finish()
                    keys.append((done.key, done.bytes))
                    writer = None
        if writer is not None:
            done = writer.finish()
            keys.append((done.key, done.bytes))
            writer = None
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    share.finish()
    return keys


def _cast(rounds: Iterator[pa.Table], arrow: pa.Schema) -> Iterator[pa.Table]:
    """Visible rows in the Iceberg schema's column order and written types."""
    for rows in rounds:
        yield rows.select(arrow.names).cast(arrow)


def _commit(txn: Any, target: IcebergTarget) -> Any:
    """The publish: one catalog commit (a compare-and-set on the table's metadata)."""
    exceptions = pyiceberg("pyiceberg.exceptions")
    try:
        return txn.commit_transaction()
    except (exceptions.CommitFailedException, exceptions.ValidationException) as e:
        # pyiceberg retries a commit that lost a race, then refuses one whose files
        # another writer's snapshot changed meanwhile.
        raise ConcurrentModification(
            f"the Iceberg table {target.name} changed while it was exported: {e}; nothing of "
            "this export was kept, export again"
        ) from e
    except exceptions.TableAlreadyExistsError as e:
        raise ConcurrentModification(
            f"the Iceberg table {target.name} was created by someone else while it was "
            "exported; nothing of this export was kept, export again"
        ) from e
    except RewindError:
        raise
    except Exception as e:  # noqa: BLE001 - the catalog's failure, named
        raise StorageError(f"cannot commit the Iceberg table {target.name}: {e}") from e


def _discard(
    target: IcebergTarget, written: Sequence[str], before: set[str], commit: uuid.UUID
) -> None:
    """Delete what a failed export wrote: its data files and its commit's
    manifests (named after the commit's uuid); never a file someone else wrote."""
    try:
        ours = [
            info.key
            for info in target.dest.list(f"{METADATA}/")
            if info.key not in before and str(commit) in info.key
        ]
        target.dest.delete_many([*written, *ours])
    except RewindError as e:
        log.warning("cannot remove the files of a failed export to %s: %s", target.location, e)
