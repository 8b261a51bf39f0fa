"""Column defaults: the value a column takes where an object lacks it, and its JSON form.

A default lives in the schema JSON of the catalog, of restore plans, of dump
manifests and of backups, so it must survive JSON exactly. Booleans, integers,
floats and strings are JSON scalars and are stored as such. Dates, timestamps
and decimals are not: they are stored as text (ISO-8601 for dates and times,
the decimal's digits for decimals) and turned back into the column's Python
value when a schema is loaded, so ``Column.default`` is always a value of the
column's type (``datetime.date``, ``datetime.datetime``, ``decimal.Decimal``).

Timestamps keep their column's unit and zone: the text has exactly the unit's
fractional digits and, for a zoned column, is the instant in UTC (``Z``); the
value read back is in the column's zone. A naive time for a zoned column, a
zoned time for a naive column, or more precision than the unit holds is refused
rather than shifted or truncated.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import TYPE_CHECKING, Any

from tenants.errors import SchemaMismatch

if TYPE_CHECKING:
    import pyarrow as pa

_FRACTION_DIGITS = {"s": 0, "ms": 3, "us": 6, "ns": 9}
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_EPOCH = dt.datetime(1970, 1, 1)
_EXAMPLES = {
    "date": "a datetime.date or ISO-8601 text such as 2026-01-05",
    "timestamp": "a datetime.datetime or ISO-8601 text such as 2026-01-05T10:00:00",
    "zoned": "a timezone-aware datetime.datetime or ISO-8601 text with an offset such as "
    "2026-01-05T10:00:00Z",
    "decimal": "a decimal.Decimal or its digits as text such as 12.50",
}


def is_text_encoded(arrow_type: pa.DataType) -> bool:
    """Whether defaults of this type are stored as text (JSON has no such scalar)."""
    import pyarrow as pa

    return (
        pa.types.is_date32(arrow_type)
        or pa.types.is_timestamp(arrow_type)
        or pa.types.is_decimal(arrow_type)
    )


def _hint(arrow_type: pa.DataType) -> str:
    import pyarrow as pa

    if pa.types.is_date32(arrow_type):
        return _EXAMPLES["date"]
    if pa.types.is_timestamp(arrow_type):
        return _EXAMPLES["zoned" if arrow_type.tz else "timestamp"]
    return _EXAMPLES["decimal"]


def canonical_default(name: str, type_text: str, arrow_type: pa.DataType, value: Any) -> Any:
    """``value`` as the column's Python value, for date, timestamp and decimal columns.

    Accepts a value of the column's type or its text (ISO-8601, decimal digits).
    Other types pass through unchanged (``tenancy`` checks them when a column is
    added). Raises ``SchemaMismatch`` naming the column and what it accepts.
    """
    import pyarrow as pa

    if value is None or not is_text_encoded(arrow_type):
        return value
    why = f"; give {_hint(arrow_type)}"
    if isinstance(value, str):
        try:
            typed = pa.array([value.strip()], pa.string()).cast(arrow_type)[0]
            return typed.as_py()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError, OverflowError) as e:
            raise SchemaMismatch(
                f"default {value!r} of column {name!r} is not a {type_text}{why} ({e})"
            ) from e
    if pa.types.is_timestamp(arrow_type) and isinstance(value, dt.datetime):
        zoned = value.tzinfo is not None and value.tzinfo.utcoffset(value) is not None
        if zoned != (arrow_type.tz is not None):
            kind = "a timezone-aware" if zoned else "a naive"
            raise SchemaMismatch(
                f"default {value!r} of column {name!r} is not a {type_text}: {kind} time would "
                f"be shifted silently{why}"
            )
    expected = {
        "date": dt.date,
        "timestamp": dt.datetime,
        "decimal": decimal.Decimal,
    }
    family = (
        "date"
        if pa.types.is_date32(arrow_type)
        else "timestamp"
        if pa.types.is_timestamp(arrow_type)
        else "decimal"
    )
    # datetime is a subclass of date: a date column takes a date, never a datetime.
    if not isinstance(value, expected[family]) or (
        family == "date" and isinstance(value, dt.datetime)
    ):
        raise SchemaMismatch(f"default {value!r} of column {name!r} is not a {type_text}{why}")
    try:
        typed = pa.scalar(value, type=arrow_type).as_py()
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError, OverflowError) as e:
        raise SchemaMismatch(
            f"default {value!r} of column {name!r} is not a {type_text}{why} ({e})"
        ) from e
    if typed != value:
        raise SchemaMismatch(
            f"default {value!r} of column {name!r} is not a {type_text}: it holds more "
            f"precision than the column keeps ({typed!r}){why}"
        )
    return typed


def default_to_json(arrow_type: pa.DataType, value: Any) -> Any:
    """The JSON form of a canonical default (see :func:`canonical_default`)."""
    import pyarrow as pa

    if value is None or not is_text_encoded(arrow_type):
        return value
    if pa.types.is_date32(arrow_type):
        return str(value.isoformat())
    if pa.types.is_decimal(arrow_type):
        return str(value)
    return _timestamp_text(arrow_type, value)


def _timestamp_text(arrow_type: pa.TimestampType, value: Any) -> str:
    """ISO-8601 with exactly the unit's fractional digits; a zoned column's instant in UTC.

    Built from the stored integer, not from ``datetime``, so nanoseconds survive.
    """
    import pyarrow as pa

    raw = pa.scalar(value, type=arrow_type).cast(pa.int64()).as_py()
    unit = arrow_type.unit
    seconds, fraction = divmod(raw, _PER_SECOND[unit])
    text = (_EPOCH + dt.timedelta(seconds=seconds)).isoformat(timespec="seconds")
    if _FRACTION_DIGITS[unit]:
        text += f".{fraction:0{_FRACTION_DIGITS[unit]}d}"
    return text + ("Z" if arrow_type.tz is not None else "")
