"""Planning a table or database restore: the tenant plan at a smaller scope.

The tables come from the source tenant as they were at S (the tenant that
held the name then, through its lineage), classified object by object as for
a whole tenant (``engine.restore.plan.plan_tables``). The new tables go into
an existing tenant: the same one (in place, or ``--to`` another name) or
another (``--to-tenant``). In place, the live tables of that name (a table
restore) or of that database (a database restore, including tables created
after S) are replaced: the job holds them while it runs, and its install
drops them and creates the new ones in one transaction. The replaced tables
stay in the catalog as dropped, readable at every time before the restore
and restorable to, for as long as the tenant retains them
(docs/table-restore.md).
"""

from __future__ import annotations

from dataclasses import replace

from engine.pipeline import RestorePlan, Scope
from engine.restore.plan import plan_tables, rewrite_tasks
from tenants.catalog import Catalog, Row, Tx
from tenants.catalog.engine.restore_plan import plan_table_rows
from tenants.catalog.engine.table_restore import (
    last_dropped_table,
    live_tables_of_database,
)
from tenants.catalog.tables import database_row_at, table_row_at
from tenants.errors import AlreadyExists, InvalidArgument, NotFound, UnprotectedTime
from tenants.names import did_you_mean, object_name, qualified_table
from tenants.tenancy import TenantRecord, active_tenant, find_tenant, new_id
from tenants.timeline.lineage import resolve_time
from tenants.timeline.protection import protection
from tenants.times import AsOf, format_ts


def plan_table_restore(
    catalog: Catalog,
    tenant: str,
    table: str,
    as_of: AsOf | None,
    *,
    to: str | None = None,
    to_tenant: str | None = None,
    job_id: str | None = None,
    undrop: bool = False,
) -> RestorePlan:
    """Plan restoring ``table`` (``DB.TABLE``) of ``tenant`` as it was at ``as_of``.

    ``to`` (``DB.NEW``) makes a new table beside it, ``to_tenant`` puts it into
    another tenant; in place the live table of that name (if any) is replaced.
    ``undrop`` restores the most recently dropped table of that name as it was
    at its drop (``as_of`` is then ``None``).

    Raises:
        NotFound: unknown tenant, table or snapshot; no such table at S.
        UnprotectedTime: S is not protected (undrop: the drop is no longer retained).
        AlreadyExists: ``to`` (or the name, for an undrop) is a live table.
    """
    database, name = qualified_table(table)
    out_database, out_name = qualified_table(to) if to else (database, name)
    with catalog.snapshot() as tx:
        current = find_tenant(tx, tenant)
        if undrop:
            row = _dropped_table(tx, current, database, name)
            source, at_ts = current, int(row["dropped_ts"]) - 1
            # The point is one µs before the drop: say so, or the drop's time and
            # the point's ts shown beside it differ by a µs for no stated reason.
            label = (
                f"just before the drop of {database}.{name} "
                f"(dropped at {format_ts(int(row['dropped_ts']))})"
            )
        else:
            source, at_ts, label = resolve_time(tx, current, _as_of(as_of))
            row = _table_at(tx, source, database, name, at_ts, label)
        target = active_tenant(tx, to_tenant or current.name)
        in_place = to is None and to_tenant is None
        live = table_row_at(tx, target.id, out_database, out_name, tx.last_ts())
        if live is not None and (not in_place or undrop):
            if undrop:
                hint = (
                    f"undrop it under another name with --as DB.NEW, or drop "
                    f"{out_database}.{out_name} first"
                )
            elif to_tenant is not None:  # never replaced there: docs/decisions.md
                hint = (
                    "a restore into another tenant never replaces its tables; restore under "
                    f"another name with --to DB.NEW, or drop it there first (`rewind table drop "
                    f"{target.name} {out_database}.{out_name}`)"
                )
            else:
                hint = "choose another --to name, or restore it in place"
            raise AlreadyExists(
                f"table {out_database}.{out_name} already exists in tenant {target.ref}; {hint}"
            )
        return _plan(
            tx,
            scope="table",
            job_id=job_id,
            source=source,
            at_ts=at_ts,
            label=label,
            rows=[row],
            target=target,
            out_database=out_database,
            out_name=out_name if (out_database, out_name) != (database, name) else None,
            in_place=in_place,
            replaced=[live["id"]] if live is not None and in_place else [],
            locked_database_id=None,
        )


