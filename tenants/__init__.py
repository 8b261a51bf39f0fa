"""The table store Rewind protects: catalog, objects, writes, MVCC reads, compaction."""
