"""Verification before install: nothing becomes visible that was not proven.

- ``objects``: every object the new tenant will reference exists with its
  recorded size, checked by listing each table prefix (1,000 keys a request)
  rather than one HEAD per object; and every rewritten object's rows hash to
  the hash of its input's rows at S.
- ``full``: also each table's row count and content hash equal a snapshot
  read of the source at S.
A missing or mismatched object fails the job loudly, naming it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

from engine.restore.members import pinned, pinned_sizes
from engine.restore.plan import RestorePlan, TablePlan
from engine.restore.rewrite import RewriteResult
from tenants.catalog import Catalog
from tenants.errors import CorruptObject, InvalidArgument, ObjectMissing
from tenants.object_reader import object_row_hash
from tenants.objectstore import ObjectStore
from tenants.reads import ReadPlan, plan_read, read_plan_in, stream_visible
from tenants.row_hash import RowHasher
from tenants.tenancy import tenant_by_id

VerifyLevel = Literal["none", "objects", "full"]
VERIFY_LEVELS: tuple[VerifyLevel, ...] = ("none", "objects", "full")


def check_level(level: str) -> VerifyLevel:
    if level not in VERIFY_LEVELS:
        raise InvalidArgument(f"unknown verify level {level!r}: use none, objects or full")
    return level  # type: ignore[return-value]


def verify_objects(
    catalog: Catalog, store: ObjectStore, plan: RestorePlan, results: Sequence[RewriteResult]
) -> tuple[int, int]:
    """Existence and size of every installed object, by listing; returns (objects, prefixes)."""
    with catalog.snapshot() as tx:
        sizes = pinned_sizes(tx, plan, "reuse")
    sizes += [(r.output.key, r.output.bytes) for r in results]
    expected: dict[str, dict[str, int]] = defaultdict(dict)
    for key, size in sizes:
        expected[key.rsplit("/", 1)[0] + "/"][key] = size
    checked = 0
    for prefix, keys in expected.items():
        listed = {info.key: info.size for info in store.list(prefix)}
        for key, size in keys.items():
            if key not in listed:
                raise ObjectMissing(
                    f"restore job {plan.job_id} of tenant {plan.source.name!r}: object "
                    f"{store.warehouse.uri}/{key} is missing; the new tenant was not installed"
                )
            if listed[key] != size:
                raise CorruptObject(
                    f"restore job {plan.job_id} of tenant {plan.source.name!r}: object "
                    f"{store.warehouse.uri}/{key} has {listed[key]} bytes, expected {size}"
                )
            checked += 1
    return checked, len(expected)


def verify_rewrites(store: ObjectStore, plan: RestorePlan, results: Sequence[RewriteResult]) -> int:
    """Each rewritten object re-read hashes to its input's rows at S."""
    for result in results:
        if object_row_hash(store, result.output) != result.content_hash:
            raise CorruptObject(
                f"restore job {plan.job_id}: rewritten object {result.output.key} does not hold "
                f"the rows of its input {result.task_id} at ts {plan.at_ts}"
            )
    return len(results)


def verify_full(
    catalog: Catalog, store: ObjectStore, plan: RestorePlan, results: Sequence[RewriteResult]
) -> int:
    """Every table read from the new objects equals a snapshot read of the source at S."""
    with catalog.snapshot() as tx:
        reused = pinned(tx, plan, "reuse")
    outputs = {r.task_id: r.output for r in results}
    compared = 0
    for table in plan.tables:
        if table.dropped_ts is not None:
            continue
        source = (
            _source_at(catalog, plan, table)
            if plan.into_existing_tenant
            else plan_read(catalog, plan.source.ref, table.database, table.name, plan.at_ts)
        )
        expected = _visible_hash(store, source)
        record = table.record(table.new_table_id, plan.new_tenant_id)
        candidate = ReadPlan(
            replace(source.tenant, id=plan.new_tenant_id),
            record,
            plan.at_ts,
            tuple(
                o
                for o in [i.object for i in reused.get(table.source_table_id, [])]
                + [outputs[r.id] for r in table.rewrites]
                if o.min_ts <= plan.at_ts
            ),
        )
        actual = _visible_hash(store, candidate)
        if actual != expected:
            raise CorruptObject(
                f"restore job {plan.job_id}: table {table.qualified} would hold {actual[0]} "
                f"rows, the source at ts {plan.at_ts} has {expected[0]} (or their contents "
                "differ); the new tenant was not installed"
            )
        compared += 1
    return compared


def _source_at(catalog: Catalog, plan: RestorePlan, table: TablePlan) -> ReadPlan:
    """The source table read at S without asking again whether S is protected:
    the plan checked it (or, for an undrop, that the dropped table is retained,
    when S, its drop ts - 1, need not be), and the job's bases pin what it reads."""
    with catalog.snapshot() as tx:
        tenant = tenant_by_id(tx, plan.source.id)
        return read_plan_in(tx, tenant, table.database, table.name, plan.at_ts)


def _visible_hash(store: ObjectStore, plan: ReadPlan) -> tuple[int, str]:
    """Row count and content hash of the plan's visible rows, streamed (both sides
    come in primary-key order, one row per key: the canonical order)."""
    hasher = RowHasher(plan.table.schema.arrow())
    for rows in stream_visible(store, plan):
        hasher.update(rows)
    return hasher.rows, hasher.hexdigest()
