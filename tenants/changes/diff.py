"""What changed in a table between two protected times A and B, row by row.

A diff is the difference of two states: the rows visible at A and at B,
matched by primary key. A key only at B is an ``insert``, only at A a
``delete``, at both with some value differing an ``update``; a key written
and put back, or upserted with the same values, is no change.

**Reading only what changed.** Every write commit's own objects are logged by
table and commit ts (tenants.catalog.changes), each sorted by key and holding
nothing but that commit's rows, and GC keeps them past compaction for the
tenant's change horizon. When the table at A and at B is the same table (no
restore or re-creation between) and its log is complete from A on, the keys
that can differ are exactly the keys of the logged objects in (A, B]: they are
merged in key order (tenants.reads.merge), cut into chunks of at most
:data:`CHUNK_KEYS`, and each chunk is read at A as point reads
(tenants.reads.key_range.KeySet): objects and row groups holding none of the
chunk's keys are never opened. The state at B of those keys is the newest of
their logged events, so B is read from the log alone. Cost follows the
change, not the table.

**Otherwise a scan.** A table restored or re-created between A and B, or one
whose log was forgotten before A (past the horizon, or older than the log),
is diffed by merging its two whole states in key order; the plan says so
(:attr:`DiffPlan.scans`) and the CLI prints it.

**Schemas.** Values are compared in B's schema: a column added since A is
compared with what B's schema reads for the row at A (its default) but shown
null before (it did not exist); a column dropped since A is shown with its
value before and null after, and never compared; a column whose type widened
is compared after casting A's value. The output's schema metadata names the
added, dropped and retyped columns. Never an error.

Memory is one chunk of keys, and per open object a batch: it does not grow
with the table.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tenants.catalog import Catalog, Tx
from tenants.catalog.changes import change_object_tuples, changes_from
from tenants.errors import InvalidArgument, NotFound
from tenants.mvcc import last_of_each_key
from tenants.names import qualified_table
from tenants.objects.reader import open_object
from tenants.objects.record import ObjectRecord, record_from_tuple
from tenants.objectstore import ObjectStore
from tenants.reads.key_range import KeyFilter, KeyRange, KeySet
from tenants.reads.merge import MergeInput, merge_rounds, typed_key
from tenants.reads.visible import ReadPlan, read_keys, read_plan_in, stream_visible
from tenants.schema import TS, TableSchema
from tenants.tenancy import TableRecord, TenantRecord, find_tenant, tables_at
from tenants.timeline.lineage import require_data, resolve_time
from tenants.timeline.protection import wall_now
from tenants.times import AsOf, format_ts

if TYPE_CHECKING:
    from tenants.store import TableStore

CHANGE = "__change"
BEFORE = "before"
AFTER = "after"
KINDS = ("insert", "update", "delete")
CHUNK_KEYS = 64 * 1024
"""Keys point-read at A and at B at once: memory is this many keys (and their rows)."""


@dataclass(frozen=True)
class DiffPlan:
    """A diff of one table between ``from_ts`` (A) and ``to_ts`` (B).

    ``before`` / ``after`` read the table as it was at A / B (None: it did not
    exist then). ``changes`` are the logged commit objects in (A, B] whose keys
    are all that can differ; None means the two states are scanned instead.
    """

    tenant: str
    table: str
    from_ts: int
    to_ts: int
    before: ReadPlan | None
    after: ReadPlan | None
    changes: tuple[ObjectRecord, ...] | None
    schema: pa.Schema
    # A diff of some keys only (restore-table --keys / --where): these keys
    # (a table of the key columns), point-read; or this range, scanned.
    only_keys: pa.Table | None = None
    only_range: KeyRange | None = None

    @property
    def logged(self) -> bool:
        """Whether the keys that can differ come from the change log (not a key
        list or range asked for, not a scan)."""
        return self.changes is not None and self.only_keys is None and self.only_range is None

    @property
    def scans(self) -> bool:
        """Whether the diff reads the two whole states (no change log covers it)."""
        return self.changes is None

    @property
    def where(self) -> str:
        return f"{self.tenant}/{self.table}"

    @property
    def added(self) -> list[str]:
        return _meta(self.schema, "added")

    @property
    def dropped(self) -> list[str]:
        return _meta(self.schema, "dropped")

    @property
    def retyped(self) -> list[str]:
        return _meta(self.schema, "retyped")


def _meta(schema: pa.Schema, name: str) -> list[str]:
    raw = (schema.metadata or {}).get(f"rewind.{name}".encode())
    return [] if raw is None else list(json.loads(raw))


@dataclass(frozen=True)
class TableChanges:
    """One table's changes between A and B, counted (``rewind diff TENANT``)."""

    table: str
    counts: dict[str, int]
    created: bool  # not there at A
    dropped: bool  # not there at B
    added: list[str]
    dropped_columns: list[str]
    retyped: list[str]
    scanned: bool

    @property
    def changed(self) -> bool:
        return bool(
            any(self.counts.values())
            or self.created
            or self.dropped
            or self.added
            or self.dropped_columns
            or self.retyped
        )


