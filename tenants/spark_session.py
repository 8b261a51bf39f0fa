"""The Spark session Rewind uses, created lazily (pyspark is a heavy import).

A cluster master comes from ``SPARK_MASTER`` or spark-submit; otherwise local
mode. Tests use one ``local[2]`` session per run with the UI off, few shuffle
partitions and UTC session time.
"""

from __future__ import annotations

import os
import sys
from typing import Any


def get_spark(master: str | None = None, *, for_tests: bool = False) -> Any:
    """The active Spark session, or a new one configured for Rewind."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.appName("rewind")
    chosen = master or os.environ.get("SPARK_MASTER")
    if chosen:
        builder = builder.master(chosen)
    elif "spark.master" not in os.environ.get("PYSPARK_SUBMIT_ARGS", ""):
        builder = builder.master("local[2]")
    builder = (
        builder.config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4" if for_tests else "32")
        .config("spark.driver.memory", "2g")
        .config("spark.python.worker.reuse", "true")
    )
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
