"""S3 Object Lock and object versions: what an immutable backup vault is built on.

On a bucket with Object Lock, each write makes a new *version* of a key; a
version under retention (``COMPLIANCE``: until its date, for everyone;
``GOVERNANCE``: unless the caller may and does bypass it) or a legal hold
cannot be deleted or overwritten in place. A plain delete only hides the key
behind a *delete marker*, and a plain PUT only adds a newer version: the
locked version stays readable by its id. So a locked backup is read by the
versions it recorded (:class:`PinnedVersions`), never by "the latest version
of a key", which an attacker holding the writer's credentials can change.

Rewind never sends a call that would shorten a retention or weaken its mode
(:func:`extend_retention` reads the version's lock first and only ever
lengthens it or raises GOVERNANCE to COMPLIANCE): real S3 refuses shortening
a COMPLIANCE retention, moto does not, so the rule is Rewind's own and is
tested by recording the calls sent.

Every botocore error is translated by the S3 object store's own
``_translate``, as for every other S3 call.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from tenants.errors import InvalidArgument, Locked, ObjectMissing, StorageError
from tenants.objectstore.base import ObjectInfo, ObjectStore

LockMode = Literal["COMPLIANCE", "GOVERNANCE"]
MODES: tuple[LockMode, ...] = ("GOVERNANCE", "COMPLIANCE")  # weakest first
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
REFUSED_CODES = frozenset({"AccessDenied", "403", "InvalidRequest"})


@dataclass(frozen=True)
class Version:
    """One version of a key, or a delete marker (``deleted``), as listed."""

    key: str
    version_id: str
    size: int
    latest: bool
    deleted: bool
    modified_us: int


@dataclass(frozen=True)
class Lock:
    """A version's protection: retention (mode and date, µs) and legal hold."""

    mode: LockMode | None
    until_us: int | None
    hold: bool

    def protects(self, now_us: int) -> bool:
        """Whether a delete of the version is refused at ``now_us`` (without bypass)."""
        return self.hold or (self.until_us is not None and self.until_us > now_us)


def _s3(objects: ObjectStore, what: str) -> Any:
    """The S3 object store under ``objects``; InvalidArgument for another backend."""
    from tenants.objectstore.s3 import S3ObjectStore

    if not isinstance(objects, S3ObjectStore):
        raise InvalidArgument(
            f"{objects.warehouse.uri} cannot {what}: Object Lock needs an s3:// bucket "
            "created with Object Lock enabled (a file:// destination has no versions or locks)"
        )
    return objects


def _call(objects: Any, method: str, key: str, action: str, **kwargs: Any) -> Any:
    from tenants.objectstore.s3 import _retry

    try:
        return _retry(getattr(objects._client, method))(
            Bucket=objects.warehouse.bucket, Key=objects._full(key), **kwargs
        )
    except Exception as e:
        raise objects._translate(e, key, action) from e


def _code(error: BaseException) -> str:
    from botocore.exceptions import ClientError

    cause = error.__cause__ if not isinstance(error, ClientError) else error
    if isinstance(cause, ClientError):
        return str(cause.response.get("Error", {}).get("Code", ""))
    return ""


def to_us(when: datetime) -> int:
    return (when - EPOCH) // timedelta(microseconds=1)


def from_us(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)


def lock_enabled(objects: ObjectStore) -> bool:
    """Whether the bucket has Object Lock enabled (False for ``file://``)."""
    from tenants.objectstore.s3 import S3ObjectStore, _retry

    if not isinstance(objects, S3ObjectStore):
        return False
    try:
        response = _retry(objects._client.get_object_lock_configuration)(
            Bucket=objects.warehouse.bucket
        )
    except Exception as e:
        from botocore.exceptions import ClientError

        if isinstance(e, ClientError) and e.response.get("Error", {}).get("Code", "") in (
            "ObjectLockConfigurationNotFoundError",
            "NoSuchObjectLockConfiguration",
        ):
            return False
        raise objects._translate(e, "", "read the Object Lock configuration of") from e
    config = response.get("ObjectLockConfiguration", {})
    return bool(config.get("ObjectLockEnabled") == "Enabled")


