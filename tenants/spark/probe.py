"""Before a job: can every Spark worker run Rewind's tasks, with the driver's code?

A worker whose Python lacks pyarrow, or cannot import Rewind, or imports
another build of it than the driver's, would otherwise fail deep inside a task
with a Py4J stack trace, or, worse, run other code. One small Spark job (one
task per core) asks each worker what it has; the driver turns the first
problem into one line naming the worker and what is missing.

The probe function is pickled *by value* (``register_pickle_by_value``): a
worker that cannot import ``tenants`` must still be able to run it and say so.
So this module imports nothing of Rewind at its top.
"""

from __future__ import annotations

import importlib
import os
import socket
import sys
from collections.abc import Iterable, Iterator
from typing import Any

# What a worker's Python must have itself; the rest ships in the package zip.
REQUIRED = ("pyarrow", "boto3")


def probe(_: Iterable[Any]) -> Iterator[dict[str, Any]]:
    """Runs on a worker: what this Python has, and which Rewind build it imports."""
    report: dict[str, Any] = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "python": sys.executable,
        "python_version": ".".join(map(str, sys.version_info[:3])),
        "missing": [],
        "version": None,
        "build": None,
        "error": None,
    }
    for module in REQUIRED:
        try:
            importlib.import_module(module)
        except Exception as e:  # noqa: BLE001 - any import failure is the answer
            report["missing"].append(f"{module} ({type(e).__name__}: {e})")
    try:
        tenants = importlib.import_module("tenants")
        package = importlib.import_module("tenants.spark.package")
        report["version"] = tenants.__version__
        report["build"] = package.build_id()
    except Exception as e:  # noqa: BLE001
        report["error"] = f"cannot import Rewind ({type(e).__name__}: {e})"
    yield report


def problem(report: dict[str, Any], version: str, build: str) -> str | None:
    """What is wrong with one worker's report, as the end of a sentence (None: fine)."""
    where = (
        f"Spark worker {report['host']} (python {report['python_version']} at {report['python']})"
    )
    if report["missing"]:
        return (
            f"{where} lacks {', '.join(report['missing'])}: give the workers a Python with "
            "pyarrow and boto3 (spark.pyspark.python, or a packed venv with --archives; "
            "docs/cluster.md)"
        )
    if report["error"]:
        return (
            f"{where} {report['error']}: the driver ships Rewind's code with the job "
            "(addPyFile); check that spark.submit.pyFiles or --py-files does not shadow it"
        )
    if (report["version"], report["build"]) != (version, build):
        return (
            f"{where} imports Rewind {report['version']} build {report['build']}, but the "
            f"driver runs {version} build {build}: remove the other copy from the worker or "
            "from --py-files (the driver ships its own code with the job)"
        )
    return None


def probe_cluster(spark: Any) -> list[dict[str, Any]]:
    """One probe task per default-parallelism slot; every report, deduplicated by
    (host, python). Raises whatever Spark raises if a worker cannot start Python."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    sc = spark.sparkContext
    slots = max(1, sc.defaultParallelism)
    previous = sc.getLocalProperty("spark.job.description")
    sc.setJobDescription("rewind: check the workers")
    try:
        reports = sc.parallelize(range(slots), slots).mapPartitions(probe).collect()
    finally:
        sc.setJobDescription(previous)  # type: ignore[arg-type]
    unique: dict[tuple[str, str], dict[str, Any]] = {}
    for report in reports:
        unique.setdefault((report["host"], report["python"]), report)
    return list(unique.values())
