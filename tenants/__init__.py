"""The table store Rewind protects: catalog, objects, writes, MVCC reads, compaction."""

from tenants import allocator as _allocator  # first: before anything loads pyarrow

del _allocator

# The one place the version is written; pyproject.toml reads it from here, and a
# Spark worker compares it with the driver's (tenants.spark.probe).
__version__ = "0.1.0"
