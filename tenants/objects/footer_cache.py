"""Parsed Parquet footers kept per process, so a reader opens a known object
without asking the store for its footer again.

Objects are immutable: a key is written once, never overwritten, and the
catalog records each object's size and checksum. A footer read from ``key``
therefore stays true of ``key`` for as long as the record stays the same, and
the cache is keyed by the record (warehouse, key, size, checksum), not by the
key alone: a different record can never get another object's footer. On S3 a
footer is one ranged GET (a round trip of 10-40 ms) before any row can be
read; a query of ten rows needs a handful of requests in all, so a process that
serves queries (a notebook, a service, ``benchmarks/instant_reader.py``) gets
its first rows one round trip sooner on every object it has opened before. A
restored tenant reads the source's own objects (reused, or held with a cut), so
a process that served the tenant before its restore reads it after without
fetching those footers again: DuckDB and Trino keep Parquet metadata for the
same reason.

Bounded: at most :data:`ENTRIES` footers, and none larger than
:data:`MAX_FOOTER_BYTES` (an object of thousands of row groups is not worth
holding), least recently used first out. A damaged object is still found: the
whole-object checksum is checked on a full read as before, and every page's
CRC on any read.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import pyarrow.parquet as pq

ENTRIES = 1024
MAX_FOOTER_BYTES = 256 * 1024

FooterKey = tuple[str, str, int, str]
"""(warehouse URI, object key, bytes, checksum): one immutable object."""


class FooterCache:
    """A bounded least-recently-used map of footers; safe across threads."""

    def __init__(self, entries: int = ENTRIES, max_footer_bytes: int = MAX_FOOTER_BYTES) -> None:
        self._entries = entries
        self._max_footer_bytes = max_footer_bytes
        self._footers: OrderedDict[FooterKey, pq.FileMetaData] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: FooterKey) -> pq.FileMetaData | None:
        with self._lock:
            footer = self._footers.get(key)
            if footer is not None:
                self._footers.move_to_end(key)
            return footer

    def put(self, key: FooterKey, footer: pq.FileMetaData) -> None:
        if footer.serialized_size > self._max_footer_bytes:
            return
        with self._lock:
            self._footers[key] = footer
            self._footers.move_to_end(key)
            while len(self._footers) > self._entries:
                self._footers.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._footers)

    def clear(self) -> None:
        with self._lock:
            self._footers.clear()


FOOTERS = FooterCache()
"""The process's cache, used by :func:`tenants.objects.reader.open_object`."""
