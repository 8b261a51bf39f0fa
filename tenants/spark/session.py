"""The Spark session Rewind uses, created lazily (pyspark is a heavy import).

**The master the user chose is the master used.** In order:

1. a Spark session already running in this process (a notebook's, a test's);
2. spark-submit's: under spark-submit (``PYSPARK_GATEWAY_PORT`` is set) the
   driver JVM already holds ``spark.master``, and Rewind never overrides it;
   a ``--spark-master`` that says otherwise is an error, not a silent choice;
3. ``--spark-master`` on the CLI (:func:`request_master`) or ``master=``;
4. ``SPARK_MASTER`` in the environment, then ``--master`` in
   ``PYSPARK_SUBMIT_ARGS``, then ``spark.master`` in ``spark-defaults.conf``
   (``$SPARK_CONF_DIR``, else ``$SPARK_HOME/conf``), which the JVM would load;
5. ``local[2]``.

On a cluster master the session ships Rewind's code to the executors
(:mod:`tenants.spark.package`) and checks the workers before the first job
(:mod:`tenants.spark.probe`). Rewind's defaults (UTC session time, Arrow on,
UI off) never override a setting the user gave spark-submit.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from tenants import allocator
from tenants.errors import ClusterMisconfigured, InvalidArgument
from tenants.spark import logs as spark_logs

DEFAULT_MASTER = "local[2]"
MasterSource = Literal[
    "active session", "spark-submit", "--spark-master", "SPARK_MASTER", "PYSPARK_SUBMIT_ARGS",
    "spark-defaults.conf", "default",
]  # fmt: skip
_MASTER = re.compile(
    r"local(\[(\*|\d+)(,\d+)?\])?|local-cluster\[\d+,\d+,\d+\]|spark://[^\s/]+(:\d+)?"
    r"(,[^\s/]+(:\d+)?)*|yarn|k8s://\S+"
)
_requested: str | None = None
_prepared: dict[str, list[dict[str, Any]]] = {}  # application id -> worker reports


@dataclass(frozen=True)
class MasterChoice:
    """The Spark master a job will use, and where that came from."""

    master: str
    source: MasterSource

    @property
    def is_cluster(self) -> bool:
        """False for ``local``/``local[N]``: tasks run inside the driver's machine
        (``local-cluster`` is a test master with real executor processes)."""
        return not (self.master == "local" or self.master.startswith("local["))

    def describe(self) -> str:
        return f"master {self.master} (from {self.source})"


def check_master(url: str) -> str:
    """``url`` if it is a Spark master URL, else an :class:`InvalidArgument`."""
    if not _MASTER.fullmatch(url.strip()):
        raise InvalidArgument(
            f"invalid Spark master {url!r}: use local[N], spark://host:port, yarn or k8s://..."
        )
    return url.strip()


def request_master(url: str | None) -> None:
    """The CLI's ``--spark-master``: the master for sessions this process creates."""
    global _requested
    _requested = check_master(url) if url else None


