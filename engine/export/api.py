"""``export_tables``: tables at a snapshot, out of Rewind, as Parquet or Iceberg.

The order is what makes a failed export harmless: names and the format are
checked before any I/O; the catalog resolves the tenant, the time and the
tables (``NotFound``, ``UnprotectedTime``); the destination is proven
writable and, unless ``replace``, to hold nothing else (before any row is
read); then files are written where nobody reads them, and published last
(engine.export.parquet, engine.export.iceberg).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from engine.export.iceberg import export_iceberg
from engine.export.iceberg_catalog import DEFAULT_NAME
from engine.export.parquet import check_destination, export_parquet
from engine.export.plan import Format, check_format, plan_export
from engine.export.result import ExportResult
from engine.export.target import open_target
from engine.logical.dump import DEFAULT_TARGET_BYTES
from tenants.config import S3Settings, Warehouse
from tenants.errors import InvalidArgument
from tenants.store import TableStore
from tenants.times import AsOf, format_ts


def export_tables(
    store: TableStore,
    tenant: str,
    tables: str | Sequence[str],
    as_of: AsOf,
    to: str,
    *,
    format: Format = "parquet",
    replace: bool = False,
    iceberg_catalog: str | None = None,
    iceberg_catalog_name: str = DEFAULT_NAME,
    namespace: str | None = None,
    zero_copy: bool = True,
    s3: S3Settings | None = None,
    target_bytes: int = DEFAULT_TARGET_BYTES,
) -> ExportResult:
    """Export ``tables`` of ``tenant`` as of ``as_of`` to ``to``.

    Args:
        store: the Rewind store.
        tenant: tenant name (or ``name@id``); times before a restore read the
            tenant that held the name then.
        tables: ``"db.table"``, ``"db.*"`` (a database), ``"*"`` (every table at
            the time), or a list of them.
        as_of: a snapshot name or a protected time (an ISO-8601 instant, a ts in
            µs, ``now``, ``-1h``), as for a restore or a dump.
        to: ``s3://bucket/prefix`` or ``file:///path``. Parquet: the export's
            root (docs/engines.md, "Export"). Iceberg: where new tables go,
            ``<to>/<namespace>/<table>`` (an existing table keeps its location).
        format: ``parquet`` (plain files of the visible rows and a manifest) or
            ``iceberg`` (one Iceberg snapshot per export, objects copied where
            they are wholly visible).
        replace: replace what the destination holds even if it is not an
            earlier export of the same tables (another tenant, table or
            primary key, or not written by Rewind). Without it that is refused.
        iceberg_catalog: for ``iceberg``: a catalog URI (``sqlite:///path``,
            ``postgresql://...``, ``http(s)://`` for REST) or the name of a
            catalog in pyiceberg's configuration.
        iceberg_catalog_name: the catalog's name for a URI (pyiceberg's default).
        namespace: for ``iceberg``: the namespace of the tables (default: each
            table's database).
        zero_copy: for ``iceberg``: copy wholly visible objects server-side
            (default); False rewrites every row.
        s3: how an ``s3://`` destination is reached (default: the warehouse's).
        target_bytes: about how large a rewritten file grows.

    Returns:
        What was exported, where, and the bytes copied and written.

    Raises:
        NotFound: the tenant, the snapshot, a table or database at the time.
        UnprotectedTime: the time is not protected.
        InvalidName, InvalidArgument: a malformed name, time, format, URI or
            catalog; a destination inside the warehouse.
        StorageError: Rewind cannot write to the destination (checked first).
        AlreadyExists: the destination holds something else (see ``replace``).
        MissingDependency: an Iceberg export without pyiceberg.
    """
    started = time.perf_counter()
    format = check_format(format)
    if format == "iceberg" and not iceberg_catalog:
        raise InvalidArgument(
            "an Iceberg export needs its catalog: a URI (sqlite:///path.db, "
            "postgresql://..., https://... for REST) or a catalog name from pyiceberg's "
            "configuration (--iceberg-catalog)"
        )
    if format == "parquet" and (iceberg_catalog or namespace):
        raise InvalidArgument("--iceberg-catalog and --namespace are for --format iceberg")
    to = Warehouse.parse(to, what="export destination").uri  # a bare path: file://
    plan = plan_export(store.catalog, tenant, tables, as_of)
    metadata_bytes = 0
    if format == "parquet":
        dest = open_target(to, s3, store.objects.warehouse, "export destination")
        published = check_destination(dest, plan, replace)
        exported, metadata_bytes = export_parquet(
            store, plan, dest, published, target_bytes=target_bytes
        )
        to = dest.warehouse.uri
    else:
        assert iceberg_catalog is not None
        exported = export_iceberg(
            store,
            plan,
            catalog=iceberg_catalog,
            catalog_name=iceberg_catalog_name,
            to=to,
            namespace=namespace,
            s3=s3,
            replace=replace,
            zero_copy=zero_copy,
            target_bytes=target_bytes,
        )
    return ExportResult(
        tenant=plan.holder.name,
        format=format,
        at_ts=plan.at_ts,
        at=format_ts(plan.at_ts),
        snapshot=plan.snapshot,
        to=to,
        export_id=plan.export_id,
        tables=exported,
        metadata_bytes=metadata_bytes + sum(t.metadata_bytes for t in exported),
        seconds=time.perf_counter() - started,
    )
