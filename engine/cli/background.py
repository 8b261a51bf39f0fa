"""The rest of an instant restore runs as background work: lower CPU priority.

Once an instant restore's tenant is usable, the command's remaining work (the
rewrite, verification and swap) is background work next to the tenants that
now serve traffic on the same host. The command lowers its own CPU priority
(``os.nice``) by ``REWIND_BACKGROUND_NICE`` (default 10; 0 keeps it), so a
write's latency beside a rewrite stays near idle (bench_instant_restore part 4)
while the rewrite still gets every cycle nobody else wants. Only the CLI does
this: a library call never changes its caller's process priority.
"""

from __future__ import annotations

import logging
import os

from tenants.errors import InvalidArgument

log = logging.getLogger(__name__)
DEFAULT_NICE = 10


def background_nice() -> int:
    """``REWIND_BACKGROUND_NICE`` as an increment from 0 to 19.

    Raises:
        InvalidArgument: not a whole number in that range.
    """
    text = os.environ.get("REWIND_BACKGROUND_NICE", "").strip()
    if not text:
        return DEFAULT_NICE
    if not (text.isascii() and text.isdigit()) or not 0 <= int(text) <= 19:
        raise InvalidArgument(
            f"REWIND_BACKGROUND_NICE={text!r}: give a whole number from 0 (keep the "
            f"priority) to 19 (lowest); the default is {DEFAULT_NICE}"
        )
    return int(text)


_lowered = False  # a process lowers itself once, however many restores it runs


def run_in_background(increment: int) -> None:
    """Lower this process's CPU priority by ``increment`` (where the OS lets it),
    once per process: a caller that runs the CLI in-process many times (a test
    suite, a notebook) is not pushed down by every restore."""
    global _lowered
    if increment <= 0 or _lowered or not hasattr(os, "nice"):
        return
    _lowered = True
    try:
        os.nice(increment)
    except OSError as e:  # a sandbox may refuse; the rewrite runs at full priority then
        log.info("could not lower the priority of the background rewrite: %s", e)
