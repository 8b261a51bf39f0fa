"""What decides where Spark work runs, what it ships, and what it never carries.

These need no cluster (tests/engine/restore/test_cluster.py has the real one): the master
resolution order, ``auto``'s choice and its reason, the package zip and its
build id, credentials that never enter a pickled task, and task failures told
as Rewind's own errors.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import zipfile
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark import cloudpickle

from engine.executors.base import AUTO_SPARK_BYTES, decide_executor
from engine.executors.spark import task_function
from tenants.config import S3Settings, Warehouse
from tenants.errors import (
    ClusterMisconfigured,
    InvalidArgument,
    ObjectMissing,
    StorageError,
    TaskFailed,
)
from tenants.objectstore.s3 import S3ObjectStore
from tenants.schema import TableSchema
from tenants.spark import package as spark_package
from tenants.spark import session as spark_session
from tenants.spark.errors import python_error, translate_task_error, worker_of
from tenants.spark_reader import read_function
from tenants.store import TableStore

# Not the catalog's behaviour: on SQLite alone (conftest.py, one_catalog).
pytestmark = pytest.mark.one_catalog

SCHEMA = TableSchema.of([("id", "int64"), ("v", "string")], ["id"])
SECRET = "wJalrXUtnFEMI-secret-of-the-test-7f3a"
TOKEN = "FwoGZXIvYXdzE-session-token-of-the-test-91c2"


def straddling_tenant(store: TableStore) -> None:
    """Tenant ``acme``, table ``db.t``: one compacted object straddles snapshot ``mon``
    (at mon: 1 a, 2 b)."""
    store.create_tenant("acme")
    store.create_table("acme", "db.t", SCHEMA)
    store.write("acme", "db.t", upserts=pa.table({"id": [1, 2], "v": ["a", "b"]}))
    store.create_snapshot("acme", "mon")
    store.write("acme", "db.t", upserts=pa.table({"id": [2, 3], "v": ["B", "c"]}))
    store.compact("acme", "db.t")


@pytest.fixture
def no_master(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """A process with no Spark session, no spark-submit and no master settings."""
    monkeypatch.setattr(spark_session, "_active_master", lambda: None)
    monkeypatch.setattr(spark_session, "_requested", None)
    for name in (
        "SPARK_MASTER", "PYSPARK_SUBMIT_ARGS", "PYSPARK_GATEWAY_PORT", "SPARK_CONF_DIR",
        "SPARK_HOME",
    ):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_the_default_master_is_local(no_master: pytest.MonkeyPatch) -> None:
    choice = spark_session.effective_master()
    assert (choice.master, choice.source, choice.is_cluster) == ("local[2]", "default", False)


def test_spark_master_and_submit_args_name_the_master(no_master: pytest.MonkeyPatch) -> None:
    no_master.setenv("PYSPARK_SUBMIT_ARGS", "--master spark://h:7077 pyspark-shell")
    assert spark_session.effective_master().master == "spark://h:7077"
    no_master.setenv("SPARK_MASTER", "spark://other:7077")
    choice = spark_session.effective_master()
    assert (choice.master, choice.source) == ("spark://other:7077", "SPARK_MASTER")
    spark_session.request_master("local[3]")  # the CLI's --spark-master wins over both
    assert spark_session.effective_master().master == "local[3]"


def test_a_master_in_spark_defaults_conf_is_kept(
    no_master: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A SparkConf that already holds spark.master (spark-defaults.conf) is not
    overridden by local[2]; SPARK_MASTER still wins over it."""
    (tmp_path / "spark-defaults.conf").write_text(
        "# cluster defaults\nspark.executor.memory 4g\nspark.master   spark://conf-host:7077\n"
    )
    no_master.setenv("SPARK_CONF_DIR", str(tmp_path))
    choice = spark_session.effective_master()
    assert (choice.master, choice.source) == ("spark://conf-host:7077", "spark-defaults.conf")
    no_master.setenv("SPARK_MASTER", "local[1]")
    assert spark_session.effective_master().master == "local[1]"


def test_under_spark_submit_its_master_is_never_overridden(no_master: pytest.MonkeyPatch) -> None:
    """The regression of issue 13: spark-submit passes the master to the driver JVM,
    not through PYSPARK_SUBMIT_ARGS, and Rewind used to force local[2]."""
    no_master.setenv("PYSPARK_GATEWAY_PORT", "1")
    no_master.setenv("SPARK_MASTER", "local[1]")
    no_master.setattr(spark_session, "_submitted_master", lambda: "spark://cluster:7077")
    choice = spark_session.effective_master()
    assert (choice.master, choice.source, choice.is_cluster) == (
        "spark://cluster:7077",
        "spark-submit",
        True,
    )
    with pytest.raises(InvalidArgument, match="spark-submit runs this job on master spark://"):
        spark_session.effective_master("spark://elsewhere:7077")


