"""S3 credentials for Spark tasks from Hadoop-style conf keys, without pickling them.

Platforms that configure S3 for Spark through ``spark.hadoop.fs.s3a.*`` keys
(``access.key``, ``secret.key``, ``session.token``, ``endpoint``,
``endpoint.region``) expect every S3 client of the job to use them. Rewind's
tasks reach S3 through pyarrow and boto3, not Hadoop, so the driver reads the
keys and hands the tasks a *broadcast* of the credentials: a task's pickled
closure holds only the broadcast's id, and the value travels through Spark's
block transfer (encrypted with ``spark.network.crypto.enabled``), once per
executor. Without those keys nothing is broadcast and each executor uses its
own AWS chain (environment, profile, instance or container role).

``spark.executorEnv.AWS_SECRET_ACCESS_KEY`` also works, but Spark copies
``spark.executorEnv.*`` into every Python task's description: prefer the
platform's chain or these keys (docs/cluster.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from tenants.config import S3Settings
from tenants.objectstore import ObjectStore
from tenants.spark.session import submitted_conf, under_spark_submit

PREFIX = "spark.hadoop.fs.s3a."
KEYS = {
    "access_key_id": PREFIX + "access.key",
    "secret_access_key": PREFIX + "secret.key",
    "session_token": PREFIX + "session.token",
}
ENDPOINT = PREFIX + "endpoint"
REGION = PREFIX + "endpoint.region"
_broadcasts: dict[tuple[str, str, str, str | None], Any] = {}


Lookup = Callable[[str], str | None]


def _session_conf(spark: Any) -> Lookup:
    def get(key: str) -> str | None:
        value = spark.conf.get(key, None)
        return str(value) if value else None

    return get


def hadoop_settings(get: Lookup, base: S3Settings) -> S3Settings:
    """``base`` completed from ``spark.hadoop.fs.s3a.*`` keys: the endpoint and
    region where ``base`` has none, the credentials where ``base`` has none of
    its own. ``get`` reads a key (:func:`submitted_conf` for the driver)."""
    endpoint = base.endpoint_url or get(ENDPOINT)
    if endpoint and "://" not in endpoint:
        endpoint = f"https://{endpoint}"  # s3a's endpoint may omit the scheme
    region = get(REGION) if base.region == "us-east-1" else None
    settings = replace(base, endpoint_url=endpoint, region=region or base.region)
    access, secret = get(KEYS["access_key_id"]), get(KEYS["secret_access_key"])
    if base.keys() is None and access and secret:
        settings = replace(
            settings,
            access_key_id=access,
            secret_access_key=secret,
            session_token=get(KEYS["session_token"]),
        )
    return settings


def submitted_settings(base: S3Settings) -> S3Settings:
    """The settings a driver's own clients use: under spark-submit, ``base``
    completed from the job's ``spark.hadoop.fs.s3a.*`` keys (:func:`hadoop_settings`),
    so the driver reaches S3 the way its tasks will when its environment gives
    no credentials; elsewhere ``base`` itself. An edge calls it on the settings
    it built (``submitted_settings(S3Settings.from_env())``)."""
    if not under_spark_submit():
        return base
    return hadoop_settings(submitted_conf(), base)


def environment_settings(*, backup: bool = False) -> S3Settings:
    """The S3 settings of this process: the one source for every ``s3://`` place
    Rewind opens (the warehouse, backup destinations, exports and the Iceberg
    table locations they create), so ``AWS_ENDPOINT_URL``, the region and the
    credentials chain reach them all alike.

    The edges call it (the CLI, a job's entry point, the demo, the convenience
    defaults of ``TableStore.open`` and ``open_destination``) and pass what it
    returns down. ``backup``: a backup destination's own ``REWIND_BACKUP_AWS_*``
    variables when any is set (:meth:`S3Settings.from_env`); otherwise, and for
    everything else, the AWS variables, completed under spark-submit from the
    job's ``spark.hadoop.fs.s3a.*`` keys (:func:`submitted_settings`).
    """
    base = S3Settings.from_env(backup=backup)
    if backup and base != S3Settings.from_env():
        return base  # the destination's own variables: another account or endpoint
    return submitted_settings(base)


def store_for_tasks(spark: Any, objects: ObjectStore) -> ObjectStore:
    """The object store as Spark tasks get it: with the Hadoop-style keys, if the session
    has them, as a broadcast reference; otherwise ``objects`` itself (its pickled
    settings carry no credentials, and executors use their own chain)."""
    from tenants.objectstore.s3 import S3ObjectStore

    if not isinstance(objects, S3ObjectStore):
        return objects
    get = _session_conf(spark)
    access, secret = get(KEYS["access_key_id"]), get(KEYS["secret_access_key"])
    if not (access and secret):
        return objects
    token = get(KEYS["session_token"])
    sc = spark.sparkContext
    cache_key = (sc.applicationId, access, secret, token)
    if cache_key not in _broadcasts:
        _broadcasts[cache_key] = sc.broadcast(
            {"access_key_id": access, "secret_access_key": secret, "session_token": token}
        )
    settings = replace(
        hadoop_settings(get, objects.warehouse.s3),
        access_key_id=None,
        secret_access_key=None,
        session_token=None,
        shared=_broadcasts[cache_key],
    )
    return S3ObjectStore(replace(objects.warehouse, s3=settings))