def versions(objects: ObjectStore, prefix: str) -> Iterator[Version]:
    """Every version and delete marker under ``prefix``, key by key (S3 lists a
    key's versions newest first), 1,000 per request."""
    from tenants.objectstore.s3 import _retry

    s3 = _s3(objects, "list object versions")
    kwargs: dict[str, Any] = {"Bucket": s3.warehouse.bucket, "Prefix": s3._full(prefix)}
    while True:
        try:
            page = _retry(s3._client.list_object_versions)(MaxKeys=1000, **kwargs)
        except Exception as e:
            raise s3._translate(e, prefix, "list the versions of") from e
        found = [
            Version(
                s3.warehouse.relative(v["Key"]),
                v["VersionId"],
                int(v.get("Size", 0)),
                bool(v["IsLatest"]),
                deleted,
                to_us(v["LastModified"]),
            )
            for deleted, field in ((False, "Versions"), (True, "DeleteMarkers"))
            for v in page.get(field, [])
        ]
        # Versions and markers come in two lists; one key's entries, newest first.
        yield from sorted(found, key=lambda v: (v.key, -v.modified_us, not v.latest))
        if not page.get("IsTruncated"):
            return
        kwargs["KeyMarker"] = page["NextKeyMarker"]
        kwargs["VersionIdMarker"] = page["NextVersionIdMarker"]


def latest_versions(objects: ObjectStore, prefix: str) -> dict[str, Version]:
    """The newest version of each key under ``prefix`` that is not hidden by a
    delete marker: what a plain GET would read."""
    newest: dict[str, Version] = {}
    for version in versions(objects, prefix):
        if version.latest and not version.deleted:
            newest[version.key] = version
    return newest


def lock_of(objects: ObjectStore, key: str, version_id: str) -> Lock:
    """The retention and legal hold of one version (one HEAD)."""
    s3 = _s3(objects, "read a lock")
    response = _call(s3, "head_object", key, "read the lock of", VersionId=version_id)
    until = response.get("ObjectLockRetainUntilDate")
    mode = response.get("ObjectLockMode")
    return Lock(
        mode if mode in MODES else None,
        None if until is None else to_us(until),
        response.get("ObjectLockLegalHoldStatus") == "ON",
    )


def stronger(a: LockMode | None, b: LockMode | None) -> LockMode | None:
    """The stronger of two modes: COMPLIANCE over GOVERNANCE over none."""
    ranked = [m for m in (a, b) if m is not None]
    return max(ranked, key=MODES.index) if ranked else None


def extend_retention(
    objects: ObjectStore,
    key: str,
    version_id: str,
    mode: LockMode,
    until_us: int,
    *,
    fresh: bool = False,
    at_least_us: int | None = None,
) -> Lock:
    """Make the version's retention at least (``mode``, ``at_least_us``), never less;
    the lock it has afterwards.

    Reads the version's lock first and sends a retention only if the lock ends
    before ``at_least_us`` (default ``until_us``) or its mode is weaker; it then
    sends the later of ``until_us`` and the current date with the stronger
    mode, so no call Rewind makes can shorten or weaken a lock. ``fresh``: the
    caller wrote this version a moment ago without a lock, so the read is
    skipped (it could only answer "none").
    """
    current = Lock(None, None, False) if fresh else lock_of(objects, key, version_id)
    want_mode = stronger(current.mode, mode)
    need = until_us if at_least_us is None else at_least_us
    if want_mode == current.mode and (current.until_us or 0) >= need:
        return current
    want_until = max(until_us, current.until_us or 0)
    assert want_mode is not None and want_until >= (current.until_us or 0)
    _call(
        _s3(objects, "lock"),
        "put_object_retention",
        key,
        "lock",
        VersionId=version_id,
        Retention={"Mode": want_mode, "RetainUntilDate": from_us(want_until)},
    )
    return Lock(want_mode, want_until, current.hold)


def set_legal_hold(objects: ObjectStore, key: str, version_id: str, on: bool) -> None:
    """Put (``on``) or lift a legal hold on one version."""
    _call(
        _s3(objects, "hold"),
        "put_object_legal_hold",
        key,
        "set the legal hold of" if on else "release the legal hold of",
        VersionId=version_id,
        LegalHold={"Status": "ON" if on else "OFF"},
    )


