"""The object store seam: immutable objects under a warehouse, by scheme."""

from tenants.objectstore.base import ObjectInfo, ObjectStore, PartialWrite, open_object_store

__all__ = ["ObjectInfo", "ObjectStore", "PartialWrite", "open_object_store"]