@dataclass(frozen=True)
class TenantChanges:
    tenant: str
    from_ts: int
    to_ts: int
    tables: tuple[TableChanges, ...]  # the tables that changed, by name


def plan_diff(
    catalog: Catalog,
    tenant: str,
    table: str,
    from_as_of: AsOf,
    to_as_of: AsOf | None = None,
) -> DiffPlan:
    """Resolve both times (snapshot names, instants, ts; B defaults to now) and plan
    the diff of ``table`` (``"db.table"``) between them, in one catalog snapshot.

    Raises:
        UnprotectedTime: A or B is not protected (its history may be gone).
        InvalidArgument: A is after B.
        NotFound: the table exists at neither time.
    """
    database, name = qualified_table(table)
    with catalog.snapshot() as tx:
        tenant_rec, a, b = _times(tx, tenant, f"{database}.{name}", from_as_of, to_as_of)
        return diff_plan_in(tx, tenant_rec.name, a, b, database, name)


def _times(
    tx: Tx, tenant: str, what: str, from_as_of: AsOf, to_as_of: AsOf | None
) -> tuple[TenantRecord, tuple[TenantRecord, int], tuple[TenantRecord, int]]:
    """The tenant, and (holder, ts) at A and at B (default now), A <= B."""
    tenant_rec = require_data(find_tenant(tx, tenant))
    holder_a, ts_a, _ = resolve_time(tx, tenant_rec, from_as_of)
    if to_as_of is None:  # the present, as "now" names it (resolve_time)
        holder_b, ts_b = tenant_rec, wall_now(tx)
    else:
        holder_b, ts_b, _ = resolve_time(tx, tenant_rec, to_as_of)
    if ts_a > ts_b:
        raise InvalidArgument(
            f"diff of {tenant}/{what}: --from {from_as_of!r} ({format_ts(ts_a)}, ts {ts_a}) "
            f"is after --to {'now' if to_as_of is None else repr(to_as_of)} "
            f"({format_ts(ts_b)}, ts {ts_b}); give the earlier time first"
        )
    return tenant_rec, (holder_a, ts_a), (holder_b, ts_b)


def diff_tenant(
    catalog: Catalog,
    objects: ObjectStore,
    tenant: str,
    from_as_of: AsOf,
    to_as_of: AsOf | None = None,
) -> TenantChanges:
    """Every table of the tenant that changed between A and B, with its changes
    counted (tables with no logged commit in between cost nothing to count)."""
    with catalog.snapshot() as tx:
        tenant_rec, a, b = _times(tx, tenant, "*", from_as_of, to_as_of)
        at_a = {t.qualified: t for t in tables_at(tx, a[0], a[1])}
        at_b = {t.qualified: t for t in tables_at(tx, b[0], b[1])}
        plans = [
            diff_plan_in(tx, tenant_rec.name, a, b, *qualified_table(name))
            for name in sorted(at_a.keys() | at_b.keys())
            if not _unchanged(tx, at_a.get(name), at_b.get(name), a[1], b[1])
        ]
    counted = []
    for plan in plans:
        changes = TableChanges(
            plan.table,
            count_changes(stream_diff(objects, plan)),
            plan.before is None,
            plan.after is None,
            plan.added,
            plan.dropped,
            plan.retyped,
            plan.scans,
        )
        if changes.changed:
            counted.append(changes)
    return TenantChanges(tenant_rec.name, a[1], b[1], tuple(counted))


