"""Objects whose every row is visible at a read's time: what an export may copy as it is.

A data object is *wholly visible* at T when a read of its table at T shows
every row of it, unchanged, and nothing else of its key range: then its file,
copied byte for byte, holds exactly those visible rows (plus the internal
``__ts``, which a reader that projects the table's columns never sees). The
rule, checked catalog first and then by reading key columns only:

1. **Catalog.** A data object of the read's plan (so its first ts is at or
   before T) whose last ts is at or before T, written with the table's schema
   as of T (the same fingerprint: the same columns, no column added or
   dropped since), whose first and last keys are known as typed values
   (tenants.reads.merge.typed_key), and whose key range overlaps no other data
   object of the plan: no other object holds a version of any of its keys at
   or before T (objects whose first ts is after T hold none, and are not in
   the plan). A compacted table's objects are disjoint, so most pass.
2. **One version per key.** An object of one commit (first ts = last ts)
   holds each key once by construction. Any other (a compaction's output) is
   read, its key columns alone, and must hold no key twice: a compaction
   keeps an older version some protected time needs.
3. **Tombstones.** The plan's tombstone objects whose key range overlaps the
   object's are read (keys and ts, inside its range), and none at or before T
   may hide one of its rows: a tombstone at d hides versions older than d (an
   update's version, at d itself, survives). A key the object holds once, at
   or before T, with no newer version anywhere and no tombstone hiding it, is
   visible with exactly that version's values.

The rest of the plan (:attr:`VisibleSplit.rest`) reads exactly the table's
other visible rows: no other data object holds a key inside a wholly visible
object's range, so dropping it from the plan drops its rows and nothing else
(the tombstones left in the range resolve to no row).

Cost: nothing but catalog records for the rule's first step; then, for the
objects that pass it, their key columns (and ``__ts``) and the overlapping
tombstones, by ranged reads of those column chunks: a few percent of the
objects' bytes. The catalog does not record whether an object holds one
version per key, which would make step 2 free.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tenants.objects.reader import open_object
from tenants.objects.record import ObjectRecord
from tenants.objectstore import ObjectStore
from tenants.reads.key_range import KeyRange
from tenants.reads.merge import typed_key
from tenants.reads.visible import ReadPlan
from tenants.schema import TS

TOMBSTONE_ROWS = 1_000_000
"""Tombstones inside one object's key range held to check it; past that the
object is not judged (it is rewritten, which is always correct)."""

Bound = tuple[Any, ...]


@dataclass(frozen=True)
class VisibleSplit:
    """A read's objects split into the wholly visible ones and a plan for the rest."""

    whole: tuple[ObjectRecord, ...]
    """Wholly visible at the plan's time, in key order: each file is its rows."""
    rest: ReadPlan
    """The plan without them: reads exactly the table's other visible rows."""
    checked_bytes: int
    """Bytes of key and ``__ts`` columns read to decide (step 2 and 3)."""

    @property
    def whole_rows(self) -> int:
        return sum(o.rows for o in self.whole)

    @property
    def whole_bytes(self) -> int:
        return sum(o.bytes for o in self.whole)


def wholly_visible(objects: ObjectStore, plan: ReadPlan) -> VisibleSplit:
    """Split ``plan``'s objects by the module doc's rule."""
    key_schema = plan.table.schema.key_arrow()
    ranges = {o.id: _range(o, key_schema) for o in plan.objects}
    data = [o for o in plan.objects if o.kind == "data"]
    tombs = [o for o in plan.objects if o.kind == "tomb"]
    whole: list[ObjectRecord] = []
    checked = 0
    for record in _isolated(data, ranges):
        if (
            record.max_ts > plan.as_of
            or record.cut_ts is not None  # a cut member: only its rows up to the cut
            or record.fingerprint != plan.table.schema.fingerprint
        ):
            continue
        low, high = ranges[record.id] or (None, None)
        assert low is not None and high is not None
        near = [t for t in tombs if _overlap(ranges[t.id], (low, high))]
        if record.min_ts == record.max_ts and not near:
            whole.append(record)
            continue
        spared, read = _keys_spared(objects, plan, record, near, (low, high))
        checked += read
        if spared:
            whole.append(record)
    whole.sort(key=lambda o: ranges[o.id] or ())
    kept = {o.id for o in whole}
    rest = replace(plan, objects=tuple(o for o in plan.objects if o.id not in kept))
    return VisibleSplit(tuple(whole), rest, checked)


def _range(record: ObjectRecord, key_schema: pa.Schema) -> tuple[Bound, Bound] | None:
    low = typed_key(record.min_pk, key_schema)
    high = typed_key(record.max_pk, key_schema)
    return None if low is None or high is None else (low, high)


def _overlap(a: tuple[Bound, Bound] | None, b: tuple[Bound, Bound]) -> bool:
    """Whether two inclusive key ranges share a key (an unknown range: maybe)."""
    if a is None:
        return True
    try:
        return a[0] <= b[1] and b[0] <= a[1]
    except TypeError:
        return True


