"""The restore job on a real standalone Spark cluster, through spark-submit.

One master and one worker started from the installed pyspark
(tests/helpers/spark_cluster.py), whose Python has pyarrow and boto3 but NOT Rewind:
the code must reach the executors with the job. The warehouse is on a moto
server that authenticates every request (tests/helpers/moto_auth.py) and the driver
and the worker hold temporary credentials, so nothing works unless
``AWS_SESSION_TOKEN`` travels with them, and the pickled tasks carry none.

The cluster is shared by this module's tests (started once, ~6 s); each
spark-submit costs 15-20 s, so the module keeps to three of them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from engine.restore.journal import finished_results
from tenants.config import S3Settings
from tenants.schema import TableSchema
from tenants.store import TableStore
from tests.helpers.moto_auth import AuthMoto, TempKeys, start_authenticating_moto
from tests.helpers.paths import HELPERS, ROOT
from tests.helpers.spark_cluster import (
    StandaloneCluster,
    spark_submit,
    start_cluster,
    worker_python,
)

JOB = ROOT / "engine" / "submit" / "restore_tenant.py"
READ_JOB = HELPERS / "cluster_read_job.py"
SCHEMA = TableSchema.of([("id", "int64"), ("v", "string")], ["id"])


@pytest.fixture(scope="module")
def auth_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthMoto]:
    server = start_authenticating_moto(tmp_path_factory.mktemp("auth-moto"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def temp_keys(auth_s3: AuthMoto) -> TempKeys:
    return auth_s3.temporary_credentials()


def _aws_env(auth_s3: AuthMoto, keys: TempKeys) -> dict[str, str]:
    """What a platform gives a process: temporary keys with their session token."""
    return {
        "AWS_ENDPOINT_URL": auth_s3.endpoint_url,
        "AWS_REGION": auth_s3.region,
        "AWS_ACCESS_KEY_ID": keys.access_key,
        "AWS_SECRET_ACCESS_KEY": keys.secret_key,
        "AWS_SESSION_TOKEN": keys.session_token,
    }


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, auth_s3: AuthMoto, temp_keys: TempKeys
) -> Iterator[StandaloneCluster]:
    started = start_cluster(
        tmp_path_factory.mktemp("spark-cluster"), worker_env=_aws_env(auth_s3, temp_keys)
    )
    yield started
    started.stop()


@pytest.fixture
def setup(
    tmp_path: Path, auth_s3: AuthMoto, temp_keys: TempKeys
) -> Iterator[tuple[TableStore, str, str]]:
    """A tenant ``acme`` with two tables whose compacted objects straddle ``mon``."""
    bucket = f"cluster-{os.urandom(4).hex()}"
    auth_s3.create_bucket(bucket)
    catalog, warehouse = f"sqlite:///{tmp_path}/catalog.db", f"s3://{bucket}/wh"
    settings = S3Settings(auth_s3.endpoint_url, auth_s3.region, *temp_keys)
    store = TableStore.open(catalog, warehouse, s3=settings)
    store.create_tenant("acme")
    for table in ("orders", "items"):
        store.create_table("acme", f"shop.{table}", SCHEMA)
        store.write("acme", f"shop.{table}", upserts=_rows(range(1, 200), "old"))
    store.create_snapshot("acme", "mon")
    for table in ("orders", "items"):
        store.write("acme", f"shop.{table}", upserts=_rows(range(100, 300), "new"))
        store.write("acme", f"shop.{table}", deletes=pa.table({"id": [1, 2, 3]}))
        store.compact("acme", f"shop.{table}")  # one object per table straddles "mon"
    yield store, catalog, warehouse
    store.close()


@dataclass(frozen=True)
class Job:
    """What a test submits with: the cluster, the tenant's store and URIs, the
    platform's credentials for the driver, and a scratch directory."""

    cluster: StandaloneCluster
    store: TableStore
    catalog: str
    warehouse: str
    env: dict[str, str]
    tmp: Path

    def restore(self, python: Path, *extra: str) -> Any:
        return self.submit(
            JOB, "--catalog", self.catalog, "--warehouse", self.warehouse, "--json",
            "acme", "--snapshot", "mon", "--to", "acme_copy", *extra, python=python,
        )  # fmt: skip

    def submit(self, app: Path, *args: str, python: Path, env: dict[str, str] | None = None) -> Any:
        return spark_submit(
            self.cluster, app, *args, python=python, env=self.env | (env or {}), timeout_s=600
        )


