"""Compaction: merge a table's objects into large objects sorted by (pk, ts).

Objects are grouped by (kind, schema fingerprint) so a merge never mixes
schemas; each group with more than one object (or an unsorted one) is merged,
split at a target size, uploaded, and swapped in by one catalog transaction
that is conditional on every input still being a live member. If another
compaction won the race the swap aborts with ``ConcurrentModification`` and
its outputs are orphans for GC. A merge keeps every version: merged objects
span wide ts ranges, which is the layout restores must handle.
"""

from __future__ import annotations

import logging
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import pyarrow as pa

from tenants.catalog import Catalog
from tenants.errors import ConcurrentModification, InvalidArgument
from tenants.object_io import read_object, write_object
from tenants.objects import (
    ObjectRecord,
    add_member,
    insert_object,
    live_objects,
    remove_members,
    sort_by_key_and_ts,
)
from tenants.objectstore import ObjectStore
from tenants.protection import protection
from tenants.reads import READ_THREADS
from tenants.retention import keep_masks
from tenants.tenancy import TableRecord, active_tenant, find_table, tables_at, tenant_by_id

log = logging.getLogger(__name__)

DEFAULT_TARGET_BYTES = 64 * 1024 * 1024
# Readers fetch an object whole, so a merged object must fit a reader's memory.
MAX_TARGET_BYTES = 4 * 1024 * 1024 * 1024


@dataclass(frozen=True)
class CompactionResult:
    table: str
    inputs: int
    outputs: int
    rows: int
    bytes_in: int
    bytes_out: int


def _groups(objects: list[ObjectRecord]) -> list[list[ObjectRecord]]:
    """Groups a partial merge touches: several objects, or one unsorted object."""
    return [g for g in _all_groups(objects) if len(g) > 1 or not g[0].sorted]


def _split(rows: pa.Table, target_bytes: int, bytes_in: int, rows_in: int) -> list[pa.Table]:
    """Slices of about ``target_bytes`` each, estimated from the inputs' bytes per row."""
    if rows.num_rows == 0:
        return []
    per_row = max(1.0, bytes_in / max(1, rows_in))
    rows_per_object = max(1, int(target_bytes / per_row))
    parts = max(1, math.ceil(rows.num_rows / rows_per_object))
    size = math.ceil(rows.num_rows / parts)
    return [rows.slice(start, size) for start in range(0, rows.num_rows, size)]


def compact_table(
    catalog: Catalog,
    store: ObjectStore,
    table: TableRecord,
    *,
    target_bytes: int = DEFAULT_TARGET_BYTES,
    full: bool = False,
) -> CompactionResult:
    """Merge the table's live objects, per (kind, fingerprint) group.

    A partial merge (``full=False``) touches only groups of several objects and
    keeps every version. A full compaction rewrites every group and drops the
    versions and tombstones no protected time needs (tenants.retention); the
    protected times are read from the catalog here, never passed in.
    """
    with catalog.snapshot() as tx:
        objects = live_objects(tx, table.id)
        guard = protection(tx, tenant_by_id(tx, table.tenant_id)) if full else None
    pk = list(table.schema.primary_key)
    if guard is None:
        groups = _groups(objects)
        loaded = _read_all(store, [o for g in groups for o in g])
    else:
        groups = _all_groups(objects)
        loaded = _read_all(store, objects)
        inputs = [(o.kind, loaded[o.id]) for o in objects]
        for record, mask in zip(objects, keep_masks(inputs, table.schema, guard), strict=True):
            loaded[record.id] = loaded[record.id].filter(pa.array(mask))
    written: list[ObjectRecord] = []
    replaced: list[ObjectRecord] = []
    rows = 0
    for group in groups:
        merged = sort_by_key_and_ts(
            pa.concat_tables([loaded[o.id] for o in group], promote_options="default"), pk
        )
        group_bytes = sum(o.bytes for o in group)
        written += [
            write_object(
                store,
                part,
                tenant_id=table.tenant_id,
                table_id=table.id,
                kind=group[0].kind,
                fingerprint=group[0].fingerprint,
                primary_key=pk,
                created_ts=0,
            )
            for part in _split(merged, target_bytes, group_bytes, sum(o.rows for o in group))
        ]
        replaced += group
        rows += merged.num_rows
    if replaced:
        _swap(catalog, table, replaced, written)
    return CompactionResult(
        table.qualified,
        len(replaced),
        len(written),
        rows,
        sum(o.bytes for o in replaced),
        sum(o.bytes for o in written),
    )


def _read_all(store: ObjectStore, objects: list[ObjectRecord]) -> dict[str, pa.Table]:
    """Read objects in parallel (I/O bound; pyarrow releases the GIL), by id."""
    with ThreadPoolExecutor(max_workers=READ_THREADS) as pool:
        return dict(
            zip(
                [o.id for o in objects],
                pool.map(lambda o: read_object(store, o), objects),
                strict=True,
            )
        )


def _all_groups(objects: list[ObjectRecord]) -> list[list[ObjectRecord]]:
    by_group: dict[tuple[str, str], list[ObjectRecord]] = {}
    for record in objects:
        by_group.setdefault((record.kind, record.fingerprint), []).append(record)
    return list(by_group.values())


def _swap(
    catalog: Catalog, table: TableRecord, inputs: list[ObjectRecord], outputs: list[ObjectRecord]
) -> None:
    """Replace ``inputs`` by ``outputs`` in one transaction, iff all inputs are still live."""
    with catalog.transaction() as tx:
        ts = tx.commit_ts()
        removed = remove_members(tx, table.id, [o.id for o in inputs], ts)
        if removed != len(inputs):
            raise ConcurrentModification(
                f"compaction of table {table.qualified} ({table.id}) lost a race: "
                f"{len(inputs) - removed} of its inputs were replaced meanwhile; run it again"
            )
        for record in outputs:
            insert_object(tx, _with_created_ts(record, ts))
            add_member(tx, table.id, record.id, ts)
    log.info(
        "table %s (%s): compacted %d objects into %d at ts %d",
        table.qualified,
        table.id,
        len(inputs),
        len(outputs),
        ts,
    )


def _with_created_ts(record: ObjectRecord, ts: int) -> ObjectRecord:
    return replace(record, created_ts=ts)


def compact(
    catalog: Catalog,
    store: ObjectStore,
    tenant: str,
    database: str | None = None,
    table: str | None = None,
    *,
    target_bytes: int = DEFAULT_TARGET_BYTES,
    full: bool = False,
) -> list[CompactionResult]:
    """Compact one table, or every live table of the tenant (see ``compact_table``).

    Raises:
        InvalidArgument: ``target_bytes`` is not a whole number of bytes from 1
            to ``MAX_TARGET_BYTES`` (4 GiB).
    """
    if (
        isinstance(target_bytes, bool)
        or not isinstance(target_bytes, int)
        or not 1 <= target_bytes <= MAX_TARGET_BYTES
    ):
        raise InvalidArgument(
            f"invalid compaction target {target_bytes!r} bytes: use 1 to {MAX_TARGET_BYTES:,} "
            "(4 GiB; readers fetch an object whole)"
        )
    with catalog.snapshot() as tx:
        tenant_rec = active_tenant(tx, tenant)
        now = tx.last_ts()
        if database is not None and table is not None:
            tables = [find_table(tx, tenant_rec, database, table, now)]
        else:
            tables = [
                t
                for t in tables_at(tx, tenant_rec, now)
                if database is None or t.database == database
            ]
    return [compact_table(catalog, store, t, target_bytes=target_bytes, full=full) for t in tables]