def delete_version(
    objects: ObjectStore, key: str, version_id: str, *, bypass_governance: bool = False
) -> None:
    """Remove one version for good (not a delete marker).

    Raises:
        Locked: S3 refused: the version is under retention or legal hold (or the
            bypass was not allowed by the bucket's policy).
    """
    s3 = _s3(objects, "delete a version")
    extra = {"BypassGovernanceRetention": True} if bypass_governance else {}
    try:
        _call(s3, "delete_object", key, "delete", VersionId=version_id, **extra)
    except StorageError as e:
        if _code(e) in REFUSED_CODES:
            raise Locked(
                f"{s3._where(key)} version {version_id} is locked: S3 refused its deletion "
                f"({_code(e)})"
            ) from e
        raise


class _VersionReader(io.RawIOBase):
    """A seekable reader of one version: each read is one ranged GET."""

    def __init__(self, objects: Any, key: str, version_id: str, size: int) -> None:
        self._objects, self._key, self._version, self._size = objects, key, version_id, size
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        want = min(len(buffer), self._size - self._pos)
        if want <= 0:
            return 0
        response = _call(
            self._objects,
            "get_object",
            self._key,
            "read",
            VersionId=self._version,
            Range=f"bytes={self._pos}-{self._pos + want - 1}",
        )
        data = response["Body"].read()
        buffer[: len(data)] = data
        self._pos += len(data)
        return len(data)


class PinnedVersions:
    """A read-only view of an S3 object store that reads each key at one recorded
    version: a locked backup read from its manifest's versions, whatever delete
    markers or newer versions were put over them since.

    Only the recorded keys exist here (a key outside the record is missing, as
    it is not part of what was locked); every write is refused.
    """

    def __init__(self, objects: ObjectStore, pinned: Mapping[str, tuple[str, int]]) -> None:
        self._objects = _s3(objects, "read pinned versions")
        self.warehouse = objects.warehouse
        self._pinned = dict(pinned)  # key -> (version id, size)

    def _version(self, key: str) -> tuple[str, int]:
        try:
            return self._pinned[key]
        except KeyError:
            raise ObjectMissing(
                f"object {self._objects._where(key)} is not among the versions the backup recorded"
            ) from None

    def get(self, key: str) -> bytes:
        version, _ = self._version(key)
        response = _call(self._objects, "get_object", key, "read", VersionId=version)
        return bytes(response["Body"].read())

    def stream(self, key: str, chunk_bytes: int) -> Iterator[bytes]:
        version, _ = self._version(key)
        return self._objects.stream_version(key, chunk_bytes, version)  # type: ignore[no-any-return]

    def open_input(self, key: str) -> Any:
        import pyarrow as pa

        version, size = self._version(key)
        raw = _VersionReader(self._objects, key, version, size)
        return pa.PythonFile(io.BufferedReader(raw, buffer_size=1 << 20), mode="r")

    def local_file(self, key: str) -> str | None:
        return None

    def head(self, key: str) -> ObjectInfo:
        version, size = self._version(key)
        response = _call(self._objects, "head_object", key, "stat", VersionId=version)
        return ObjectInfo(key, int(response["ContentLength"]), to_us(response["LastModified"]))

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        for key in sorted(k for k in self._pinned if k.startswith(prefix)):
            yield ObjectInfo(key, self._pinned[key][1], 0)

    def children(self, prefix: str) -> Iterator[str]:
        seen = sorted(
            {
                k[len(prefix) :].split("/", 1)[0]
                for k in self._pinned
                if k.startswith(prefix) and "/" in k[len(prefix) :]
            }
        )
        yield from seen

    def copy_from(self, source: ObjectStore, source_key: str, dest_key: str) -> bool:
        raise Locked(f"{self.warehouse.uri} is a read-only view of a locked backup")

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise Locked(f"{self.warehouse.uri} is a read-only view of a locked backup")

    put = create = open_output = copy = delete_many = discard_partial = _refuse

    def partial_writes(self, prefix: str) -> Iterator[Any]:
        return iter(())

    def partial_writes_under(self, prefixes: Any) -> Iterator[Any]:
        return iter(())
