"""Point-in-time recovery windows: every time inside the window is protected.

A window protects only history recorded while it was on: when a window is
first set (or grown), its start is clamped to the moment it took effect, so
Rewind never claims to protect times whose versions compaction may already
have dropped. Off by default.
"""

from __future__ import annotations

from dataclasses import dataclass

from tenants.catalog import Tx
from tenants.errors import InvalidArgument
from tenants.protection import wall_now
from tenants.tenancy import TenantRecord
from tenants.times import check_duration


@dataclass(frozen=True)
class PitrWindow:
    window_us: int
    since_ts: int  # the window never reaches before this

    def start(self, now: int) -> int:
        return max(now - self.window_us, self.since_ts)


def get_pitr(tx: Tx, tenant: TenantRecord) -> PitrWindow | None:
    row = tx.one("SELECT window_us, since_ts FROM pitr_windows WHERE tenant_id = ?", (tenant.id,))
    return None if row is None else PitrWindow(int(row["window_us"]), int(row["since_ts"]))


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
    tx.execute("DELETE FROM pitr_windows WHERE tenant_id = ?", (tenant.id,))
    if window_us is None:
        return None
    # Times already inside the old window stay protected; nothing older is.
    since = current.start(now) if current else now
    tx.execute(
        "INSERT INTO pitr_windows (tenant_id, window_us, since_ts) VALUES (?, ?, ?)",
        (tenant.id, window_us, since),
    )
    return PitrWindow(window_us, since)