@pytest.fixture
def job(
    cluster: StandaloneCluster,
    setup: tuple[TableStore, str, str],
    auth_s3: AuthMoto,
    temp_keys: TempKeys,
    tmp_path: Path,
) -> Job:
    store, catalog, warehouse = setup
    return Job(cluster, store, catalog, warehouse, _aws_env(auth_s3, temp_keys), tmp_path)


def _rows(ids: range, tag: str) -> pa.Table:
    return pa.table({"id": list(ids), "v": [f"{tag}{i}" for i in ids]})


def _error_line(output: str) -> dict[str, Any]:
    """The one JSON error line. spark-submit runs the driver's Python with its
    stderr redirected into stdout, beside Spark's own log lines."""
    lines = [line for line in output.splitlines() if line.startswith('{"error"')]
    assert len(lines) == 1, [line for line in output.splitlines() if " INFO " not in line]
    return json.loads(lines[0])["error"]  # type: ignore[no-any-return]


def test_spark_submit_runs_the_rewrite_in_the_cluster_executors(job: Job) -> None:
    done = job.restore(worker_python(job.tmp / "bare"))  # pyarrow and boto3, no Rewind
    assert done.returncode == 0, done.stderr[-4000:]
    outcome = json.loads(done.stdout[done.stdout.index("{") :])
    assert outcome["executor"] == "spark"
    assert f"master {job.cluster.master_url} (from spark-submit)" in outcome["executor_reason"]
    assert outcome["rewritten_objects"] == 2

    store = job.store
    for table in ("orders", "items"):
        copy = store.read("acme_copy", f"shop.{table}").to_pydict()
        assert copy == store.read("acme", f"shop.{table}", "mon").to_pydict()
        assert copy == _rows(range(1, 200), "old").to_pydict()

    # The rewrite ran in the worker's executors, not in the driver.
    apps = [a for a in job.cluster.applications() if a.get("name") == "rewind"]
    assert apps, job.cluster.applications()
    app_id = max(apps, key=lambda a: a.get("starttime", 0))["id"]  # this test's job
    assert job.cluster.executor_launched(app_id)
    assert any(app_id in str(p) for p in job.cluster.executor_logs())
    workers = {r.worker for r in finished_results(store.catalog, outcome["job_id"])}
    assert workers == set(outcome["workers"]) and outcome["driver"] not in workers
    driver_pid = outcome["driver"].rsplit(" ", 1)[1]
    assert all(w.rsplit(" ", 1)[1] != driver_pid for w in workers)


def test_read_as_of_runs_on_the_cluster(job: Job) -> None:
    """``read_as_of`` on a cluster session: MVCC in the executors, nothing collected
    but the count and a checksum the job prints."""
    env = {"REWIND_CATALOG": job.catalog, "REWIND_WAREHOUSE": job.warehouse}
    done = job.submit(
        READ_JOB, "acme", "shop.orders", "mon", python=worker_python(job.tmp / "w"), env=env
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    expected = job.store.read("acme", "shop.orders", "mon")
    assert result["rows"] == expected.num_rows == 199
    assert result["ids"] == sum(expected.column("id").to_pylist())
    assert result["master"] == job.cluster.master_url
    assert result["executors"] >= 1


def test_a_worker_without_pyarrow_fails_fast_naming_it(job: Job) -> None:
    # Rewrite first: the workers are checked before the job starts. (An instant
    # restore installs first and starts Spark for its rewrite after: the same
    # error then fails the job, resumable, with the tenant installed and correct.)
    done = job.restore(worker_python(job.tmp / "nopa", exclude=("pyarrow",)), "--rewrite-first")
    assert done.returncode == 1, done.stderr[-4000:]
    error = _error_line(done.stderr + done.stdout)
    assert error["type"] == "ClusterMisconfigured"
    assert "lacks pyarrow" in error["message"]
    assert "Spark worker" in error["message"] and "python 3." in error["message"]
    # Checked before the job started: nothing journaled, nothing installed.
    assert [t.name for t in job.store.tenants()] == ["acme"]
