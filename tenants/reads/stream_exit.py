"""Rewind's Arrow streams let go of other engines' threads before Python exits.

An engine may read a stream of Rewind's rows on threads Python did not
start; a thread still in one as the interpreter finalizes aborts the
process. :class:`ExitSafeStream` counts those threads in and out, and the
exit waits for them (:class:`_Streams` says how, and why by timing).
"""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Iterator

import pyarrow as pa

from tenants.errors import RewindError

QUIET_SECONDS = 0.5
"""At exit, a stream no thread has touched for this long is parked: its engine
holds it (a scan left open) and will not read it again before Python finalizes."""

REFUSED_QUIET_SECONDS = 0.05
"""As :data:`QUIET_SECONDS`, for a stream whose thread was told it is closed: that
thread reads no more, it only releases the stream, at once if its engine let go."""

EXIT_WAIT_SECONDS = 60.0
"""At most this long at exit for a batch being read: one batch, never a table."""


class _Streams:
    """The streams :meth:`ArrowRead.reader` handed out that are still held, and the
    exit that waits for the foreign threads reading them.

    Why: an engine may read a stream on threads Python did not start. DuckDB
    scans one through pyarrow's dataset scanner, whose background thread on
    Arrow's IO pool keeps reading ahead after the scan stops (a query that
    failed, a result read in part) and releases the stream once it is done.
    Each read and that release enter Python; a thread that enters it once the
    interpreter finalizes aborts the process ("PyGILState_Release: thread state
    must be current") or leaves Arrow's pool waiting for it, a hang.

    So at exit (``atexit``, while Python is whole) streams close: a read then
    raises at once instead of reading on, which ends the thread's read-ahead,
    and the exit waits until every stream a foreign thread read is released,
    or parked (:data:`QUIET_SECONDS`), with no call in flight. Streams only
    Python's main thread read need no wait: it is the one exiting.
    """

    def __init__(self) -> None:
        self.open: dict[int, _StreamState] = {}
        self.closed = False
        self.last_foreign = 0.0
        """When a foreign thread last entered or left a stream (time.monotonic)."""

    def close_and_wait(self) -> None:
        """Close every stream, then wait for the foreign threads still in one."""
        self.closed = True
        deadline = time.monotonic() + EXIT_WAIT_SECONDS
        while time.monotonic() < deadline:
            now = time.monotonic()
            if not any(
                s.inside
                or now - s.touched < (REFUSED_QUIET_SECONDS if s.refused else QUIET_SECONDS)
                for s in list(self.open.values())
                if s.foreign
            ):
                break
            time.sleep(0.002)  # lets the threads in a stream take the GIL and finish
        if time.monotonic() - self.last_foreign < 0.05:
            # A thread that just left a stream returns into Arrow through a few more
            # C calls before it lets the GIL go: give it the GIL to do so.
            time.sleep(0.02)


_STREAMS = _Streams()
atexit.register(_STREAMS.close_and_wait)


class _StreamState:
    """One stream's calls: what the exit waits on (the stream's own object must not be
    held, or it would never be released)."""

    __slots__ = ("foreign", "inside", "refused", "touched")

    def __init__(self) -> None:
        self.foreign = False
        self.refused = False
        self.inside = 0
        self.touched = 0.0


class ExitSafeStream:
    """The batches of one :meth:`ArrowRead.reader`, counted in and out for :class:`_Streams`."""

    def __init__(self, batches: Iterator[pa.RecordBatch], where: str) -> None:
        self._batches = batches
        self._where = where
        self._state = _StreamState()
        _STREAMS.open[id(self)] = self._state

    def __iter__(self) -> ExitSafeStream:
        return self

    def __next__(self) -> pa.RecordBatch:
        state = self._state
        if threading.get_ident() != threading.main_thread().ident:
            state.foreign = True
        state.inside += 1
        state.touched = time.monotonic()
        if state.foreign:
            _STREAMS.last_foreign = state.touched
        try:
            if _STREAMS.closed:
                state.refused = True
                raise RewindError(
                    f"reading {self._where}: the process is exiting, so the stream was "
                    "closed before its end; read it before the process exits"
                )
            return next(self._batches)
        finally:
            state.inside -= 1
            state.touched = time.monotonic()
            if state.foreign:
                _STREAMS.last_foreign = state.touched

    def __del__(self) -> None:
        # The batches close first (their object readers with them), and only then is
        # the stream gone for the exit: nothing of it runs after that.
        getattr(self._batches, "close", lambda: None)()
        if self._state.foreign:
            _STREAMS.last_foreign = time.monotonic()
        _STREAMS.open.pop(id(self), None)
