"""The executor seam: run rewrite tasks, report each result as it completes.

``auto`` picks Spark when a cluster master is configured or the bytes to
rewrite are large enough to pay for starting Spark; on one machine two local
threads beat local Spark (see benchmarks/README.md for the measurement that
sets ``AUTO_SPARK_BYTES``).
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
AUTO_SPARK_BYTES = 4 * 1024**3


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
