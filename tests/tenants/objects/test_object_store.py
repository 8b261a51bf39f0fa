"""Both object stores (file:// and s3:// on moto) behave alike; S3 errors are translated."""

from __future__ import annotations

import hashlib
import pickle
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from hypothesis import given
from hypothesis import strategies as st

from tenants.errors import CorruptObject, ObjectMissing, StorageError, TransientError
from tenants.objects.io import read_object, write_object
from tenants.objects.record import ObjectRecord
from tenants.objectstore import ObjectStore, PrefixSet, open_object_store
from tenants.objectstore.embedded import EmbeddedS3
from tenants.schema import TS


@pytest.fixture
def s3_store(s3_server: EmbeddedS3, bucket: str) -> ObjectStore:
    return open_object_store(f"s3://{bucket}/warehouse", s3_server.settings)


def keys_under(store: ObjectStore, prefix: str = "") -> list[str]:
    return sorted(info.key for info in store.list(prefix))


def test_s3_store_module_imports_without_warnings() -> None:
    """Importing the S3 store must not warn: under ``filterwarnings=error`` that is an error."""
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", "import tenants.objectstore.s3"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]


# ---------------------------------------------------------------------------
# The common contract


def test_put_then_get_and_head_return_what_was_written(object_store: ObjectStore) -> None:
    object_store.put("tenants/t1/a.parquet", b"hello")
    assert object_store.get("tenants/t1/a.parquet") == b"hello"
    info = object_store.head("tenants/t1/a.parquet")
    assert (info.key, info.size) == ("tenants/t1/a.parquet", 5)
    assert info.last_modified_us > 0
    object_store.put("tenants/t1/a.parquet", b"")  # overwrite, even with nothing
    assert object_store.get("tenants/t1/a.parquet") == b""
    assert object_store.head("tenants/t1/a.parquet").size == 0


def test_list_returns_relative_keys_under_the_prefix_only(object_store: ObjectStore) -> None:
    for key in ("a/1", "a/2", "a/sub/3", "ab/4", "b/5"):
        object_store.put(key, key.encode())
    assert keys_under(object_store) == ["a/1", "a/2", "a/sub/3", "ab/4", "b/5"]
    assert keys_under(object_store, "a/") == ["a/1", "a/2", "a/sub/3"]
    assert keys_under(object_store, "a") == ["a/1", "a/2", "a/sub/3", "ab/4"]
    assert keys_under(object_store, "a/sub/") == ["a/sub/3"]
    assert keys_under(object_store, "nothing/") == []
    sizes = {info.key: info.size for info in object_store.list("")}
    assert sizes["a/sub/3"] == len(b"a/sub/3")


def test_list_yields_keys_in_byte_order_where_a_directory_is_not_its_name(
    object_store: ObjectStore,
) -> None:
    """The ordering contract ``gc --deep`` merges on (tenants/objectstore/base.py): keys
    come in byte order. On file:// a directory ``d`` sorts as ``d/``: after ``d-x``
    and ``d.x`` ('-' and '.' are below '/'), before ``d0``, and an upper-case name
    before every lower-case one; a name sorts by its UTF-8 bytes."""
    keys = [
        "d/a",
        "d/b/c",
        "d-x",
        "d.x",
        "d0",
        "D/x",
        "_/y",
        "dé/z",
        "dz",
        "d/b-",
        "d/b0",
        "e/f/g/h",
        "e/f-g",
    ]
    for key in keys:
        object_store.put(key, b"x")
    ordered = sorted(keys, key=str.encode)
    assert [info.key for info in object_store.list("")] == ordered
    assert [info.key for info in object_store.list("d")] == [k for k in ordered if k[0] == "d"]
    assert [info.key for info in object_store.list("d/b")] == ["d/b-", "d/b/c", "d/b0"]


def test_copy_duplicates_the_bytes_and_keeps_the_source(object_store: ObjectStore) -> None:
    object_store.put("src/x", b"payload")
    object_store.copy("src/x", "dst/y")
    assert object_store.get("dst/y") == b"payload"
    assert object_store.get("src/x") == b"payload"


