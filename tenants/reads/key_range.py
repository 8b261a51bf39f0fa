"""A range or a set of primary keys, and how a read skips what lies outside it.

``query --from K --to K`` reads the keys in [from, to] (both inclusive,
compared as tuples: the first key column, then the next). Three levels of
skipping, coarse to fine, so a narrow range of a huge table reads little:

- objects: the catalog records each object's first and last key; an object
  wholly outside the range is never opened;
- row groups: Parquet keeps min/max statistics per row group; a group whose
  first key column lies wholly outside the range is never read;
- rows: what is read is filtered to the range before the merge.

A :class:`KeySet` (point reads of whole keys) skips at the same three levels;
both are a :class:`KeyFilter`, which is all a read asks of them.
"""

from __future__ import annotations

import dataclasses
import json
import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tenants.errors import InvalidArgument
from tenants.objects.record import ObjectRecord
from tenants.reads.merge import typed_key


class KeyFilter(Protocol):
    """What a read asks of a key filter, coarse to fine (see the module doc).

    Each level may keep more than it must (the next one decides), never less.
    """

    def may_hold(self, record: ObjectRecord, key_schema: pa.Schema) -> bool: ...

    def row_groups(self, parquet: pq.ParquetFile, first_key: str) -> list[int] | None: ...

    def mask(self, rows: pa.Table, keys: Sequence[str]) -> pa.Array: ...


@dataclass(frozen=True)
class KeyRange:
    """Keys from ``low`` to ``high`` (tuples of key values; None: unbounded)."""

    low: tuple[Any, ...] | None = None
    high: tuple[Any, ...] | None = None

    @classmethod
    def parse(
        cls,
        low: str | None,
        high: str | None,
        key_schema: pa.Schema,
        option: str = "--from/--to",
    ) -> KeyRange | None:
        """From the command line: a value (one key column) or a JSON list (several);
        ``option`` names where the bounds came from in errors."""
        if low is None and high is None:
            return None
        return cls(_parse_key(low, key_schema, option), _parse_key(high, key_schema, option))

    def may_hold(self, record: ObjectRecord, key_schema: pa.Schema) -> bool:
        """False only if the object's recorded keys all lie outside the range.

        The recorded first and last keys are read back as typed values
        (tenants.reads.merge.typed_key); where JSON cannot say a key exactly (decimals,
        bytes, times are recorded as text that need not sort like them), the
        object is read. A bound shorter than the key is a prefix: its keys are
        the ones that start with it, so only as many columns are compared.
        """
        first = typed_key(record.min_pk, key_schema)
        last = typed_key(record.max_pk, key_schema)
        if first is None or last is None:
            return True
        try:
            if self.high is not None and first[: len(self.high)] > self.high:
                return False
            return not (self.low is not None and last[: len(self.low)] < self.low)
        except TypeError:
            return True  # a bound of another type than the key: let the rows decide

    def row_groups(self, parquet: pq.ParquetFile, first_key: str) -> list[int] | None:
        """Row groups whose first key column may hold keys in range (None: all)."""
        metadata = parquet.metadata
        index = parquet.schema_arrow.get_field_index(first_key)
        if index < 0:
            return None
        kept = []
        for group in range(metadata.num_row_groups):
            stats = metadata.row_group(group).column(index).statistics
            if stats is None or not stats.has_min_max:
                kept.append(group)
                continue
            try:
                if self.high is not None and stats.min > self.high[0]:
                    continue
                if self.low is not None and stats.max < self.low[0]:
                    continue
            except TypeError:
                pass
            kept.append(group)
        return kept

    def mask(self, rows: pa.Table, keys: Sequence[str]) -> pa.Array:
        """True on the rows whose key lies in the range."""
        inside = pa.repeat(pa.scalar(True), rows.num_rows)
        if self.low is not None:
            inside = pc.and_(inside, _compare(rows, keys, self.low, pc.greater))
        if self.high is not None:
            inside = pc.and_(inside, _compare(rows, keys, self.high, pc.less))
        return inside


