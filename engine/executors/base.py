"""The executor seam: run rewrite tasks, report each result as it completes.

``auto`` picks Spark when a cluster master is configured (``SPARK_MASTER`` or
spark-submit), else the local executor. Measured here (benchmarks/README.md,
bench_restore): on one 2-core machine local Spark lost to two local threads at
every rewrite size from 1 MB to 168 MB (10x slower at 1 MB, 1.2-1.7x at 168 MB,
no crossover in the fitted per-byte costs), plus ~13 s to start. So without a
cluster no byte threshold pays for Spark; ``AUTO_SPARK_BYTES`` only guards
very large single-machine jobs, where memory, not speed, argues for Spark.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Literal, Protocol

from engine.restore.plan import RewriteTask
from engine.restore.rewrite import RewriteResult
from tenants.errors import InvalidArgument
from tenants.objectstore import ObjectStore

ExecutorName = Literal["local", "spark", "auto"]
OnResult = Callable[[RewriteResult], None]
AUTO_SPARK_BYTES = 64 * 1024**3


class RewriteExecutor(Protocol):
    name: str

    def rewrite(
        self, store: ObjectStore, tasks: Sequence[RewriteTask], on_result: OnResult
    ) -> list[RewriteResult]: ...


def choose_executor(name: str, rewrite_bytes: int) -> RewriteExecutor:
    """The executor called ``name``; ``auto`` decides from the work and the cluster."""
    if name == "auto":
        cluster = bool(os.environ.get("SPARK_MASTER")) or "spark.master" in os.environ.get(
            "PYSPARK_SUBMIT_ARGS", ""
        )
        name = "spark" if cluster or rewrite_bytes >= AUTO_SPARK_BYTES else "local"
    if name == "local":
        from engine.executors.local import LocalExecutor

        return LocalExecutor()
    if name == "spark":
        from engine.executors.spark import SparkExecutor

        return SparkExecutor()
    raise InvalidArgument(f"unknown executor {name!r}: use local, spark or auto")