@pytest.mark.parametrize("bad", ["spark:/h:7077", "localhost", "local[two]", "", "http://h:8080"])
def test_a_malformed_master_is_refused(bad: str) -> None:
    with pytest.raises(InvalidArgument, match="invalid Spark master"):
        spark_session.check_master(bad) if bad else spark_session.check_master(" ")


def test_auto_picks_spark_on_a_cluster_and_says_why(no_master: pytest.MonkeyPatch) -> None:
    local = decide_executor("auto", 10**9)
    assert local.name == "local"
    assert "master local[2] (from default) is this machine" in local.reason
    assert decide_executor("auto", AUTO_SPARK_BYTES).name == "spark"
    no_master.setenv("SPARK_MASTER", "spark://h:7077")
    cluster = decide_executor("auto", 1)
    assert cluster.name == "spark"
    assert cluster.reason == "auto: master spark://h:7077 (from SPARK_MASTER) is a cluster"
    assert decide_executor("local", 1).describe() == "local (asked for)"
    with pytest.raises(InvalidArgument, match="unknown executor 'threads'"):
        decide_executor("threads", 1)


def test_the_cli_plan_names_the_executor_and_why(rewind, no_master) -> None:  # type: ignore[no-untyped-def]
    import json

    assert rewind("tenant", "create", "acme").exit_code == 0
    assert rewind("snapshot", "create", "acme", "mon").exit_code == 0
    done = rewind("--spark-master", "spark://h:7077", "restore-tenant", "acme", "--snapshot",
                  "mon", "--to", "acme2", "--dry-run", "--json")  # fmt: skip
    assert done.exit_code == 0, done.output
    plan = json.loads(done.stdout)
    assert plan["executor"] == "spark"
    assert (
        plan["executor_reason"] == "auto: master spark://h:7077 (from --spark-master) is a cluster"
    )
    bad = rewind("--spark-master", "nowhere", "tenant", "list")
    assert bad.exit_code == 1
    assert "invalid Spark master 'nowhere'" in bad.output


def test_credentials_never_pickle() -> None:
    settings = S3Settings("http://s3.example:9000", "eu-west-1", "AKIAEXAMPLE", SECRET, TOKEN)
    data = pickle.dumps(settings)
    assert SECRET.encode() not in data and TOKEN.encode() not in data
    back = pickle.loads(data)
    assert (back.endpoint_url, back.region, back.access_key_id, back.session_token) == (
        "http://s3.example:9000",
        "eu-west-1",
        None,
        None,
    )
    assert SECRET not in repr(settings) and TOKEN not in repr(settings)


def test_no_secret_is_in_a_tasks_serialised_bytes() -> None:
    """The exact functions Spark pickles for rewrite and read tasks."""
    settings = S3Settings("http://127.0.0.1:1", "us-east-1", "AKIAEXAMPLE", SECRET, TOKEN)
    store = S3ObjectStore(Warehouse.parse("s3://bucket/wh", settings))
    schema = TableSchema.of([("id", "int64")], ["id"])
    for function in (task_function(store), read_function(store, schema, 1, [])):
        data = cloudpickle.dumps(function)
        assert SECRET.encode() not in data and TOKEN.encode() not in data
        assert b"127.0.0.1:1" in data  # the endpoint does travel


def test_session_token_and_profile_reach_both_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    settings = S3Settings.from_env()
    assert settings.session_token == TOKEN
    assert settings.to_boto3()["aws_session_token"] == TOKEN
    assert settings.to_pyarrow_fs()["session_token"] == TOKEN


def test_a_backup_destination_has_its_own_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    assert S3Settings.for_backup() == S3Settings.from_env()
    monkeypatch.setenv("REWIND_BACKUP_AWS_ENDPOINT_URL", "http://backups.example:9000")
    monkeypatch.setenv("REWIND_BACKUP_AWS_PROFILE", "backups")
    backup = S3Settings.for_backup()
    assert (backup.endpoint_url, backup.profile) == ("http://backups.example:9000", "backups")
    assert backup.access_key_id is None  # not the warehouse's keys


