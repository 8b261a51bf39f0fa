"""Parsing user-named times and durations into µs.

A time is absolute: a raw ts (an integer of µs since the epoch) or an ISO-8601
instant (a naive instant is taken as UTC, an offset is honoured); or relative
to "now": ``now``, a minus sign and a duration (``-90s``, ``-1h30m``,
``-PT15M``), or a bare ISO-8601 duration, which also means that long ago
(``PT15M``, as Snowflake's ``AT(OFFSET => -900)``). :func:`parse_time` parses
either into a :class:`TimeSpec` before any I/O; ``now`` is the catalog's clock,
so a relative time is pinned by :meth:`TimeSpec.resolve` once the catalog is
open. Snapshot names are resolved by tenants.timeline.lineage, which owns the rule for
text that could be either (docs/decisions.md, "Naming a time").

Durations are ``<n><unit>`` with units ``us ms s m h d w`` (``90m``, ``6h``,
``7d``) or combinations (``1h30m``). ISO-8601 durations take weeks, days,
hours, minutes and seconds (``P1W``, ``P1DT2H``, ``PT0.5S``); years and months
are refused, their length depends on the calendar.

A ts typed as text (ASCII digits only) must be at least ``MIN_TYPED_TS``
(2000-01-01): ``1999`` is a year, not 1999 µs after the epoch, and a ts in
seconds or ms is a mistake; a time before 2000 is named in ISO-8601.

Every time a user can name lies in ``[MIN_TS, MAX_TS]``: from the epoch to the
last µs of year 9999, the range an ISO-8601 instant can print and an int64 ts
column can hold. Durations are at most ``MAX_DURATION_US`` (1000 years), so
``now + duration`` stays inside that range. A value outside either is refused
when it is parsed, before it reaches the catalog (whose integers are int64) or
a formatter (whose years stop at 9999).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fractions import Fraction

from tenants.errors import InvalidArgument

AsOf = str | int
"""How every public function names a time: a snapshot name (searched through
the tenant's lineage), an ISO-8601 instant (naive means UTC), a ts in µs since
the epoch, or a time relative to the catalog's clock (``now``, ``-1h``,
``-PT15M``, ``PT15M``). ``now`` and ``PT15M`` name a snapshot instead when one
of exactly that name exists (docs/decisions.md, "Naming a time"). The time
must be protected (a snapshot or a PITR window covers it)."""

US = {
    "us": 1,
    "ms": 1_000,
    "s": 1_000_000,
    "m": 60_000_000,
    "h": 3_600_000_000,
    "d": 86_400_000_000,
    "w": 7 * 86_400_000_000,
}
# [0-9], never \d: \d and int() also take other scripts' digits (٣, full-width ３).
_DURATION_PART = re.compile(r"([0-9]+)(us|ms|s|m|h|d|w)")
_ISO_NUMBER = r"([0-9]+(?:[.,][0-9]+)?)"
_DIGITS = re.compile(r"[0-9]+")
# P[nY][nM][nW][nD][T[nH][nM][nS]]: years and months are matched so they can be refused by name.
_ISO_DURATION = re.compile(
    rf"P(?:{_ISO_NUMBER}Y)?(?:{_ISO_NUMBER}M)?(?:{_ISO_NUMBER}W)?(?:{_ISO_NUMBER}D)?"
    rf"(?:T(?:{_ISO_NUMBER}H)?(?:{_ISO_NUMBER}M)?(?:{_ISO_NUMBER}S)?)?",
    re.IGNORECASE,
)
_ISO_UNITS = (None, None, US["w"], US["d"], US["h"], US["m"], US["s"])  # None: no fixed length
_ISO_FORM = "P[nW][nD][T[nH][nM][nS]], e.g. PT15M, P1DT2H or PT0.5S"

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ONE_US = timedelta(microseconds=1)
MIN_TS = 0
MAX_TS = (datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC) - EPOCH) // ONE_US
MAX_DURATION_US = 365_000 * US["d"]
# A ts typed as a bare number starts here: 1999 (a year), a ts in seconds or in
# ms are all earlier, and reading them as µs would name a time in January 1970.
MIN_TYPED_TS = (datetime(2000, 1, 1, tzinfo=UTC) - EPOCH) // ONE_US
TIME_FORMS = (
    "use a snapshot name, an ISO-8601 instant (2026-11-22T10:00:00Z), now, a time before now "
    "(-1h, -90s, PT15M) or a ts in µs since the epoch (16 digits, e.g. 1795600800000000)"
)
NOW = "now"


@dataclass(frozen=True)
class TimeSpec:
    """A time a user named, parsed but not yet pinned to a ts.

    Absolute (``ts`` set) or relative: ``ago_us`` before "now", which only the
    catalog's clock knows, so :meth:`resolve` takes it as an argument.
    """

    text: str
    ts: int | None = None
    ago_us: int = 0

    @property
    def relative(self) -> bool:
        return self.ts is None

    def resolve(self, now_us: int) -> int:
        """The ts this names when "now" is ``now_us``.

        Raises:
            InvalidArgument: a relative time that falls before the epoch.
        """
        if self.ts is not None:
            return self.ts
        return check_ts(now_us - self.ago_us, self.text)

    def as_point(self) -> int | str:
        """This time for an API that takes ``str | int``: the ts itself, or (relative)
        text that starts with ``-`` and so is never read as a snapshot name."""
        if self.ts is not None:
            return self.ts
        if self.text.startswith("-"):
            return self.text
        return "-0s" if self.text.lower() == NOW else f"-{self.text}"


def starts_time(text: str) -> bool:
    """Text starting with a digit or ``-`` is a time, never a snapshot name (those
    start with a letter or ``_``)."""
    return text.strip()[:1].isdigit() or text.strip().startswith("-")  # ²: a bad time, not a name


def time_word(text: str) -> bool:
    """``now`` or an ISO-8601 duration (``PT15M``, also ``P1Y``, refused later): a time,
    unless a snapshot of exactly that name exists where the caller looks."""
    value = text.strip()
    return value.lower() == NOW or _iso_parts(value) is not None


def parse_time(text: str) -> TimeSpec:
    """Any time form: a raw ts, an ISO-8601 instant, ``now``, ``-<duration>`` or an
    ISO-8601 duration (with or without ``-``; both mean that long before now).

    Raises:
        InvalidArgument: not a time; years or months; a duration finer than 1 µs;
            a time outside 1970-01-01 .. 9999-12-31 (UTC), including a relative
            one longer than that whole range.
    """
    value = text.strip()
    if value.lower() == NOW:
        return TimeSpec(value)
    if value.startswith("-") or time_word(value):
        return TimeSpec(value, ago_us=_span_before_now(value, text))
    return TimeSpec(value, ts=parse_instant(text))


def _span_before_now(value: str, text: str) -> int:
    """µs of ``-90s``, ``-PT15M`` or ``PT15M`` (zero allowed: ``-0s`` is now)."""
    body = value[1:] if value.startswith("-") else value
    if body[:1] in ("P", "p"):
        span = _iso_span(body, text)
    else:
        short = _short_span(body)
        if short is None:
            raise InvalidArgument(
                f"invalid time {_shown(text)}: a time before now is a minus sign and a "
                "duration: -90s, -1h30m, -7d (units us, ms, s, m, h, d, w) or -PT15M"
            )
        span = short
    if span > MAX_TS - MIN_TS:  # before the epoch whatever the clock says
        check_ts(MIN_TS - 1, text)
    return span


def _iso_parts(value: str) -> tuple[str | None, ...] | None:
    """The seven numbers of an ISO-8601 duration (``None`` where absent), or ``None``."""
    match = _ISO_DURATION.fullmatch(value)
    if match is None:
        return None
    parts = match.groups()
    has_time = "T" in value.upper()
    if all(p is None for p in parts) or (has_time and all(p is None for p in parts[4:])):
        return None  # "P", "PT", "P1DT": no component where one is due
    return parts


def _iso_span(body: str, text: str) -> int:
    parts = _iso_parts(body)
    if parts is None:
        raise InvalidArgument(f"invalid time {_shown(text)}: an ISO-8601 duration is {_ISO_FORM}")
    if parts[0] is not None or parts[1] is not None:
        raise InvalidArgument(
            f"invalid time {_shown(text)}: years and months have no fixed length (a month is "
            "28 to 31 days); give weeks, days, hours, minutes or seconds, e.g. P30D or P52W"
        )
    given = [(p, unit) for p, unit in zip(parts, _ISO_UNITS, strict=True) if p is not None]
    if any(not p.isdigit() for p, _ in given[:-1]):
        raise InvalidArgument(
            f"invalid time {_shown(text)}: only the last number of an ISO-8601 duration may "
            "have a fraction (PT1H30.5M, not PT1.5H30M)"
        )
    total = 0
    for number, unit in given:
        assert unit is not None  # years and months were refused above
        whole, _, fraction = number.replace(",", ".").partition(".")
        fraction = fraction.rstrip("0")
        if len(whole.lstrip("0")) > 20:  # past any range (and int() refuses ~4300 digits)
            return MAX_TS + 1
        # A week is 2**13 * 5**8 * 189 µs: past 13 decimals no fraction of a unit is whole µs.
        amount = Fraction(f"{whole}.{fraction or 0}") * unit if len(fraction) <= 13 else None
        if amount is None or amount.denominator != 1:
            raise InvalidArgument(f"invalid time {_shown(text)}: finer than a microsecond")
        total += int(amount)
    return total


def _short_span(value: str) -> int | None:
    """µs of ``1h30m`` (zero allowed), or ``None`` if it is not that grammar."""
    value = value.lower()
    parts = _DURATION_PART.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        return None
    # Past 20 digits it is out of every range anyway (and int() refuses ~4300).
    return sum((int(n) if len(n) <= 20 else 10**20) * US[u] for n, u in parts)


def parse_instant(text: str) -> int:
    """A raw ts or an ISO-8601 instant, as µs since the epoch.

    Raises:
        InvalidArgument: not a time, or one outside 1970-01-01 .. 9999-12-31 (UTC).
    """
    value = text.strip()
    typed = typed_ts(value)
    if typed is not None:
        return typed
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


def typed_ts(text: str) -> int | None:
    """The ts a bare number names (ASCII digits), or ``None`` if ``text`` is not one.

    Raises:
        InvalidArgument: a number before 2000-01-01 in µs (``1999``, a ts in
            seconds or ms) or past 9999; it names the accepted forms.
    """
    value = text.strip()
    if not _DIGITS.fullmatch(value):
        return None
    # Past 20 digits it is out of range anyway (and int() refuses ~4300).
    ts = int(value) if len(value) <= 20 else MAX_TS + 1
    if ts < MIN_TYPED_TS:
        raise InvalidArgument(
            f"invalid time {_shown(text)}: a bare number is a ts in µs since the epoch, from "
            f"{MIN_TYPED_TS} ({format_ts(MIN_TYPED_TS)}) on; a year or an earlier time is "
            f"written in ISO-8601 (1999-01-01T00:00:00Z); {TIME_FORMS}"
        )
    return check_ts(ts, text)


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
    total = _short_span(text.strip())
    if total is None:
        raise InvalidArgument(
            f"invalid duration {text!r}: use a number and a unit (us, ms, s, m, h, d, w), "
            "e.g. 90m, 6h, 7d or 1h30m"
        )
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