def test_copy_from_another_store_of_the_same_kind_copies_inside_it_and_refuses_across_kinds(
    object_store: ObjectStore, s3_server: EmbeddedS3, tmp_path: Path
) -> None:
    """file:// to file:// (a file copy) and bucket to bucket of one endpoint (S3
    CopyObject) copy without the bytes passing through Rewind; across kinds,
    or to another endpoint, nothing is copied and the caller is told so."""
    if object_store.warehouse.scheme == "s3":
        other_bucket = f"rewind-test-{uuid.uuid4().hex[:12]}"
        s3_server.create_bucket(other_bucket)
        other = open_object_store(f"s3://{other_bucket}/elsewhere", s3_server.settings)
        foreign = open_object_store(f"file://{tmp_path / 'foreign'}")
        elsewhere = open_object_store(
            f"s3://{other_bucket}/x", replace(s3_server.settings, endpoint_url="http://127.0.0.1:9")
        )
    else:
        other = open_object_store(f"file://{tmp_path / 'elsewhere'}")
        foreign = open_object_store(f"s3://{s3_server_bucket(s3_server)}/x", s3_server.settings)
        elsewhere = foreign
    object_store.put("objects/a.parquet", b"payload" * 1000)
    assert other.copy_from(object_store, "objects/a.parquet", "data/a.parquet") is True
    assert other.get("data/a.parquet") == b"payload" * 1000
    assert object_store.get("objects/a.parquet") == b"payload" * 1000
    assert foreign.copy_from(object_store, "objects/a.parquet", "data/a.parquet") is False
    assert elsewhere.copy_from(object_store, "objects/a.parquet", "data/a.parquet") is False
    assert keys_under(foreign) == []
    with pytest.raises(ObjectMissing, match="objects/nope"):
        other.copy_from(object_store, "objects/nope", "data/nope")


def s3_server_bucket(s3_server: EmbeddedS3) -> str:
    name = f"rewind-test-{uuid.uuid4().hex[:12]}"
    s3_server.create_bucket(name)
    return name


def test_delete_many_removes_keys_and_ignores_missing_ones(object_store: ObjectStore) -> None:
    for key in ("d/1", "d/2", "d/3"):
        object_store.put(key, b"x")
    object_store.delete_many(["d/1", "d/missing", "d/3", "never/there"])
    assert keys_under(object_store) == ["d/2"]
    object_store.delete_many(["d/1", "d/2"])  # deleting twice is not an error
    assert keys_under(object_store) == []
    assert object_store.delete_many([]) == 0


