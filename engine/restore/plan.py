"""The restore planner: classify every object of the tenant against the point S.

Planning reads only the catalog. Per table that existed at S (and per table
that a carried snapshot still needs), each live member object is:

- ``reuse``   when max_ts <= S: every row is inside the snapshot, zero copy;
- ``skip``    when min_ts > S: every row is after it;
- ``rewrite`` otherwise: it straddles S, and a task keeps its rows <= S.

Every object's schema fingerprint must be one of its table's schema versions,
or the plan fails before anything is written. The plan is a value
(``engine.pipeline.RestorePlan``): it serialises to JSON (and is journaled
with the job), prints as a table, and derives the rewrite tasks with
deterministic output keys.

The plan is set-based: the catalog classifies and sums members in SQL, and the
plan keeps per table the objects and bytes of each action, but full records
only for the straddling objects it rewrites. The reused ones (10^5 in a big
tenant) stay in the catalog: the restored table inherits them by reference,
as its source held them at the plan's ``read_ts`` (``engine.restore.members``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from engine.pipeline import (
    Action,
    Mode,
    RestorePlan,
    RewriteTask,
    SchemaVersionPlan,
    SnapshotPlan,
    TablePlan,
    classify,
)
from tenants.catalog import Catalog, Row, Tx
from tenants.catalog.engine.restore_plan import (
    database_rows_at,
    first_stranger,
    members_after_by_table,
    plan_table_rows,
    schema_version_rows,
)
from tenants.catalog.tenants import active_holder_id
from tenants.catalog.totals import totals_of_tables
from tenants.errors import AlreadyExists, CorruptObject, TenantDropped
from tenants.names import tenant_name
from tenants.objects.record import ObjectRecord, record_from_tuple
from tenants.tenancy import TenantRecord, find_tenant, new_id
from tenants.timeline.lineage import inherited_snapshots, resolve_time
from tenants.timeline.pitr import get_pitr
from tenants.timeline.schedules import get_schedule
from tenants.times import AsOf


def plan_restore(
    catalog: Catalog,
    tenant: str,
    as_of: AsOf,
    *,
    to: str | None = None,
    job_id: str | None = None,
) -> RestorePlan:
    """Plan restoring ``tenant`` to ``as_of`` (snapshot name, instant or ts).

    In place (``to=None``) the new tenant takes the name and the current one is
    retired at install; with ``to`` the new tenant is a clone under that name.

    Raises:
        NotFound: unknown tenant or snapshot.
        UnprotectedTime: the point is not protected.
        AlreadyExists: ``to`` names an active tenant.
        CorruptObject: an object's fingerprint is not a schema of its table.
    """
    with catalog.snapshot() as tx:
        return plan_in(tx, tenant, as_of, to=to, job_id=job_id)


def plan_backup(tx: Tx, tenant: str, as_of: AsOf) -> RestorePlan:
    """What a backup of ``tenant`` at ``as_of`` reads: the restore plan's tables,
    objects and snapshots, with no target (no name is checked or taken, nothing
    will be installed), in the caller's transaction.

    Raises:
        NotFound, UnprotectedTime: an unknown tenant, or an unprotected time.
    """
    return plan_in(tx, tenant, as_of, for_backup=True)


def plan_in(
    tx: Tx,
    tenant: str,
    as_of: AsOf,
    *,
    to: str | None = None,
    job_id: str | None = None,
    for_backup: bool = False,
) -> RestorePlan:
    """``plan_restore`` inside a caller's transaction (to list its members in the same one).
    ``for_backup``: see :func:`plan_backup`.

    Raises:
        As ``plan_restore``; TenantDropped: in place, the tenant is dropped.
    """
    job_id = job_id or new_id()
    current = find_tenant(tx, tenant)
    source, at_ts, label = resolve_time(tx, current, as_of)
    mode: Mode = "clone" if to is not None or for_backup else "in_place"
    if for_backup:
        target, replaced = to or current.name, None
    elif to is not None:
        tenant_name(to)
        if active_holder_id(tx, to) is not None:
            raise AlreadyExists(
                f"cannot restore into {to!r}: an active tenant has that name; "
                "choose another --to name, or restore in place"
            )
        target, replaced = to, None
    else:
        if current.state != "active":
            raise TenantDropped(
                f"tenant {current.ref} is dropped; restore it as a clone with --to NEW, "
                f"or bring it back with `rewind tenant undrop {current.ref}`"
            )
        target, replaced = current.name, current.id
    # Only what the name's lineage inherits of the source: never a snapshot a
    # clone's source made after the clone's cut (tenants.timeline.lineage).
    snapshots = tuple(
        SnapshotPlan(s.name, s.ts, s.kind, s.expires_at)
        for s in inherited_snapshots(tx, current, source)
        if s.ts <= at_ts
    )
    oldest_needed = min([at_ts] + [s.ts for s in snapshots])
    tables, databases = plan_tables(
        tx, source, plan_table_rows(tx, source.id, at_ts, oldest_needed), at_ts
    )
    for row in database_rows_at(tx, source.id, at_ts):  # empty ones too: DDL as of S
        databases.setdefault(row["name"], (new_id(), int(row["created_ts"])))
    pitr = get_pitr(tx, source)
    schedule = get_schedule(tx, source)
    new_tenant_id = new_id()
    tasks = rewrite_tasks(job_id, tables, at_ts, new_tenant_id)
    return RestorePlan(
        job_id=job_id,
        source=source,
        replaced_tenant_id=replaced,
        target_name=target,
        mode=mode,
        at_ts=at_ts,
        at_label=label,
        new_tenant_id=new_tenant_id,
        databases=databases,
        tables=tables,
        snapshots=snapshots,
        pitr_window_us=pitr.window_us if pitr else None,
        schedule=asdict(schedule) if schedule else None,
        tasks=tasks,
        read_ts=tx.last_ts(),
    )


def rewrite_tasks(
    job_id: str, tables: Sequence[TablePlan], at_ts: int, out_tenant_id: str
) -> tuple[RewriteTask, ...]:
    """One task per straddler of ``tables``, writing under ``out_tenant_id`` and
    each table's new id."""
    return tuple(
        RewriteTask(
            task_id=record.id,
            job_id=job_id,
            input=record,
            primary_key=table.primary_key,
            as_of=at_ts,
            out_tenant_id=out_tenant_id,
            out_table_id=table.new_table_id,
        )
        for table in tables
        for record in table.rewrites
    )


