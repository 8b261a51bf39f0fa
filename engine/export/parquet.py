"""``--format parquet``: plain Parquet files of the visible rows, published by a pointer.

Layout under the destination::

    rewind-export.json                       the pointer: which export is current (written last)
    exports/<export id>/manifest.json        the export's manifest (a dump manifest)
    exports/<export id>/tables/<db>.<table>/part-00000.parquet ...

An export is a logical dump (engine.logical.dump): per table, files of the
rows visible at the time, user columns only (no ``__ts``), sorted by primary
key and cut at about 128 MiB, each hashed as it is written; then the
manifest (DDL, time, row counts, every file's size and sha256, each table's
row hash). Every file is rewritten, none copied: a Rewind object carries
``__ts``, and a plain-Parquet reader (``spark.read.parquet``, DuckDB's
``read_parquet``, pandas) shows every column a file has, so a copied object
would show it (or, mixed with rewritten files, make the folder's files
disagree on their columns). docs/decisions.md, "Export".

**Publish.** Files are written under a fresh folder nobody reads, then its
manifest, then the pointer is replaced (one PUT, or a rename on ``file://``):
a reader that reads the pointer first sees the previous export or this one,
complete, never part of one. A failed export deletes its folder. The
previous export stays until the next one publishes, so a reader that read
the pointer just before has a whole export's time to finish; older ones
(and folders of exports that crashed, once an hour old) are removed then.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass

from engine.export.plan import ExportPlan, export_id_time
from engine.export.result import TableExported
from engine.export.target import PROBE
from engine.logical.dump import DEFAULT_TARGET_BYTES, write_dump
from engine.logical.manifest import MANIFEST, DumpManifest, read_manifest
from tenants.errors import AlreadyExists, RewindError
from tenants.objectstore import ObjectStore
from tenants.store import TableStore
from tenants.times import format_ts

log = logging.getLogger(__name__)

POINTER = "rewind-export.json"
FORMAT = "rewind-export"
FORMAT_VERSION = 1
EXPORTS = "exports"
SWEEP_AFTER_S = 3600
"""A folder of exports/ that no pointer names is removed once this old: a
crashed export's, never one still being written."""


@dataclass(frozen=True)
class Published:
    """The destination's current export, as its pointer names it."""

    root: str
    """``exports/<id>``"""
    manifest: DumpManifest | None
    """None: the pointer names a folder without a readable manifest."""


def check_destination(dest: ObjectStore, plan: ExportPlan, replace: bool) -> Published | None:
    """The destination's current export, if it may be replaced by ``plan``'s.

    Raises:
        AlreadyExists: (unless ``replace``) the destination holds files and no
            Rewind export; or its export is of another tenant, has a table this
            one lacks, or a table with another primary key.
    """
    where = dest.warehouse.uri
    try:
        pointer = json.loads(dest.get(POINTER))
        root = str(pointer["current"])
    except RewindError:  # no pointer (ObjectMissing): an empty or foreign destination
        foreign = _first_foreign_key(dest)
        if foreign is not None and not replace:
            raise AlreadyExists(
                f"{where} holds {foreign} and no Rewind export ({POINTER}): choose an empty "
                "place, or pass --replace to export there anyway (what is there stays)"
            ) from None
        return None
    except (ValueError, KeyError, TypeError):
        if not replace:
            raise AlreadyExists(
                f"{where}/{POINTER} is not a Rewind export pointer: choose another place, or "
                "pass --replace to write a new export there"
            ) from None
        return None
    try:
        manifest = read_manifest(dest, root)
    except RewindError:
        manifest = None
    if not replace:
        why = _why_different(manifest, plan)
        if why is not None:
            raise AlreadyExists(
                f"{where} holds the export {root} {why}: pass --replace to replace it, or "
                "choose another place"
            )
    return Published(root, manifest)


def _first_foreign_key(dest: ObjectStore) -> str | None:
    for info in dest.list(""):
        if not info.key.startswith(PROBE):
            return info.key
    return None


