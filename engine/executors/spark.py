"""The Spark executor: rewrite tasks as Spark tasks via ``mapInArrow``.

Tasks are packed into byte-balanced groups (largest first onto the lightest
group). Each group is its own one-partition Spark job, all submitted at once
from a driver thread pool, so the cluster's cores rewrite in parallel; a
group's results are journaled when its job finishes, so a crash loses at most
the groups still in flight. Each Spark task reads and writes S3 through
pyarrow with the pickled object store, so no Hadoop S3 connector is needed; the
object store pickles its endpoint and region but never credentials, which each
executor takes from its own AWS chain (docs/cluster.md).
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict
from typing import Any

import pyarrow as pa

from engine.executors.task import run_task
from engine.pipeline import OnResult, RewriteResult, RewriteTask
from tenants.errors import RewindError
from tenants.objects.record import ObjectRecord
from tenants.objectstore import ObjectStore
from tenants.spark.credentials import store_for_tasks
from tenants.spark.errors import translate_task_error

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


def task_function(
    objects: ObjectStore,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """What each Spark task runs: the function ``mapInArrow`` pickles and ships.

    Its closure holds the object store, whose settings pickle without credentials; the
    executor's own AWS chain supplies them (tests check the pickled bytes).
    """

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for text in batch.column(0).to_pylist():
                for raw in json.loads(text):
                    result = run_task(objects, _task_from_json(json.dumps(raw)))
                    yield pa.RecordBatch.from_pydict(
                        {"task_id": [result.task_id], "result": [result.to_json()]}
                    )

    return run


class SparkExecutor:
    """Rewrite groups as concurrent one-partition Spark jobs.

    One job per group, submitted together from a driver thread pool, so every
    core of the cluster rewrites at once; results are journaled as each job
    finishes. (A single job read back with ``toLocalIterator`` computes its
    partitions one after another: bench_cluster saw one task at a time.)
    """

    name = "spark"
    MAX_CONCURRENT_JOBS = 128

    def __init__(self, spark: Any | None = None, tasks_per_core: int = 2) -> None:
        self._spark = spark
        self.tasks_per_core = tasks_per_core

    def rewrite(
        self, objects: ObjectStore, tasks: Sequence[RewriteTask], on_result: OnResult
    ) -> list[RewriteResult]:
        if not tasks:
            return []
        from tenants.spark.session import get_spark, prepare

        spark: Any = self._spark or get_spark()
        prepare(spark)
        sc = spark.sparkContext
        parallelism = max(1, sc.defaultParallelism)
        groups = balance(tasks, parallelism * self.tasks_per_core)
        run = task_function(store_for_tasks(spark, objects))
        job_id = tasks[0].job_id
        job_group = f"rewind-restore-{job_id}"

        def run_group(group: list[RewriteTask]) -> list[RewriteResult]:
            # Job groups are thread-local (PySpark's pinned threads): cancelling
            # the group stops every job of this restore, in any thread.
            sc.setJobGroup(
                job_group, f"rewind restore job {job_id}: {len(group)} rewrite task(s)", True
            )
            payload = [(json.dumps([asdict(t) for t in group]),)]
            frame = sc.parallelize(payload, 1).toDF("tasks string")
            rows = frame.mapInArrow(run, RESULT_SCHEMA).collect()
            return [RewriteResult.from_json(row["result"]) for row in rows]

        results: list[RewriteResult] = []
        threads = min(len(groups), self.MAX_CONCURRENT_JOBS)
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="rewind-spark") as pool:
            futures = [pool.submit(run_group, group) for group in groups]
            try:
                for future in as_completed(futures):
                    for result in future.result():
                        on_result(result)
                        results.append(result)
            except BaseException as e:
                for future in futures:
                    future.cancel()
                sc.cancelJobGroup(job_group)
                if isinstance(e, Exception) and not isinstance(e, RewindError):
                    raise translate_task_error(e, f"restore job {job_id}") from e
                raise
        return results
