"""The Spark executor: rewrite tasks as Spark tasks via ``mapInArrow``.

Tasks are packed into byte-balanced groups (largest first onto the lightest
group), one group per partition. Each Spark task reads and writes S3 through
pyarrow with the pickled object store, so no Hadoop S3 connector is needed; the
store pickles its endpoint and region but never credentials, which each
executor takes from its own AWS chain (docs/cluster.md).
Results stream back to the driver (``toLocalIterator``) and are journaled as
they arrive, so a crash loses at most the groups still in flight.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from typing import Any

import pyarrow as pa

from engine.executors.base import OnResult
from engine.restore.plan import RewriteTask
from engine.restore.rewrite import RewriteResult, run_task
from tenants.objects import ObjectRecord
from tenants.objectstore import ObjectStore
from tenants.spark_credentials import store_for_tasks
from tenants.spark_errors import translate_task_error

RESULT_SCHEMA = "task_id string, result string"


def balance(tasks: Sequence[RewriteTask], groups: int) -> list[list[RewriteTask]]:
    """Greedy longest-processing-time packing of tasks into ``groups`` by bytes."""
    heap = [(0, i) for i in range(max(1, min(groups, len(tasks))))]
    packed: list[list[RewriteTask]] = [[] for _ in heap]
    for task in sorted(tasks, key=lambda t: t.input.bytes, reverse=True):
        load, index = heapq.heappop(heap)
        packed[index].append(task)
        heapq.heappush(heap, (load + task.input.bytes, index))
    return [g for g in packed if g]


def _task_from_json(text: str) -> RewriteTask:
    raw = json.loads(text)
    return RewriteTask(
        **{**raw, "input": ObjectRecord(**raw["input"]), "primary_key": tuple(raw["primary_key"])}
    )


def task_function(store: ObjectStore) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """What each Spark task runs: the function ``mapInArrow`` pickles and ships.

    Its closure holds the store, whose settings pickle without credentials; the
    executor's own AWS chain supplies them (tests check the pickled bytes).
    """

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for text in batch.column(0).to_pylist():
                for raw in json.loads(text):
                    result = run_task(store, _task_from_json(json.dumps(raw)))
                    yield pa.RecordBatch.from_pydict(
                        {"task_id": [result.task_id], "result": [result.to_json()]}
                    )

    return run


class SparkExecutor:
    name = "spark"

    def __init__(self, spark: Any | None = None, tasks_per_core: int = 2) -> None:
        self._spark = spark
        self.tasks_per_core = tasks_per_core

    def rewrite(
        self, store: ObjectStore, tasks: Sequence[RewriteTask], on_result: OnResult
    ) -> list[RewriteResult]:
        if not tasks:
            return []
        from tenants.spark_session import get_spark, prepare

        spark: Any = self._spark or get_spark()
        prepare(spark)
        parallelism = spark.sparkContext.defaultParallelism
        groups = balance(tasks, parallelism * self.tasks_per_core)
        payload = [(json.dumps([asdict(t) for t in group]),) for group in groups]
        frame = spark.sparkContext.parallelize(payload, len(payload)).toDF("tasks string")
        results = []
        try:
            run = task_function(store_for_tasks(spark, store))
            for row in frame.mapInArrow(run, RESULT_SCHEMA).toLocalIterator():
                result = RewriteResult.from_json(row["result"])
                on_result(result)
                results.append(result)
        except Exception as e:
            raise translate_task_error(e, f"restore job {tasks[0].job_id}") from e
        return results
