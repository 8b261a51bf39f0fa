"""S3 settings are built from the environment at the edges and passed down.

Below the edges (the CLI, a job's entry point, the demo, the convenience
defaults of ``TableStore.open`` and ``open_destination``) nothing reads the
environment: a caller with settings of its own passes them, and they are the
ones used, whatever the AWS variables of the process say. Two stores in one
process can so reach two endpoints with two sets of credentials.

The second endpoint is an authenticating moto server in its own process
(tests/helpers/moto_auth.py): moto's in-process servers share one backend, and this
one refuses the shared test server's placeholder keys, so a store that fell
back to the environment would fail there.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pyarrow as pa
import pytest

from engine.backup.destination import MARKER, open_destination
from tenants.config import S3Settings
from tenants.errors import InvalidArgument, StorageError
from tenants.objectstore import open_object_store
from tenants.objectstore.embedded import EmbeddedS3
from tenants.schema import TableSchema
from tenants.store import TableStore
from tests.helpers.moto_auth import authenticating_moto
from tests.helpers.paths import ROOT

SCHEMA = TableSchema.of([("id", "int64"), ("v", "string")], ["id"])
NOWHERE = "http://127.0.0.1:1"  # nothing listens on port 1
AWS_VARIABLES = {
    "AWS_ENDPOINT_URL": NOWHERE,
    "AWS_ENDPOINT_URL_S3": NOWHERE,
    "AWS_ACCESS_KEY_ID": "AKIAFROMTHEENVIRONMENT",
    "AWS_SECRET_ACCESS_KEY": "not-the-secret",
    "AWS_SESSION_TOKEN": "not-the-token",
    "AWS_REGION": "eu-north-1",
    "REWIND_BACKUP_AWS_ENDPOINT_URL": NOWHERE,
}


def _misdirect(monkeypatch: pytest.MonkeyPatch) -> None:
    """Point every AWS variable elsewhere: settings built before must not notice."""
    for name, value in AWS_VARIABLES.items():
        monkeypatch.setenv(name, value)


def _rows(ids: range, tag: str) -> pa.Table:
    return pa.table({"id": list(ids), "v": [f"{tag}{i}" for i in ids]})


def test_two_stores_in_one_process_each_reach_the_endpoint_of_their_own_settings(
    s3_server: EmbeddedS3, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with authenticating_moto(tmp_path / "moto") as other:
        keys = other.temporary_credentials()
        other.create_bucket("elsewhere")
        ours = s3_server.settings
        theirs = S3Settings(other.endpoint_url, other.region, *keys)
        _misdirect(monkeypatch)
        here = TableStore.open(f"sqlite:///{tmp_path}/here.db", f"s3://{bucket}/wh", s3=ours)
        there = TableStore.open(f"sqlite:///{tmp_path}/there.db", "s3://elsewhere/wh", s3=theirs)
        try:
            for store, tag in ((here, "here"), (there, "there")):
                store.create_tenant("acme")
                store.create_table("acme", "db.t", SCHEMA)
                store.write("acme", "db.t", upserts=_rows(range(1, 50), tag))
                store.write("acme", "db.t", upserts=_rows(range(25, 75), tag + "2"))
                store.compact("acme", "db.t")  # reads (pyarrow), uploads in parts (boto3)
            assert here.read("acme", "db.t").column("v")[0].as_py() == "here1"
            assert there.read("acme", "db.t").column("v")[0].as_py() == "there1"
        finally:
            here.close()
            there.close()
        # Each endpoint holds its own store's objects: "elsewhere" is not on the shared server.
        elsewhere = other.client("s3", *keys).list_objects_v2(Bucket="elsewhere")["Contents"]
        assert any(o["Key"].endswith(".parquet") for o in elsewhere)
        shared = open_object_store(f"s3://{bucket}/wh", ours)
        assert any(info.key.endswith(".parquet") for info in shared.list(""))
        with pytest.raises(StorageError, match="NoSuchBucket"):
            list(open_object_store("s3://elsewhere/wh", ours).list(""))


def test_a_backup_destination_uses_the_settings_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with authenticating_moto(tmp_path / "moto") as other:
        keys = other.temporary_credentials()
        other.create_bucket("backups")
        theirs = S3Settings(other.endpoint_url, other.region, *keys)
        _misdirect(monkeypatch)  # REWIND_BACKUP_AWS_* too: the argument wins
        dest = open_destination("s3://backups/rewind", create=True, s3=theirs)
        assert dest.get(MARKER)
        listed = other.client("s3", *keys).list_objects_v2(Bucket="backups")["Contents"]
        assert [o["Key"] for o in listed] == [f"rewind/{MARKER}"]


def test_settings_once_built_do_not_follow_the_environment(
    s3_server: EmbeddedS3, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The edge reads the variables once; a store keeps what it was given."""
    settings = S3Settings.from_env()  # the fixture exported the test server's variables
    assert settings.endpoint_url == s3_server.endpoint_url
    store = open_object_store(f"s3://{bucket}/wh", settings)
    _misdirect(monkeypatch)
    store.put("a/x", b"data")  # pyarrow's client
    assert store.get("a/x") == b"data"
    assert [info.key for info in store.list("a/")] == ["a/x"]  # boto3's client
    assert S3Settings.from_env().endpoint_url == NOWHERE  # only a new edge sees the change