@dataclass(frozen=True)
class KeySet:
    """Whole primary keys, sorted and unique: a read of exactly those keys.

    ``table`` holds the key columns in key order, sorted as reads sort; the
    same keys are kept as Python tuples (and the distinct first-column values)
    so objects and row groups are pruned by bisection, not by a scan of the set.
    """

    table: pa.Table
    _keys: list[tuple[Any, ...]] = dataclasses.field(repr=False, compare=False)
    _firsts: list[Any] = dataclasses.field(repr=False, compare=False)
    # A NaN orders against nothing, so bisection cannot place it: prune nothing.
    _unordered: bool = dataclasses.field(repr=False, compare=False)

    @classmethod
    def of(cls, keys: pa.Table, primary_key: Sequence[str]) -> KeySet:
        """The distinct keys of ``keys`` (which must hold every ``primary_key``
        column; other columns are ignored). A key with a null is dropped: no
        row's key is null, so it could match nothing.

        Raises:
            InvalidArgument: a primary-key column is missing from ``keys``.
        """
        missing = [k for k in primary_key if k not in keys.column_names]
        if missing or not primary_key:
            raise InvalidArgument(
                f"key set: give a table with the key column(s) {', '.join(primary_key)}; "
                f"it has {', '.join(keys.column_names) or 'none'}"
            )
        pk = list(primary_key)
        unique = keys.select(pk).drop_null().group_by(pk, use_threads=False).aggregate([])
        table = unique.select(pk).sort_by([(k, "ascending") for k in pk])
        rows = list(zip(*(table.column(k).to_pylist() for k in pk), strict=True))
        firsts = [
            v
            for i, v in enumerate(table.column(pk[0]).to_pylist())
            if i == 0 or rows[i - 1][0] != v
        ]
        unordered = any(v != v for row in rows for v in row)
        return cls(table, rows, firsts, unordered)

    def __len__(self) -> int:
        return len(self._keys)

    def may_hold(self, record: ObjectRecord, key_schema: pa.Schema) -> bool:
        """False only if no key of the set lies between the object's recorded first
        and last keys (read back as :meth:`KeyRange.may_hold` does)."""
        first = typed_key(record.min_pk, key_schema)
        last = typed_key(record.max_pk, key_schema)
        if first is None or last is None or self._unordered:
            return True
        try:
            at = bisect_left(self._keys, first)
            return at < len(self._keys) and self._keys[at] <= last
        except TypeError:
            return True  # keys of another type than the table's: let the rows decide

    def row_groups(self, parquet: pq.ParquetFile, first_key: str) -> list[int] | None:
        """Row groups whose first key column's min/max may hold a key of the set (None: all)."""
        index = parquet.schema_arrow.get_field_index(first_key)
        if index < 0 or self._unordered:
            return None
        metadata = parquet.metadata
        kept = []
        for group in range(metadata.num_row_groups):
            stats = metadata.row_group(group).column(index).statistics
            if stats is not None and stats.has_min_max:
                try:
                    at = bisect_left(self._firsts, stats.min)
                    if at == len(self._firsts) or self._firsts[at] > stats.max:
                        continue
                except TypeError:
                    pass
            kept.append(group)
        return kept

    def mask(self, rows: pa.Table, keys: Sequence[str]) -> pa.Array:
        """True on the rows whose whole key is in the set, in the rows' order."""
        wanted = self.table.cast(pa.schema([(k, rows.column(k).type) for k in keys]))
        if len(keys) == 1:
            found = pc.is_in(rows.column(keys[0]), value_set=wanted.column(0), skip_nulls=True)
            return pc.fill_null(found, False)
        # Several columns: Arrow has no is_in over tuples, but a semi join finds the
        # matching rows (nulls match nothing) and their indices give the mask back in order.
        indexed = rows.select(list(keys)).append_column("__row", pa.array(np.arange(rows.num_rows)))
        matched = indexed.join(wanted, keys=list(keys), join_type="left semi").column("__row")
        return pc.is_in(indexed.column("__row"), value_set=matched.combine_chunks())


