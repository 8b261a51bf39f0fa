"""The Spark executor: rewrite tasks as Spark tasks via ``mapInArrow``.

Tasks are packed into byte-balanced groups (largest first onto the lightest
group), one group per partition. Each Spark task reads and writes S3 through
pyarrow with the pickled object store, so no Hadoop S3 connector is needed.
Results stream back to the driver (``toLocalIterator``) and are journaled as
they arrive, so a crash loses at most the groups still in flight.
"""

from __future__ import annotations

import heapq
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from typing import Any

import pyarrow as pa

from engine.executors.base import OnResult
from engine.restore.plan import RewriteTask
from engine.restore.rewrite import RewriteResult, run_task
from tenants import errors
from tenants.errors import RewindError, StorageError
from tenants.objects import ObjectRecord
from tenants.objectstore import ObjectStore

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
        from tenants.spark_session import get_spark

        spark: Any = self._spark or get_spark()
        parallelism = spark.sparkContext.defaultParallelism
        groups = balance(tasks, parallelism * self.tasks_per_core)
        payload = [(json.dumps([asdict(t) for t in group]),) for group in groups]
        frame = spark.sparkContext.parallelize(payload, len(payload)).toDF("tasks string")

        def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for batch in batches:
                for text in batch.column(0).to_pylist():
                    for raw in json.loads(text):
                        task = _task_from_json(json.dumps(raw))
                        result = run_task(store, task)
                        yield pa.RecordBatch.from_pydict(
                            {"task_id": [result.task_id], "result": [result.to_json()]}
                        )

        results = []
        try:
            for row in frame.mapInArrow(run, RESULT_SCHEMA).toLocalIterator():
                result = RewriteResult.from_json(row["result"])
                on_result(result)
                results.append(result)
        except Exception as e:
            raise translate_task_error(e) from e
        return results


_TASK_ERROR = re.compile(r"tenants\.errors\.(\w+): ([^\n]*)")


def translate_task_error(error: Exception) -> Exception:
    """Re-raise a Rewind error that a Spark task raised as its own class.

    Spark hands task failures to the driver as Java exceptions carrying the
    Python traceback text; the last Rewind error named there is the cause.
    """
    if isinstance(error, RewindError):
        return error
    matches = _TASK_ERROR.findall(str(error))
    if matches:
        name, message = matches[-1]
        cls = getattr(errors, name, None)
        if isinstance(cls, type) and issubclass(cls, RewindError):
            return cls(message)
    return StorageError(f"a Spark rewrite task failed: {str(error).splitlines()[0][:500]}")
