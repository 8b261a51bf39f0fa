"""Where an export goes: opened, proven writable and kept out of the warehouse,
before any row is read.

A bad URI, an unknown bucket, a read-only directory or a path under a file
is found by writing (and removing) one small probe object, so the export
fails with the destination's name before it has read a row or written a
file. A destination inside the warehouse is refused: GC's orphan sweep
deletes what its catalog does not know under the warehouse's prefix, an
export's files included.
"""

from __future__ import annotations

import uuid

from tenants.config import S3Settings, Warehouse
from tenants.errors import InvalidArgument, RewindError, StorageError
from tenants.objectstore import ObjectStore, open_object_store

PROBE = ".rewind-probe-"


def open_target(uri: str, s3: S3Settings | None, warehouse: Warehouse, what: str) -> ObjectStore:
    """The object store at ``uri``, checked writable and outside ``warehouse``.

    Raises:
        InvalidArgument: a malformed URI, or one inside the warehouse.
        StorageError: Rewind cannot write there (the message names the URI).
    """
    dest = open_object_store(uri, s3 if s3 is not None else warehouse.s3, what=what)
    place = dest.warehouse
    if inside(place, warehouse):
        raise InvalidArgument(
            f"the {what} {place.uri} is inside the warehouse {warehouse.uri}, whose GC deletes "
            "files its catalog does not know: choose a place outside it"
        )
    probe_writable(dest, what)
    return dest


def inside(place: Warehouse, warehouse: Warehouse) -> bool:
    """Whether ``place`` is the warehouse or a prefix under it."""
    if (place.scheme, place.bucket) != (warehouse.scheme, warehouse.bucket):
        return False
    root = warehouse.prefix.rstrip("/")
    return not root or place.prefix == root or place.prefix.startswith(root + "/")


def probe_writable(dest: ObjectStore, what: str) -> None:
    """Write and remove a probe object.

    Raises:
        StorageError: the write failed, naming the destination and why.
    """
    key = f"{PROBE}{uuid.uuid4().hex[:12]}"
    try:
        dest.put(key, b"")
        dest.delete_many([key])
    except RewindError as e:
        raise StorageError(f"cannot write to the {what} {dest.warehouse.uri}: {e.message}") from e
    except OSError as e:  # the directory cannot be made (a file is in the way)
        raise StorageError(f"cannot write to the {what} {dest.warehouse.uri}: {e}") from e
