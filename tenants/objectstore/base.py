"""What every object store offers (the backends: ``local.py``, ``s3.py``).

Keys handed to an object store are relative to the warehouse root; it adds its
prefix. Object stores are picklable (clients are rebuilt lazily) so Spark tasks can
carry them.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from tenants.config import Warehouse
from tenants.errors import InvalidArgument

if TYPE_CHECKING:
    import pyarrow as pa


def contained(key: str, where: str) -> str:
    """``key`` if it stays under the root it is joined to, else ``InvalidArgument``.

    Ids are validated where they enter (tenants.names); this is the last line:
    whatever slips past them, no backend reads or writes outside its root.
    A ``..`` or ``.`` segment, a leading ``/``, a ``\\`` or a NUL is refused.
    """
    if (
        key.startswith("/")
        or "\\" in key
        or "\0" in key
        or any(part in (".", "..") for part in key.split("/"))
    ):
        raise InvalidArgument(
            f"refusing key {key!r} under {where}: it would reach outside it "
            "(a '..' or '.' segment, a leading '/', a '\\\\' or a NUL)"
        )
    return key


@dataclass(frozen=True)
class ObjectInfo:
    """One listed object: relative key, size in bytes, last-modified (epoch µs)."""

    key: str
    size: int
    last_modified_us: int


@dataclass(frozen=True)
class PartialWrite:
    """A write that never finished: an S3 multipart upload, or a ``file://`` temp file.

    ``key`` is the warehouse-relative key the write was for; ``since_us`` is when
    the upload was initiated (S3) or the temp file last written (file://), by the
    object store's clock; ``handle`` names it for :meth:`ObjectStore.discard_partial`
    (the upload id, or the temp file's relative path).
    """

    key: str
    since_us: int
    handle: str
    kind: Literal["multipart", "temp"]


class PrefixSet:
    """Key prefixes, with S3's semantics (``"a"`` matches ``a/1`` and ``ab/2``): a key
    is matched against all of them by one binary search, not one test each."""

    def __init__(self, prefixes: Iterable[str]) -> None:
        # Prefix-free: a prefix under a shorter one adds no key. Then the only
        # prefix that can match a key is the greatest one not after it.
        self._sorted: list[str] = []
        for prefix in sorted(set(prefixes)):
            if not self._sorted or not prefix.startswith(self._sorted[-1]):
                self._sorted.append(prefix)

    def __bool__(self) -> bool:
        return bool(self._sorted)

    def __iter__(self) -> Iterator[str]:
        return iter(self._sorted)

    def common(self) -> str:
        """The longest prefix of them all: where one listing finds every match."""
        return os.path.commonprefix(self._sorted)

    def match(self, key: str) -> str | None:
        """The prefix ``key`` starts with (None: none does)."""
        at = bisect.bisect_right(self._sorted, key) - 1
        if at >= 0 and key.startswith(self._sorted[at]):
            return self._sorted[at]
        return None


class ObjectOutput(Protocol):
    """An object being written in pieces: invisible until :meth:`commit`.

    A writer that fails calls :meth:`abort`, and nothing appears at the key; a
    writer killed before either leaves a partial write (temp file, multipart
    upload) that ``partial_writes`` finds and GC sweeps.
    """

    def write(self, data: bytes | memoryview) -> int: ...

    def commit(self) -> None: ...

    def abort(self) -> None: ...


class ObjectStore(Protocol):
    """Control and data operations on one warehouse."""

    warehouse: Warehouse

    def put(self, key: str, data: bytes) -> None: ...

    def open_output(self, key: str) -> ObjectOutput:
        """Write ``key`` in pieces, with memory bounded by one upload part."""
        ...

    def open_input(self, key: str) -> pa.NativeFile:
        """A random-access reader of ``key``: reads fetch only the ranges asked for."""
        ...

    def stream(self, key: str, chunk_bytes: int) -> Iterator[bytes]:
        """The whole object from its first byte, in chunks: one request, however large."""
        ...

    def local_file(self, key: str) -> str | None:
        """A path the object's bytes can be read from in place, or None (remote)."""
        ...

    def create(self, key: str, data: bytes) -> bool:
        """Write ``key`` only if it does not exist; False (nothing written) if it does.

        Atomic against a concurrent ``create`` of the same key: exactly one wins.
        """
        ...

    def get(self, key: str) -> bytes: ...

    def head(self, key: str) -> ObjectInfo: ...

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        """Every object whose key starts with ``prefix`` (S3's semantics: ``"a"``
        matches ``a/1`` and ``ab/2``), streamed, **in key order**: ascending by the
        key's UTF-8 bytes, which is Python's ``str`` order and S3's ListObjectsV2
        order. Each key once.

        The order is a contract: ``rewind gc --deep`` (engine/gc/deep.py) merges
        the listing against the catalog's keys, streamed in the same order, instead
        of holding either in memory. A backend that cannot list in order must sort
        (``file://`` walks each directory sorted, a directory ``d`` as ``d/``).
        """
        ...

    def listing(self, prefix: str) -> Iterator[tuple[str, ObjectInfo | None]]:
        """:meth:`list`'s keys, in the same order, each with its :class:`ObjectInfo`
        when the listing gives it for free (S3's LIST returns size and time) or
        None when it would cost a request of its own (``file://``: a stat per
        file). A caller that needs the info of only a few keys (``gc --deep``
        needs it for the keys the catalog does not know) asks :meth:`head` for
        those and skips the rest."""
        ...

    def children(self, prefix: str) -> Iterator[str]:
        """Names of the "directories" directly under ``prefix`` (which ends with ``/``)."""
        ...

    def copy(self, source_key: str, dest_key: str) -> None: ...

    def copy_from(self, source: ObjectStore, source_key: str, dest_key: str) -> bool:
        """Copy ``source_key`` of another object store to ``dest_key`` of this one
        without its bytes passing through this process, if the two allow it: S3
        CopyObject between buckets of one endpoint and account, a file copy
        between two ``file://`` directories. False: nothing was copied (another
        backend, endpoint or account), and the caller streams the bytes itself.

        Raises:
            ObjectMissing: ``source_key`` is not there.
        """
        ...

    def delete_many(self, keys: Iterable[str]) -> int: ...

    def partial_writes(self, prefix: str) -> Iterator[PartialWrite]:
        """Unfinished writes whose key starts with ``prefix``."""
        ...

    def partial_writes_under(self, prefixes: PrefixSet) -> Iterator[PartialWrite]:
        """Unfinished writes whose key starts with one of ``prefixes``, found with as
        few requests as the backend allows: on S3 one ListMultipartUploads (paged)
        under their common prefix, whatever their number; on ``file://`` each
        prefix's directory read once (a temp file lies beside its key)."""
        ...

    def discard_partial(self, writes: Iterable[PartialWrite]) -> int:
        """Abort uploads / remove temp files; ones already gone are not counted."""
        ...
