"""The object store seam: immutable objects under a warehouse, by scheme."""

from tenants.objectstore.base import ObjectInfo, ObjectStore, open_object_store

__all__ = ["ObjectInfo", "ObjectStore", "open_object_store"]
