"""Which row versions a full compaction must keep, given the protected times.

A data version (pk, a) superseded at b (the key's next event after it) is
needed iff some protected time p has a <= p < b; a version never superseded
is needed by "now". A tombstone at d is needed iff a version of its key older
than d is still kept; with nothing older left it hides nothing at any time.
The decision is made over every event of the table at once (all objects,
both kinds, every schema), because a version in one object can be superseded
by an event in another.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tenants.mvcc import IS_DATA
from tenants.objects.record import ObjectKind
from tenants.schema import TS, TableSchema
from tenants.timeline.protection import Protection

NEVER = np.iinfo(np.int64).max
_SRC = "__src"
_ROW = "__row"
# Bump it whenever the rule (keep_sorted, Protection.needed) changes what it keeps:
# every measurement GC kept (keep_digest) is then stale and measured again.
RULE_VERSION = 1


def keep_digest(protection: Protection, until: int) -> str:
    """What the protected times decide for a table whose rows are all at or before
    ``until``, as a digest: two protections with the same digest make a full
    compaction keep exactly the same versions and tombstones of such a table.

    A version born at ``a`` and superseded at ``b`` has ``a, b <= until`` (both
    are ts of the table's rows), or is never superseded and always kept. So a
    snapshot at or after ``until`` protects none of them; nor does the PITR
    window or "now" (``[current_from, now]``) once it starts at or after
    ``until``; and an end past ``until`` reads as ``until``. Anything else
    (a snapshot before ``until`` dropped, a window start moving below it)
    changes the digest, added times as well as removed ones (a wall clock
    stepping back moves the window back). "Now" starts at the tenant's last
    change, never before a table's rows, so an idle table's digest stops
    changing once the window has moved past its newest row: GC then reuses
    what it measured (engine/gc/reclaim.py).
    """
    now = (
        (min(protection.now, until), protection.current_from)
        if protection.current_from < until
        else None
    )
    window = None
    if protection.window is not None and protection.window[0] < until:
        window = (min(protection.window[1], until), protection.window[0])
    points = [p for p in protection.points if p < until]
    decisive = (RULE_VERSION, now, window, points)
    return hashlib.sha256(repr(decisive).encode()).hexdigest()


def keep_masks(
    objects: Sequence[tuple[ObjectKind, pa.Table]], schema: TableSchema, protection: Protection
) -> list[np.ndarray]:
    """One boolean mask per object: which of its rows a full compaction keeps."""
    key_schema = schema.key_arrow()
    pk = list(schema.primary_key)
    parts = []
    for index, (kind, rows) in enumerate(objects):
        n = rows.num_rows
        columns = [rows.column(f.name).cast(f.type) for f in key_schema]
        columns += [
            rows.column(TS).cast(pa.int64()),
            pa.array(np.full(n, kind == "data")),
            pa.array(np.full(n, index, dtype=np.int64)),
            pa.array(np.arange(n, dtype=np.int64)),
        ]
        parts.append(pa.Table.from_arrays(columns, names=pk + [TS, IS_DATA, _SRC, _ROW]))
    if not parts:
        return []
    events = pa.concat_tables(parts)
    order = [(k, "ascending") for k in pk] + [(TS, "ascending"), (IS_DATA, "ascending")]
    events = events.sort_by(order)
    keep = keep_sorted(events, pk, protection)

    masks = [np.zeros(rows.num_rows, dtype=bool) for _, rows in objects]
    src = events.column(_SRC).to_numpy()
    row = events.column(_ROW).to_numpy()
    for index, mask in enumerate(masks):
        mine = src == index
        mask[row[mine]] = keep[mine]
    return masks


def keep_sorted(events: pa.Table, pk: Sequence[str], protection: Protection) -> np.ndarray:
    """Which events to keep, for events sorted by (pk, ts, data after tombstone)
    that hold every event of each of their keys (a whole table, or a merge round)."""
    n = events.num_rows
    same_as_next = _same_key_as_next(events, list(pk))
    ts = events.column(TS).to_numpy()
    is_data = events.column(IS_DATA).to_numpy(zero_copy_only=False)
    next_ts = np.full(n, NEVER, dtype=np.int64)
    next_ts[:-1] = np.where(same_as_next, ts[1:], NEVER)
    keep = np.where(is_data, protection.needed(ts, next_ts), False)

    # Kept data versions strictly before each row, within its key.
    kept_data = (keep & is_data).astype(np.int64)
    before = np.cumsum(kept_data) - kept_data
    starts = np.ones(n, dtype=bool)
    starts[1:] = ~same_as_next
    key_index = np.cumsum(starts) - 1
    before_in_key = before - before[np.flatnonzero(starts)][key_index]
    return np.where(is_data, keep, before_in_key > 0)


def _same_key_as_next(events: pa.Table, pk: list[str]) -> np.ndarray:
    n = events.num_rows
    same = np.ones(max(n - 1, 0), dtype=bool)
    for key in pk:
        column = events.column(key).combine_chunks()
        equal = pc.equal(column.slice(0, n - 1), column.slice(1))
        same &= equal.to_numpy(zero_copy_only=False)
    return same
