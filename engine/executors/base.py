"""The executor seam: run rewrite tasks, report each result as it completes.

``auto`` follows the effective Spark master (:func:`tenants.spark.session.
effective_master`: spark-submit's, ``--spark-master``, ``SPARK_MASTER``): a
cluster master means Spark, a local one means the local executor. Measured
(benchmarks/README.md, bench_restore and bench_cluster): on one 2-core machine
local Spark lost to two local threads at every rewrite size, plus seconds to
start, so without a cluster no byte threshold pays for Spark;
``AUTO_SPARK_BYTES`` only guards very large single-machine jobs, where memory,
not speed, argues for Spark. The choice carries its reason, which the plan
output prints.
"""

from __future__ import annotations

from engine.pipeline import (
    ExecutorChoice,
    RewriteExecutor,
    check_executor,
)

AUTO_SPARK_BYTES = 64 * 1024**3


def decide_executor(name: str, rewrite_bytes: int) -> ExecutorChoice:
    """``name`` if it is ``local`` or ``spark``; for ``auto``, the choice the
    effective master and the work call for. Starts no Spark session."""
    check_executor(name)
    if name == "local":
        return ExecutorChoice("local", "asked for")
    from tenants.spark.session import effective_master

    master = effective_master()
    if name == "spark":
        return ExecutorChoice("spark", f"asked for; {master.describe()}")
    if master.is_cluster:
        return ExecutorChoice("spark", f"auto: {master.describe()} is a cluster")
    if rewrite_bytes >= AUTO_SPARK_BYTES:
        return ExecutorChoice(
            "spark",
            f"auto: {rewrite_bytes / 1024**3:.0f} GiB to rewrite is past one machine's "
            f"{AUTO_SPARK_BYTES // 1024**3} GiB; {master.describe()}",
        )
    return ExecutorChoice(
        "local",
        f"auto: {master.describe()} is this machine, where threads beat local Spark",
    )


def executor_for(choice: ExecutorChoice) -> RewriteExecutor:
    if choice.name == "local":
        from engine.executors.local import LocalExecutor

        return LocalExecutor()
    from engine.executors.spark import SparkExecutor

    return SparkExecutor()


def choose_executor(name: str, rewrite_bytes: int) -> RewriteExecutor:
    """The executor called ``name``; ``auto`` decides from the work and the master."""
    return executor_for(decide_executor(name, rewrite_bytes))


class DefaultExecutors:
    """The executors a restore job gets (``engine.pipeline.Executors``): local
    threads or Spark, decided from the work and the effective master."""

    def decide(self, name: str, rewrite_bytes: int) -> ExecutorChoice:
        return decide_executor(name, rewrite_bytes)

    def build(self, choice: ExecutorChoice) -> RewriteExecutor:
        return executor_for(choice)


DEFAULT_EXECUTORS = DefaultExecutors()