def plan_database_restore(
    catalog: Catalog,
    tenant: str,
    database: str,
    as_of: AsOf,
    *,
    to: str | None = None,
    to_tenant: str | None = None,
    job_id: str | None = None,
) -> RestorePlan:
    """Plan restoring every table of ``database`` as it was at ``as_of``.

    In place, the database's live tables are replaced, including those created
    after S; tables dropped since S come back. ``to`` names a new database,
    ``to_tenant`` another tenant; either must not hold a live database of that
    name.

    Raises:
        NotFound: unknown tenant or snapshot; no such database at S.
        UnprotectedTime: S is not protected.
        AlreadyExists: the target database exists (not in place).
    """
    object_name(database, "database")
    out_database = object_name(to, "database") if to else database
    with catalog.snapshot() as tx:
        current = find_tenant(tx, tenant)
        source, at_ts, label = resolve_time(tx, current, _as_of(as_of))
        if database_row_at(tx, source.id, database, at_ts) is None:
            then = {str(r["database_name"]) for r in plan_table_rows(tx, source.id, at_ts, at_ts)}
            raise NotFound(
                f"database {database} did not exist in tenant {source.ref} at {label} "
                f"({format_ts(at_ts)}){did_you_mean(database, then)}; "
                f"`rewind table list {tenant} --as-of TIME` shows what did"
            )
        rows = [
            r
            for r in plan_table_rows(tx, source.id, at_ts, at_ts)
            if r["database_name"] == database
        ]
        target = active_tenant(tx, to_tenant or current.name)
        in_place = to is None and to_tenant is None
        existing = database_row_at(tx, target.id, out_database, tx.last_ts())
        if existing is not None and not in_place:
            raise AlreadyExists(
                f"database {out_database} already exists in tenant {target.ref}; choose another "
                "--to name"
                + (
                    " (a restore into another tenant never replaces its tables)"
                    if to_tenant is not None
                    else ", or restore it in place"
                )
            )
        replaced = (
            [r["id"] for r in live_tables_of_database(tx, target.id, out_database)]
            if in_place
            else []
        )
        return _plan(
            tx,
            scope="database",
            job_id=job_id,
            source=source,
            at_ts=at_ts,
            label=label,
            rows=rows,
            target=target,
            out_database=out_database,
            out_name=None,
            in_place=in_place,
            replaced=replaced,
            locked_database_id=existing["id"] if existing is not None and in_place else None,
        )


def _as_of(as_of: AsOf | None) -> AsOf:
    if as_of is None:
        raise InvalidArgument("say what to restore to: a snapshot name or a time")
    return as_of


def _table_at(
    tx: Tx, source: TenantRecord, database: str, name: str, at_ts: int, label: str
) -> Row:
    rows = plan_table_rows(tx, source.id, at_ts, at_ts)
    for row in rows:
        if row["database_name"] == database and row["name"] == name:
            return row
    close = did_you_mean(f"{database}.{name}", (f"{r['database_name']}.{r['name']}" for r in rows))
    raise NotFound(
        f"table {database}.{name} did not exist in tenant {source.ref} at {label} "
        f"({format_ts(at_ts)}){close}; `rewind table list {source.name} --as-of TIME` shows what did"
    )


def _dropped_table(tx: Tx, tenant: TenantRecord, database: str, name: str) -> Row:
    """The most recently dropped ``database.name`` of ``tenant``, if its history is
    still retained: a dropped table is released (its objects collectable) once no
    snapshot or PITR time of the tenant is older than its drop."""
    row = last_dropped_table(tx, tenant.id, database, name)
    if row is None:
        raise NotFound(f"tenant {tenant.ref} has no dropped table {database}.{name}")
    dropped = int(row["dropped_ts"])
    guard = protection(tx, tenant)
    oldest = min([guard.current_from] + guard.points + ([guard.window[0]] if guard.window else []))
    if oldest >= dropped:
        raise UnprotectedTime(
            f"table {database}.{name} of tenant {tenant.ref} was dropped at "
            f"{format_ts(dropped)}, and its history is no longer retained: no snapshot or PITR "
            f"window of the tenant reaches back before the drop (the oldest protected time is "
            f"{format_ts(oldest)}); it cannot be undropped"
        )
    return row


def _plan(
    tx: Tx,
    *,
    scope: Scope,
    job_id: str | None,
    source: TenantRecord,
    at_ts: int,
    label: str,
    rows: list[Row],
    target: TenantRecord,
    out_database: str,
    out_name: str | None,
    in_place: bool,
    replaced: list[str],
    locked_database_id: str | None,
) -> RestorePlan:
    job_id = job_id or new_id()
    tables, _ = plan_tables(tx, source, rows, at_ts)
    tables = tuple(
        replace(
            t,
            dropped_ts=None,
            target_database=out_database if out_database != t.database else None,
            target_name=out_name,
        )
        for t in tables
    )
    tasks = rewrite_tasks(job_id, tables, at_ts, target.id)
    return RestorePlan(
        job_id=job_id,
        source=source,
        replaced_tenant_id=None,
        target_name=target.name,
        mode="in_place" if in_place else "clone",
        at_ts=at_ts,
        at_label=label,
        new_tenant_id=target.id,
        # created at install unless the target tenant has it live then
        databases={out_database: (new_id(), 0)},
        tables=tables,
        snapshots=(),
        pitr_window_us=None,
        schedule=None,
        tasks=tasks,
        read_ts=tx.last_ts(),
        scope=scope,
        replaced_table_ids=tuple(replaced),
        locked_database_id=locked_database_id,
    )
