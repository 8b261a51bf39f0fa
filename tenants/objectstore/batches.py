"""Work on many keys in batches, a few batches at once, the keys never materialised.

Deleting 10^6 keys one request (S3) or one unlink (``file://``) at a time waits
on each in turn: the store's latency, not its throughput, sets the pace. Both
stores cut the keys into batches and keep a few in flight on a small thread
pool. The keys are an iterator (GC streams them from the catalog), drawn in
the caller's thread only as a slot frees up: at most ``in_flight + 1`` batches
exist at once.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait


def batched(keys: Iterable[str], size: int) -> Iterator[list[str]]:
    """``keys`` in lists of ``size``, each cut only when asked for."""
    it = iter(keys)
    while batch := list(itertools.islice(it, size)):
        yield batch


def in_parallel(
    keys: Iterable[str],
    work: Callable[[list[str]], int],
    *,
    batch: int,
    in_flight: int,
    name: str,
) -> int:
    """Run ``work`` on each batch of ``batch`` keys, ``in_flight`` at once; the sum
    of what it returns.

    ``keys`` is consumed in this thread only (a caller's generator need not be
    thread-safe). One batch runs here, with no pool. The first failure stops
    the cutting of batches; those in flight finish, then it is raised: keys not
    yet handed out are untouched.
    """
    batches = batched(keys, batch)
    first = next(batches, None)
    if first is None:
        return 0
    second = next(batches, None)
    if second is None:
        return work(first)
    done_total = 0
    with ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix=name) as pool:
        running: set[Future[int]] = set()
        try:
            for keys_batch in itertools.chain((first, second), batches):
                if len(running) >= in_flight:
                    done, running = wait(running, return_when=FIRST_COMPLETED)
                    done_total += sum(f.result() for f in done)
                running.add(pool.submit(work, keys_batch))
            done, running = wait(running)
            done_total += sum(f.result() for f in done)
        except BaseException:
            for future in running:
                future.cancel()
            raise
    return done_total
