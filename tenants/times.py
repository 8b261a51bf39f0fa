"""Parsing user-named times and durations into µs.

A time is a raw ts (an integer of µs since the epoch) or an ISO-8601 instant
(a naive instant is taken as UTC). Snapshot names are resolved by the snapshot
module, which falls back to this one. Durations are ``<n><unit>`` with units
``us ms s m h d w`` (``90m``, ``6h``, ``7d``) or combinations (``1h30m``).

Every time a user can name lies in ``[MIN_TS, MAX_TS]``: from the epoch to the
last µs of year 9999, the range an ISO-8601 instant can print and an int64 ts
column can hold. Durations are at most ``MAX_DURATION_US`` (1000 years), so
``now + duration`` stays inside that range. A value outside either is refused
when it is parsed, before it reaches the catalog (whose integers are int64) or
a formatter (whose years stop at 9999).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

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

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ONE_US = timedelta(microseconds=1)
MIN_TS = 0
MAX_TS = (datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC) - EPOCH) // ONE_US
MAX_DURATION_US = 365_000 * US["d"]
TIME_FORMS = (
    "use a snapshot name, an ISO-8601 instant (2026-11-22T10:00:00Z) or a ts in µs since the epoch"
)


def parse_instant(text: str) -> int:
    """A raw ts or an ISO-8601 instant, as µs since the epoch.

    Raises:
        InvalidArgument: not a time, or one outside 1970-01-01 .. 9999-12-31 (UTC).
    """
    value = text.strip()
    if re.fullmatch(r"\d+", value):
        # Past 20 digits it is out of range anyway (and int() refuses ~4300).
        return check_ts(int(value) if len(value) <= 20 else MAX_TS + 1, text)
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as e:
        if re.match(r"[+-]?\d{5,}-", value):  # an ISO-like date past year 9999
            check_ts(MAX_TS + 1, text)
        raise InvalidArgument(f"invalid time {_shown(text)}: {TIME_FORMS}") from e
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    # Integer arithmetic: a float timestamp() loses µs near year 9999, and an
    # offset can carry year 9999 past the end (or year 1 before the start).
    return check_ts((moment - EPOCH) // ONE_US, text)


def check_ts(ts: int, text: str | int | None = None) -> int:
    """``ts`` itself, if it is a time Rewind can name; else a clear error."""
    if MIN_TS <= ts <= MAX_TS:
        return ts
    raise InvalidArgument(
        f"invalid time {_shown(ts if text is None else text)}: times run from {format_ts(MIN_TS)} (ts {MIN_TS}) to "
        f"{format_ts(MAX_TS)} (ts {MAX_TS})"
    )


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
    return check_duration(total, text)


def check_duration(us: int, text: str | int | None = None) -> int:
    """``us`` itself, if it is at most ``MAX_DURATION_US`` (1000 years); else a clear error."""
    if us <= MAX_DURATION_US:
        return us
    raise InvalidArgument(
        f"invalid duration {_shown(us if text is None else text)}: at most {format_duration(MAX_DURATION_US)} (1000 years)"
    )


def _shown(value: str | int) -> str:
    """A user's value for an error message, cut short if it is very long."""
    text = repr(value)
    return text if len(text) <= 48 else f"{text[:40]}... ({len(text)} characters)"


def format_ts(ts: int) -> str:
    """ISO-8601 UTC with µs, for display; never fails (it also formats error messages)."""
    if not (datetime.min.replace(tzinfo=UTC) - EPOCH) // ONE_US <= ts <= MAX_TS:
        return f"ts {ts}, outside the years 1-9999"
    return (EPOCH + ts * ONE_US).isoformat(timespec="microseconds").replace("+00:00", "Z")


def format_duration(us: int) -> str:
    for unit in ("w", "d", "h", "m", "s"):
        if us % US[unit] == 0 and us >= US[unit]:
            return f"{us // US[unit]}{unit}"
    return f"{us}us"
