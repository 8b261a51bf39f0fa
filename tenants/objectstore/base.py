"""What every object store offers, and how a warehouse URI picks one.

Keys handed to a store are relative to the warehouse root; the store adds its
prefix. Stores are picklable (clients are rebuilt lazily) so Spark tasks can
carry them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

from tenants.config import S3Settings, Warehouse


@dataclass(frozen=True)
class ObjectInfo:
    """One listed object: relative key, size in bytes, last-modified (epoch µs)."""

    key: str
    size: int
    last_modified_us: int


class ObjectStore(Protocol):
    """Control and data operations on one warehouse."""

    warehouse: Warehouse

    def put(self, key: str, data: bytes) -> None: ...

    def get(self, key: str) -> bytes: ...

    def head(self, key: str) -> ObjectInfo: ...

    def list(self, prefix: str) -> Iterator[ObjectInfo]: ...

    def copy(self, source_key: str, dest_key: str) -> None: ...

    def delete_many(self, keys: Iterable[str]) -> int: ...


def open_object_store(
    uri: str, s3: S3Settings | None = None, *, what: str = "warehouse"
) -> ObjectStore:
    """The store for ``uri``: ``s3://bucket/prefix`` or ``file:///path``.

    ``what`` names the URI's role in errors ("warehouse", "backup destination").
    """
    warehouse = Warehouse.parse(uri, s3, what=what)
    if warehouse.scheme == "s3":
        from tenants.objectstore.s3 import S3ObjectStore

        return S3ObjectStore(warehouse)
    from tenants.objectstore.local import LocalObjectStore

    return LocalObjectStore(warehouse)
