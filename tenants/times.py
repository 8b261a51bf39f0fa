"""Parsing user-named times and durations into µs.

A time is a raw ts (an integer of µs since the epoch) or an ISO-8601 instant
(a naive instant is taken as UTC). Snapshot names are resolved by the snapshot
module, which falls back to this one. Durations are ``<n><unit>`` with units
``us ms s m h d w`` (``90m``, ``6h``, ``7d``) or combinations (``1h30m``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from tenants.errors import InvalidArgument

US = {
    "us": 1,
    "ms": 1_000,
    "s": 1_000_000,
    "m": 60_000_000,
    "h": 3_600_000_000,
    "d": 86_400_000_000,
    "w": 7 * 86_400_000_000,
}
_DURATION_PART = re.compile(r"(\d+)(us|ms|s|m|h|d|w)")


def parse_instant(text: str) -> int:
    """A raw ts or an ISO-8601 instant, as µs since the epoch."""
    value = text.strip()
    if re.fullmatch(r"\d{1,19}", value):
        return int(value)
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as e:
        raise InvalidArgument(
            f"invalid time {text!r}: use a snapshot name, an ISO-8601 instant "
            "(2026-11-22T10:00:00Z) or a ts in µs since the epoch"
        ) from e
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1_000_000)


def parse_duration(text: str) -> int:
    """``72h`` → µs. Zero-length and malformed durations are errors."""
    value = text.strip().lower()
    parts = _DURATION_PART.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        raise InvalidArgument(
            f"invalid duration {text!r}: use a number and a unit (us, ms, s, m, h, d, w), "
            "e.g. 90m, 6h, 7d or 1h30m"
        )
    total = sum(int(n) * US[u] for n, u in parts)
    if total <= 0:
        raise InvalidArgument(f"invalid duration {text!r}: must be longer than zero")
    return total


def format_ts(ts: int) -> str:
    """ISO-8601 UTC with µs, for display."""
    return (
        datetime.fromtimestamp(ts / 1_000_000, tz=UTC)
        .isoformat(timespec="microseconds")
        .replace("+00:00", "Z")
    )


def format_duration(us: int) -> str:
    for unit in ("w", "d", "h", "m", "s"):
        if us % US[unit] == 0 and us >= US[unit]:
            return f"{us // US[unit]}{unit}"
    return f"{us}us"
