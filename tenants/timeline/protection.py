"""Which times of a tenant are protected, computed from the catalog.

A time T is protected when T is a snapshot's ts, T lies inside the tenant's
PITR window, or T is "now" (at or after the tenant's last change, which reads
the same as the present). Reads and restores are allowed only at protected
times, and full compaction keeps exactly the versions protected times need.
Protection is always computed here, inside the operation, never taken from
a caller.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tenants.catalog import Tx
from tenants.catalog.pitr import pitr_window
from tenants.catalog.snapshots import snapshot_points
from tenants.errors import InvalidArgument, UnprotectedTime
from tenants.tenancy import TenantRecord
from tenants.times import format_ts

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class Protection:
    """The protected times of one tenant, as of ``now``."""

    tenant: TenantRecord
    now: int
    snapshots: tuple[tuple[int, str], ...]  # (ts, name), sorted by ts
    window: tuple[int, int] | None  # PITR: every T in [lo, hi]
    current_from: int  # every T in [current_from, now] reads as now

    @property
    def points(self) -> list[int]:
        return [ts for ts, _ in self.snapshots]

    @property
    def oldest(self) -> int:
        """The oldest protected time: a table dropped at or before it is released
        by GC (its history is no longer retained, and it cannot be undropped)."""
        return min([self.current_from, *self.points, *([self.window[0]] if self.window else [])])

    @property
    def change_horizon(self) -> int:
        """The oldest commit the change log keeps (tenants.catalog.changes): the
        start of the PITR window, or with none, the newest snapshot, or with
        none, now. Diffs and reverts after it read only what changed; before
        it they scan (docs/diff.md)."""
        if self.window:
            return self.window[0]
        return self.snapshots[-1][0] if self.snapshots else self.now

    def covers(self, ts: int) -> bool:
        if ts > self.now:
            return False
        if self.current_from <= ts:
            return True
        if self.window and self.window[0] <= ts <= self.window[1]:
            return True
        points = self.points
        i = bisect.bisect_left(points, ts)
        return i < len(points) and points[i] == ts

    def needed(self, born: np.ndarray, superseded: np.ndarray) -> np.ndarray:
        """For versions alive over [born, superseded): is some protected time inside?

        ``superseded`` is ``np.iinfo(np.int64).max`` for versions never superseded,
        which "now" always needs.
        """
        import numpy as np

        keep = superseded == np.iinfo(np.int64).max
        keep |= (born <= self.now) & (superseded > self.current_from)
        if self.window:
            lo, hi = self.window
            keep |= (born <= hi) & (superseded > lo)
        points = np.asarray(self.points, dtype=np.int64)
        if points.size:
            first = np.searchsorted(points, born, side="left")
            inside = first < points.size
            candidate = points[np.minimum(first, points.size - 1)]
            keep |= inside & (candidate < superseded)
        return keep

    def require(self, ts: int) -> None:
        """Raise unless ``ts`` is protected, naming what is recoverable."""
        if ts > self.now:
            raise InvalidArgument(
                f"time {ts} ({format_ts(ts)}) is in the future for tenant {self.tenant.name!r}; "
                f"now is {self.now} ({format_ts(self.now)})"
            )
        if self.covers(ts):
            return
        points = self.points
        i = bisect.bisect_left(points, ts)
        nearest = []
        if i > 0:
            nearest.append(f"{self.snapshots[i - 1][1]} (ts {points[i - 1]}, before)")
        if i < len(points):
            nearest.append(f"{self.snapshots[i][1]} (ts {points[i]}, after)")
        raise UnprotectedTime(
            f"time {ts} ({format_ts(ts)}) is not protected for tenant {self.tenant.name!r}: "
            f"recoverable are {self.recoverable()}; nearest snapshots: "
            f"{', '.join(nearest) if nearest else 'none'}"
        )

    def recoverable(self) -> str:
        """The protected times in words: the PITR window, "now" and the snapshots."""
        window = (
            f"the PITR window {format_ts(self.window[0])} .. {format_ts(self.window[1])}"
            if self.window
            else "no PITR window"
        )
        # A dropped or retired tenant changes no more: its "now" ended when it was dropped.
        end = "now" if self.tenant.dropped_ts is None else f"{format_ts(self.now)} (its drop)"
        return (
            f"{window}, any time from {format_ts(self.current_from)} (the last change) to "
            f"{end}, and its snapshots"
        )


def wall_now(tx: Tx) -> int:
    """The present: the wall clock, never behind the newest commit."""
    return max(tx.last_ts(), tx.catalog.clock())


def protection(tx: Tx, tenant: TenantRecord) -> Protection:
    # A dropped tenant changes no more: its "now" is the moment it was dropped.
    now = tenant.dropped_ts if tenant.dropped_ts is not None else wall_now(tx)
    snapshots = tuple(snapshot_points(tx, tenant.id))
    window = None
    pitr = pitr_window(tx, tenant.id)
    if pitr is not None:
        window_us, since_ts = pitr
        window = (max(now - window_us, since_ts), now)
    return Protection(tenant, now, snapshots, window, tenant.last_change_ts)
