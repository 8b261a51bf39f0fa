"""The object store seam: immutable objects under a warehouse, by scheme."""

from tenants.objectstore.base import (
    ObjectInfo,
    ObjectOutput,
    ObjectStore,
    PartialWrite,
    open_object_store,
)

__all__ = ["ObjectInfo", "ObjectOutput", "ObjectStore", "PartialWrite", "open_object_store"]
