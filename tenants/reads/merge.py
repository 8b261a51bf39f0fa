"""A k-way merge of sorted objects, in rounds of complete keys, in bounded memory.

Every object is stored in (pk, ts) order, so a table's events can be merged
without sorting the table: each input contributes one buffered batch at a
time, and a round takes, from every input, the rows whose key is below the
*frontier*, the smallest last key among the inputs that still have rows to
come. No unseen row can have a key below it, so a round holds every event of
each of its keys, which is what MVCC decisions need (the newest version at or
before T, a tombstone hiding older versions). Rows of the frontier key wait
for the next round; an input whose buffer holds only that key reads on until
it passes it.

A round's events (key columns, ``__ts``, kind, input, position) are sorted
once, across inputs, in a table no larger than a batch per input. Memory is
the inputs' buffers: callers bound it by the number of inputs they merge at
once (the fan-in) and the batch size they read with.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tenants.mvcc import IS_DATA
from tenants.objects.record import ObjectKind
from tenants.schema import TS

SRC = "__src"
POS = "__pos"


@dataclass(frozen=True)
class MergeInput:
    """One sorted input: its kind and its batches (with ``__ts``).

    ``batches`` may be a callable that opens the input: with ``first_key`` (no
    row of it sorts before that key) it is called only when the merge reaches
    that key, so inputs that do not overlap (a compacted table's objects) are
    read one after another, not all at once.
    """

    kind: ObjectKind
    batches: Iterator[pa.RecordBatch] | Callable[[], Iterator[pa.RecordBatch]]
    first_key: tuple[Any, ...] | None = None


@dataclass(frozen=True)
class Round:
    """The rows one round took from each input (``taken[i]``, sorted, maybe empty)
    and their events: the key columns, ``__ts``, ``__is_data``, ``__src`` (input)
    and ``__pos`` (row in ``taken[src]``), sorted by (pk, ts, data after tombstone)."""

    taken: list[pa.Table | None]
    events: pa.Table


def _key_at(table: pa.Table, keys: Sequence[str], index: int) -> tuple[object, ...]:
    return tuple(table.column(k)[index].as_py() for k in keys)


def _count_below(table: pa.Table, keys: Sequence[str], frontier: tuple[object, ...]) -> int:
    """Leading rows of the sorted ``table`` whose key is below ``frontier`` (bisection)."""
    low, high = 0, table.num_rows
    while low < high:
        middle = (low + high) // 2
        if _key_at(table, keys, middle) < frontier:
            low = middle + 1
        else:
            high = middle
    return low


def _integer_key(key_schema: pa.Schema) -> bool:
    """A key of one integer column: bounds and cuts are found in a numpy copy of
    it (the common case, and the one where per-row ``as_py`` costs the most)."""
    return len(key_schema) == 1 and pa.types.is_integer(key_schema[0].type)


class _Buffer:
    def __init__(self, source: MergeInput, keys: Sequence[str], integer_key: bool) -> None:
        self.source = source
        self.keys = keys
        self.rows: pa.Table | None = None
        self.ended = False
        # The key column as numpy, row for row with ``rows`` (integer keys only).
        self._key: np.ndarray | None = None
        self._integer_key = integer_key
        self._batches: Iterator[pa.RecordBatch] | None = None
        # Opened now unless it says where it starts.
        self.opened = source.first_key is None or not callable(source.batches)
        if self.opened:
            self._open()

    def _open(self) -> None:
        batches = self.source.batches
        self._batches = batches() if callable(batches) else batches
        self.opened = True

    def fill(self) -> None:
        """Append the next non-empty batch, or mark the input ended."""
        if self._batches is None:
            self._open()
        assert self._batches is not None
        for batch in self._batches:
            if batch.num_rows:
                more = pa.Table.from_batches([batch])
                self.rows = more if self.rows is None else pa.concat_tables([self.rows, more])
                if self._integer_key:
                    key = batch.column(self.keys[0]).to_numpy()
                    self._key = key if self._key is None else np.concatenate([self._key, key])
                return
        self.ended = True

    @property
    def empty(self) -> bool:
        return self.rows is None or self.rows.num_rows == 0

    def key_at(self, index: int) -> tuple[object, ...]:
        assert self.rows is not None
        if self._key is not None:
            return (int(self._key[index]),)
        return _key_at(self.rows, self.keys, index)

    def count_below(self, frontier: tuple[object, ...]) -> int:
        """Leading rows whose key is below ``frontier``."""
        assert self.rows is not None
        if self._key is not None:
            return int(np.searchsorted(self._key, cast(int, frontier[0]), side="left"))
        return _count_below(self.rows, self.keys, frontier)

    def take(self, count: int | None) -> pa.Table | None:
        """The first ``count`` rows (all: None), removed from the buffer."""
        if self.rows is None or count == 0:
            return None
        if count is None or count >= self.rows.num_rows:
            taken, self.rows, self._key = self.rows, None, None
            return taken
        taken, self.rows = self.rows.slice(0, count), self.rows.slice(count)
        if self._key is not None:
            self._key = self._key[count:]
        return taken


def merge_rounds(inputs: Sequence[MergeInput], key_schema: pa.Schema) -> Iterator[Round]:
    """Rounds of complete keys, in key order, over ``inputs`` (see the module doc).

    ``key_schema``: the primary key columns and their types now; each input's
    key columns are cast to them, so inputs written under older schemas compare.
    """
    keys = key_schema.names
    integer_key = _integer_key(key_schema)
    buffers = [_Buffer(source, keys, integer_key) for source in inputs]
    unopened = sorted(
        (b for b in buffers if not b.opened),
        key=lambda b: b.source.first_key,  # type: ignore[arg-type,return-value]
        reverse=True,  # the next to open last, so pop() takes it
    )
    while True:
        for buffer in buffers:
            if buffer.opened and buffer.empty and not buffer.ended:
                buffer.fill()
        live = [b for b in buffers if b.opened and not b.empty]
        if not live and not unopened:
            return
        waiting = [b for b in live if not b.ended]
        bounds = [b.key_at(b.rows.num_rows - 1) for b in waiting if b.rows is not None]
        if unopened:
            bounds.append(unopened[-1].source.first_key)  # type: ignore[arg-type]
        # No unseen row sorts below the frontier: not in a waiting input (its
        # buffer ends at or after it), not in an unopened one (it starts there).
        frontier = min(bounds) if bounds else None
        counts = [
            None if frontier is None or b.rows is None or not b.opened else b.count_below(frontier)
            for b in buffers
        ]
        if frontier is not None and not any(counts):
            # Nothing below the frontier: open the inputs that start at it, and
            # read on wherever a buffer holds nothing but that key.
            while unopened and unopened[-1].source.first_key <= frontier:  # type: ignore[operator]
                unopened.pop().fill()
            for b in waiting:
                assert b.rows is not None
                if b.key_at(0) == frontier:
                    b.fill()
            continue
        taken = [
            b.take(c) if b.opened and not b.empty else None
            for b, c in zip(buffers, counts, strict=True)
        ]
        yield Round(taken, _events(taken, inputs, key_schema))


def typed_key(text: str, key_schema: pa.Schema) -> tuple[Any, ...] | None:
    """A key as the catalog records it (JSON) in the values batches compare with,
    or None when JSON cannot say it exactly (then the input opens at once): only
    integer, float, text and date keys are read back; anything else (bytes,
    times, decimals) is written to JSON as text that need not sort like it."""
    if not all(_exact_in_json(f.type) for f in key_schema):
        return None
    try:
        values = json.loads(text)
        if not isinstance(values, list) or len(values) != len(key_schema):
            return None
        return tuple(
            pa.array([v]).cast(f.type)[0].as_py() for f, v in zip(key_schema, values, strict=True)
        )
    except (ValueError, TypeError, pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _exact_in_json(kind: pa.DataType) -> bool:
    return (
        pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_date32(kind)
    )


def overlap_depth(
    ranges: Sequence[tuple[tuple[Any, ...] | None, tuple[Any, ...] | None]],
) -> int:
    """The most key ranges any one key falls in: how many inputs a merge that
    opens them lazily holds at once (an unknown bound counts as everywhere)."""
    if any(low is None or high is None for low, high in ranges):
        return len(ranges)
    points = sorted([(low, 0) for low, _ in ranges] + [(high, 1) for _, high in ranges])
    depth = best = 0
    for _, closing in points:  # at equal keys, openings (0) count before closings (1)
        depth += -1 if closing else 1
        best = max(best, depth)
    return best


def _events(
    taken: Sequence[pa.Table | None], inputs: Sequence[MergeInput], key_schema: pa.Schema
) -> pa.Table:
    present = [(i, rows) for i, rows in enumerate(taken) if rows is not None and rows.num_rows]
    counts = np.array([rows.num_rows for _, rows in present], dtype=np.int64)
    sources = np.array([i for i, _ in present], dtype=np.int32)
    starts = np.cumsum(counts) - counts
    total = int(counts.sum())

    def column(name: str, kind: pa.DataType) -> pa.Array:
        chunks = [c for _, rows in present for c in _as(rows.column(name), kind).chunks]
        return pa.chunked_array(chunks, type=kind).combine_chunks()

    columns: list[pa.Array | np.ndarray] = [column(f.name, f.type) for f in key_schema]
    columns += [
        column(TS, pa.int64()),
        np.repeat(np.array([inputs[i].kind == "data" for i, _ in present]), counts),
        np.repeat(sources, counts),
        np.arange(total, dtype=np.int64) - np.repeat(starts, counts),
    ]
    names = [*key_schema.names, TS, IS_DATA, SRC, POS]
    if len(present) > 1:  # one input's rows are already in (pk, ts) order
        order = _event_order(columns, key_schema)
        columns = [c[order] if isinstance(c, np.ndarray) else c.take(order) for c in columns]
    return pa.Table.from_arrays([pa.array(c) for c in columns], names=names)


def _as(column: pa.ChunkedArray, kind: pa.DataType) -> pa.ChunkedArray:
    return column if column.type == kind else column.cast(kind)


def _event_order(columns: Sequence[pa.Array | np.ndarray], key_schema: pa.Schema) -> np.ndarray:
    """The order of (pk, ts, data after tombstone, input, row) over the event
    ``columns`` (keys, ts, is-data, ...): a stable sort, so input and row, the
    order the events were gathered in, need not be compared.

    An integer key is sorted alone by numpy (several times faster than a
    sort on four columns); the versions of a key then stand in input order, which
    is ts order when the inputs are ordered by time, as a compaction orders them.
    When they are not, the full sort decides.
    """
    width = len(key_schema)
    ts = columns[width].to_numpy()  # type: ignore[union-attr]
    data = columns[width + 1]
    if _integer_key(key_schema):
        key = columns[0].to_numpy()  # type: ignore[union-attr]
        order = np.argsort(key, kind="stable")
        key = key[order]
        same = key[1:] == key[:-1]
        if not same.any():
            return order
        stamps = ts[order]
        later, earlier = stamps[1:], stamps[:-1]
        flags = data[order]  # type: ignore[index]
        back = same & ((later < earlier) | ((later == earlier) & (flags[1:] < flags[:-1])))
        if not back.any():
            return order
    table = pa.Table.from_arrays(
        [*columns[: width + 1], pa.array(data)], names=[*key_schema.names, TS, IS_DATA]
    )
    keys = [(k, "ascending") for k in key_schema.names]
    order = pc.sort_indices(table, sort_keys=[*keys, (TS, "ascending"), (IS_DATA, "ascending")])
    return order.to_numpy()  # type: ignore[no-any-return]


def gather(
    round_: Round, events: pa.Table, sources: Sequence[int], schema: pa.Schema
) -> pa.Table | None:
    """The rows behind ``events`` that came from ``sources`` (inputs sharing
    ``schema``), in the events' order."""
    src = events.column(SRC).to_numpy()
    pos = events.column(POS).to_numpy()
    member = np.zeros(len(round_.taken), dtype=bool)
    member[list(sources)] = True
    mine = member[src]
    if not mine.any():
        return None
    offsets = np.zeros(len(member), dtype=np.int64)
    tables = []
    total = 0
    for index in sources:
        rows = round_.taken[index]
        if rows is None or rows.num_rows == 0:
            continue
        offsets[index] = total
        tables.append(_conform(rows, schema))
        total += rows.num_rows
    # One contiguous table: take from 60 chunks costs about twice the copy.
    combined = pa.concat_tables(tables).combine_chunks()
    return combined.take(pa.array(offsets[src[mine]] + pos[mine]))


def _conform(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """``rows`` with ``schema``'s field types and nullability (same columns)."""
    if rows.schema.equals(schema):
        return rows
    return rows.select(schema.names).cast(schema)