def _isolated(
    data: Sequence[ObjectRecord], ranges: dict[str, tuple[Bound, Bound] | None]
) -> Iterator[ObjectRecord]:
    """The data objects whose key range no other data object's overlaps: sorted
    by first key, one overlaps a later one exactly when the next starts at or
    before its end, and an earlier one when the earlier ends reach its start."""
    known = [(bounds, o) for o in data if (bounds := ranges[o.id]) is not None]
    if len(known) < len(data):
        return  # an object whose keys are unknown may overlap any other
    try:
        known.sort(key=lambda pair: pair[0])
        reach: Bound | None = None  # the largest last key among the objects before
        for index, ((low, high), record) in enumerate(known):
            after = index + 1 < len(known) and known[index + 1][0][0] <= high
            before = reach is not None and reach >= low
            if not after and not before:
                yield record
            reach = high if reach is None or high > reach else reach
    except TypeError:
        return  # keys that do not compare: judge nothing


def _keys_spared(
    objects: ObjectStore,
    plan: ReadPlan,
    record: ObjectRecord,
    tombs: Sequence[ObjectRecord],
    bounds: tuple[Bound, Bound],
) -> tuple[bool, int]:
    """(no key twice and no tombstone hides a row, bytes read): steps 2 and 3."""
    pk = list(plan.table.schema.primary_key)
    hiding = _tombstones(objects, plan, tombs, bounds)
    if hiding is None:
        return False, 0
    columns = pk if hiding.num_rows == 0 else [*pk, TS]
    with open_object(objects, record, verify=False) as reader:
        read = _column_bytes(reader.parquet, columns)
        previous: pa.Table | None = None
        for batch in reader.batches(columns):
            rows = pa.Table.from_batches([batch])
            if rows.num_rows == 0:
                continue
            if _repeats(rows, pk, previous):
                return False, read
            previous = rows.slice(rows.num_rows - 1)
            if hiding.num_rows and _hidden(rows, hiding, pk):
                return False, read
    return True, read


def _repeats(rows: pa.Table, pk: Sequence[str], previous: pa.Table | None) -> bool:
    """Whether a key appears twice in sorted ``rows`` (or its first equals the last
    row of the batch before)."""
    if previous is not None:
        rows = pa.concat_tables([previous.select(pk), rows.select(pk)])
    if rows.num_rows < 2:
        return False
    same = None
    for name in pk:
        column = rows.column(name)
        equal = pc.equal(column.slice(1), column.slice(0, rows.num_rows - 1))
        same = equal if same is None else pc.and_(same, equal)
    return bool(pc.any(same).as_py())


def _tombstones(
    objects: ObjectStore,
    plan: ReadPlan,
    tombs: Sequence[ObjectRecord],
    bounds: tuple[Bound, Bound],
) -> pa.Table | None:
    """The tombstones at or before the plan's time inside ``bounds``, as (key, ``d``)
    rows; None when there are more than :data:`TOMBSTONE_ROWS`."""
    pk = list(plan.table.schema.primary_key)
    key_schema = plan.table.schema.key_arrow()
    schema = key_schema.append(pa.field("d", pa.int64(), False))
    found: list[pa.Table] = []
    held = 0
    inside = KeyRange(*bounds)
    for tomb in tombs:
        with open_object(objects, tomb, verify=False) as reader:
            groups = inside.row_groups(reader.parquet, pk[0])
            for batch in reader.batches([*pk, TS], row_groups=groups):
                rows = pa.Table.from_batches([batch])
                rows = rows.filter(pc.less_equal(rows.column(TS), tomb.read_ts(plan.as_of)))
                rows = rows.filter(inside.mask(rows, pk))
                if rows.num_rows == 0:
                    continue
                held += rows.num_rows
                if held > TOMBSTONE_ROWS:
                    return None
                columns = [rows.column(k).cast(key_schema.field(k).type) for k in pk]
                found.append(pa.Table.from_arrays([*columns, rows.column(TS)], schema=schema))
    return pa.concat_tables(found) if found else schema.empty_table()


def _hidden(rows: pa.Table, hiding: pa.Table, pk: Sequence[str]) -> bool:
    """Whether a tombstone in ``hiding`` (key, d) is newer than a version in ``rows``."""
    keyed = rows.select([*pk, TS])
    matched = keyed.join(hiding, keys=list(pk), join_type="inner")
    if matched.num_rows == 0:
        return False
    return bool(pc.any(pc.greater(matched.column("d"), matched.column(TS))).as_py())


def _column_bytes(parquet: Any, columns: Sequence[str]) -> int:
    """Compressed bytes of ``columns``' chunks (what reading them fetches)."""
    metadata = parquet.metadata
    names = parquet.schema_arrow.names
    indexes = [names.index(c) for c in columns if c in names]
    return sum(
        metadata.row_group(g).column(i).total_compressed_size
        for g in range(metadata.num_row_groups)
        for i in indexes
    )
