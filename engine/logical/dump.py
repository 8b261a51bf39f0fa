"""Dump: snapshot-read every table of a tenant at S and write portable Parquet.

Files hold the visible rows (no ``__ts``: a dump is the state at S, not its
history), sorted by primary key and split at a target size, under
``<root>/tables/<db>.<table>/part-NNNNN.parquet``. With the local reader the
driver streams each table's visible rows (a merge of its objects, round by
round) into its parts; with Spark the executors read, range-partition by key
and stream one part per key range, and the driver only gathers one row per
file (a big tenant never passes through it). Either way a file's row hash is
computed as it is written. Every file is
written before ``manifest.json``; a rerun after a crash overwrites (local) or
first clears (Spark) the table's folder.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import pyarrow as pa

from engine.logical.manifest import (
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    DumpFile,
    DumpManifest,
    DumpTable,
    chain_hash,
)
from engine.pipeline import SourceAtS
from tenants.objects.codec import encode
from tenants.objects.row_hash import RowHasher
from tenants.objects.writer import ObjectWriter
from tenants.objectstore import ObjectStore
from tenants.progress import Share, Step, step
from tenants.reads.visible import ReadPlan, plan_read, stream_visible
from tenants.store import TableStore
from tenants.tenancy import TableRecord, TenantRecord, find_tenant, new_id, tables_at
from tenants.timeline.lineage import resolve_time
from tenants.times import AsOf

Reader = Literal["local", "spark"]
DEFAULT_TARGET_BYTES = 128 * 1024 * 1024


@dataclass(frozen=True)
class DumpResult:
    manifest: DumpManifest
    seconds: float


def _dump_table_locally(
    store: TableStore,
    plan: ReadPlan,
    dest: ObjectStore,
    root: str,
    target_bytes: int,
    dumping: Step,
) -> DumpTable:
    """Stream the table's visible rows (key order) into files of about the target
    size, each hashed as it is written."""
    table = plan.table
    folder = f"tables/{table.qualified}"
    stored = sum(o.bytes for o in plan.objects)
    per_row = max(1.0, stored / max(1, sum(o.rows for o in plan.objects)))
    capacity = max(1, int(target_bytes / per_row))
    files: list[DumpFile] = []
    hashes: list[str] = []
    writer: PartWriter | None = None
    share = Share(dumping, stored, sum(o.rows for o in plan.objects))
    for rows in stream_visible(store.objects, plan):
        share.rows(rows.num_rows)
        while rows.num_rows:
            if writer is None:
                path = f"{folder}/part-{len(files):05d}.parquet"
                writer = PartWriter(
                    dest, root, path, table.schema.arrow(), table.schema.primary_key
                )
            room = capacity - writer.rows
            writer.write(rows.slice(0, room))
            rows = rows.slice(room)
            if writer.rows >= capacity:
                files, hashes = _finished(writer, files, hashes)
                writer = None
    if writer is not None:
        files, hashes = _finished(writer, files, hashes)
    share.finish()
    if not files:  # an empty table still gets one (empty) file: its schema travels
        files, hashes = _empty_part(dest, root, folder, table.schema.arrow())
    return _entry(table, sum(f.rows for f in files), chain_hash(hashes), files)


def _finished(
    writer: PartWriter, files: list[DumpFile], hashes: list[str]
) -> tuple[list[DumpFile], list[str]]:
    part, digest = writer.finish()
    return [*files, part], [*hashes, digest]


def _empty_part(
    dest: ObjectStore, root: str, folder: str, target: pa.Schema
) -> tuple[list[DumpFile], list[str]]:
    path = f"{folder}/part-00000.parquet"
    data, sha = encode(target.empty_table())
    dest.put(f"{root}/{path}", data)
    return [DumpFile(path, len(data), sha, 0)], [RowHasher(target).hexdigest()]


class PartWriter:
    """One dump file, streamed: rows in key order in, (file, row hash) out."""

    def __init__(
        self, dest: ObjectStore, root: str, path: str, target: pa.Schema, keys: Sequence[str]
    ) -> None:
        self.path = path
        self.target = target
        # A dump's rows have no __ts: ts=0 stands for it in the writer's stats.
        self._writer = ObjectWriter(dest, f"{root}/{path}", target, keys, ts=0, hash_rows=True)

    @property
    def rows(self) -> int:
        return self._writer.rows

    def write(self, rows: pa.Table | pa.RecordBatch) -> None:
        self._writer.write(rows.select(self.target.names).cast(self.target))

    def finish(self) -> tuple[DumpFile, str]:
        written = self._writer.finish()
        assert written.row_hash is not None
        return DumpFile(self.path, written.bytes, written.checksum, written.rows), written.row_hash

    def abort(self) -> None:
        self._writer.abort()


def _entry(table: TableRecord, rows: int, digest: str, files: list[DumpFile]) -> DumpTable:
    schema = table.schema
    return DumpTable(
        table.database,
        table.name,
        schema.columns_json(),
        schema.primary_key_json(),
        schema.fingerprint,
        rows,
        digest,
        tuple(files),
        "row-parts",
    )


def part_writer(
    dest: ObjectStore, root: str, folder: str, target: pa.Schema, keys: list[str]
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """What each Spark dump task runs: stream its key range (one partition, sorted)
    into ``part-<partition>.parquet`` and report the file. The closure holds the
    destination object store, which pickles without credentials."""

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        index = context.partitionId() if context is not None else 0
        writer: PartWriter | None = None
        try:
            for batch in batches:
                if batch.num_rows:
                    if writer is None:
                        path = f"{folder}/part-{index:05d}.parquet"
                        writer = PartWriter(dest, root, path, target, keys)
                    writer.write(batch)
            if writer is None:
                return
            part, digest = writer.finish()
        except BaseException:
            if writer is not None:
                writer.abort()
            raise
        yield pa.RecordBatch.from_pydict(
            {"index": [index], "path": [part.path], "bytes": [part.bytes],
             "sha256": [part.sha256], "rows": [part.rows], "hash": [digest]}
        )  # fmt: skip

    return write


PART_SCHEMA = "index long, path string, bytes long, sha256 string, rows long, hash string"


def _dump_table_by_executors(
    store: TableStore, plan: ReadPlan, dest: ObjectStore, root: str, target_bytes: int
) -> DumpTable:
    """The executors read the table at S, range-partition it by key, and each
    writes its sorted range as one file; the driver gets one small row per file.

    Each file's row hash is computed as it is written; the table's is their
    chain, as for a local dump (format 3 "row-parts").
    """
    from tenants.spark.credentials import store_for_tasks
    from tenants.spark.errors import translate_task_error
    from tenants.spark.session import get_spark
    from tenants.spark_reader import spark_dataframe

    table = plan.table
    schema = table.schema
    keys = list(schema.primary_key)
    folder = f"tables/{table.qualified}"
    spark = get_spark()
    # A rerun may cut other key ranges than a crashed attempt did: clear the
    # table's folder (the dump root is this dump's alone) so no stray part stays.
    dest.delete_many(info.key for info in dest.list(f"{root}/{folder}/"))
    files: list[DumpFile] = []
    hashes: list[str] = []
    if plan.objects:
        parts = max(1, math.ceil(sum(o.bytes for o in plan.objects) / target_bytes))
        frame = spark_dataframe(store.objects, plan, spark)
        ranges = frame.repartitionByRange(parts, *keys).sortWithinPartitions(*keys)
        writer = part_writer(store_for_tasks(spark, dest), root, folder, schema.arrow(), keys)
        try:
            written = ranges.mapInArrow(writer, PART_SCHEMA).collect()
        except Exception as e:
            raise translate_task_error(
                e, f"dumping {table.qualified} of tenant {plan.tenant.ref} at ts {plan.as_of}"
            ) from e
        for row in sorted(written, key=lambda r: r["index"]):
            files.append(DumpFile(row["path"], row["bytes"], row["sha256"], row["rows"]))
            hashes.append(row["hash"])
    if not files:  # an empty table still gets one (empty) file: its schema travels
        files, hashes = _empty_part(dest, root, folder, schema.arrow())
    return _entry(table, sum(f.rows for f in files), chain_hash(hashes), files)


Seal = Callable[[TenantRecord], dict[str, Any]]


def dump_tenant(
    store: TableStore,
    tenant: str,
    as_of: AsOf,
    dest: ObjectStore,
    root: str,
    *,
    reader: Reader = "local",
    target_bytes: int = DEFAULT_TARGET_BYTES,
    dump_id: str | None = None,
    seal: Seal | None = None,
) -> DumpResult:
    """Write a dump of ``tenant`` at ``as_of`` under ``root`` of ``dest`` (``seal``:
    as :func:`write_dump`)."""
    with store.catalog.snapshot() as tx:
        holder, at_ts, label = resolve_time(tx, find_tenant(tx, tenant), as_of)
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
        seal=seal,
    )


def dump_source(
    store: TableStore,
    source: SourceAtS,
    dest: ObjectStore,
    root: str,
    *,
    reader: Reader = "local",
) -> DumpResult:
    """Dump the source at S exactly as a restore job pinned it.

    A journaled logical restore must not resolve its point again: a time that was
    "now" when planned is no longer protected after the next write, but the
    pinned objects still hold every row at or before it (``SourceAtS``).
    """
    return write_dump(
        store,
        source.reads(),
        source.tenant,
        source.at_ts,
        source.label,
        dest,
        root,
        reader=reader,
        dump_id=source.job_id,
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
    action: str = "dumping",
    seal: Seal | None = None,
) -> DumpResult:
    """Read each planned table at its time and write files, then the manifest
    (``action`` names the work in progress bars: a parquet export is a dump).
    ``seal``, given the dumped tenant once every file is written, returns what
    a backup adds to the manifest (``previous``, ``lock``, ``versions``)."""
    started = time.perf_counter()
    root = root.rstrip("/")
    dumped = []
    work = sum(o.bytes for plan in reads for o in plan.objects)
    with step(f"{action} {holder.name}", work) as dumping:
        for plan in reads:
            if reader == "spark":
                dumped.append(_dump_table_by_executors(store, plan, dest, root, target_bytes))
                dumping.advance(sum(o.bytes for o in plan.objects))
            else:
                dumped.append(_dump_table_locally(store, plan, dest, root, target_bytes, dumping))
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
    if seal is not None:
        manifest = replace(manifest, **seal(holder))
    dest.put(f"{root}/{MANIFEST}", manifest.to_json().encode())
    return DumpResult(manifest, time.perf_counter() - started)