def test_the_package_zip_carries_the_code_and_its_build(tmp_path: Path) -> None:
    path = spark_package.build_zip(tmp_path / "rewind.zip")
    names = set(zipfile.ZipFile(path).namelist())
    assert {"tenants/__init__.py", "engine/executors/spark.py", "tenacity/__init__.py"} <= names
    assert not any("__pycache__" in n for n in names)
    assert spark_package.build_zip(tmp_path / "again.zip").read_bytes() == path.read_bytes()
    # A Python that imports Rewind from the zip alone computes the driver's build id.
    probe = subprocess.run(
        [sys.executable, "-I", "-c",
         f"import sys; sys.path.insert(0, {str(path)!r}); "
         "from tenants.spark import package as p; print(p.__file__); print(p.build_id())"],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    )  # fmt: skip
    where, build = probe.stdout.split()
    assert where.startswith(str(path))
    assert build == spark_package.build_id()


TRACE = """An error occurred while calling o84.collectToPython.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 \
failed 4 times, most recent failure: Lost task 0.3 in stage 3.0 (TID 9) (10.1.2.3 executor 1): \
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/x/pyspark.zip/pyspark/worker.py", line 1, in main
    import tenants
{line}
\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:1)
"""


def test_a_task_failure_keeps_its_cause_and_worker() -> None:
    error = RuntimeError(TRACE.format(line="ValueError: bad row 7"))
    assert worker_of(error) == "10.1.2.3 executor 1"
    assert python_error(error) == "ValueError: bad row 7"
    told = translate_task_error(error, "restore job j1")
    assert isinstance(told, TaskFailed)
    assert (
        str(told)
        == "restore job j1: a Spark task failed on 10.1.2.3 executor 1: ValueError: bad row 7"
    )


def test_a_rewind_error_in_a_task_keeps_its_class() -> None:
    line = "tenants.errors.ObjectMissing: restore job j1: rewriting t/x.parquet on w1 pid 9: gone"
    told = translate_task_error(RuntimeError(TRACE.format(line=line)), "restore job j1")
    assert isinstance(told, ObjectMissing)
    assert str(told) == "restore job j1: rewriting t/x.parquet on w1 pid 9: gone"


def test_a_worker_without_a_module_is_a_cluster_problem() -> None:
    error = RuntimeError(TRACE.format(line="ModuleNotFoundError: No module named 'pyarrow'"))
    told = translate_task_error(error, "restore job j1")
    assert isinstance(told, ClusterMisconfigured)
    assert "a Spark worker cannot import pyarrow (on 10.1.2.3 executor 1" in str(told)
    assert "\n" not in str(told)


def test_the_local_master_needs_no_preparation(spark) -> None:  # type: ignore[no-untyped-def]
    spark_session.prepare(spark)  # local[2]: the workers are this Python; no job, no zip
    assert spark.sparkContext.applicationId not in spark_session._prepared


def test_env_credentials_reach_local_spark_workers_without_the_pickle(
    store,
    spark,  # type: ignore[no-untyped-def]
) -> None:
    """A store whose settings hold a secret of their own still works through Spark:
    the tasks never see that secret and take the environment's chain."""
    assert os.environ["AWS_ACCESS_KEY_ID"]
    from engine.restore.job import restore_tenant

    straddling_tenant(store)
    outcome = restore_tenant(store, "acme", "mon", to="acme2", executor="spark")
    assert outcome.rewritten == 1
    assert store.read("acme2", "db.t").to_pydict() == {"id": [1, 2], "v": ["a", "b"]}


