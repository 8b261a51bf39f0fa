"""MVCC visibility at a time T, as docs/design.md defines it.

For each key take every event at or before T: data versions and tombstones. A
tombstone at d hides versions with ts < d; an update at t (tombstone and
version both at t) keeps the version. Equivalently: order a key's events by
(ts, data-after-tombstone) and the key is visible iff its newest event is a
data version, whose values are the row. That one sort is the whole algorithm,
shared by the local reader and (in Spark terms) the Spark reader.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from tenants.schema import TS, TableSchema

IS_DATA = "__is_data"


def project(rows: pa.Table, schema: TableSchema, *, keys_only: bool = False) -> pa.Table:
    """Conform an object's rows to ``schema`` (plus ``__ts``).

    Columns the object lacks (added later) are filled with the column default or
    null; columns the schema lacks (dropped) are left out.
    """
    columns = [schema.column(k) for k in schema.primary_key] if keys_only else list(schema.columns)
    arrays = []
    fields = []
    for column in columns:
        arrow_type = column.arrow_type
        if column.name in rows.column_names:
            array = rows.column(column.name).cast(arrow_type)
        else:
            array = pa.repeat(pa.scalar(column.default, type=arrow_type), rows.num_rows)
        arrays.append(array)
        fields.append(pa.field(column.name, arrow_type, column.nullable))
    arrays.append(rows.column(TS).cast(pa.int64()))
    fields.append(pa.field(TS, pa.int64(), False))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def resolve(
    data: Sequence[pa.Table], tombs: Sequence[pa.Table], schema: TableSchema, as_of: int
) -> pa.Table:
    """Visible rows at ``as_of``, sorted by primary key, without ``__ts``.

    ``data`` and ``tombs`` must already be projected onto ``schema``.
    """
    target = schema.arrow()
    events = [t.append_column(IS_DATA, pa.repeat(pa.scalar(True), t.num_rows)) for t in data]
    events += [t.append_column(IS_DATA, pa.repeat(pa.scalar(False), t.num_rows)) for t in tombs]
    events = [e.filter(pc.less_equal(e.column(TS), as_of)) for e in events]
    events = [e for e in events if e.num_rows]
    if not any(e.column(IS_DATA)[0].as_py() for e in events):
        return target.empty_table()  # tombstones alone show nothing
    merged = pa.concat_tables(events, promote_options="default")
    order = [(k, "ascending") for k in schema.primary_key] + [
        (TS, "ascending"),
        (IS_DATA, "ascending"),
    ]
    merged = merged.sort_by(order)
    last = last_of_each_key(merged, schema.primary_key)
    visible = pc.and_(last, merged.column(IS_DATA))
    result = merged.filter(visible).select(schema.names)
    return result.cast(target)


def last_of_each_key(table: pa.Table, primary_key: Sequence[str]) -> pa.Array:
    """A mask that is true on the last row of each run of equal keys: with events
    sorted by (pk, ts, data after tombstone), each key's newest event."""
    n = table.num_rows
    if n == 0:
        return pa.array([], pa.bool_())
    differs = pa.repeat(pa.scalar(False), n - 1)
    for key in primary_key:
        column = table.column(key).combine_chunks()
        differs = pc.or_(differs, pc.not_equal(column.slice(0, n - 1), column.slice(1)))
    return pa.concat_arrays([differs, pa.array([True], pa.bool_())])
