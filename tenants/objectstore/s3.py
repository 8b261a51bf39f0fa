"""An ``s3://`` warehouse: boto3 for control, pyarrow's S3FileSystem for bytes.

This is the one layer that translates botocore and pyarrow errors. Throttling,
5xx and timeouts are retried with bounded exponential backoff (tenacity for
boto3, pyarrow's own retry strategy for data I/O); anything else fails at once
with the key in the message.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from tenacity import (
    retry,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

from tenants.config import Warehouse
from tenants.errors import ObjectMissing, RewindError, StorageError, TransientError
from tenants.objectstore.base import ObjectInfo, ObjectStore, PartialWrite, PrefixSet, contained

log = logging.getLogger(__name__)

RETRYABLE_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestLimitExceeded",
        "RequestTimeout",
        "RequestTimeTooSkewed",
        "InternalError",
        "ServiceUnavailable",
        "500",
        "502",
        "503",
        "504",
    }
)
MISSING_CODES = frozenset({"NoSuchKey", "404", "NotFound"})
# A conditional write lost: the key exists (412), or another conditional write
# of it is in flight (409, S3 asks to retry; the caller re-reads instead).
CONDITION_CODES = frozenset({"PreconditionFailed", "412", "ConditionalRequestConflict", "409"})
MAX_ATTEMPTS = 5
# CopyObject copies up to 5 GiB in one request; beyond, parts of this size.
COPY_PART_BYTES = 5 * 1024 * 1024 * 1024
# Multipart part size: S3 allows 10,000 parts, so objects up to 80 GiB (compaction
# targets at most 4 GiB; a rewrite is never larger than its input).
PART_BYTES = 8 * 1024 * 1024


def _is_retryable(error: BaseException) -> bool:
    from botocore.exceptions import (
        ClientError,
        ConnectionClosedError,
        ConnectTimeoutError,
        EndpointConnectionError,
        ReadTimeoutError,
    )

    if isinstance(error, ClientError):
        return error.response.get("Error", {}).get("Code", "") in RETRYABLE_CODES
    return isinstance(
        error,
        (EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError, ConnectionClosedError),
    )


def _missing(error: BaseException) -> bool:
    """A 404 from S3 (the managed copy's HEAD of its source answers a bare "404")."""
    from botocore.exceptions import ClientError

    if isinstance(error, ClientError):
        return error.response.get("Error", {}).get("Code", "") in MISSING_CODES
    return False


_retry = retry(
    retry=retry_if_exception(_is_retryable),
    stop=stop_after_attempt(MAX_ATTEMPTS),
    wait=wait_exponential(multiplier=0.05, max=2.0) + wait_random(0, 0.05),
    reraise=True,
)


def _says_missing(error: Exception) -> bool:
    """pyarrow's S3 filesystem raises a plain OSError when a key its HEAD found
    is gone by the GET that follows (``AWS Error RESOURCE_NOT_FOUND during
    GetObject``, or ``NO_SUCH_KEY``): the object is missing all the same (GC
    collected it meanwhile), not a storage fault."""
    text = str(error)
    return isinstance(error, OSError) and any(
        code in text for code in ("RESOURCE_NOT_FOUND", "NO_SUCH_KEY", "NoSuchKey")
    )


class S3Output:
    """An object uploaded as it is written: parts of :data:`PART_BYTES` go up one
    at a time from a background thread while the next fills, so memory is two
    parts whatever the object's size. An object smaller than one part is one
    PUT. Nothing is visible until :meth:`commit` completes the upload;
    :meth:`abort` (or a failure) aborts it, and an upload whose writer was
    killed is swept by GC (``partial_writes``)."""

    def __init__(self, objects: S3ObjectStore, key: str) -> None:
        self._objects, self._key = objects, key
        self._full = objects._full(key)
        self._buffer = bytearray()
        self._upload_id: str | None = None
        self._parts: builtins.list[dict[str, Any]] = []
        self._pool: ThreadPoolExecutor | None = None
        self._inflight: Future[None] | None = None

    def _call(self, action: str, method: str, **kwargs: Any) -> Any:
        try:
            return _retry(getattr(self._objects._client, method))(
                Bucket=self._objects.warehouse.bucket, Key=self._full, **kwargs
            )
        except Exception as e:
            raise self._objects._translate(e, self._key, action) from e

    def write(self, data: bytes | memoryview) -> int:
        self._buffer += data
        if len(self._buffer) >= PART_BYTES:
            self._send_part()
        return len(data)

    def _send_part(self) -> None:
        if self._upload_id is None:
            self._upload_id = self._call("write", "create_multipart_upload")["UploadId"]
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="s3-part")
        self._wait()
        body, self._buffer = self._buffer, bytearray()
        number = len(self._parts) + 1
        self._parts.append({"PartNumber": number})
        assert self._pool is not None
        self._inflight = self._pool.submit(self._upload_part, number, body)

    def _upload_part(self, number: int, body: bytearray) -> None:
        response = self._call(
            "write", "upload_part", UploadId=self._upload_id, PartNumber=number, Body=body
        )
        self._parts[number - 1]["ETag"] = response["ETag"]

    def _wait(self) -> None:
        if self._inflight is not None:
            inflight, self._inflight = self._inflight, None
            try:
                inflight.result()
            except BaseException:
                self.abort()
                raise

    def commit(self) -> None:
        try:
            if self._upload_id is None:
                done = self._call("write", "put_object", Body=bytes(self._buffer))
                self._objects.note_version(self._key, done)
                return
            if self._buffer:
                self._send_part()
            self._wait()
            done = self._call(
                "write",
                "complete_multipart_upload",
                UploadId=self._upload_id,
                MultipartUpload={"Parts": self._parts},
            )
            self._objects.note_version(self._key, done)
        except BaseException:
            self.abort()
            raise
        finally:
            self._close_pool()
        self._upload_id = None

    def abort(self) -> None:
        upload_id, self._upload_id = self._upload_id, None
        self._buffer = bytearray()
        if self._inflight is not None:
            self._inflight.cancel()
            self._inflight = None
        self._close_pool()
        if upload_id is not None:
            try:
                self._call("abort the upload of", "abort_multipart_upload", UploadId=upload_id)
            except RewindError as e:
                # GC sweeps the upload after its grace; the write's own error matters more.
                log.warning("cannot abort the upload of %s: %s", self._objects._where(self._key), e)

    def _close_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