def _unchanged(
    tx: Tx, before: TableRecord | None, after: TableRecord | None, a: int, b: int
) -> bool:
    """Whether the log alone shows the table did not change in (a, b]: the same
    table and schema at both times, a log that reaches back, and no commit in it
    (a table of a tenant with thousands is skipped without listing its objects)."""
    return (
        before is not None
        and after is not None
        and before.id == after.id
        and before.schema == after.schema
        and changes_from(tx, after.id) <= a + 1
        and not change_object_tuples(tx, after.id, a, b)
    )


def diff_plan_in(
    tx: Tx,
    tenant: str,
    a: tuple[TenantRecord, int],
    b: tuple[TenantRecord, int],
    database: str,
    name: str,
) -> DiffPlan:
    """The diff of ``database.name`` between (holder, ts) ``a`` and ``b``, in the
    caller's transaction, both times already resolved and protected."""
    before = _plan_or_none(tx, a[0], database, name, a[1])
    after = _plan_or_none(tx, b[0], database, name, b[1])
    if before is None and after is None:
        raise NotFound(
            f"table {database}.{name} exists in tenant {tenant!r} neither at "
            f"{format_ts(a[1])} (ts {a[1]}) nor at {format_ts(b[1])} (ts {b[1]})"
        )
    changes = None
    if before is not None and after is not None and before.table.id == after.table.id:
        table_id = after.table.id
        if changes_from(tx, table_id) <= a[1] + 1:
            changes = tuple(
                record_from_tuple(row[:13])
                for row in change_object_tuples(tx, table_id, a[1], b[1])
            )
    return DiffPlan(
        tenant,
        f"{database}.{name}",
        a[1],
        b[1],
        before,
        after,
        changes,
        output_schema(
            None if before is None else before.table.schema,
            None if after is None else after.table.schema,
        ),
    )


def _plan_or_none(
    tx: Tx, holder: TenantRecord, database: str, name: str, ts: int
) -> ReadPlan | None:
    try:
        return read_plan_in(tx, holder, database, name, ts)
    except NotFound:
        return None


def output_schema(a: TableSchema | None, b: TableSchema | None) -> pa.Schema:
    """``__change``, the key columns (B's, or A's if the table is gone at B), then
    ``before`` and ``after``: structs of the non-key columns of both schemas, B's
    in B's order then those only A had. Metadata names the schema changes."""
    keyed = b if b is not None else a
    assert keyed is not None
    pk = keyed.primary_key
    fields = {
        c.name: c.arrow_type for c in (b.columns if b is not None else ()) if c.name not in pk
    }
    for column in a.columns if a is not None else ():
        if column.name not in pk and column.name not in fields:
            fields[column.name] = column.arrow_type
    values = pa.struct([pa.field(n, t) for n, t in fields.items()])
    a_types = {} if a is None else {c.name: c.arrow_type for c in a.columns}
    b_types = {} if b is None else {c.name: c.arrow_type for c in b.columns}
    both = a is not None and b is not None
    metadata = {
        "rewind.added": [n for n in b_types if both and n not in a_types],
        "rewind.dropped": [n for n in a_types if both and n not in b_types],
        "rewind.retyped": [n for n in b_types if n in a_types and a_types[n] != b_types[n]],
    }
    columns = [pa.field(CHANGE, pa.string(), False)]
    columns += [pa.field(k, keyed.column(k).arrow_type, False) for k in pk]
    if fields:
        columns += [pa.field(BEFORE, values), pa.field(AFTER, values)]
    return pa.schema(columns, metadata={k: json.dumps(v) for k, v in metadata.items()})