def test_hadoop_style_keys_reach_the_tasks_as_a_broadcast(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``spark.hadoop.fs.s3a.*`` keys are the only credentials that work here: the
    warehouse is on a moto server that checks keys and session tokens, and the
    local workers' environment holds the shared test server's placeholder keys,
    which this one refuses. So the read fails without the keys and works with
    them, although no task's pickled bytes hold them."""
    from engine.restore.job import restore_tenant
    from tenants.spark.credentials import KEYS, store_for_tasks
    from tests.helpers.moto_auth import authenticating_moto

    with authenticating_moto(tmp_path / "moto") as auth:
        keys = auth.temporary_credentials()
        bucket = "hadoop-keys"
        auth.create_bucket(bucket)
        settings = S3Settings(auth.endpoint_url, auth.region, *keys)
        store = TableStore.open(f"sqlite:///{tmp_path}/c.db", f"s3://{bucket}/wh", s3=settings)
        try:
            straddling_tenant(store)
            schema = SCHEMA

            with pytest.raises(StorageError, match="reading db.t of tenant acme.*ACCESS_DENIED"):
                store.read("acme", "db.t", "mon", reader="spark")
            given = {KEYS["access_key_id"]: keys.access_key,
                     KEYS["secret_access_key"]: keys.secret_key,
                     KEYS["session_token"]: keys.session_token}  # fmt: skip
            for key, value in given.items():
                spark.conf.set(key, value)
            try:
                shipped = store_for_tasks(spark, store.objects)
                data = cloudpickle.dumps(read_function(shipped, schema, 1, []))
                assert keys.secret_key.encode() not in data
                assert keys.session_token.encode() not in data
                assert store.read("acme", "db.t", "mon", reader="spark").to_pydict() == {
                    "id": [1, 2],
                    "v": ["a", "b"],
                }
                restore_tenant(store, "acme", "mon", to="acme2", executor="spark")
                assert store.read("acme2", "db.t").column("v").to_pylist() == ["a", "b"]
            finally:
                for key in given:
                    spark.conf.unset(key)
        finally:
            store.close()


def _report(**changes: object) -> dict[str, object]:
    report: dict[str, object] = {
        "host": "node-7", "pid": 1, "python": "/usr/bin/python3", "python_version": "3.11.7",
        "missing": [], "version": spark_package.version(), "build": spark_package.build_id(),
        "error": None,
    }  # fmt: skip
    return report | changes


def test_the_probe_names_the_worker_and_what_is_wrong() -> None:
    from tenants.spark.probe import problem

    version, build = spark_package.version(), spark_package.build_id()
    assert problem(_report(), version, build) is None
    lacking = problem(_report(missing=["boto3 (ModuleNotFoundError: x)"]), version, build)
    assert lacking is not None
    assert lacking.startswith("Spark worker node-7 (python 3.11.7 at /usr/bin/python3) lacks boto3")
    other = problem(_report(version="0.0.9", build="abc"), version, build)
    assert (
        other is not None
        and f"imports Rewind 0.0.9 build abc, but the driver runs {version}" in other
    )
    broken = problem(_report(error="cannot import Rewind (ImportError: y)"), version, build)
    assert broken is not None and "cannot import Rewind" in broken


def test_spark_check_shows_the_workers(rewind, spark) -> None:  # type: ignore[no-untyped-def]
    import json

    done = rewind("--json", "spark", "check")
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["master"] == spark.sparkContext.master and report["cluster"] is False
    assert report["workers"] and all(
        w["build"] == spark_package.build_id() for w in report["workers"]
    )


def test_spark_package_writes_the_zip(rewind, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    done = rewind("spark", "package", "--out", tmp_path)
    assert done.exit_code == 0, done.output
    [written] = tmp_path.glob("rewind-*.zip")
    assert written.name == spark_package.zip_name()


def test_a_failed_spark_task_names_tenant_job_object_and_worker(store, spark) -> None:  # type: ignore[no-untyped-def]
    """A rewrite task whose input vanished: the driver raises ObjectMissing (the
    task's own class), in one line naming the job, the object, the process the
    task ran in, and how to resume; no Py4J stack in the message."""
    import re

    from engine.restore.job import restore_tenant

    straddling_tenant(store)
    [(_, straddler)] = store.objects_of("acme")
    store.objects.delete_many([straddler.key])
    with pytest.raises(
        ObjectMissing, match=rf"rewriting {re.escape(straddler.key)} on .* is missing"
    ) as caught:
        restore_tenant(store, "acme", "mon", to="acme2", executor="spark")
    message = str(caught.value)
    assert re.fullmatch(
        rf"restore job (\w+): rewriting {re.escape(straddler.key)} on \S+ pid \d+: "
        rf"object s3://\S+/{re.escape(straddler.key)} is missing — restore job \1 failed; "
        r"resume with `rewind restore-tenant acme --resume \1` or cancel with `--cancel \1`",
        message,
    ), message


def test_spark_rewrite_groups_run_at_the_same_time(store, spark) -> None:  # type: ignore[no-untyped-def]
    """Every group is a job of its own, submitted together: on local[2] two Python
    workers rewrite at once. (One job read back with toLocalIterator ran its
    partitions one after another, in one worker: bench_cluster.)"""
    from engine.restore.job import restore_tenant

    store.create_tenant("acme")
    ids = range(40_000)
    for n in range(6):
        store.create_table("acme", f"db.t{n}", SCHEMA)
        store.write("acme", f"db.t{n}", upserts=pa.table({"id": ids, "v": [f"a{i}" for i in ids]}))
    store.create_snapshot("acme", "mon")
    for n in range(6):
        store.write("acme", f"db.t{n}", upserts=pa.table({"id": ids, "v": [f"b{i}" for i in ids]}))
        store.compact("acme", f"db.t{n}")
    outcome = restore_tenant(store, "acme", "mon", to="acme2", executor="spark", verify="none")
    assert outcome.rewritten == 6
    assert len(outcome.workers) >= 2, outcome.workers
    assert store.read("acme2", "db.t5").column("v")[39_999].as_py() == "a39999"
