"""Dump: snapshot-read every table of a tenant at S and write portable Parquet.

Files hold the visible rows (no ``__ts``: a dump is the state at S, not its
history), sorted by primary key and split at a target size, under
``<root>/tables/<db>.<table>/part-NNNNN.parquet``. Reads go through the local
reader or Spark. Every file is written before ``manifest.json``; file keys are
deterministic, so a rerun after a crash overwrites its own partial output.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa

from engine.logical.manifest import (
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    DumpFile,
    DumpManifest,
    DumpTable,
)
from engine.restore.members import pinned
from engine.restore.plan import RestorePlan
from tenants.lineage import resolve_point
from tenants.objectstore import ObjectStore
from tenants.parquet_codec import content_hash, encode
from tenants.reads import ReadPlan, plan_read, read_local
from tenants.store import TableStore
from tenants.tenancy import TenantRecord, find_tenant, new_id, tables_at

Reader = Literal["local", "spark"]
DEFAULT_TARGET_BYTES = 128 * 1024 * 1024


@dataclass(frozen=True)
class DumpResult:
    manifest: DumpManifest
    seconds: float


def _split(rows: pa.Table, target_bytes: int) -> list[pa.Table]:
    if rows.num_rows == 0:
        return [rows]
    per_row = max(1.0, rows.nbytes / rows.num_rows) / 4  # Parquet+zstd is ~4x smaller than Arrow
    size = max(1, int(target_bytes / per_row))
    parts = max(1, math.ceil(rows.num_rows / size))
    step = math.ceil(rows.num_rows / parts)
    return [rows.slice(i, step) for i in range(0, rows.num_rows, step)]


def _read(store: TableStore, plan: ReadPlan, reader: Reader) -> pa.Table:
    if reader == "spark":
        from tenants.spark_reader import read_spark

        return read_spark(store.objects, plan)
    return read_local(store.objects, plan)


def dump_tenant(
    store: TableStore,
    tenant: str,
    point: str | int,
    dest: ObjectStore,
    root: str,
    *,
    reader: Reader = "local",
    target_bytes: int = DEFAULT_TARGET_BYTES,
    dump_id: str | None = None,
) -> DumpResult:
    """Write a dump of ``tenant`` at ``point`` under ``root`` of ``dest``."""
    with store.catalog.snapshot() as tx:
        holder, at_ts, label = resolve_point(tx, find_tenant(tx, tenant), point)
        tables = tables_at(tx, holder, at_ts)
    plans = [plan_read(store.catalog, holder.ref, t.database, t.name, at_ts) for t in tables]
    return write_dump(
        store,
        plans,
        holder,
        at_ts,
        label,
        dest,
        root,
        reader=reader,
        target_bytes=target_bytes,
        dump_id=dump_id,
    )


def dump_restore_plan(
    store: TableStore,
    plan: RestorePlan,
    dest: ObjectStore,
    root: str,
    *,
    reader: Reader = "local",
    dump_id: str | None = None,
) -> DumpResult:
    """Dump exactly the objects a restore job planned (and pinned).

    A journaled logical restore must not resolve its point again: a time that was
    "now" when planned is no longer protected after the next write, but the
    pinned objects still hold every row at or before it.
    """
    with store.catalog.snapshot() as tx:
        members = pinned(tx, plan.job_id)
    reads = []
    for table in plan.tables:
        if table.dropped_ts is not None:
            continue
        record = table.record(table.source_table_id, plan.source.id)
        objects = tuple(o.object for o in members.get(table.source_table_id, []))
        reads.append(ReadPlan(plan.source, record, plan.at_ts, objects))
    return write_dump(
        store,
        reads,
        plan.source,
        plan.at_ts,
        plan.at_label,
        dest,
        root,
        reader=reader,
        dump_id=dump_id,
    )


def write_dump(
    store: TableStore,
    reads: list[ReadPlan],
    holder: TenantRecord,
    at_ts: int,
    label: str,
    dest: ObjectStore,
    root: str,
    *,
    reader: Reader = "local",
    target_bytes: int = DEFAULT_TARGET_BYTES,
    dump_id: str | None = None,
) -> DumpResult:
    """Read each planned table at its time and write files, then the manifest."""
    started = time.perf_counter()
    root = root.rstrip("/")
    dumped = []
    for plan in reads:
        table = plan.table
        rows = _read(store, plan, reader)
        keys = list(table.schema.primary_key)
        files = []
        for index, part in enumerate(_split(rows, target_bytes)):
            path = f"tables/{table.qualified}/part-{index:05d}.parquet"
            data, sha = encode(part)
            dest.put(f"{root}/{path}", data)
            files.append(DumpFile(path, len(data), sha, part.num_rows))
        dumped.append(
            DumpTable(
                table.database,
                table.name,
                table.schema.columns_json(),
                table.schema.primary_key_json(),
                table.schema.fingerprint,
                rows.num_rows,
                content_hash(rows, keys),
                tuple(files),
            )
        )
    manifest = DumpManifest(
        FORMAT,
        FORMAT_VERSION,
        dump_id or new_id(),
        holder.name,
        holder.id,
        at_ts,
        label,
        time.time_ns() // 1000,
        tuple(dumped),
    )
    dest.put(f"{root}/{MANIFEST}", manifest.to_json().encode())
    return DumpResult(manifest, time.perf_counter() - started)