def _why_different(manifest: DumpManifest | None, plan: ExportPlan) -> str | None:
    """Why the export in ``manifest`` is not an earlier export of ``plan``'s tables."""
    if manifest is None:
        return f"without a readable {MANIFEST}"
    if manifest.source_tenant != plan.holder.name:
        return f"of tenant {manifest.source_tenant!r}, not {plan.holder.name!r}"
    new = {read.table.qualified: read.table.schema for read in plan.reads}
    for table in manifest.tables:
        if table.qualified not in new:
            return f"with table {table.qualified}, which this export does not have"
        key = list(new[table.qualified].primary_key)
        if json.loads(table.primary_key_json) != key:
            return (
                f"whose {table.qualified} has primary key ({', '.join(json.loads(table.primary_key_json))}), "
                f"not ({', '.join(key)})"
            )
    return None


def export_parquet(
    store: TableStore,
    plan: ExportPlan,
    dest: ObjectStore,
    published: Published | None,
    *,
    target_bytes: int = DEFAULT_TARGET_BYTES,
) -> tuple[tuple[TableExported, ...], int]:
    """Write the export's files and manifest, then publish it (the module doc);
    returns the tables and the bytes of the manifest and pointer.

    A failure before the pointer is replaced deletes what this export wrote.
    """
    root = f"{EXPORTS}/{plan.export_id}"
    try:
        dumped = write_dump(
            store,
            list(plan.reads),
            plan.holder,
            plan.at_ts,
            plan.label,
            dest,
            root,
            target_bytes=target_bytes,
            dump_id=plan.export_id,
            action="exporting",
        )
        pointer = _pointer(plan, root, dumped.manifest, published)
        dest.put(POINTER, pointer)  # the publish: one PUT (a rename on file://)
    except BaseException:
        _discard(dest, root)
        raise
    _sweep(dest, keep={root} | ({published.root} if published else set()))
    manifest_bytes = len(dumped.manifest.to_json().encode())
    tables = tuple(
        TableExported(
            table=t.qualified,
            target=f"{dest.warehouse.uri}/{root}/tables/{t.qualified}",
            location=f"{dest.warehouse.uri}/{root}/tables/{t.qualified}",
            rows=t.rows,
            files=len(t.files),
            reused_files=0,
            rewritten_files=len(t.files),
            copied_bytes=0,
            written_bytes=sum(f.bytes for f in t.files),
            metadata_bytes=0,
            checked_bytes=0,
        )
        for t in dumped.manifest.tables
    )
    return tables, manifest_bytes + len(pointer)


def _pointer(
    plan: ExportPlan, root: str, manifest: DumpManifest, published: Published | None
) -> bytes:
    document = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "export_id": plan.export_id,
        "current": root,
        "previous": published.root if published else None,
        "tenant": plan.holder.name,
        "tenant_id": plan.holder.id,
        "at_ts": plan.at_ts,
        "at": format_ts(plan.at_ts),
        "snapshot": plan.snapshot,
        "created": format_ts(time.time_ns() // 1000),
        "tables": {
            t.qualified: {"path": f"{root}/tables/{t.qualified}", "rows": t.rows}
            for t in manifest.tables
        },
    }
    return json.dumps(document, indent=1, sort_keys=True).encode()


def _discard(dest: ObjectStore, root: str) -> None:
    """Delete a failed export's folder (its error is the one to report)."""
    try:
        dest.delete_many([info.key for info in dest.list(f"{root}/")])
    except RewindError as e:
        log.warning("cannot remove the failed export %s/%s: %s", dest.warehouse.uri, root, e)


def _sweep(dest: ObjectStore, keep: set[str]) -> None:
    """Remove export folders the pointer no longer names (module doc); a failure
    only leaves them for the next export."""
    try:
        for name in list(dest.children(f"{EXPORTS}/")):
            root = f"{EXPORTS}/{name}"
            made = export_id_time(name)
            if root in keep or made is None:
                continue
            # A superseded export goes now; one without a manifest may still be
            # being written (another export), so only once it is old.
            if _complete(dest, root) or time.time() - made >= SWEEP_AFTER_S:
                dest.delete_many([info.key for info in dest.list(f"{root}/")])
    except RewindError as e:
        log.warning("cannot remove old exports under %s: %s", dest.warehouse.uri, e)


def _complete(dest: ObjectStore, root: str) -> bool:
    """Whether an export folder has its manifest (a finished, superseded export)."""
    return any(info.key == f"{root}/{MANIFEST}" for info in dest.list(f"{root}/{MANIFEST}"))
