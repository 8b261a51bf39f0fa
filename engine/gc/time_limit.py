"""``rewind gc --max-seconds``: a pass that stops cleanly and lets the next one go on.

Every phase of a pass leaves the catalog and the warehouse consistent between
its units of work (a table compacted, a batch of recorded deletions done, an
intent swept), and whatever a pass did not reach is found again by the next:
garbage stays unreferenced, decisions stay in ``gc_pending``, stale intents
stay stale. So the limit is checked between units, never inside one, and a
pass may run past it by one unit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from tenants.errors import InvalidArgument


@dataclass
class TimeLimit:
    seconds: float | None  # None: no limit
    started: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        if self.seconds is not None and not self.seconds > 0:  # also refuses nan
            raise InvalidArgument(f"--max-seconds must be a positive number, got {self.seconds}")

    def up(self) -> bool:
        """Whether the pass should stop before its next unit of work."""
        return self.seconds is not None and time.monotonic() - self.started >= self.seconds
