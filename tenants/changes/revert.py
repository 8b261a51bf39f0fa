"""Revert: undo what one commit (or the commits of a range) did to a table, and
keep every later write; and its sibling, putting some keys back as they were.

The change set is the diff of the table across the commit, (ts - 1, ts], or
across the range (A, B] (tenants.changes.diff): rows it inserted, updated and
deleted, with their values before. A revert writes **one ordinary commit**
that puts each changed key back: a key present before gets its before-values
(conformed to today's schema: a column added since gets its default, a
dropped one is left out), a key absent before is deleted. Being a commit, it
is logged, can be diffed and can itself be reverted.

A key that a later commit touched (any event after the reverted range, even
one that happened to write the same values) is a **conflict**: putting it back
would lose that later write. By default the revert refuses and names the
keys; with ``skip_conflicts`` it leaves them as they are now and reports
them. Conflicts are found in the change log of the commits after the range,
point-read for the change set's keys only.

The commit lands only if the tenant did not change since the conflicts were
computed (compare-and-set on ``last_change_ts``); otherwise the revert plans
again (at most :data:`ATTEMPTS` times).

A revert works within one table's life: the commit must be a ``write`` of the
table the name holds now (not of a table restored or re-created since), and
the table's change log must reach back to it (the tenant's PITR window, see
docs/diff.md). Otherwise it is refused, and ``restore-table`` is the tool.

:func:`restore_keys` is the same write without conflicts: some keys of a table
(a list, or a key range) made to read as they did at a time, every other row
untouched (``restore-table --keys``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, replace

import pyarrow as pa
import pyarrow.compute as pc
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_random_exponential

from tenants.catalog import Catalog, Tx
from tenants.catalog.changes import change_object_tuples, changes_from
from tenants.catalog.commits import commits_at, table_changed_between
from tenants.changes.diff import (
    BEFORE,
    CHANGE,
    KINDS,
    DiffPlan,
    count_changes,
    diff_plan_in,
    stream_diff,
)
from tenants.errors import (
    ConcurrentModification,
    InvalidArgument,
    NotFound,
    RevertConflict,
    UnprotectedTime,
)
from tenants.loads import CHUNK_BYTES
from tenants.names import qualified_table
from tenants.objects.intents import WriteIntent, begin_intent
from tenants.objects.io import write_commit_object
from tenants.objects.reader import open_object
from tenants.objects.record import ObjectKind, ObjectRecord, record_from_tuple
from tenants.objectstore import ObjectStore
from tenants.reads.key_range import KeyRange, KeySet
from tenants.schema import TableSchema
from tenants.tenancy import TableRecord, TenantRecord, active_tenant, find_table
from tenants.timeline.lineage import resolve_time
from tenants.timeline.protection import protection
from tenants.times import AsOf, check_ts, format_ts
from tenants.writes import (
    PreparedCommit,
    conform_keys,
    conform_rows,
    give_up,
    install_prepared,
)

log = logging.getLogger(__name__)

ATTEMPTS = 3
"""Plans of one revert that keep losing their compare-and-set to other commits."""

SHOWN_CONFLICTS = 10
"""Conflicting keys an error message names (all of them are on the error)."""


@dataclass(frozen=True)
class RevertResult:
    """What a revert did, or with ``dry_run`` would do.

    ``changes`` counts the reverted range's changes per kind (insert, update,
    delete); ``upserted`` / ``deleted`` what the revert's commit writes (keys
    put back to their values before, keys the range inserted); ``conflicts``
    the keys later commits touched (left as they are). ``ts`` is the revert's
    own commit, None when nothing was written (a dry run, or nothing to undo).
    """

    tenant: str
    table: str
    from_ts: int
    to_ts: int
    changes: dict[str, int]
    upserted: int
    deleted: int
    conflicts: pa.Table
    dry_run: bool
    ts: int | None = None

    @property
    def conflict_keys(self) -> list[dict[str, object]]:
        return self.conflicts.to_pylist()


@dataclass(frozen=True)
class _Plan:
    tenant: TenantRecord
    table: TableRecord  # as it is now: the revert's commit goes here
    diff: DiffPlan
    later: tuple[ObjectRecord, ...]  # logged commit objects after the range


def revert(
    catalog: Catalog,
    objects: ObjectStore,
    tenant: str,
    table: str,
    commit_ts: int | None = None,
    *,
    from_as_of: AsOf | None = None,
    to_as_of: AsOf | None = None,
    skip_conflicts: bool = False,
    dry_run: bool = False,
) -> RevertResult:
    """Undo commit ``commit_ts`` of ``table`` (``"db.table"``), or every commit in
    (``from_as_of``, ``to_as_of``], in one new commit (see the module doc).

    Raises:
        NotFound: no such tenant, table or commit.
        InvalidArgument: the commit is not a write of this table, the range is
            empty or reversed, or the change log does not reach back to it.
        UnprotectedTime: the time before the commit (or A, B) is not protected.
        RevertConflict: later commits touched some changed keys (without
            ``skip_conflicts``); nothing is written.
        ConcurrentModification: other commits landed under the revert
            ``ATTEMPTS`` times in a row; nothing is written.
    """
    database, name = qualified_table(table)
    if (commit_ts is None) == (from_as_of is None):
        raise InvalidArgument(
            f"revert of {tenant}/{database}.{name}: give a commit ts, or a range "
            "(from and to), not both"
        )
    for attempt in _replanning():
        with attempt:
            with catalog.snapshot() as tx:
                plan = _plan(tx, tenant, database, name, commit_ts, from_as_of, to_as_of)
            return _revert_once(catalog, objects, plan, skip_conflicts, dry_run)
    raise AssertionError("unreachable: tenacity reraises the last attempt's error")


def _quiet_before(tx: Tx, tenant: TenantRecord, table: TableRecord, ts: int) -> int:
    """The time a revert of commit ``ts`` reads the table's state before it at.

    Just before the commit (``ts - 1``) when that time is protected (a PITR
    window, most often). Otherwise the newest snapshot before the commit, if
    the table had no commit (write or DDL) from that snapshot to this one: its
    state then was the state just before the commit, and the snapshot keeps
    it. The table's change log must reach back to the snapshot, which proves no
    write in between went unrecorded.

    Raises:
        UnprotectedTime: neither holds; the message says how to revert from a
            snapshot instead.
    """
    guard = protection(tx, tenant)
    if guard.covers(ts - 1):
        return ts - 1
    earlier = [p for p in guard.points if p < ts]
    if earlier:
        point = earlier[-1]
        if changes_from(tx, table.id) <= point + 1 and not table_changed_between(
            tx, table.id, point, ts - 1
        ):
            return point
    try:
        guard.require(ts - 1)
    except UnprotectedTime as e:
        raise UnprotectedTime(
            f"{e.message}; the table changed between its last snapshot and commit {ts}, so that "
            f"commit alone cannot be undone: revert everything since a snapshot instead "
            f"(`rewind revert {tenant.name} {table.qualified} --from SNAPSHOT --to {ts}`), and "
            f"keep a PITR window on (`rewind pitr set {tenant.name} 7d`) to undo any single commit"
        ) from e
    return ts - 1


def _replanning() -> Retrying:
    """Plan and commit again when another commit lands in between (the CAS lost)."""
    return Retrying(
        retry=retry_if_exception_type(ConcurrentModification),
        stop=stop_after_attempt(ATTEMPTS),
        wait=wait_random_exponential(multiplier=0.02, max=1.0),
        reraise=True,
    )


def _plan(
    tx: Tx,
    tenant: str,
    database: str,
    name: str,
    commit_ts: int | None,
    from_as_of: AsOf | None,
    to_as_of: AsOf | None,
) -> _Plan:
    tenant_rec = active_tenant(tx, tenant)
    now = tx.last_ts()
    table_now = find_table(tx, tenant_rec, database, name, now)
    qualified = table_now.qualified
    where = f"{tenant_rec.name}/{qualified}"
    if commit_ts is not None:
        ts = _check_commit(tx, tenant_rec, table_now, commit_ts)
        lo, hi = _quiet_before(tx, tenant_rec, table_now, ts), ts
        holder, lo, _ = resolve_time(tx, tenant_rec, lo)
        diff = diff_plan_in(tx, tenant_rec.name, (holder, lo), (tenant_rec, hi), database, name)
    else:
        assert from_as_of is not None
        holder, lo, _ = resolve_time(tx, tenant_rec, from_as_of)
        end, hi, _ = resolve_time(tx, tenant_rec, now if to_as_of is None else to_as_of)
        if lo >= hi:
            raise InvalidArgument(
                f"revert of {where}: --from ({format_ts(lo)}, ts {lo}) must be before --to "
                f"({format_ts(hi)}, ts {hi})"
            )
        diff = diff_plan_in(tx, tenant_rec.name, (holder, lo), (end, hi), database, name)
    for side, ts_ in ((diff.before, lo), (diff.after, hi)):
        if side is None or side.table.id != table_now.id:
            raise InvalidArgument(
                f"revert of {where}: at {format_ts(ts_)} (ts {ts_}) the name held another table "
                "than today's (it was restored, re-created or did not exist since); a revert "
                f"works within one table's life: `rewind restore-table {tenant_rec.name} "
                f"{qualified} --at {lo}` puts the whole table back as it was then"
            )
    start = changes_from(tx, table_now.id)
    if diff.changes is None or start > lo + 1:
        raise InvalidArgument(
            f"revert of {where}: its change log starts at {format_ts(start)} (ts {start}), after "
            f"{format_ts(lo)}; commits before the tenant's change horizon (its PITR window) "
            f"cannot be reverted; `rewind restore-table {tenant_rec.name} {qualified} --at {lo}` "
            "puts the whole table back as it was then"
        )
    later = tuple(
        record_from_tuple(row[:13])
        for row in change_object_tuples(tx, table_now.id, hi, max(now, hi))
    )
    return _Plan(tenant_rec, table_now, diff, later)


def restore_keys(
    catalog: Catalog,
    objects: ObjectStore,
    tenant: str,
    table: str,
    as_of: AsOf,
    *,
    keys: pa.Table | None = None,
    key_range: KeyRange | None = None,
    dry_run: bool = False,
) -> RevertResult:
    """Put some rows of ``table`` back as they were at ``as_of``, in one commit: the
    keys of ``keys`` (a table of the key columns), or those in ``key_range``. A key
    present then gets its values then; one absent then is deleted; every other row
    is untouched. Unlike a table restore it is no job: the table stays writable,
    and the commit's compare-and-set makes it all or nothing against concurrent
    writes (``restore-table --keys``, docs/diff.md).

    Raises:
        InvalidArgument: neither or both of ``keys`` and ``key_range``; keys that
            are not the table's key columns; a table that did not exist then.
        UnprotectedTime: ``as_of`` is not protected.
    """
    database, name = qualified_table(table)
    if (keys is None) == (key_range is None):
        raise InvalidArgument(
            f"restore of some keys of {tenant}/{database}.{name}: give the keys, or a key "
            "range, not both"
        )
    for attempt in _replanning():
        with attempt:
            with catalog.snapshot() as tx:
                tenant_rec = active_tenant(tx, tenant)
                now = tx.last_ts()
                table_now = find_table(tx, tenant_rec, database, name, now)
                holder, ts, _ = resolve_time(tx, tenant_rec, as_of)
                diff = diff_plan_in(
                    tx, tenant_rec.name, (holder, ts), (tenant_rec, now), database, name
                )
            if diff.before is None:
                raise InvalidArgument(
                    f"table {table_now.qualified} of tenant {tenant_rec.name!r} did not exist at "
                    f"{format_ts(ts)} (ts {ts}): there are no rows of then to put back"
                )
            where = f"{tenant_rec.name}/{table_now.qualified}"
            only = None if keys is None else _key_columns(keys, table_now.schema, where)
            diff = replace(diff, only_keys=only, only_range=key_range)
            plan = _Plan(tenant_rec, table_now, diff, ())
            return _revert_once(catalog, objects, plan, True, dry_run)
    raise AssertionError("unreachable: tenacity reraises the last attempt's error")


def _key_columns(keys: pa.Table, schema: TableSchema, where: str) -> pa.Table:
    """The key columns of ``keys`` (other columns, a whole row's, are ignored),
    cast to the table's key types.

    Raises:
        InvalidArgument: a key column is missing.
    """
    pk = list(schema.primary_key)
    missing = [k for k in pk if k not in keys.column_names]
    if missing:
        raise InvalidArgument(
            f"keys to restore of {where} need the key column(s) {', '.join(pk)}; "
            f"{', '.join(missing)} missing (given: {', '.join(keys.column_names) or 'none'})"
        )
    return conform_keys(keys.select(pk), schema, where)


def _check_commit(tx: Tx, tenant: TenantRecord, table: TableRecord, commit_ts: int) -> int:
    """``commit_ts`` if it is a write commit of ``table``, else a clear refusal."""
    if isinstance(commit_ts, bool) or not isinstance(commit_ts, int):
        raise InvalidArgument(f"commit {commit_ts!r}: give a commit ts (an int of µs)")
    ts = check_ts(commit_ts)
    where = f"{tenant.name}/{table.qualified}"
    rows = commits_at(tx, tenant.id, ts)
    mine = [r for r in rows if r["table_id"] == table.id]
    if not rows:
        raise NotFound(
            f"tenant {tenant.name!r} has no commit at ts {ts}; "
            f"`rewind history {tenant.name} --commits` lists them"
        )
    if not mine:
        other = rows[0]
        same_name = (other["database_name"], other["table_name"]) == (table.database, table.name)
        what = (
            f"an earlier table {table.qualified} (id {other['table_id']}), replaced since"
            if same_name
            else f"table {other['database_name']}.{other['table_name']}"
        )
        raise InvalidArgument(
            f"commit ts {ts} of tenant {tenant.name!r} changed {what}, not {table.qualified} "
            f"({table.id}); revert names a commit of the table it undoes"
        )
    kind = mine[0]["kind"]
    if kind != "write":
        raise InvalidArgument(
            f"commit ts {ts} of {where} is {'an' if kind[0] in 'aeiou' else 'a'} {kind}, not a "
            "write; revert undoes upserts, deletes "
            f"and loads: `rewind restore-table {tenant.name} {table.qualified} --before {ts}` "
            "puts the whole table back"
        )
    return ts


def _revert_once(
    catalog: Catalog, objects: ObjectStore, plan: _Plan, skip_conflicts: bool, dry_run: bool
) -> RevertResult:
    """Stream the change set, uploading what puts it back a chunk at a time (as a
    load does), then commit every chunk at one ts, or discard them all."""
    schema = plan.table.schema
    pk = list(schema.primary_key)
    before_schema = plan.diff.before.table.schema if plan.diff.before is not None else schema
    where = f"{plan.tenant.name}/{plan.table.qualified}"
    counts = dict.fromkeys(KINDS, 0)
    conflicts: list[pa.Table] = []
    out = _Uploads(catalog, objects, plan, where, upload=not dry_run)
    try:
        for batch in stream_diff(objects, plan.diff):
            rows = pa.Table.from_batches([batch])
            for kind, n in count_changes(iter([batch])).items():
                counts[kind] += n
            touched = _touched_later(objects, plan.later, rows.select(pk), schema)
            if touched is not None:
                clash = touched.mask(rows, pk)
                conflicts.append(rows.filter(clash).select(pk))
                rows = rows.filter(pc.invert(clash))
            had = pc.equal(rows.column(CHANGE), "insert")
            out.add("tomb", rows.filter(had).select(pk))
            kept = rows.filter(pc.invert(had))
            if kept.num_rows:
                out.add("data", _before_values(kept, before_schema, schema))
        out.flush()
        conflict_keys = _concat(conflicts, schema.key_arrow())
        if conflict_keys.num_rows and not skip_conflicts and not dry_run:
            raise RevertConflict(
                f"revert of {where} ({format_ts(plan.diff.from_ts)} .. "
                f"{format_ts(plan.diff.to_ts)}): {conflict_keys.num_rows} changed key(s) were "
                f"written again later: {_some(conflict_keys)}; nothing was written; "
                "--skip-conflicts reverts the others and leaves these as they are now",
                conflict_keys,
            )
    except BaseException:
        give_up(catalog, objects, out.uploaded, out.intent)
        raise
    result = RevertResult(
        plan.tenant.name,
        plan.table.qualified,
        plan.diff.from_ts,
        plan.diff.to_ts,
        counts,
        out.rows["data"],
        out.rows["tomb"],
        conflict_keys,
        dry_run,
    )
    if dry_run or not out.uploaded:
        return result
    prepared = PreparedCommit(
        plan.tenant,
        plan.table,
        tuple(out.uploaded),
        upserted=out.rows["data"],
        deleted=out.rows["tomb"],
        intent=out.intent,
    )
    written = install_prepared(
        catalog, objects, prepared, plan.tenant.name, plan.tenant.last_change_ts
    )
    log.info(
        "tenant %s table %s: revert of ts %d..%d committed at ts %d (%d put back, %d deleted, "
        "%d conflict(s) left)",
        plan.tenant.name,
        plan.table.qualified,
        plan.diff.from_ts,
        plan.diff.to_ts,
        written.ts,
        out.rows["data"],
        out.rows["tomb"],
        conflict_keys.num_rows,
    )
    return replace(result, ts=written.ts)


class _Uploads:
    """The revert's commit objects, uploaded about every :data:`CHUNK_BYTES` of rows
    per kind: the change set is never held whole. Chunks come from disjoint key
    chunks of the diff, so no key is in two of them."""

    def __init__(
        self, catalog: Catalog, objects: ObjectStore, plan: _Plan, where: str, *, upload: bool
    ) -> None:
        self.catalog = catalog
        self.objects = objects
        self.plan = plan
        self.where = where
        self.upload = upload
        self.pending: dict[ObjectKind, list[pa.Table]] = {"data": [], "tomb": []}
        self.rows: dict[ObjectKind, int] = {"data": 0, "tomb": 0}
        self.uploaded: list[ObjectRecord] = []
        self.intent: WriteIntent | None = None  # begun before the first upload

    def add(self, kind: ObjectKind, rows: pa.Table) -> None:
        if not rows.num_rows:
            return
        self.rows[kind] += rows.num_rows
        if not self.upload:
            return
        self.pending[kind].append(rows)
        if sum(t.nbytes for t in self.pending[kind]) >= CHUNK_BYTES:
            self._write(kind)

    def flush(self) -> None:
        for kind in ("data", "tomb"):
            self._write(kind)

    def _write(self, kind: ObjectKind) -> None:
        parts = self.pending[kind]
        if not parts:
            return
        self.pending[kind] = []
        schema = self.plan.table.schema
        rows = pa.concat_tables(parts)
        rows = conform_rows(rows, schema, self.where) if kind == "data" else rows
        if self.intent is None:
            # Both kinds: the diff is streamed, so whether tombstones follow the
            # first data chunk (or the reverse) is not known yet.
            self.intent = begin_intent(
                self.catalog,
                "revert",
                [(self.plan.tenant.id, self.plan.table.id)],
                ("data", "tomb"),
            )
        self.uploaded.append(
            write_commit_object(
                self.objects,
                rows,
                tenant_id=self.plan.tenant.id,
                table_id=self.plan.table.id,
                kind=kind,
                fingerprint=schema.fingerprint,
                primary_key=list(schema.primary_key),
                object_id=self.intent.new_object_id(kind),
            )
        )


def _touched_later(
    objects: ObjectStore, later: tuple[ObjectRecord, ...], keys: pa.Table, schema: TableSchema
) -> KeySet | None:
    """The keys of ``keys`` that a logged commit object in ``later`` holds (None: none)."""
    if not later or not keys.num_rows:
        return None
    pk = list(schema.primary_key)
    wanted = KeySet.of(keys, pk)
    key_schema = schema.key_arrow()
    found = [
        part
        for record in later
        if wanted.may_hold(record, key_schema)
        for part in _keys_in(objects, record, wanted, pk)
    ]
    if not found:
        return None
    return KeySet.of(pa.concat_tables(found), pk)


def _keys_in(
    objects: ObjectStore, record: ObjectRecord, wanted: KeySet, pk: list[str]
) -> Iterator[pa.Table]:
    with open_object(objects, record, verify=False) as reader:
        groups = wanted.row_groups(reader.parquet, pk[0])
        for batch in reader.batches(pk, row_groups=groups):
            rows = pa.Table.from_batches([batch])
            rows = rows.filter(wanted.mask(rows, pk))
            if rows.num_rows:
                yield rows


def _before_values(rows: pa.Table, before: TableSchema, now: TableSchema) -> pa.Table:
    """The rows' values before the range, as today's schema stores them: a column
    added since the range began gets its default, a dropped one is left out."""
    values = rows.column(BEFORE).combine_chunks() if BEFORE in rows.column_names else None
    arrays = []
    for column in now.columns:
        kind = column.arrow_type
        if column.name in now.primary_key:
            arrays.append(rows.column(column.name).cast(kind))
        elif values is not None and column.name in before.names:
            arrays.append(values.field(column.name).cast(kind))
        else:
            arrays.append(pa.repeat(pa.scalar(column.default, type=kind), rows.num_rows))
    return pa.Table.from_arrays(arrays, schema=now.arrow())


def _concat(parts: list[pa.Table], schema: pa.Schema) -> pa.Table:
    parts = [p.cast(schema) for p in parts if p.num_rows]
    return pa.concat_tables(parts) if parts else schema.empty_table()


def _some(keys: pa.Table) -> str:
    shown = [
        next(iter(row.values())) if len(row) == 1 else row
        for row in keys.slice(0, SHOWN_CONFLICTS).to_pylist()
    ]
    more = keys.num_rows - len(shown)
    return ", ".join(repr(k) for k in shown) + (f" and {more} more" if more > 0 else "")
