"""The object store seam: immutable objects under a warehouse, by scheme.

A warehouse URI picks the backend (``s3://`` or ``file://``); an ``s3://``
object store reaches S3 with the :class:`~tenants.config.S3Settings` it is given and
reads no environment (the edges build settings: ``S3Settings.from_env()``).
"""

from __future__ import annotations

from tenants.config import S3Settings, Warehouse
from tenants.errors import InvalidArgument
from tenants.objectstore.base import (
    ObjectInfo,
    ObjectOutput,
    ObjectStore,
    PartialWrite,
    PrefixSet,
)

__all__ = [
    "ObjectInfo",
    "ObjectOutput",
    "ObjectStore",
    "PartialWrite",
    "PrefixSet",
    "open_object_store",
]


def open_object_store(
    uri: str, s3: S3Settings | None = None, *, what: str = "warehouse"
) -> ObjectStore:
    """The object store for ``uri``: ``s3://bucket/prefix`` or ``file:///path``.

    Args:
        uri: the warehouse (or backup destination) URI.
        s3: how an ``s3://`` object store reaches S3 (endpoint, region, credentials);
            required for one, ignored for ``file://``.
        what: the URI's role in errors ("warehouse", "backup destination").

    Raises:
        InvalidArgument: a malformed URI, or an ``s3://`` one without ``s3``.
    """
    warehouse = Warehouse.parse(uri, s3, what=what)
    if warehouse.scheme == "s3":
        if s3 is None:
            raise InvalidArgument(
                f"the {what} {warehouse.uri} is on S3 but no S3 settings were given: pass "
                "s3=S3Settings(...), or S3Settings.from_env() for the AWS variables"
            )
        from tenants.objectstore.s3 import S3ObjectStore

        return S3ObjectStore(warehouse)
    from tenants.objectstore.local import LocalObjectStore

    return LocalObjectStore(warehouse)
