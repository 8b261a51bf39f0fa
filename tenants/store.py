"""``TableStore``: the tenant store's public API, one catalog and one warehouse.

Everything here is a thin, typed entry point over the modules that do the
work (tenancy, writes, reads, compaction), so the CLI, the engine and the
tests all go through the same code. A method imports the modules only it
needs (and pyarrow with them) when it runs: opening a store and listing its
tenants loads the catalog and little else, so a short command starts fast
(benchmarks/bench_cli_start.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal

from tenants.catalog import Catalog, open_catalog
from tenants.catalog.base import Clock, wall_clock_us
from tenants.config import S3Settings, default_catalog_uri, default_warehouse_uri
from tenants.errors import NotFound
from tenants.names import object_name, qualified_table
from tenants.objects.sizes import BATCH_ROWS, DEFAULT_TARGET_BYTES
from tenants.objectstore import ObjectStore, open_object_store
from tenants.spark.credentials import environment_settings
from tenants.tenancy import (
    TableRecord,
    TenantRecord,
    active_tenant,
    alter_table,
    create_table,
    drop_table,
    drop_tenant,
    find_tenant,
    list_tenants,
    tables_at,
    undrop_tenant,
)
from tenants.tenancy import create_tenant as _create_tenant
from tenants.times import AsOf, parse_time
from tenants.warehouse_owner import MARKER, claim_warehouse, read_marker

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc

    from tenants.changes.revert import RevertResult
    from tenants.compaction import CompactionResult
    from tenants.objects.record import ObjectRecord
    from tenants.reads.arrow import Keys
    from tenants.reads.key_range import KeyRange
    from tenants.reads.visible import ReadPlan
    from tenants.schema import Column, TableSchema
    from tenants.timeline.pitr import PitrWindow
    from tenants.timeline.protection import Protection
    from tenants.timeline.schedules import Schedule, TickResult
    from tenants.timeline.snapshots import SnapshotKind, SnapshotRecord
    from tenants.writes import WriteResult

Reader = Literal["local", "spark"]


class TableStore:
    """A tenant store: a catalog and the warehouse its objects live in.

    A method that acts on one table names it as one ``"db.table"`` string
    (``store.write("acme", "shop.orders", upserts=...)``), as ``read_arrow``,
    the engine functions and the CLI's ``DB.TABLE`` do; a malformed or
    non-string name raises ``InvalidName`` before any I/O.
    """

    def __init__(self, catalog: Catalog, objects: ObjectStore) -> None:
        self.catalog = catalog
        self.objects = objects
        catalog.searched = f"catalog {catalog.uri} (warehouse {objects.warehouse.uri})"

    @classmethod
    def open(
        cls,
        catalog_uri: str | None = None,
        warehouse_uri: str | None = None,
        *,
        s3: S3Settings | None = None,
        clock: Clock = wall_clock_us,
        adopt_warehouse: bool = False,
        create: bool = True,
    ) -> TableStore:
        """Open the catalog (creating or migrating it) and the warehouse it owns.

        To only read (``to_duckdb(TableStore.open(create=False), ...)``), pass
        ``create=False``: a catalog or warehouse that is not there is refused,
        naming both, rather than created empty where the data is not.

        The warehouse's owner marker is checked (and written, on first use):
        a warehouse another catalog owns is refused unless ``adopt_warehouse``
        makes this catalog its owner (tenants/warehouse_owner.py).

        Args:
            catalog_uri: default ``REWIND_CATALOG``, else under ``REWIND_HOME``.
            warehouse_uri: default ``REWIND_WAREHOUSE``, else under ``REWIND_HOME``.
            s3: how the store reaches S3: an ``s3://`` warehouse, and the ``s3://``
                places it opens for others (exports). Default, for convenience
                at this public entry only: the environment's
                (:func:`tenants.spark.credentials.environment_settings`).

        Raises:
            WarehouseOwned: another catalog owns the warehouse.
            ForeignWarehouse: the warehouse has no marker and holds data this
                catalog never wrote, or it is a backup destination.
            NotFound: ``create`` is False and the catalog does not exist, or the
                warehouse was never claimed; nothing was created.
        """
        if s3 is None:
            s3 = environment_settings()
        # The warehouse URI is parsed (and a bad one refused) before the catalog
        # file is created: a malformed command line changes nothing.
        objects = open_object_store(warehouse_uri or default_warehouse_uri(), s3)
        try:
            catalog = open_catalog(catalog_uri or default_catalog_uri(), clock, create=create)
        except NotFound as e:
            raise NotFound(_nothing_there(e.message, objects.warehouse.uri)) from None
        try:
            if not create and read_marker(objects) is None:
                raise NotFound(
                    _nothing_there(
                        f"warehouse {objects.warehouse.uri} has no Rewind data (no {MARKER}) "
                        f"for catalog {catalog.uri}",
                        None,
                    )
                )
            claim_warehouse(catalog, objects, adopt=adopt_warehouse)
        except BaseException:
            catalog.close()
            raise
        return cls(catalog, objects)

    def close(self) -> None:
        self.catalog.close()

    def now(self) -> int:
        with self.catalog.snapshot() as tx:
            return tx.last_ts()

    # tenants and tables
    def create_tenant(self, name: str) -> TenantRecord:
        with self.catalog.transaction() as tx:
            return _create_tenant(tx, name)

    def drop_tenant(self, ref: str) -> TenantRecord:
        with self.catalog.transaction() as tx:
            return drop_tenant(tx, ref)

    def tenant(self, ref: str) -> TenantRecord:
        with self.catalog.snapshot() as tx:
            return find_tenant(tx, ref)

    def tenants(self, *, include_dropped: bool = False) -> list[TenantRecord]:
        with self.catalog.snapshot() as tx:
            return list_tenants(tx, include_dropped)

    def create_table(self, tenant: str, table: str, schema: TableSchema) -> TableRecord:
        """Create ``table`` (``"db.table"``); a database exists while it has a table."""
        database, name = qualified_table(table)
        with self.catalog.transaction() as tx:
            return create_table(tx, active_tenant(tx, tenant), database, name, schema)

    def drop_table(self, tenant: str, table: str) -> TableRecord:
        """Drop ``table`` (``"db.table"``); ``engine.undrop_table`` brings it back."""
        database, name = qualified_table(table)
        with self.catalog.transaction() as tx:
            return drop_table(tx, active_tenant(tx, tenant), database, name)

    def alter_table(
        self,
        tenant: str,
        table: str,
        *,
        add: Sequence[Column] = (),
        drop: Sequence[str] = (),
    ) -> TableRecord:
        """Add (nullable or defaulted) and drop (non-key) columns of ``table`` (``"db.table"``)."""
        database, name = qualified_table(table)
        with self.catalog.transaction() as tx:
            return alter_table(tx, active_tenant(tx, tenant), database, name, add=add, drop=drop)

    def tables(self, tenant: str, as_of: AsOf | None = None) -> list[TableRecord]:
        """DDL as of a protected time: the tables that existed then, with their schemas."""
        from tenants.timeline.lineage import resolve_time

        with self.catalog.snapshot() as tx:
            tenant_rec = find_tenant(tx, tenant)
            if as_of is None:
                return tables_at(tx, tenant_rec, tx.last_ts())
            holder, ts, _ = resolve_time(tx, tenant_rec, as_of)
            return tables_at(tx, holder, ts)

    def undrop_tenant(self, ref: str, new_name: str | None = None) -> TenantRecord:
        with self.catalog.transaction() as tx:
            return undrop_tenant(tx, ref, new_name)

    def resolve_time(self, tenant: str, as_of: AsOf) -> int:
        """A snapshot name, ISO instant, ts or relative time (``now``, ``-1h``,
        ``PT15M``, counted back from the catalog clock) as a protected ts of the
        name's lineage (tenants.timeline.lineage.resolve_time). The one place a
        user-named time is resolved: the CLI's ``--as-of`` calls it, so the CLI
        accepts exactly what the store does.

        Raises:
            InvalidArgument: not a time or snapshot name; or a time in the future.
            NotFound: no snapshot of that name.
            UnprotectedTime: the time is outside every snapshot and PITR window.
        """
        from tenants.timeline.lineage import resolve_time

        with self.catalog.snapshot() as tx:
            return resolve_time(tx, find_tenant(tx, tenant), as_of)[1]

    # snapshots and PITR
    def create_snapshot(
        self, tenant: str, name: str, *, at: int | str | None = None
    ) -> SnapshotRecord:
        """Record a snapshot of the present, or of ``at``: a protected ts, or text
        naming a time (never a snapshot): an ISO instant, a ts, or a relative time
        (``now``, ``-1h``, ``PT15M``) counted back from the catalog clock."""
        from tenants.timeline.protection import wall_now
        from tenants.timeline.snapshots import create_snapshot

        with self.catalog.transaction() as tx:
            tenant_rec = active_tenant(tx, tenant)
            ts = parse_time(at).resolve(wall_now(tx)) if isinstance(at, str) else at
            return create_snapshot(tx, tenant_rec, name, at=ts)

    def snapshots(self, tenant: str) -> list[SnapshotRecord]:
        from tenants.timeline.snapshots import list_snapshots

        with self.catalog.snapshot() as tx:
            return list_snapshots(tx, find_tenant(tx, tenant))

    def snapshot(self, tenant: str, name: str) -> SnapshotRecord:
        from tenants.timeline.snapshots import find_snapshot

        with self.catalog.snapshot() as tx:
            return find_snapshot(tx, find_tenant(tx, tenant), name)

    def drop_snapshot(self, tenant: str, name: str) -> SnapshotRecord:
        from tenants.timeline.snapshots import drop_snapshot

        with self.catalog.transaction() as tx:
            return drop_snapshot(tx, find_tenant(tx, tenant), name)

    def drop_snapshots(
        self, tenant: str, *, older_than_us: int | None = None, kind: SnapshotKind | None = None
    ) -> list[SnapshotRecord]:
        """Drop snapshots older than a duration (µs before now) and/or of a kind."""
        from tenants.timeline.protection import wall_now
        from tenants.timeline.snapshots import drop_snapshots

        with self.catalog.transaction() as tx:
            cutoff = None if older_than_us is None else wall_now(tx) - older_than_us
            return drop_snapshots(tx, find_tenant(tx, tenant), older_than=cutoff, kind=kind)

    def set_schedule(
        self,
        tenant: str,
        *,
        first_at_us: int,
        interval_us: int,
        retain_age_us: int | None = None,
        retain_count: int | None = None,
        name_prefix: str = "auto",
    ) -> Schedule:
        from tenants.timeline.schedules import set_schedule

        with self.catalog.transaction() as tx:
            return set_schedule(
                tx,
                active_tenant(tx, tenant),
                first_at_us=first_at_us,
                interval_us=interval_us,
                retain_age_us=retain_age_us,
                retain_count=retain_count,
                name_prefix=name_prefix,
            )

    def schedule(self, tenant: str) -> Schedule | None:
        from tenants.timeline.schedules import get_schedule

        with self.catalog.snapshot() as tx:
            return get_schedule(tx, find_tenant(tx, tenant))

    def tick(self, tenant: str | None = None) -> list[TickResult]:
        """Apply snapshot schedules: one tenant, or every active tenant. Idempotent."""
        from tenants.timeline.schedules import tick

        with self.catalog.transaction() as tx:
            targets = [active_tenant(tx, tenant)] if tenant else list_tenants(tx)
            return [tick(tx, t) for t in targets]

    def set_pitr(self, tenant: str, window_us: int | None) -> PitrWindow | None:
        from tenants.timeline.pitr import set_pitr

        with self.catalog.transaction() as tx:
            return set_pitr(tx, active_tenant(tx, tenant), window_us)

    def pitr(self, tenant: str) -> PitrWindow | None:
        from tenants.timeline.pitr import get_pitr

        with self.catalog.snapshot() as tx:
            return get_pitr(tx, find_tenant(tx, tenant))

    def protection(self, tenant: str) -> Protection:
        from tenants.timeline.protection import protection

        with self.catalog.snapshot() as tx:
            return protection(tx, find_tenant(tx, tenant))

    # data
    def write(
        self,
        tenant: str,
        table: str,
        *,
        upserts: pa.Table | None = None,
        deletes: pa.Table | None = None,
        only_present: bool = False,
    ) -> WriteResult:
        """One commit to ``table`` (``"db.table"``); see :func:`tenants.writes.write`
        (``only_present`` counts real deletes)."""
        from tenants.writes import write

        database, name = qualified_table(table)
        return write(
            self.catalog,
            self.objects,
            tenant,
            database,
            name,
            upserts=upserts,
            deletes=deletes,
            only_present=only_present,
        )

    def plan_read(self, tenant: str, table: str, as_of: AsOf | None = None) -> ReadPlan:
        """The objects a read of ``table`` (``"db.table"``) at ``as_of`` merges."""
        from tenants.reads.visible import plan_read

        database, name = qualified_table(table)
        return plan_read(self.catalog, tenant, database, name, as_of)

    def read(
        self,
        tenant: str,
        table: str,
        as_of: AsOf | None = None,
        *,
        reader: Reader = "local",
    ) -> pa.Table:
        """Visible rows of ``table`` (``"db.table"``) at ``as_of`` (default now),
        sorted by primary key.

        ``as_of`` is a ts or text (snapshot name, ISO-8601 instant, ts) and must
        be a protected time of the tenant.
        """
        plan = self.plan_read(tenant, table, as_of)
        if reader == "spark":
            from tenants.spark.scan import read_spark

            return read_spark(self.objects, plan)
        from tenants.reads.visible import read_local

        return read_local(self.objects, plan)

    def diff(
        self, tenant: str, table: str, from_as_of: AsOf, to_as_of: AsOf | None = None
    ) -> pa.RecordBatchReader:
        """The rows of ``table`` (``"db.table"``) that changed between two protected
        times (``to_as_of`` defaults to now), streamed in key order: ``__change``
        (insert, update, delete), the key columns, and ``before`` / ``after``
        structs of the other columns (tenants.changes.diff; docs/diff.md)."""
        from tenants.changes.diff import diff_reader

        return diff_reader(self.catalog, self.objects, tenant, table, from_as_of, to_as_of)

    def revert(
        self,
        tenant: str,
        table: str,
        commit_ts: int | None = None,
        *,
        from_as_of: AsOf | None = None,
        to_as_of: AsOf | None = None,
        skip_conflicts: bool = False,
        dry_run: bool = False,
    ) -> RevertResult:
        """Undo write commit ``commit_ts`` of ``table`` (or every commit in
        (``from_as_of``, ``to_as_of``]) in one new commit, keeping every later
        write; keys written again later are conflicts (refused, or left with
        ``skip_conflicts``). See tenants.changes.revert."""
        from tenants.changes.revert import revert

        return revert(
            self.catalog,
            self.objects,
            tenant,
            table,
            commit_ts,
            from_as_of=from_as_of,
            to_as_of=to_as_of,
            skip_conflicts=skip_conflicts,
            dry_run=dry_run,
        )

    def restore_keys(
        self,
        tenant: str,
        table: str,
        as_of: AsOf,
        *,
        keys: pa.Table | None = None,
        key_range: KeyRange | None = None,
        dry_run: bool = False,
    ) -> RevertResult:
        """Put some rows of ``table`` back as they were at ``as_of`` in one commit:
        the keys of ``keys`` (a table of the key columns) or those in ``key_range``;
        every other row is untouched (tenants.changes.revert.restore_keys)."""
        from tenants.changes.revert import restore_keys

        return restore_keys(
            self.catalog,
            self.objects,
            tenant,
            table,
            as_of,
            keys=keys,
            key_range=key_range,
            dry_run=dry_run,
        )

    def read_arrow(
        self,
        tenant: str,
        table: str,
        as_of: AsOf | None = None,
        *,
        columns: Sequence[str] | None = None,
        keys: Keys | None = None,
        filter: pc.Expression | None = None,
        limit: int | None = None,
        batch_rows: int = BATCH_ROWS,
    ) -> pa.RecordBatchReader:
        """Visible rows of ``table`` (``"db.table"``) at ``as_of`` (default now), streamed
        as Arrow batches in primary-key order, for DuckDB, polars, pandas and the
        like: see :func:`tenants.reads.arrow.read_arrow` (arguments, errors) and
        docs/engines.md (filters, how long a read may take)."""
        from tenants.reads.arrow import read_arrow

        return read_arrow(
            self,
            tenant,
            table,
            as_of,
            columns=columns,
            keys=keys,
            filter=filter,
            limit=limit,
            batch_rows=batch_rows,
        )

    def load(
        self,
        tenant: str,
        table: str,
        batches: Iterable[pa.Table | pa.RecordBatch],
    ) -> WriteResult:
        """Upsert rows that arrive in batches into ``table`` (``"db.table"``), as one
        commit, in bounded memory (:func:`tenants.loads.load`)."""
        from tenants.loads import load

        database, name = qualified_table(table)
        return load(self.catalog, self.objects, tenant, database, name, batches)

    def compact(
        self,
        tenant: str,
        table: str | None = None,
        *,
        target_bytes: int = DEFAULT_TARGET_BYTES,
        full: bool = False,
        memory: int | None = None,
    ) -> list[CompactionResult]:
        """Merge objects of every live table of the tenant, of one database
        (``table="db.*"``) or of one table (``"db.table"``); ``full=True`` also
        drops versions no protected time needs; ``memory`` bounds the bytes a
        merge holds (default: tenants.compaction)."""
        from tenants.compaction import compact

        database, name = _compaction_scope(table)
        return compact(
            self.catalog,
            self.objects,
            tenant,
            database,
            name,
            target_bytes=target_bytes,
            full=full,
            memory=memory,
        )

    def objects_of(self, tenant: str) -> list[tuple[str, ObjectRecord]]:
        from tenants.objects.record import tenant_objects

        with self.catalog.snapshot() as tx:
            return tenant_objects(tx, find_tenant(tx, tenant).id)


def _compaction_scope(table: str | None) -> tuple[str | None, str | None]:
    """``None`` (every table), ``"db.*"`` (a database) or ``"db.table"``, as
    (database, table) for :func:`tenants.compaction.compact`."""
    if isinstance(table, str) and table.endswith(".*"):
        return object_name(table[:-2], "database"), None
    if table is None:
        return None, None
    return qualified_table(table)


def _nothing_there(what: str, warehouse: str | None) -> str:
    """An open that may not create found nothing: say where it looked, that it
    created nothing, and how a new deployment starts."""
    where = f" (warehouse {warehouse})" if warehouse else ""
    return (
        f"{what}{where}; nothing was created: check --catalog and --warehouse (or "
        "REWIND_CATALOG, REWIND_WAREHOUSE, REWIND_HOME); a new deployment starts with "
        "`rewind tenant create NAME`"
    )
