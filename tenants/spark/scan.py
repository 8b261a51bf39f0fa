"""The Spark scan: the same MVCC read as the local reader, as a DataFrame.

Objects are spread over tasks; each task reads its objects from the object store
through pyarrow (``mapInArrow``), projects them onto the schema as of T and
emits events at or before T tagged data/tombstone. Spark then keeps, per key,
the newest event (ties: the data version wins) when it is a data version —
exactly :func:`tenants.mvcc.resolve`, distributed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tenants.mvcc import IS_DATA, project
from tenants.objects.reader import open_object
from tenants.objects.record import ObjectRecord
from tenants.objectstore import ObjectStore
from tenants.reads.visible import ReadPlan
from tenants.schema import TS, TableSchema


def _events_schema(schema: TableSchema) -> pa.Schema:
    fields = [pa.field(f.name, f.type, True) for f in schema.arrow()]
    return pa.schema(
        fields + [pa.field(TS, pa.int64(), False), pa.field(IS_DATA, pa.bool_(), False)]
    )


def _event_batches(
    objects: ObjectStore, schema: TableSchema, as_of: int, records: list[ObjectRecord]
) -> Iterator[pa.RecordBatch]:
    target = _events_schema(schema)
    for record in records:
        # Batch by batch: a task holds a batch of its object, never the object.
        with open_object(objects, record) as reader:
            for batch in reader.batches():
                rows = project(
                    pa.Table.from_batches([batch]), schema, keys_only=record.kind == "tomb"
                )
                rows = rows.filter(pc.less_equal(rows.column(TS), record.read_ts(as_of)))
                if not rows.num_rows:
                    continue
                flag = pa.repeat(pa.scalar(record.kind == "data"), rows.num_rows)
                rows = rows.append_column(IS_DATA, flag)
                arrays = [
                    rows.column(f.name)
                    if f.name in rows.column_names
                    else pa.nulls(rows.num_rows, f.type)
                    for f in target
                ]
                yield from pa.Table.from_arrays(arrays, schema=target).to_batches()


def read_function(
    objects: ObjectStore, schema: TableSchema, as_of: int, records: list[ObjectRecord]
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """What each Spark read task runs (``mapInArrow``): the events of its objects.
    The closure holds the object store, which pickles without credentials."""
    by_index = dict(enumerate(records))

    def read_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            mine = [by_index[i] for i in batch.column(0).to_pylist()]
            yield from _event_batches(objects, schema, as_of, mine)

    return read_task


def spark_dataframe(objects: ObjectStore, plan: ReadPlan, spark: Any | None = None) -> Any:
    """A Spark DataFrame of the visible rows at the plan's time (unsorted)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    from tenants.spark.credentials import store_for_tasks
    from tenants.spark.session import get_spark, prepare

    if spark is None:
        spark = get_spark()
    else:
        prepare(spark)  # a caller's session: ship the code to its cluster, once
    schema = plan.table.schema
    as_of = plan.as_of
    records = list(plan.objects)
    events_schema = _events_schema(schema)
    slices = max(1, min(len(records), spark.sparkContext.defaultParallelism * 2))
    tasks = spark.createDataFrame([(i,) for i in range(len(records))], "i long").repartition(slices)

    events = tasks.mapInArrow(
        read_function(store_for_tasks(spark, objects), schema, as_of, records),
        from_arrow_schema(events_schema),
    )
    window = Window.partitionBy(*schema.primary_key).orderBy(
        F.col(TS).desc(), F.col(IS_DATA).desc()
    )
    newest = events.withColumn("__rank", F.row_number().over(window)).where("__rank = 1")
    return newest.where(F.col(IS_DATA)).select(*schema.names)


def read_spark(objects: ObjectStore, plan: ReadPlan, spark: Any | None = None) -> pa.Table:
    """Visible rows at the plan's time, collected and sorted by primary key."""
    schema = plan.table.schema
    if not plan.objects:
        return schema.arrow().empty_table()
    try:
        table = spark_dataframe(objects, plan, spark).toArrow()
    except Exception as e:
        from tenants.spark.errors import translate_task_error

        raise translate_task_error(
            e, f"reading {plan.table.qualified} of tenant {plan.tenant.ref} at ts {plan.as_of}"
        ) from e
    table = table.cast(pa.schema([pa.field(f.name, f.type, True) for f in schema.arrow()]))
    table = table.sort_by([(k, "ascending") for k in schema.primary_key])
    return table.cast(schema.arrow())
