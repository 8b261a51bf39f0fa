"""Point-in-time recovery windows: every time inside the window is protected.

A window protects only history recorded while it was on: when a window is
first set (or grown), its start is clamped to the moment it took effect, so
Rewind never claims to protect times whose versions compaction may already
have dropped. Off by default.
"""

from __future__ import annotations

from dataclasses import dataclass

from tenants.catalog import Tx
from tenants.catalog.pitr import delete_pitr_window, insert_pitr_window, pitr_window
from tenants.errors import InvalidArgument
from tenants.tenancy import TenantRecord
from tenants.timeline.protection import wall_now
from tenants.times import check_duration


@dataclass(frozen=True)
class PitrWindow:
    window_us: int
    since_ts: int  # the window never reaches before this

    def start(self, now: int) -> int:
        return max(now - self.window_us, self.since_ts)


def get_pitr(tx: Tx, tenant: TenantRecord) -> PitrWindow | None:
    found = pitr_window(tx, tenant.id)
    return None if found is None else PitrWindow(*found)


def set_pitr(tx: Tx, tenant: TenantRecord, window_us: int | None) -> PitrWindow | None:
    """Set (or with ``None`` turn off) the tenant's PITR window."""
    if window_us is not None and window_us <= 0:
        raise InvalidArgument(
            f"the PITR window must be longer than zero, got {window_us} µs; use off to turn it off"
        )
    if window_us is not None:
        check_duration(window_us)  # past 1000 years: a typo, and past SQLite's int64 soon after
    now = wall_now(tx)
    current = get_pitr(tx, tenant)
    delete_pitr_window(tx, tenant.id)
    if window_us is None:
        return None
    # Times already inside the old window stay protected; nothing older is.
    since = current.start(now) if current else now
    insert_pitr_window(tx, tenant.id, window_us, since)
    return PitrWindow(window_us, since)