def diff_reader(
    catalog: Catalog,
    objects: ObjectStore,
    tenant: str,
    table: str,
    from_as_of: AsOf,
    to_as_of: AsOf | None = None,
) -> pa.RecordBatchReader:
    """The rows of ``table`` that changed between A and B, in key order, streamed
    (see the module doc; :func:`plan_diff` for the errors)."""
    plan = plan_diff(catalog, tenant, table, from_as_of, to_as_of)
    return pa.RecordBatchReader.from_batches(plan.schema, stream_diff(objects, plan))


def diff_table(
    store: TableStore,
    tenant: str,
    table: str,
    from_as_of: AsOf,
    to_as_of: AsOf | None = None,
) -> pa.RecordBatchReader:
    """``TableStore.diff`` as a function, like ``to_duckdb``: the rows of ``table``
    (``"db.table"``) inserted, updated and deleted between two protected times
    (B defaults to now), an Arrow ``RecordBatchReader`` in key order."""
    return diff_reader(store.catalog, store.objects, tenant, table, from_as_of, to_as_of)


def stream_diff(objects: ObjectStore, plan: DiffPlan) -> Iterator[pa.RecordBatch]:
    """The plan's changed rows, in key order, a chunk at a time."""
    for before, after in _aligned(objects, plan):
        batch = _classify(plan, before, after)
        if batch is not None and batch.num_rows:
            yield batch


def _aligned(
    objects: ObjectStore, plan: DiffPlan
) -> Iterator[tuple[pa.Table | None, pa.Table | None]]:
    """(rows at A, rows at B) of the same keys, round after round in key order.

    A chunk of keys is point-read at each side (tenants.reads.visible.read_keys:
    the objects that may hold them, in parallel); a key range, or with neither
    the whole table (a scan), is merged in key order (tenants.reads.merge), a
    batch of each side at a time."""
    keyed = plan.after or plan.before
    assert keyed is not None
    key_schema = keyed.table.schema.key_arrow()
    after = plan.after
    if after is not None and plan.logged:
        # Every event of a changed key in (A, B] is in the logged commit objects,
        # so the newest of them is the key's state at B: B is read from the log
        # alone, never the table (and need not be a time compaction kept whole:
        # a revert's B is its commit's own ts).
        after = ReadPlan(after.tenant, after.table, after.as_of, plan.changes or ())
    for keys in _key_filters(objects, plan):
        if isinstance(keys, KeySet):  # point reads: every object needed is known
            yield (
                None if plan.before is None else read_keys(objects, plan.before, keys),
                None if after is None else read_keys(objects, after, keys),
            )
            continue
        inputs = [
            MergeInput("data", _with_ts(objects, side, key_schema, keys))
            for side in (plan.before, after)
        ]
        for round_ in merge_rounds(inputs, key_schema):
            a, b = (None if t is None else t.drop_columns([TS]) for t in round_.taken)
            yield a, b


def _key_filters(objects: ObjectStore, plan: DiffPlan) -> Iterator[KeyFilter | None]:
    """What each pass of the merge reads: chunks of the keys asked for, or of the
    keys the logged commits changed; the key range asked for; or everything."""
    keyed = plan.after or plan.before
    assert keyed is not None
    pk = keyed.table.schema.primary_key
    if plan.only_keys is not None:
        every = KeySet.of(plan.only_keys, pk).table
        for start in range(0, every.num_rows, CHUNK_KEYS):
            yield KeySet.of(every.slice(start, CHUNK_KEYS), pk)
    elif plan.logged:
        assert plan.changes is not None
        for keys in changed_keys(objects, plan.changes, keyed.table.schema):
            yield KeySet.of(keys, pk)
    else:
        yield plan.only_range