def test_from_env_reads_the_mapping_it_is_given() -> None:
    environ = {
        "AWS_ENDPOINT_URL": "http://s3.example:9000",
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "AKIAWAREHOUSE",
        "AWS_SECRET_ACCESS_KEY": "warehouse-secret",
        "AWS_PROFILE": "warehouse",
    }
    warehouse = S3Settings.from_env(environ)
    assert (warehouse.endpoint_url, warehouse.region, warehouse.access_key_id) == (
        "http://s3.example:9000",
        "eu-west-1",
        "AKIAWAREHOUSE",
    )
    assert warehouse.profile is None  # the SDKs read AWS_PROFILE themselves
    assert S3Settings.from_env(environ, backup=True) == warehouse  # no REWIND_BACKUP_AWS_*
    backup = S3Settings.from_env(
        environ
        | {
            "REWIND_BACKUP_AWS_ENDPOINT_URL_S3": "http://backups.example:9000",
            "REWIND_BACKUP_AWS_PROFILE": "backups",
        },
        backup=True,
    )
    assert (backup.endpoint_url, backup.region, backup.profile) == (
        "http://backups.example:9000",
        "us-east-1",
        "backups",
    )
    assert backup.keys() is None  # never the warehouse's keys


def test_an_s3_store_is_never_opened_without_settings() -> None:
    with pytest.raises(InvalidArgument, match="on S3 but no S3 settings were given"):
        open_object_store("s3://some-bucket/wh")
    with pytest.raises(InvalidArgument, match="backup destination s3://some-bucket/b is on S3"):
        open_object_store("s3://some-bucket/b", what="backup destination")


def _imports(relative: str) -> set[str]:
    """Every module ``relative`` imports, at the top or inside a function."""
    tree = ast.parse((ROOT / relative).read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_no_module_below_the_edges_reads_the_environment_or_imports_upwards() -> None:
    """config ← objectstore ← spark.credentials, and spark_reader → store → spark.scan:
    one way each; and the object store and backup destinations read no variables
    (but the embedded moto server, an edge like the CLI: it exports the endpoint it
    serves for the processes the demo and the tests start)."""
    config = _imports("tenants/config.py")
    assert not {m for m in config if m.startswith(("tenants.objectstore", "tenants.spark"))}
    for module in ("tenants/store.py", "tenants/spark/scan.py"):
        assert "tenants.spark_reader" not in _imports(module), module
    sources = [
        *(p for p in ROOT.glob("tenants/objectstore/*.py") if p.name != "embedded.py"),
        *ROOT.glob("engine/backup/*.py"),
    ]
    assert sources
    for path in sources:
        text = path.read_text()
        assert "os.environ" not in text and "getenv" not in text, path
