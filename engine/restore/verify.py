"""Verification before install: nothing becomes visible that was not proven.

- ``objects``: every object the new tenant will reference exists with its
  recorded size, checked by listing each table prefix (1,000 keys a request)
  rather than one HEAD per object; and every rewritten object's rows hash to
  the hash of its input's rows at S.
- ``full``: also each table's row count and content hash, read from the
  objects the new table will hold, equal the source read at S
  (``engine.restore.source``: the same value a logical restore dumps).
A missing or mismatched object fails the job loudly, naming it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from engine.pipeline import (
    RestorePlan,
    RewriteResult,
    SourceAtS,
    Verified,
    VerifyLevel,
)
from engine.restore.members import reused_sizes
from engine.restore.source import source_at
from tenants.catalog import Catalog
from tenants.errors import CorruptObject, ObjectMissing
from tenants.objects.reader import object_row_hash
from tenants.objects.row_hash import RowHasher
from tenants.objectstore import ObjectStore
from tenants.reads.visible import ReadPlan, stream_visible


def verify_objects(
    catalog: Catalog,
    objects: ObjectStore,
    plan: RestorePlan,
    results: Sequence[RewriteResult],
    *,
    also: Sequence[tuple[str, int]] = (),
) -> tuple[int, int]:
    """Existence and size of every installed object, by listing; returns (objects, prefixes).
    ``also``: more (key, bytes) to find (an instant job's straddlers, installed as
    they are before their rewrite).

    Raises:
        ObjectMissing: an object is not listed under its prefix.
        CorruptObject: an object's listed size differs from its record.
    """
    with catalog.snapshot() as tx:
        sizes = reused_sizes(tx, plan)
    sizes += [(r.output.key, r.output.bytes) for r in results]
    sizes += also
    expected: dict[str, dict[str, int]] = defaultdict(dict)
    for key, size in sizes:
        expected[key.rsplit("/", 1)[0] + "/"][key] = size
    checked = 0
    for prefix, keys in expected.items():
        listed = {info.key: info.size for info in objects.list(prefix)}
        for key, size in keys.items():
            if key not in listed:
                raise ObjectMissing(
                    f"restore job {plan.job_id} of tenant {plan.source.name!r}: object "
                    f"{objects.warehouse.uri}/{key} is missing; the new tenant was not installed"
                )
            if listed[key] != size:
                raise CorruptObject(
                    f"restore job {plan.job_id} of tenant {plan.source.name!r}: object "
                    f"{objects.warehouse.uri}/{key} has {listed[key]} bytes, expected {size}"
                )
            checked += 1
    return checked, len(expected)


def verify_rewrites(
    objects: ObjectStore, plan: RestorePlan, results: Sequence[RewriteResult]
) -> int:
    """Each rewritten object re-read hashes to its input's rows at S.

    Raises:
        CorruptObject: a rewritten object's rows do not hash to its input's at S.
    """
    for result in results:
        if object_row_hash(objects, result.output) != result.content_hash:
            raise CorruptObject(
                f"restore job {plan.job_id}: rewritten object {result.output.key} does not hold "
                f"the rows of its input {result.task_id} at ts {plan.at_ts}"
            )
    return len(results)


def verify_full(objects: ObjectStore, source: SourceAtS, results: Sequence[RewriteResult]) -> int:
    """Every table read from the new objects equals the source read at S.

    Raises:
        CorruptObject: a table's rows or content hash differ from the source's at S.
    """
    outputs = {r.task_id: r.output for r in results}
    compared = 0
    for table in source.tables:
        plan = table.plan
        expected = _visible_hash(objects, table.read(source.tenant, source.at_ts))
        candidate = ReadPlan(
            source.tenant,
            plan.record(plan.new_table_id, source.tenant.id),
            source.at_ts,
            tuple(o for o in table.reused if o.min_ts <= source.at_ts)
            + tuple(outputs[r.id] for r in plan.rewrites),
        )
        actual = _visible_hash(objects, candidate)
        if actual != expected:
            raise CorruptObject(
                f"restore job {source.job_id}: table {plan.qualified} would hold {actual[0]} "
                f"rows, the source at ts {source.at_ts} has {expected[0]} (or their contents "
                "differ); nothing was installed"
            )
        compared += 1
    return compared


def verify_installable(
    catalog: Catalog, objects: ObjectStore, plan: RestorePlan, level: VerifyLevel
) -> Verified:
    """Before an instant job's install: every object it will reference at once (the
    reused ones and the straddlers it holds with a cut) exists with its size, by
    listing, so nothing is installed that cannot be read. The copies are verified
    after the rewrite, before their swap (:func:`verify`).

    Raises:
        ObjectMissing, CorruptObject: as :func:`verify_objects`; nothing installed.
    """
    if level == "none":
        return Verified(level)
    straddlers = [(task.input.key, task.input.bytes) for task in plan.tasks]
    found, prefixes = verify_objects(catalog, objects, plan, [], also=straddlers)
    return Verified(level, found, prefixes)


def verify(
    catalog: Catalog,
    objects: ObjectStore,
    plan: RestorePlan,
    results: Sequence[RewriteResult],
    level: VerifyLevel,
) -> Verified:
    """Verify at ``level`` what the install will reference.

    Raises:
        ObjectMissing: an object the new tables need is not in the object store.
        CorruptObject: an object's size or rows differ from what was recorded
            or planned; nothing is installed and the job can be resumed after
            the cause is fixed.
    """
    if level == "none":
        return Verified(level)
    found, prefixes = verify_objects(catalog, objects, plan, results)
    rewrites = verify_rewrites(objects, plan, results)
    tables = verify_full(objects, source_at(catalog, plan), results) if level == "full" else 0
    return Verified(level, found, prefixes, rewrites, tables)


def _visible_hash(objects: ObjectStore, plan: ReadPlan) -> tuple[int, str]:
    """Row count and content hash of the plan's visible rows, streamed (both sides
    come in primary-key order, one row per key: the canonical order)."""
    hasher = RowHasher(plan.table.schema.arrow())
    for rows in stream_visible(objects, plan):
        hasher.update(rows)
    return hasher.rows, hasher.hexdigest()