def test_delete_many_streams_many_batches_from_a_generator(
    object_store: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches of 10, a few at once (both stores delete in parallel), drawn from a
    generator as they go; missing keys among them are fine."""
    import tenants.objectstore.local as local
    import tenants.objectstore.s3_deletes as s3_deletes

    for module in (local, s3_deletes):
        monkeypatch.setattr(module, "DELETE_BATCH", 10)
    keys = [f"m/{i:03d}" for i in range(55)]
    for key in keys[::2]:
        object_store.put(key, b"x")
    object_store.put("keep", b"x")
    object_store.delete_many(k for k in keys)
    assert keys_under(object_store) == ["keep"]


def test_a_file_that_cannot_be_deleted_fails_naming_it(tmp_path: Path) -> None:
    store = open_object_store(f"file://{tmp_path / 'warehouse'}")
    store.put("dir/a", b"x")
    (tmp_path / "warehouse" / "sub" / "b").mkdir(parents=True)  # a directory, not a file
    with pytest.raises(StorageError, match=r"cannot delete file://.*/sub/b"):
        store.delete_many(["dir/a", "sub/b"])
    assert keys_under(store, "dir/") == []


def test_create_writes_only_if_absent_and_exactly_one_of_racing_creators_wins(
    object_store: ObjectStore,
) -> None:
    bodies = [f"creator {n}".encode() for n in range(8)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        won = list(pool.map(lambda body: object_store.create("m/marker.json", body), bodies))
    assert won.count(True) == 1
    assert object_store.get("m/marker.json") == bodies[won.index(True)]
    assert object_store.create("m/marker.json", b"late") is False
    assert object_store.get("m/marker.json") == bodies[won.index(True)]
    assert keys_under(object_store) == ["m/marker.json"]  # no temp file left behind
    assert list(object_store.partial_writes("m/")) == []


def test_children_are_the_directories_one_level_down(object_store: ObjectStore) -> None:
    for key in ("t/a/1", "t/a/sub/2", "t/b/3", "t/file", "u/c/4", "top"):
        object_store.put(key, b".")
    assert list(object_store.children("t/")) == ["a", "b"]
    assert list(object_store.children("t/a/")) == ["sub"]
    assert list(object_store.children("")) == ["t", "u"]
    assert list(object_store.children("nothing/")) == []


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.get("no/such/key"),
        lambda s: s.head("no/such/key"),
        lambda s: s.copy("no/such/key", "dest/key"),
    ],
    ids=["get", "head", "copy"],
)
def test_missing_object_raises_object_missing_naming_the_key(
    object_store: ObjectStore, call: Callable[[ObjectStore], Any]
) -> None:
    with pytest.raises(ObjectMissing, match=r"no/such/key is missing"):
        call(object_store)
    assert keys_under(object_store) == []


# ---------------------------------------------------------------------------
# S3 specifics


@pytest.mark.parametrize(
    "text",
    [
        "AWS Error RESOURCE_NOT_FOUND during GetObject operation: ",
        "AWS Error NO_SUCH_KEY during GetObject operation: The specified key does not exist.",
    ],
)
def test_a_key_gone_between_heads_and_gets_is_missing_not_a_storage_fault(
    s3_store: ObjectStore, text: str
) -> None:
    """pyarrow finds a key by HEAD and reads it by GET; a key GC collects in
    between fails the GET with a plain OSError. It is the same missing object
    (callers that race GC, like a compaction, tell it from lost bytes), not an
    opaque StorageError."""
    error = s3_store._translate(OSError(text), "data/gone.parquet", "read")  # type: ignore[attr-defined]
    assert type(error) is ObjectMissing and "data/gone.parquet is missing" in str(error)
    other = s3_store._translate(OSError("AWS Error NETWORK_CONNECTION"), "k", "read")  # type: ignore[attr-defined]
    assert type(other) is StorageError


def test_s3_list_and_delete_page_past_1000_keys(
    s3_server: EmbeddedS3, bucket: str, s3_store: ObjectStore
) -> None:
    import boto3

    keys = [f"many/{i:05d}" for i in range(1005)]
    # Filling the bucket is not under test: one plain PUT per key is quicker than put().
    client = boto3.client("s3", **s3_server.settings.to_boto3())
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(
            pool.map(
                lambda k: client.put_object(Bucket=bucket, Key=f"warehouse/{k}", Body=b"."), keys
            )
        )
    s3_store.put("other/0", b".")
    assert keys_under(s3_store, "many/") == keys
    s3_store.delete_many(keys)
    assert keys_under(s3_store) == ["other/0"]


def test_s3_store_pickles_and_works_after_unpickling(s3_store: ObjectStore) -> None:
    s3_store.put("p/1", b"before")
    s3_store.head("p/1")  # build its clients first: they must not be pickled
    clone: ObjectStore = pickle.loads(pickle.dumps(s3_store))
    assert clone.get("p/1") == b"before"
    assert keys_under(clone, "p/") == ["p/1"]


def test_s3_keys_live_under_the_warehouse_prefix(s3_server: EmbeddedS3, bucket: str) -> None:
    import boto3

    store = open_object_store(f"s3://{bucket}/some/prefix", s3_server.settings)
    store.put("k/1", b"x")
    client = boto3.client("s3", **s3_server.settings.to_boto3())
    listed = [o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert listed == ["some/prefix/k/1"]
    assert keys_under(store) == ["k/1"]


class FaultInjector:
    """Makes the real boto3 client of a store fail before sending a request.

    A ``before-call`` handler raises the given error for the first ``times``
    calls of an operation, exactly as botocore raises a service error.
    """

    def __init__(
        self, store: ObjectStore, operation: str, error: Callable[[str], Exception], times: int
    ) -> None:
        self.operation = operation
        self.error = error
        self.times = times
        self.calls = 0
        client = store._client  # type: ignore[attr-defined]  # the real client of the store
        client.meta.events.register(f"before-call.s3.{operation}", self)

    def __call__(self, **kwargs: Any) -> None:
        self.calls += 1
        if self.calls <= self.times:
            raise self.error(self.operation)


def client_error(code: str, status: int) -> Callable[[str], Exception]:
    def make(operation: str) -> Exception:
        return ClientError(
            {
                "Error": {"Code": code, "Message": f"injected {code}"},
                "ResponseMetadata": {"HTTPStatusCode": status},
            },
            operation,
        )

    return make


def connection_error(operation: str) -> Exception:
    return EndpointConnectionError(endpoint_url="http://127.0.0.1:1")


CONTROL_CALLS: list[tuple[str, Callable[[ObjectStore], Any]]] = [
    ("HeadObject", lambda s: s.head("ctl/a")),
    ("ListObjectsV2", lambda s: list(s.list("ctl/"))),
    ("CopyObject", lambda s: s.copy("ctl/a", "ctl/b")),
    ("DeleteObjects", lambda s: s.delete_many(["ctl/zzz"])),
]


@pytest.fixture
def prepared_s3_store(s3_store: ObjectStore) -> ObjectStore:
    s3_store.put("ctl/a", b"abc")
    return s3_store


@pytest.mark.parametrize(("operation", "call"), CONTROL_CALLS, ids=[c[0] for c in CONTROL_CALLS])
def test_s3_throttling_is_retried_until_success(
    prepared_s3_store: ObjectStore, operation: str, call: Callable[[ObjectStore], Any]
) -> None:
    faults = FaultInjector(prepared_s3_store, operation, client_error("SlowDown", 503), times=3)
    call(prepared_s3_store)
    assert faults.calls == 4  # three failures, then the real request


@pytest.mark.parametrize(
    "error",
    [client_error("InternalError", 500), client_error("503", 503), connection_error],
    ids=["InternalError", "503", "connection"],
)
def test_s3_server_and_connection_errors_are_retried_until_success(
    prepared_s3_store: ObjectStore, error: Callable[[str], Exception]
) -> None:
    faults = FaultInjector(prepared_s3_store, "HeadObject", error, times=2)
    assert prepared_s3_store.head("ctl/a").size == 3
    assert faults.calls == 3


def test_s3_throttling_that_never_ends_surfaces_as_transient_error(
    prepared_s3_store: ObjectStore,
) -> None:
    from tenants.objectstore.s3 import MAX_ATTEMPTS

    faults = FaultInjector(
        prepared_s3_store, "HeadObject", client_error("SlowDown", 503), times=10**6
    )
    with pytest.raises(TransientError, match=r"ctl/a: SlowDown after retries"):
        prepared_s3_store.head("ctl/a")
    assert faults.calls == MAX_ATTEMPTS


@pytest.mark.parametrize(("operation", "call"), CONTROL_CALLS, ids=[c[0] for c in CONTROL_CALLS])
def test_s3_access_denied_fails_at_once_as_storage_error_naming_the_key(
    prepared_s3_store: ObjectStore, operation: str, call: Callable[[ObjectStore], Any]
) -> None:
    faults = FaultInjector(
        prepared_s3_store, operation, client_error("AccessDenied", 403), times=10**6
    )
    with pytest.raises(
        StorageError, match=r"s3://rewind-test-\w+/warehouse/ctl/\w*: AccessDenied"
    ) as raised:
        call(prepared_s3_store)
    assert not isinstance(raised.value, TransientError)
    assert isinstance(raised.value.__cause__, ClientError)
    assert faults.calls == 1  # not retried


# ---------------------------------------------------------------------------
# Reading objects back: corruption is loud


@pytest.fixture
def written(object_store: ObjectStore) -> Iterator[tuple[ObjectStore, ObjectRecord]]:
    rows = pa.table(
        {
            "k": pa.array(range(200), pa.int64()),
            "v": [f"value-{i}" for i in range(200)],
            TS: pa.array([10] * 200, pa.int64()),
        }
    )
    record = write_object(
        object_store,
        rows,
        tenant_id=uuid.uuid4().hex,
        table_id=uuid.uuid4().hex,
        kind="data",
        fingerprint="f" * 32,
        primary_key=["k"],
        created_ts=10,
    )
    assert read_object(object_store, record).num_rows == 200
    yield object_store, record


def test_truncated_object_raises_corrupt_object(written: tuple[ObjectStore, ObjectRecord]) -> None:
    store, record = written
    data = store.get(record.key)
    store.put(record.key, data[: len(data) // 2])
    with pytest.raises(
        CorruptObject,
        match=rf"{record.key} has {len(data) // 2} bytes, the catalog records {len(data)}",
    ):
        read_object(store, record)


def test_truncated_parquet_matching_its_record_raises_corrupt_object(
    written: tuple[ObjectStore, ObjectRecord],
) -> None:
    """Even if size and checksum were recorded for the truncated bytes, parsing fails loudly."""
    store, record = written
    truncated = store.get(record.key)[:-100]
    store.put(record.key, truncated)
    lying = replace(record, bytes=len(truncated), checksum=hashlib.sha256(truncated).hexdigest())
    with pytest.raises(CorruptObject, match=rf"{record.key} is not readable Parquet"):
        read_object(store, lying)


def test_object_with_same_size_but_other_bytes_raises_corrupt_object(
    written: tuple[ObjectStore, ObjectRecord],
) -> None:
    store, record = written
    tampered = bytearray(store.get(record.key))
    tampered[len(tampered) // 2] ^= 0xFF
    store.put(record.key, bytes(tampered))
    with pytest.raises(CorruptObject, match=rf"{record.key} does not match its recorded checksum"):
        read_object(store, record)


def test_reading_a_deleted_object_raises_object_missing(
    written: tuple[ObjectStore, ObjectRecord],
) -> None:
    store, record = written
    store.delete_many([record.key])
    with pytest.raises(ObjectMissing, match=rf"{record.key} is missing"):
        read_object(store, record)


# ---------------------------------------------------------------------------
# Writes that never finished


def test_file_temp_files_of_unfinished_writes_are_listed_by_target_and_removable(
    tmp_path: Path,
) -> None:
    store = open_object_store(f"file://{tmp_path / 'wh'}")
    store.put("tenants/t/x.parquet", b"done")
    left = tmp_path / "wh" / "tenants" / "t" / ".y.parquet.4242.tmp"
    left.write_bytes(b"half")
    [write] = store.partial_writes("tenants/")
    assert (write.key, write.kind, write.handle) == (
        "tenants/t/y.parquet",
        "temp",
        "tenants/t/.y.parquet.4242.tmp",
    )
    assert keys_under(store) == ["tenants/t/x.parquet"]  # never listed as an object
    assert list(store.partial_writes("staging/")) == []
    with pytest.raises(StorageError, match="not a temp file"):
        store.discard_partial([replace(write, handle="tenants/t/x.parquet")])
    assert store.discard_partial([write]) == 1 and not left.exists()
    assert store.discard_partial([write]) == 0  # already gone
    assert keys_under(store) == ["tenants/t/x.parquet"]


@given(
    prefixes=st.lists(st.text("ab/", max_size=4), max_size=6),
    key=st.text("ab/", max_size=6),
)
def test_a_prefix_set_matches_a_key_iff_some_prefix_starts_it(
    prefixes: list[str], key: str
) -> None:
    found = PrefixSet(prefixes).match(key)
    assert (found is not None) == any(key.startswith(p) for p in prefixes)
    assert found is None or key.startswith(found)


def test_file_temp_files_are_found_under_any_of_many_prefixes(
    tmp_path: Path,
) -> None:
    store = open_object_store(f"file://{tmp_path / 'wh'}")
    for directory in ("t/data", "t/tomb", "u/data"):
        (tmp_path / "wh" / directory).mkdir(parents=True)
        for name in ("aa1", "ab2", "bb3"):
            (tmp_path / "wh" / directory / f".{name}.parquet.7.tmp").write_bytes(b"half")
    wanted = PrefixSet(["t/data/aa", "t/data/bb", "u/data/ab", "v/data/aa"])
    assert sorted(w.key for w in store.partial_writes_under(wanted)) == [
        "t/data/aa1.parquet",
        "t/data/bb3.parquet",
        "u/data/ab2.parquet",
    ]
    assert list(store.partial_writes_under(PrefixSet([]))) == []


def test_s3_incomplete_multipart_uploads_are_listed_under_the_prefix_and_aborted(
    s3_server: EmbeddedS3, bucket: str, s3_store: ObjectStore
) -> None:
    import boto3

    client = boto3.client("s3", **s3_server.settings.to_boto3())
    for key in ("warehouse/tenants/t/a.parquet", "warehouse/staging/j/b", "elsewhere/c"):
        upload = client.create_multipart_upload(Bucket=bucket, Key=key)
        client.upload_part(
            Bucket=bucket, Key=key, UploadId=upload["UploadId"], PartNumber=1, Body=b"x" * 10
        )
    found = list(s3_store.partial_writes("tenants/"))
    assert [(w.key, w.kind) for w in found] == [("tenants/t/a.parquet", "multipart")]
    under = s3_store.partial_writes_under(PrefixSet(["tenants/t/a", "staging/j/"]))
    assert sorted(w.key for w in under) == ["staging/j/b", "tenants/t/a.parquet"]
    assert list(s3_store.partial_writes_under(PrefixSet(["tenants/t/b", "staging/k"]))) == []
    assert abs(found[0].since_us - time.time() * 1e6) < 60e6  # the part's real upload time
    assert s3_store.discard_partial(found) == 1
    assert s3_store.discard_partial(found) == 0  # already aborted
    left = {u["Key"] for u in client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])}
    assert left == {"warehouse/staging/j/b", "elsewhere/c"}