def _compare(rows: pa.Table, keys: Sequence[str], bound: tuple[Any, ...], strict: Any) -> Any:
    """Rows whose key is ``strict`` than ``bound`` or equal to it, lexicographically
    over the bound's columns (a shorter bound is a prefix)."""
    pairs = list(zip(keys, bound, strict=False))
    result = None
    for key, value in reversed(pairs):
        column = rows.column(key)
        scalar = pa.scalar(value, column.type)
        equal = pc.equal(column, scalar)
        tail = equal if result is None else pc.and_(equal, result)
        result = pc.or_(strict(column, scalar), tail)
    return result


_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError)


def exact_bound(value: Any, field: pa.Field, bound: Any, where: str) -> Any:
    """``value`` as a value of key column ``field``, only if it is that value exactly.

    Arrow's conversions are lenient where a bound must not be: ``1.5`` becomes
    the int64 ``1`` (and the range silently moves), ``True`` passes for the
    bool-like ``1``, NaN compares false with everything. A bound is a question
    about keys, so one that no key of this type could equal or order against
    exactly is refused rather than rounded: an int key takes ints (and integral
    floats), in its type's range; a float key takes numbers it holds exactly,
    never NaN; a bool key takes bools only; no other key takes a float or a bool.

    Args:
        value: one value of the bound (one key column's).
        field: the key column.
        bound: the whole bound, as given (for the error).
        where: what is read, e.g. "table acme/shop.orders" (for the error).

    Raises:
        InvalidArgument: names the column, its type and the bound.
    """
    kind = field.type

    def refuse(why: str, hint: str = "give a value of that type") -> InvalidArgument:
        return InvalidArgument(
            f"key bound {bound!r} of {where}: {value!r} {why} for key column "
            f"{field.name!r} ({kind}); {hint}"
        )

    if value is None:
        raise refuse("is null", "a key is never null: leave the end out (None) instead")
    if isinstance(value, bool) != pa.types.is_boolean(kind):
        raise refuse(f"is not a {kind}")
    if isinstance(value, float):
        if math.isnan(value):
            raise refuse("is NaN, which orders against no key")
        if pa.types.is_integer(kind):
            if not value.is_integer():
                raise refuse("is not a whole number")
            value = int(value)
        elif not pa.types.is_floating(kind):
            raise refuse(f"is not a {kind}")
    try:
        typed = pa.scalar(value, kind).as_py()
    except (*_ARROW_ERRORS, TypeError, ValueError, OverflowError) as e:
        raise refuse(f"is not a {kind}") from e
    numeric = pa.types.is_integer(kind) or pa.types.is_floating(kind)
    if numeric and typed != value:  # float32 rounding, a wrapped int: not this value
        raise refuse(f"does not fit a {kind} exactly")
    return typed


def _parse_key(
    text: str | None, key_schema: pa.Schema, option: str = "--from/--to"
) -> tuple[Any, ...] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = text  # a bare word: one text key column
    values = value if isinstance(value, list) else [value]
    if not 1 <= len(values) <= len(key_schema):
        raise InvalidArgument(
            f"invalid key {text!r}: give up to {len(key_schema)} value(s) for "
            f"({', '.join(key_schema.names)}), as a JSON list when more than one"
        )
    parsed = []
    for field, raw in zip(key_schema, values, strict=False):
        if isinstance(raw, str) and not pa.types.is_string(field.type):
            # Text for a typed column (a time, a date, a decimal): Arrow's safe
            # cast parses it and refuses what does not fit ("1.5" as int64).
            try:
                raw = pa.array([raw]).cast(field.type)[0].as_py()
            except _ARROW_ERRORS as e:
                raise InvalidArgument(
                    f"key bound {text!r} of {option}: {raw!r} is not a {field.type} for key "
                    f"column {field.name!r} ({field.type}); give a value of that type"
                ) from e
        parsed.append(exact_bound(raw, field, text, option))
    return tuple(parsed)