class S3ObjectStore:
    """Objects under ``s3://bucket/prefix``.

    Both clients are built from ``warehouse.s3`` alone (``to_boto3()``,
    ``to_pyarrow_fs()``): the object store reads no environment, so two object stores in one
    process may reach two endpoints. Fields the settings leave unset fall to
    the SDKs' own AWS chain (a profile, an instance role).
    """

    def __init__(self, warehouse: Warehouse) -> None:
        self.warehouse = warehouse
        self._client_obj: Any = None
        self._fs_obj: Any = None
        # key -> the version id S3 gave this store's writes of it, kept only once a
        # caller asks (a vault backup, engine.backup.vault.track_versions, which
        # records and locks exactly the versions it wrote without listing them
        # again); None: not kept, so a long-lived store does not grow with its writes.
        self.written_versions: dict[str, str] | None = None

    def note_version(self, key: str, response: Any) -> None:
        if self.written_versions is None:
            return
        version = response.get("VersionId") if isinstance(response, dict) else None
        if version and version != "null":
            self.written_versions[key] = str(version)

    def __getstate__(self) -> dict[str, Any]:
        return {"warehouse": self.warehouse}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["warehouse"])  # type: ignore[misc]

    @property
    def _client(self) -> Any:
        if self._client_obj is None:
            from botocore.config import Config

            config = Config(
                s3={"addressing_style": "path"},
                retries={"max_attempts": 1, "mode": "standard"},
                connect_timeout=10,
                read_timeout=60,
                max_pool_connections=32,
            )
            settings = self.warehouse.s3
            self._client_obj = settings.boto3_session().client(
                "s3", config=config, **settings.to_boto3()
            )
        return self._client_obj

    @property
    def _fs(self) -> Any:
        if self._fs_obj is None:
            from pyarrow.fs import AwsStandardS3RetryStrategy, S3FileSystem

            self._fs_obj = S3FileSystem(
                retry_strategy=AwsStandardS3RetryStrategy(max_attempts=MAX_ATTEMPTS),
                # One PUT per object instead of a multipart upload of one part.
                allow_delayed_open=True,
                **self.warehouse.s3.to_pyarrow_fs(),
            )
        return self._fs_obj

    def _full(self, key: str) -> str:
        return self.warehouse.key(contained(key, self.warehouse.uri))

    def _where(self, key: str) -> str:
        return f"s3://{self.warehouse.bucket}/{self._full(key)}"

    def _translate(self, error: Exception, key: str, action: str) -> Exception:
        from botocore.exceptions import ClientError

        if isinstance(error, RewindError):
            return error  # already ours (a bad profile, met while making the client)
        if isinstance(error, ClientError):
            code = error.response.get("Error", {}).get("Code", "")
            if code in MISSING_CODES:
                return ObjectMissing(f"object {self._where(key)} is missing")
            if code in RETRYABLE_CODES:
                return TransientError(f"cannot {action} {self._where(key)}: {code} after retries")
            return StorageError(f"cannot {action} {self._where(key)}: {code}")
        if isinstance(error, FileNotFoundError) or _says_missing(error):
            return ObjectMissing(f"object {self._where(key)} is missing")
        return StorageError(f"cannot {action} {self._where(key)}: {error}")

    def put(self, key: str, data: bytes) -> None:
        try:
            with self._fs.open_output_stream(f"{self.warehouse.bucket}/{self._full(key)}") as out:
                out.write(data)
        except OSError as e:
            raise self._translate(e, key, "write") from e

    def open_output(self, key: str) -> S3Output:
        return S3Output(self, key)

    def open_input(self, key: str) -> Any:
        try:
            return self._fs.open_input_file(f"{self.warehouse.bucket}/{self._full(key)}")
        except OSError as e:
            raise self._translate(e, key, "read") from e

    def stream(self, key: str, chunk_bytes: int) -> Iterator[bytes]:
        """One GET, read as it arrives; a connection that breaks mid-way resumes
        from the byte it reached (a ranged GET), up to ``MAX_ATTEMPTS`` times."""
        return self.stream_version(key, chunk_bytes, None)

    def stream_version(self, key: str, chunk_bytes: int, version_id: str | None) -> Iterator[bytes]:
        """:meth:`stream` of one version of ``key`` (None: the latest), for a
        vault read at the versions a backup recorded (tenants.objectstore.object_lock)."""
        from botocore.exceptions import BotoCoreError

        offset = 0
        version = {} if version_id is None else {"VersionId": version_id}
        for attempt in range(1, MAX_ATTEMPTS + 1):
            extra = {"Range": f"bytes={offset}-"} if offset else {}
            try:
                response = _retry(self._client.get_object)(
                    Bucket=self.warehouse.bucket, Key=self._full(key), **version, **extra
                )
            except Exception as e:
                raise self._translate(e, key, "read") from e
            try:
                for chunk in response["Body"].iter_chunks(chunk_bytes):
                    offset += len(chunk)
                    yield chunk
                return
            except (BotoCoreError, OSError) as e:
                if attempt == MAX_ATTEMPTS:
                    raise TransientError(
                        f"cannot read {self._where(key)}: the connection broke at byte "
                        f"{offset}, {MAX_ATTEMPTS} times: {e}"
                    ) from e
                log.warning(
                    "reading %s broke at byte %d (%s); resuming", self._where(key), offset, e
                )

    def local_file(self, key: str) -> str | None:
        return None

    def create(self, key: str, data: bytes) -> bool:
        """One conditional PUT (``If-None-Match: *``): S3 lets exactly one racing
        creator win. An endpoint without conditional writes (``NotImplemented``)
        falls back to HEAD-then-PUT; callers read the object back to detect a lost race."""
        try:
            _retry(self._client.put_object)(
                Bucket=self.warehouse.bucket, Key=self._full(key), Body=data, IfNoneMatch="*"
            )
            return True
        except Exception as e:
            from botocore.exceptions import ClientError

            code = e.response.get("Error", {}).get("Code", "") if isinstance(e, ClientError) else ""
            if code in CONDITION_CODES:
                return False
            if code != "NotImplemented":
                raise self._translate(e, key, "create") from e
        try:
            self.head(key)
            return False
        except ObjectMissing:
            pass
        self.put(key, data)
        return True

    def get(self, key: str) -> bytes:
        try:
            # A random-access file reads the whole object in one GET; a stream would
            # fetch it as hundreds of 256 KiB ranged GETs.
            with self._fs.open_input_file(f"{self.warehouse.bucket}/{self._full(key)}") as src:
                return bytes(src.read())
        except OSError as e:
            raise self._translate(e, key, "read") from e

    def head(self, key: str) -> ObjectInfo:
        try:
            response = _retry(self._client.head_object)(
                Bucket=self.warehouse.bucket, Key=self._full(key)
            )
        except Exception as e:
            raise self._translate(e, key, "stat") from e
        modified = response["LastModified"]
        return ObjectInfo(key, int(response["ContentLength"]), int(modified.timestamp() * 1e6))

    def listing(self, prefix: str) -> Iterator[tuple[str, ObjectInfo | None]]:
        """:meth:`list`'s keys with their info: LIST returns it with each key."""
        for info in self.list(prefix):
            yield info.key, info

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        """Every object under ``prefix``, 1,000 keys per request."""
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {
                "Bucket": self.warehouse.bucket,
                "Prefix": self._full(prefix),
                "MaxKeys": 1000,
            }
            if token:
                kwargs["ContinuationToken"] = token
            try:
                page = _retry(self._client.list_objects_v2)(**kwargs)
            except Exception as e:
                raise self._translate(e, prefix, "list") from e
            for item in page.get("Contents", []):
                yield ObjectInfo(
                    self.warehouse.relative(item["Key"]),
                    int(item["Size"]),
                    int(item["LastModified"].timestamp() * 1e6),
                )
            if not page.get("IsTruncated"):
                return
            token = page["NextContinuationToken"]

    def children(self, prefix: str) -> Iterator[str]:
        """Common prefixes one level under ``prefix`` (a delimited listing: one
        request per 1,000 names, however many keys lie below them)."""
        full = self._full(prefix.rstrip("/")) + "/" if prefix.strip("/") else self._full("")
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {
                "Bucket": self.warehouse.bucket,
                "Prefix": full,
                "Delimiter": "/",
                "MaxKeys": 1000,
            }
            if token:
                kwargs["ContinuationToken"] = token
            try:
                page = _retry(self._client.list_objects_v2)(**kwargs)
            except Exception as e:
                raise self._translate(e, prefix, "list") from e
            for item in page.get("CommonPrefixes", []):
                yield item["Prefix"][len(full) :].rstrip("/")
            if not page.get("IsTruncated"):
                return
            token = page["NextContinuationToken"]

    def copy(self, source_key: str, dest_key: str) -> None:
        try:
            _retry(self._client.copy_object)(
                Bucket=self.warehouse.bucket,
                Key=self._full(dest_key),
                CopySource={"Bucket": self.warehouse.bucket, "Key": self._full(source_key)},
            )
        except Exception as e:
            raise self._translate(e, source_key, "copy") from e

    def copy_from(self, source: ObjectStore, source_key: str, dest_key: str) -> bool:
        """S3 CopyObject from another bucket (or prefix) of the same endpoint,
        reached with the same settings (so the same account): the bytes move
        inside S3. Past 5 GiB, CopyObject's limit, the object is copied in parts
        (UploadPartCopy, boto3's managed copy), still inside S3."""
        if not isinstance(source, S3ObjectStore) or source.warehouse.s3 != self.warehouse.s3:
            return False
        from botocore.exceptions import ClientError

        copy_source = {"Bucket": source.warehouse.bucket, "Key": source._full(source_key)}
        try:
            try:
                done = _retry(self._client.copy_object)(
                    Bucket=self.warehouse.bucket, Key=self._full(dest_key), CopySource=copy_source
                )
                self.note_version(dest_key, done)
            except ClientError as e:
                if e.response.get("Error", {}).get("Code", "") != "InvalidRequest":
                    raise
                from boto3.s3.transfer import TransferConfig  # too large for one request

                config = TransferConfig(
                    multipart_threshold=COPY_PART_BYTES, multipart_chunksize=COPY_PART_BYTES
                )
                _retry(self._client.copy)(
                    copy_source, self.warehouse.bucket, self._full(dest_key), Config=config
                )
        except Exception as e:
            if _missing(e):
                raise ObjectMissing(f"object {source._where(source_key)} is missing") from e
            raise self._translate(e, dest_key, f"copy {source._where(source_key)} to") from e
        return True

    def delete_many(self, keys: Iterable[str]) -> int:
        """Delete in batches of 1,000, several requests in flight; deleting a
        missing key is not an error (tenants/objectstore/s3_deletes.py)."""
        from tenants.objectstore.s3_deletes import delete_keys

        return delete_keys(self, keys)

    def partial_writes(self, prefix: str) -> Iterator[PartialWrite]:
        """Incomplete multipart uploads under ``prefix`` (ListMultipartUploads, paged)."""
        return self._uploads(prefix, lambda key: True)

    def partial_writes_under(self, prefixes: PrefixSet) -> Iterator[PartialWrite]:
        """Incomplete multipart uploads under any of ``prefixes``: one paged
        ListMultipartUploads under their common prefix, matched here. A bucket
        holds few incomplete uploads (a lifecycle rule aborts the old ones), so
        one listing of them all beats one request per prefix, whose cost on some
        servers (moto) grows with the bucket."""
        if not prefixes:
            return iter(())
        return self._uploads(prefixes.common(), lambda key: prefixes.match(key) is not None)

    def _uploads(self, prefix: str, wanted: Callable[[str], bool]) -> Iterator[PartialWrite]:
        """The incomplete uploads under ``prefix`` whose relative key is ``wanted``
        (only those have their parts listed for their age)."""
        key_marker: str | None = None
        upload_marker: str | None = None
        while True:
            kwargs: dict[str, Any] = {
                "Bucket": self.warehouse.bucket,
                "Prefix": self._full(prefix),
                "MaxUploads": 1000,
            }
            if key_marker:
                kwargs["KeyMarker"] = key_marker
                if upload_marker:
                    kwargs["UploadIdMarker"] = upload_marker
            try:
                page = _retry(self._client.list_multipart_uploads)(**kwargs)
            except Exception as e:
                raise self._translate(e, prefix, "list the multipart uploads of") from e
            for upload in page.get("Uploads", []):
                if not wanted(self.warehouse.relative(upload["Key"])):
                    continue
                initiated = int(upload["Initiated"].timestamp() * 1e6)
                last_part = self._last_part_us(upload["Key"], upload["UploadId"])
                yield PartialWrite(
                    self.warehouse.relative(upload["Key"]),
                    max(initiated, last_part or initiated),
                    upload["UploadId"],
                    "multipart",
                )
            if not page.get("IsTruncated"):
                return
            key_marker = page.get("NextKeyMarker")
            upload_marker = page.get("NextUploadIdMarker")
            if not key_marker:
                return

    def _last_part_us(self, full_key: str, upload_id: str) -> int | None:
        """When the upload's newest part was stored (None: no part yet).

        An upload's age is its last activity, not its start: a large upload
        still sending parts is in flight however long ago it began. (It also
        keeps endpoints honest that report no real ``Initiated``; moto does not.)
        """
        from botocore.exceptions import ClientError

        newest: int | None = None
        marker = 0
        while True:
            try:
                page = _retry(self._client.list_parts)(
                    Bucket=self.warehouse.bucket,
                    Key=full_key,
                    UploadId=upload_id,
                    PartNumberMarker=marker,
                )
            except ClientError as e:
                if e.response.get("Error", {}).get("Code", "") in ("NoSuchUpload", "404"):
                    return newest  # completed or aborted meanwhile
                raise self._translate(e, self.warehouse.relative(full_key), "list parts of") from e
            for part in page.get("Parts", []):
                modified = int(part["LastModified"].timestamp() * 1e6)
                newest = modified if newest is None else max(newest, modified)
            if not page.get("IsTruncated"):
                return newest
            marker = int(page["NextPartNumberMarker"])

    def discard_partial(self, writes: Iterable[PartialWrite]) -> int:
        """Abort each upload; one already completed or aborted (NoSuchUpload) is skipped."""
        from botocore.exceptions import ClientError

        aborted = 0
        for write in writes:
            if write.kind != "multipart":
                raise StorageError(f"{write.handle!r} is not a multipart upload of this store")
            try:
                _retry(self._client.abort_multipart_upload)(
                    Bucket=self.warehouse.bucket, Key=self._full(write.key), UploadId=write.handle
                )
                aborted += 1
            except ClientError as e:
                if e.response.get("Error", {}).get("Code", "") not in ("NoSuchUpload", "404"):
                    raise self._translate(e, write.key, "abort the upload of") from e
            except Exception as e:
                raise self._translate(e, write.key, "abort the upload of") from e
        return aborted