def _with_ts(
    objects: ObjectStore,
    plan: ReadPlan | None,
    key_schema: pa.Schema,
    keys: KeyFilter | None = None,
) -> Iterator[pa.RecordBatch]:
    """A state's rows (of ``keys``) as a merge input: keys cast to the diff's key
    types, a ``__ts``."""
    if plan is None:
        return
    for rows in stream_visible(objects, plan, keys=keys):
        for name in key_schema.names:
            index = rows.schema.get_field_index(name)
            rows = rows.set_column(index, name, rows.column(name).cast(key_schema.field(name).type))
        rows = rows.append_column(TS, pa.repeat(pa.scalar(0, pa.int64()), rows.num_rows))
        yield from rows.to_batches()


def changed_keys(
    objects: ObjectStore,
    changes: tuple[ObjectRecord, ...],
    schema: TableSchema,
    chunk_keys: int = CHUNK_KEYS,
) -> Iterator[pa.Table]:
    """The distinct keys of the logged commit objects ``changes``, in key order, in
    chunks of at most ``chunk_keys`` (a key is never in two chunks)."""
    pk = list(schema.primary_key)
    key_schema = schema.key_arrow()

    def opener(record: ObjectRecord) -> Callable[[], Iterator[pa.RecordBatch]]:
        def batches() -> Iterator[pa.RecordBatch]:
            with open_object(objects, record, verify=False) as reader:
                for batch in reader.batches([*pk, TS]):
                    arrays = [batch.column(k).cast(key_schema.field(k).type) for k in pk]
                    yield pa.RecordBatch.from_arrays([*arrays, batch.column(TS)], names=[*pk, TS])

        return batches

    sources = [MergeInput(r.kind, opener(r), typed_key(r.min_pk, key_schema)) for r in changes]
    pending: list[pa.Table] = []
    count = 0
    for round_ in merge_rounds(sources, key_schema):
        events = round_.events
        keys = events.filter(last_of_each_key(events, pk)).select(pk)
        pending.append(keys)
        count += keys.num_rows
        while count >= chunk_keys:
            ready = pa.concat_tables(pending)
            yield ready.slice(0, chunk_keys)
            pending, count = [ready.slice(chunk_keys)], ready.num_rows - chunk_keys
    if count:
        yield pa.concat_tables(pending)


