"""Decode the next batch of a stream while the caller works on this one.

A merge or a rewrite spends its time in three places: decoding Parquet,
its own work (filter, sort, MVCC, hashing) and encoding the output. The
encoder has a thread of its own (tenants.objects.writer); this module gives
decoding one, so on two cores the three overlap instead of taking turns.
pyarrow releases the GIL while it decodes.

A pool of one worker per core serves every stream of the process, a batch
ahead each (so rewrite tasks running side by side on the local executor's
threads do not queue behind one decoder): the memory cost is one decoded
batch per open stream, and an input a merge has not needed for a while has
its next batch ready when it is. A stream has at most one read in flight, so
its items keep their order. Workers run nothing but ``next()`` on a stream,
so they never wait on one another: a stream read ahead from a worker itself
(nested) is read directly.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

Item = TypeVar("Item")

_END = object()
_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_worker = threading.local()


def _mark_worker() -> None:
    _worker.active = True


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(
                max(2, os.cpu_count() or 1),
                thread_name_prefix="rewind-read-ahead",
                initializer=_mark_worker,
            )
        return _pool


def _forget_pool() -> None:
    """A forked child (a Spark Python worker) has no thread behind the parent's pool."""
    global _pool, _lock
    _pool = None
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_pool)


def read_ahead(items: Iterator[Item]) -> Generator[Item, None, None]:
    """``items``, each produced on the read-ahead thread while the caller holds
    the one before. Closing the generator waits for the item in flight, so the
    caller may then close what ``items`` reads from."""
    if getattr(_worker, "active", False):
        yield from items
        return
    pool = _executor()
    pending: Future[object] = pool.submit(next, items, _END)
    try:
        while True:
            item = pending.result()
            if item is _END:
                return
            pending = pool.submit(next, items, _END)
            yield item  # type: ignore[misc]
    finally:
        if not pending.done():
            try:
                pending.result()
            except BaseException:  # noqa: BLE001 - the stream is being abandoned
                pass


@contextmanager
def reading_ahead(
    items: Generator[Item, None, None],
) -> Iterator[Generator[Item, None, None]]:
    """``read_ahead(items)`` for a with block: leaving it, early or not, waits
    for the item in flight and closes ``items`` (so its reader may close next)."""
    ahead = read_ahead(items)
    try:
        yield ahead
    finally:
        ahead.close()
        items.close()
