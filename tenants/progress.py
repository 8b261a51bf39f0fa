"""Progress of long work, for whoever watches it.

Long steps (a load, a compaction, a backup and its restore, a dump and its
reload, a GC pass, a restore's rewrite) say what they do, how much there is
(bytes) and how much is done. They find the watcher in a context variable, not
in a parameter threaded through every layer: progress is an observer's
concern that decides nothing, the CLI is its one watcher (a rich bar on a
terminal, engine/cli/progress.py), and with no watcher a step costs a lookup.

A :class:`Step` may be advanced from any thread (an executor's callback, a copy
pool): it is captured when the step begins, so the context variable is read
once, in the thread that began it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol


class Step(Protocol):
    def advance(self, amount: int) -> None:
        """``amount`` more bytes done."""


class Watcher(Protocol):
    def begin(self, what: str, total: int | None) -> Step:
        """A step starts: ``what`` it does (a few words) and its ``total`` bytes,
        or None when unknown."""

    def end(self, step: Step) -> None:
        """The step is over (done, or failed)."""


class _Silent:
    def advance(self, amount: int) -> None:
        pass


SILENT: Step = _Silent()
_watcher: ContextVar[Watcher | None] = ContextVar("rewind_progress_watcher", default=None)


@contextmanager
def watching(watcher: Watcher) -> Iterator[Watcher]:
    """Report the steps begun inside the body (in this context) to ``watcher``."""
    token = _watcher.set(watcher)
    try:
        yield watcher
    finally:
        _watcher.reset(token)


@contextmanager
def step(what: str, total: int | None = None) -> Iterator[Step]:
    """A step of long work, reported to the watcher if there is one."""
    watcher = _watcher.get()
    if watcher is None:
        yield SILENT
        return
    begun = watcher.begin(what, total)
    try:
        yield begun
    finally:
        watcher.end(begun)


class Share:
    """Advances a step by an estimate, then by exactly what is left.

    Some work knows its bytes only in total (a table's stored bytes) but
    progresses in rows: each ``rows(n)`` advances ``n`` rows' share of the
    bytes, never past ``total``, and :meth:`finish` advances the rest, so the
    step's sum is exact whatever the estimate.
    """

    def __init__(self, step: Step, total_bytes: int, total_rows: int) -> None:
        self.step = step
        self.left = total_bytes
        self.per_row = total_bytes / total_rows if total_rows > 0 else 0.0

    def rows(self, n: int) -> None:
        amount = min(self.left, int(n * self.per_row))
        if amount > 0:
            self.left -= amount
            self.step.advance(amount)

    def finish(self) -> None:
        if self.left > 0:
            self.step.advance(self.left)
            self.left = 0