def _classify(
    plan: DiffPlan, before: pa.Table | None, after: pa.Table | None
) -> pa.RecordBatch | None:
    """Match rows at A and at B by key (both sorted, keys unique) and keep the changes."""
    schema = plan.schema
    pk = [f.name for f in schema if f.name not in (CHANGE, BEFORE, AFTER)]
    empty_a = before is None or before.num_rows == 0
    empty_b = after is None or after.num_rows == 0
    if empty_a and empty_b:
        return None
    key_types = pa.schema([schema.field(k) for k in pk])
    sides = []
    for side, rows in ((0, before), (1, after)):
        if rows is None or rows.num_rows == 0:
            continue
        keys = [rows.column(k).cast(key_types.field(k).type) for k in pk]
        n = rows.num_rows
        sides.append(
            pa.table(
                [*keys, pa.array(np.full(n, side, np.int8)), pa.array(np.arange(n))],
                names=[*pk, "__side", "__pos"],
            )
        )
    events = pa.concat_tables(sides).sort_by(
        [(k, "ascending") for k in pk] + [("__side", "ascending")]
    )
    n = events.num_rows
    side = events.column("__side").to_numpy()
    pos = events.column("__pos").to_numpy()
    same_next = np.zeros(n, dtype=bool)
    if n > 1:
        equal = np.ones(n - 1, dtype=bool)
        for k in pk:
            column = events.column(k).combine_chunks()
            equal &= pc.equal(column.slice(0, n - 1), column.slice(1)).to_numpy(
                zero_copy_only=False
            )
        same_next[:-1] = equal
    paired_tail = np.zeros(n, dtype=bool)
    paired_tail[1:] = same_next[:-1]
    keep = ~paired_tail
    a_index = np.where(side == 0, pos, -1)[keep]
    b_index = np.where(side == 1, pos, np.where(same_next, np.roll(pos, -1), -1))[keep]
    keys = events.filter(pa.array(keep)).select(pk)
    a_idx = pa.array(a_index, mask=a_index < 0)
    b_idx = pa.array(b_index, mask=b_index < 0)
    kinds = np.where(a_index < 0, "insert", np.where(b_index < 0, "delete", "update"))
    changed = a_index < 0
    changed |= b_index < 0
    has_values = BEFORE in schema.names
    before_values = after_values = None
    if has_values:
        value_type = schema.field(BEFORE).type
        b_schema = plan.after.table.schema if plan.after is not None else None
        a_names = set(before.column_names) if before is not None else set()
        b_names = set(after.column_names) if after is not None else set()
        before_arrays = []
        after_arrays = []
        differs = np.zeros(len(a_index), dtype=bool)
        for field in value_type:
            a_col = _taken(before, field, a_idx, a_names)
            b_col = _taken(after, field, b_idx, b_names)
            if b_schema is not None and field.name in b_names:
                compared = a_col if field.name in a_names else _default(b_schema, field, a_idx)
                differs |= _differ(compared, b_col)
            if field.name not in a_names:
                a_col = pa.nulls(len(a_index), field.type)
            before_arrays.append(a_col)
            after_arrays.append(b_col)
        changed |= differs
        before_values = pa.StructArray.from_arrays(
            before_arrays, fields=list(value_type), mask=pa.array(a_index < 0)
        )
        after_values = pa.StructArray.from_arrays(
            after_arrays, fields=list(value_type), mask=pa.array(b_index < 0)
        )
    if not changed.any():
        return None
    mask = pa.array(changed)
    columns = [pa.array(kinds, pa.string()), *keys.columns]
    if before_values is not None and after_values is not None:
        columns += [before_values, after_values]
    return pa.RecordBatch.from_arrays([_filtered(c, mask) for c in columns], schema=schema)


def _filtered(column: pa.Array | pa.ChunkedArray, mask: pa.Array) -> pa.Array:
    kept = pc.filter(column, mask)
    return kept.combine_chunks() if isinstance(kept, pa.ChunkedArray) else kept


def _taken(rows: pa.Table | None, field: pa.Field, index: pa.Array, names: set[str]) -> pa.Array:
    """``field``'s values of ``rows`` at ``index`` (nulls where the index is null or the
    side lacks the column), cast to the diff's type."""
    if rows is None or field.name not in names:
        return pa.nulls(len(index), field.type)
    return rows.column(field.name).take(index).combine_chunks().cast(field.type)


def _default(schema: TableSchema, field: pa.Field, index: pa.Array) -> pa.Array:
    """What ``schema`` reads for a row written before ``field`` was added: its default."""
    value = pa.scalar(schema.column(field.name).default, type=field.type)
    return pa.repeat(value, len(index))


def _differ(a: pa.Array, b: pa.Array) -> np.ndarray:
    """Null-aware inequality: a null and a value differ; two nulls, or two NaNs, do not."""
    unequal = pc.fill_null(pc.not_equal(a, b), False)
    one_null = pc.xor(pc.is_null(a), pc.is_null(b))
    result = pc.or_(unequal, one_null)
    if pa.types.is_floating(a.type):
        both_nan = pc.and_(pc.fill_null(pc.is_nan(a), False), pc.fill_null(pc.is_nan(b), False))
        result = pc.and_(result, pc.invert(both_nan))
    return result.to_numpy(zero_copy_only=False)


def count_changes(batches: Iterator[pa.RecordBatch]) -> dict[str, int]:
    """Rows per kind (``insert``, ``update``, ``delete``) of a diff's batches."""
    counts = dict.fromkeys(KINDS, 0)
    for batch in batches:
        values, found = np.unique(
            batch.column(CHANGE).to_numpy(zero_copy_only=False), return_counts=True
        )
        for value, number in zip(values, found, strict=True):
            counts[str(value)] += int(number)
    return counts