def plan_tables(
    tx: Tx, source: TenantRecord, rows: Sequence[Row], at_ts: int
) -> tuple[tuple[TablePlan, ...], dict[str, tuple[str, int]]]:
    """A ``TablePlan`` of each of the source's ``tables`` rows (with
    ``database_name`` and ``database_created_ts``) at ``at_ts``, and the
    databases they need, by name: (new id, creation ts)."""
    # Each read covers every table at once: a tenant of many tables is planned
    # in a few round trips, not a few per table (docs/membership.md).
    table_ids = [row["id"] for row in rows]
    schema_rows = schema_version_rows(tx, table_ids)
    totals = totals_of_tables(tx, table_ids)
    after = members_after_by_table(tx, table_ids, at_ts)
    databases: dict[str, tuple[str, int]] = {}
    tables = []
    for row in rows:
        databases.setdefault(row["database_name"], (new_id(), row["database_created_ts"]))
        versions = tuple(
            SchemaVersionPlan(
                v["valid_from_ts"], v["columns_json"], v["primary_key_json"], v["fingerprint"]
            )
            for v in schema_rows.get(row["id"], [])
        )
        counts, rewrites, reuse_groups = _classify(
            tx,
            source,
            row,
            at_ts,
            {v.fingerprint for v in versions},
            totals.get(row["id"], {}),
            after[row["id"]],
        )
        kept_versions = tuple(v for v in versions if v.valid_from_ts <= at_ts)
        dropped = (
            row["dropped_ts"]
            if row["dropped_ts"] is not None and row["dropped_ts"] <= at_ts
            else None
        )
        tables.append(
            TablePlan(
                source_table_id=row["id"],
                new_table_id=new_id(),
                database=row["database_name"],
                name=row["name"],
                created_ts=row["created_ts"],
                dropped_ts=dropped,
                primary_key=tuple(json.loads(kept_versions[-1].primary_key_json)),
                schema_versions=kept_versions,
                counts=counts,
                rewrites=rewrites,
                reuse_groups=reuse_groups,
            )
        )
    return tuple(tables), databases


def _classify(
    tx: Tx,
    source: TenantRecord,
    table: Row,
    at_ts: int,
    fingerprints: set[str],
    totals: Mapping[tuple[str, str], tuple[int, int]],
    after: Sequence[tuple[Any, ...]],
) -> tuple[
    dict[Action, tuple[int, int]], tuple[ObjectRecord, ...], tuple[tuple[str, str, int, int], ...]
]:
    """(objects, bytes) per action, the straddlers in full and the reused objects'
    totals per (kind, fingerprint): the table's member ``totals`` less its
    members ``after`` S, which are the only members read."""
    groups = {group: list(total) for group, total in totals.items()}
    if any(fingerprint not in fingerprints for _, fingerprint in groups):
        _reject_fingerprints(tx, source, table)
    counts: dict[Action, list[int]] = {}
    rewrites: list[ObjectRecord] = []
    for record in (record_from_tuple(r) for r in after):
        action = classify(record, at_ts)
        if action == "rewrite":
            rewrites.append(record)
        count = counts.setdefault(action, [0, 0])
        count[0] += 1
        count[1] += record.bytes
        group = groups.setdefault((record.kind, record.fingerprint), [0, 0])
        group[0] -= 1
        group[1] -= record.bytes
    reuse = tuple(sorted((kind, fp, n, b) for (kind, fp), (n, b) in groups.items() if n))
    if reuse:
        counts["reuse"] = [sum(g[2] for g in reuse), sum(g[3] for g in reuse)]
    rewrites.sort(key=lambda o: (o.min_ts, o.id))
    return {a: (c[0], c[1]) for a, c in counts.items()}, tuple(rewrites), reuse


def _reject_fingerprints(tx: Tx, source: TenantRecord, table: Row) -> None:
    bad = first_stranger(tx, table["id"])
    if bad is None:  # the totals name a schema no member has: nothing to refuse
        return
    raise CorruptObject(
        f"object {bad['object_key']} of table {table['database_name']}.{table['name']} "
        f"(tenant {source.ref}) has schema fingerprint {bad['fingerprint']}, which is "
        "not a schema version of its table; the restore stops before writing anything"
    )
