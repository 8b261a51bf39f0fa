"""Iceberg data files and snapshots as an export makes them, through pyiceberg.

A data file is described from its Parquet footer alone (a ranged read):
pyiceberg's ``add_files`` would refuse a copied object, whose ``__ts`` column
the table's schema lacks, so the export builds each ``DataFile`` itself with
pyiceberg's statistics helper (engine.export.iceberg_schema says how
readers then ignore ``__ts``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq

from engine.export.iceberg_catalog import pyiceberg
from engine.export.plan import ExportPlan
from tenants.objectstore import ObjectStore
from tenants.reads.visible import ReadPlan
from tenants.schema import TS
from tenants.times import format_ts

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.table.metadata import TableMetadata


def describe_file(metadata: TableMetadata, dest: ObjectStore, key: str) -> DataFile:
    """The Iceberg data file of ``key``, from its Parquet footer (a ranged read).

    pyiceberg's statistics helper maps every Parquet column to a field id: a
    copied object's ``__ts`` gets a placeholder that collects nothing and is
    dropped from the column sizes (the file's own name mapping is the table's).
    """
    io = pyiceberg("pyiceberg.io.pyarrow")
    manifest = pyiceberg("pyiceberg.manifest")
    with dest.open_input(key) as source:
        footer = pq.read_metadata(source)
        size = source.size()
    schema = metadata.schema()
    mapping = io.parquet_path_to_id_mapping(schema)
    plan = io.compute_statistics_plan(schema, metadata.properties)
    placeholder = -1
    if TS in footer.schema.to_arrow_schema().names:
        types = pyiceberg("pyiceberg.types")
        mapping[TS] = placeholder
        plan[placeholder] = io.StatisticsCollector(
            field_id=placeholder,
            iceberg_type=types.LongType(),
            mode=io.MetricsMode(io.MetricModeTypes.NONE),
            column_name=TS,
        )
    stats = io.data_file_statistics_from_parquet_metadata(footer, plan, mapping)
    stats.column_sizes.pop(placeholder, None)
    return manifest.DataFile.from_args(
        content=manifest.DataFileContent.DATA,
        file_path=f"{dest.warehouse.uri}/{key}",
        file_format=manifest.FileFormat.PARQUET,
        partition=stats.partition(metadata.spec(), schema),
        file_size_in_bytes=size,
        sort_order_id=None,
        spec_id=metadata.default_spec_id,
        equality_ids=None,
        key_metadata=None,
        **stats.to_serialized_dict(),
    )


def snapshot_summary(
    plan: ExportPlan, read: ReadPlan, reused: int, rewritten: int
) -> dict[str, str]:
    """The Iceberg snapshot's summary properties: which Rewind time it holds."""
    summary = {
        "rewind.tenant": plan.holder.name,
        "rewind.tenant-id": plan.holder.id,
        "rewind.table": read.table.qualified,
        "rewind.ts": str(plan.at_ts),
        "rewind.at": format_ts(plan.at_ts),
        "rewind.export-id": plan.export_id,
        "rewind.reused-files": str(reused),
        "rewind.rewritten-files": str(rewritten),
    }
    if plan.snapshot is not None:
        summary["rewind.snapshot"] = plan.snapshot
    return summary


def current_files(existing: Any) -> Iterator[DataFile]:
    """The data files of the table's current snapshot (all replaced by the export)."""
    if existing is None or existing.current_snapshot() is None:
        return
    manifest = pyiceberg("pyiceberg.manifest")
    for listed in existing.current_snapshot().manifests(existing.io):
        if listed.content == manifest.ManifestContent.DATA:
            for entry in listed.fetch_manifest_entry(existing.io, discard_deleted=True):
                yield entry.data_file