def under_spark_submit() -> bool:
    """True when spark-submit launched this Python (its JVM gateway is waiting)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _defaults_file_master() -> str | None:
    """``spark.master`` of the ``spark-defaults.conf`` a new JVM would read."""
    folder = os.environ.get("SPARK_CONF_DIR") or (
        os.path.join(os.environ["SPARK_HOME"], "conf") if os.environ.get("SPARK_HOME") else None
    )
    if not folder:
        return None
    try:
        with open(os.path.join(folder, "spark-defaults.conf"), encoding="utf-8") as conf:
            for line in conf:
                parts = line.strip().replace("=", " ", 1).split(None, 1)
                if len(parts) == 2 and parts[0] == "spark.master":
                    return parts[1].strip()
    except OSError:
        return None
    return None


def _submit_args_master() -> str | None:
    args = shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    for i, arg in enumerate(args):
        if arg == "--master" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--master="):
            return arg.split("=", 1)[1]
        if arg == "--conf" and i + 1 < len(args) and args[i + 1].startswith("spark.master="):
            return args[i + 1].split("=", 1)[1]
    return None


def _active_master() -> str | None:
    """The master of a Spark session already running in this process."""
    if "pyspark" not in sys.modules:
        return None  # nobody started Spark; do not pay for the import
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    return None if active is None else str(active.sparkContext.master)


def submitted_conf() -> Callable[[str], str | None]:
    """A reader of spark-submit's settings (``--master``, ``--conf``), as the
    waiting driver JVM holds them. A ``SparkConf`` reads the JVM's settings
    only once the gateway is connected; before that it would answer None."""
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()
    conf = SparkConf()

    def get(key: str) -> str | None:
        return conf.get(key, None) or None

    return get


def _submitted_master() -> str | None:
    """``spark.master`` as spark-submit gave it to the waiting driver JVM."""
    return submitted_conf()("spark.master")


def effective_master(master: str | None = None) -> MasterChoice:
    """Which master a session for this process uses, without starting Spark
    (unless spark-submit already started its JVM, which is then asked).

    Raises:
        InvalidArgument: ``master`` (or ``--spark-master``) contradicts spark-submit's.
    """
    asked = check_master(master) if master else _requested
    active = _active_master()
    if active is not None:
        return MasterChoice(active, "active session")
    if under_spark_submit():
        given = _submitted_master()
        if given:
            if asked and asked != given:
                raise InvalidArgument(
                    f"spark-submit runs this job on master {given}, but --spark-master says "
                    f"{asked}: give the master to spark-submit only"
                )
            return MasterChoice(given, "spark-submit")
    if asked:
        return MasterChoice(asked, "--spark-master")
    if os.environ.get("SPARK_MASTER"):
        return MasterChoice(check_master(os.environ["SPARK_MASTER"]), "SPARK_MASTER")
    from_args = _submit_args_master()
    if from_args:
        return MasterChoice(from_args, "PYSPARK_SUBMIT_ARGS")
    from_defaults = _defaults_file_master()
    if from_defaults:
        return MasterChoice(check_master(from_defaults), "spark-defaults.conf")
    return MasterChoice(DEFAULT_MASTER, "default")


def _defaults(for_tests: bool) -> dict[str, str]:
    return {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4" if for_tests else "32",
        "spark.driver.memory": "2g",
        "spark.python.worker.reuse": "true",
        # Executors' Python workers may load pyarrow before Rewind's code
        # (tenants.allocator): give them the allocator setting from the start.
        **{f"spark.executorEnv.{k}": v for k, v in allocator.ENVIRONMENT.items()},
    }


def get_spark(master: str | None = None, *, for_tests: bool = False) -> Any:
    """The active Spark session, or a new one on :func:`effective_master`, made
    ready for Rewind's tasks (:func:`prepare`)."""
    choice = effective_master(master)
    if not choice.is_cluster:
        # On one machine the workers are this Python; on a cluster they run
        # whatever spark.pyspark.python (or the platform) names there.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is None:
        given = SparkConf()  # spark-submit's --conf and spark-defaults.conf
        builder = SparkSession.builder.appName("rewind")
        if choice.source != "spark-submit":
            builder = builder.master(choice.master)
        for key, value in _defaults(for_tests).items():
            if not given.contains(key):
                builder = builder.config(key, value)
        options = spark_logs.java_options(given.get("spark.driver.extraJavaOptions"))
        if options is not None and choice.source != "spark-submit":
            builder = builder.config("spark.driver.extraJavaOptions", options)
        with spark_logs.filtered_jvm_stderr():
            active = builder.getOrCreate()
        if not spark_logs.spark_logs_shown():
            active.sparkContext.setLogLevel("ERROR")
    prepare(active)
    return active


def prepare(spark: Any) -> list[dict[str, Any]] | None:
    """Ship Rewind's code to a cluster's executors and check the workers, once per
    Spark application; the workers' reports (:mod:`tenants.spark.probe`). On a
    local master the workers are this machine's Python (``PYSPARK_PYTHON``) and
    import Rewind as the driver does, so nothing is done and None is returned.

    Raises:
        ClusterMisconfigured: naming the worker and what it lacks.
    """
    sc = spark.sparkContext
    master = sc.master
    if master == "local" or master.startswith("local["):
        return None
    if sc.applicationId in _prepared:
        return _prepared[sc.applicationId]
    from tenants.spark import package as spark_package
    from tenants.spark import probe as spark_probe

    sc.addPyFile(str(spark_package.cached_zip()))
    try:
        reports = spark_probe.probe_cluster(spark)
    except Exception as e:
        from tenants.spark.errors import task_failure

        raise ClusterMisconfigured(
            f"the Spark workers of {master} cannot run Python tasks: {task_failure(e)}"
        ) from e
    version, build = spark_package.version(), spark_package.build_id()
    for report in reports:
        wrong = spark_probe.problem(report, version, build)
        if wrong:
            raise ClusterMisconfigured(wrong)
    _prepared[sc.applicationId] = reports
    return reports
