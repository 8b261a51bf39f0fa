"""Model-based test of diff and revert (tenants.changes.diff, tenants.changes.revert).

Hypothesis generates histories of one table ``db.t`` of tenant ``src`` (a PITR
window of a day, so every time is protected while it is on), keyed by an int,
a string or an (int, string) pair, over a key space of six keys, so keys
collide: upserts (often of the values a key already has), writes of exactly
what is there, deletes (of absent keys too), updates (a delete and an upsert
of one key in one commit), bulk writes of up to 90 keys (objects of several
batches and row groups), columns
added (nullable or not, with or without a default that writes also use) and
dropped, partial and full compactions, snapshots made and dropped, PITR turned
off and on (the change log before the horizon is forgotten by the next GC:
diffs from before it scan, reverts before it are refused), GC with no grace,
table restores in place (a new table id: diffs across it scan, reverts across
it are refused), writes to a second table, and reverts (conflicting or not,
refused or skipping, dry runs, and reverts of the revert). Some histories cut
the change log's keys into chunks of one or three keys.

The model maps ``db.t`` to *segments* (one per table id, from its create or
restore install ts), each an oracle table (tests/helpers/oracle.py) with its
schema versions; a row reads a column it was written without as the column's
default. Properties:

1. a diff between protected times A <= B is the difference of the oracle's
   two states by key (kinds, keys, before/after values per the schema rules
   of docs/diff.md), sorted by key; it scans when A and B read different
   table ids, and takes the change log whenever the table id is the same and
   no GC forgot the log from A on;
2. ``revert(c, skip_conflicts=True)`` reports as conflicts exactly the keys c
   changed that have an event after c, puts every other key c changed back
   to "the history without c" and leaves the rest as they were; without
   ``skip_conflicts`` and with conflicts it raises RevertConflict and writes
   nothing; a revert is refused (and writes nothing) exactly when the time
   before c is unprotected or the log no longer reaches c;
3. reverting the revert's own commit reads as before the revert;
4. bad inputs (unknown commit ts, a create/alter/restore commit, a commit of
   another table or of the table a restore replaced, A after B, an
   unprotected A) raise one error and write nothing.

Two bugs it found have regression tests below: a diff to "now" from a protected
time after the last commit was refused, and a revert of a commit whose own ts
is unprotected missed conflicts after a full compaction. Counts of what was
exercised are printed at the end (``-s``).
"""

from __future__ import annotations

import functools
import os
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import pyarrow as pa
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from engine.gc.run import run_gc
from engine.restore.tables import restore_table
from tenants.catalog.base import wall_clock_us
from tenants.changes import diff as diff_module
from tenants.changes.diff import CHUNK_KEYS, plan_diff
from tenants.compaction import DEFAULT_TARGET_BYTES
from tenants.errors import InvalidArgument, NotFound, RevertConflict, UnprotectedTime
from tenants.objectstore.embedded import EmbeddedS3
from tenants.schema import Column, TableSchema
from tenants.store import TableStore
from tests.conftest import ManualClock
from tests.helpers.oracle import ModelTable, Oracle
from tests.helpers.restores import catalog_rows

DEEP = os.environ.get("HYPOTHESIS_PROFILE", "ci") == "deep"
MAX_STEPS = 40 if DEEP else 18
END_PAIRS = 24 if DEEP else 8  # random (A, B) diffs checked at the end of each history
SRC = "src"
TABLE, OTHER = "db.t", "db.other"
DAY_US = 86_400_000_000
TICK_US = 1_000  # how far the catalog clock moves between steps (unless a step says not)
KEYS = 6

# The primary keys a history's table may have: an int, a string (sorted as bytes:
# "k10" < "k2"), or an (int, string) pair; key i of a write is KEY_OF[kind](i).
KEY_COLUMNS = {
    "int": [("id", "int64")],
    "str": [("k", "string")],
    "pair": [("id", "int64"), ("k", "string")],
}
KEY_OF: dict[str, Callable[[int], dict[str, Any]]] = {
    "int": lambda i: {"id": i},
    "str": lambda i: {"k": f"k{i}"},
    "pair": lambda i: {"id": i // 2, "k": "ba"[i % 2]},
}
OTHER_SCHEMA = TableSchema.of([("id", "int64"), ("x", "string")], ["id"])
STRINGS = ("a", "d", None)
INTS = (0, 7, None)

COUNTS: Counter[str] = Counter()

Key = tuple[Any, ...]
Values = dict[str, Any]
State = dict[Key, Values]


def value(column: Column, seed: int) -> Any:
    """A small value of the column's type (so equal values are frequent), never null
    in a NOT NULL column; ``"d"`` and ``7`` are also the defaults columns get."""
    choices = STRINGS if column.type == "string" else INTS
    picked = choices[seed % 3]
    return choices[0] if picked is None and not column.nullable else picked


# --- operations -------------------------------------------------------------------------


@dataclass(frozen=True)
class Write:
    upserts: tuple[tuple[int, int, int], ...]  # (key, seed, seed): values per column
    deletes: tuple[int, ...]
    tick: bool = True  # False: the commit lands at the previous ts + 1


@dataclass(frozen=True)
class Bulk:
    start: int
    count: int
    seed: int
    delete: bool


@dataclass(frozen=True)
class Touch:
    """Upsert keys with the values they have and delete absent ones: events that change
    nothing (no diff row), yet make a later revert of those keys conflict."""

    keys: tuple[int, ...]


@dataclass(frozen=True)
class WriteOther:
    key: int


@dataclass(frozen=True)
class AddColumn:
    type: str
    nullable: bool
    with_default: bool


@dataclass(frozen=True)
class DropColumn:
    pick: int


@dataclass(frozen=True)
class Compact:
    full: bool
    target_bytes: int


@dataclass(frozen=True)
class Snapshot:
    pass


@dataclass(frozen=True)
class SnapshotAt:
    """A snapshot of an earlier protected time (PITR on): a protected time that
    outlives the window, and (as the newest snapshot) the change horizon without it."""

    pick: int


@dataclass(frozen=True)
class DropSnapshot:
    pick: int


@dataclass(frozen=True)
class Pitr:
    on: bool


@dataclass(frozen=True)
class Gc:
    pass


@dataclass(frozen=True)
class Restore:
    point: int  # among the protected times the table existed, from the newest back


@dataclass(frozen=True)
class Diff:
    a: int
    b: int | None  # None: to now


@dataclass(frozen=True)
class Revert:
    pick: int  # among the live table's write commits, from the newest back
    skip: bool
    dry_run: bool
    undo: bool  # then revert the revert's own commit


@dataclass(frozen=True)
class Bad:
    kind: int
    pick: int


Op = (
    Write
    | Bulk
    | Touch
    | SnapshotAt
    | WriteOther
    | AddColumn
    | DropColumn
    | Compact
    | Snapshot
    | DropSnapshot
    | Pitr
    | Gc
    | Restore
    | Diff
    | Revert
    | Bad
)

seeds = st.integers(0, 2)
upserts = st.lists(
    st.tuples(st.integers(0, KEYS - 1), seeds, seeds), max_size=4, unique_by=lambda r: r[0]
).map(tuple)
deletes = st.lists(st.integers(0, KEYS - 1), max_size=2, unique=True).map(tuple)
writes = st.builds(Write, upserts, deletes, st.booleans())
picks = st.integers(0, 30)
ops = st.one_of(
    writes,
    writes,
    writes,
    writes,
    st.builds(
        Bulk, st.integers(0, 40), st.integers(1, 90), seeds, st.sampled_from([False, False, True])
    ),
    st.builds(
        Touch, st.lists(st.integers(0, KEYS - 1), min_size=1, max_size=3, unique=True).map(tuple)
    ),
    st.builds(WriteOther, st.integers(0, 2)),
    st.builds(AddColumn, st.sampled_from(["int64", "string"]), st.booleans(), st.booleans()),
    st.builds(DropColumn, picks),
    st.builds(Compact, st.booleans(), st.sampled_from([1, 1_500, DEFAULT_TARGET_BYTES])),
    st.just(Snapshot()),
    st.builds(SnapshotAt, picks),
    st.builds(DropSnapshot, picks),
    st.builds(Pitr, st.booleans()),
    st.just(Gc()),
    st.builds(Restore, picks),
    st.builds(Diff, picks, st.none() | picks),
    st.builds(Diff, picks, picks),
    st.builds(Revert, picks, st.booleans(), st.booleans(), st.booleans()),
    st.builds(Revert, st.integers(0, 3), st.booleans(), st.just(False), st.booleans()),
    st.builds(Revert, picks, st.booleans(), st.just(False), st.just(True)),
    st.builds(Bad, st.integers(0, 4), picks),
)


@st.composite
def histories(draw: st.DrawFn) -> list[Op]:
    """Writes first, then free operations around a snapshot; most histories then
    turn PITR off and collect (the log before the horizon is forgotten: diffs
    from before it scan, reverts before it are refused), and most turn it on again."""
    part = st.lists(ops, min_size=MAX_STEPS // 6, max_size=MAX_STEPS // 3)
    first = draw(st.lists(st.builds(Write, upserts.filter(bool), deletes), min_size=1, max_size=2))
    forget: list[Op] = []
    if draw(st.integers(0, 3)):
        # A commit just after a snapshot: its ts - 1 stays protected, its log goes.
        forget = [Snapshot(), Write(draw(upserts.filter(bool)), (), tick=False)]
        forget += [Pitr(False), *draw(st.lists(writes, max_size=2))]
        forget += [*draw(st.sampled_from([[], [Snapshot()]])), Gc()]
        forget += draw(st.sampled_from([[], [Pitr(True)], [Pitr(True)]]))
    return [*first, *draw(part), Snapshot(), *draw(part), *forget, *draw(part)]


# --- the model --------------------------------------------------------------------------


@dataclass
class Segment:
    """From ``start`` on (until the next segment's start), ``db.t`` is table id
    ``table_id``, read as oracle table ``key``."""

    start: int
    key: str
    table_id: str
    log_from: int = 0  # the model's start of its change log (raised by GC)


@dataclass(frozen=True)
class Commit:
    ts: int
    kind: str  # create, alter, write, restore
    table: str  # a segment's oracle key, or OTHER


@dataclass
class Model:
    store: TableStore
    clock: ManualClock
    key_kind: str
    oracle: Oracle = field(default_factory=Oracle)
    segments: list[Segment] = field(default_factory=list)
    schemas: dict[str, list[tuple[int, TableSchema]]] = field(default_factory=dict)
    commits: list[Commit] = field(default_factory=list)
    snapshots: dict[str, int] = field(default_factory=dict)  # standing: name -> ts
    pitr_since: int | None = None
    tenant_from: int = 0
    last_change: int = 0
    columns_made: int = 0
    snapshots_made: int = 0

    # -- bookkeeping

    @property
    def pk(self) -> list[str]:
        return [name for name, _ in KEY_COLUMNS[self.key_kind]]

    def base(self) -> TableSchema:
        return TableSchema.of([*KEY_COLUMNS[self.key_kind], ("v", "string")], self.pk)

    def key_row(self, i: int) -> dict[str, Any]:
        return KEY_OF[self.key_kind](i)

    def key(self, i: int) -> Key:
        return tuple(self.key_row(i).values())

    def key_dict(self, key: Key) -> dict[str, Any]:
        return dict(zip(self.pk, key, strict=True))

    def keys_table(self, keys: list[Key], schema: TableSchema) -> pa.Table:
        return pa.Table.from_pylist([self.key_dict(k) for k in keys], schema=schema.key_arrow())

    def values(self, schema: TableSchema) -> list[Column]:
        return [c for c in schema.columns if c.name not in self.pk]

    def by_key(self, rows: list[dict[str, Any]]) -> State:
        return {tuple(r.pop(k) for k in self.pk): r for r in rows}

    def tick(self) -> None:
        assert self.clock.fixed is not None
        self.clock.fixed += TICK_US

    def wall_now(self) -> int:
        assert self.clock.fixed is not None
        return max(self.store.now(), self.clock.fixed)

    def committed(self, ts: int, kind: str, table: str) -> None:
        assert not self.commits or ts > self.commits[-1].ts
        self.commits.append(Commit(ts, kind, table))
        self.last_change = ts

    def live(self) -> Segment:
        return self.segments[-1]

    def at(self, ts: int) -> Segment | None:
        found = None
        for segment in self.segments:
            if segment.start <= ts:
                found = segment
        return found

    def schema_at(self, key: str, ts: int) -> TableSchema:
        return [s for since, s in self.schemas[key] if since <= ts][-1]

    def state(self, segment: Segment | None, ts: int) -> State | None:
        """What ``db.t`` reads at ``ts`` by key: the non-key columns of its schema
        then, a column a row was written without read as its default."""
        if segment is None:
            return None
        return self.state_of(self.oracle, segment.key, ts)

    def state_of(self, oracle: Oracle, key: str, ts: int) -> State:
        schema = self.schema_at(key, ts)
        out: State = {}
        for row in oracle.read(key, ts):
            out[tuple(row[k] for k in self.pk)] = {
                c.name: row[c.name] if c.name in row else c.default for c in self.values(schema)
            }
        return out

    def protected(self, ts: int) -> bool:
        if ts < self.tenant_from:
            return False
        now = self.wall_now()
        if ts > now:
            return False
        if ts >= self.last_change:
            return True
        if self.pitr_since is not None and ts >= max(now - DAY_US, self.pitr_since):
            return True
        return ts in self.snapshots.values()

    def state_before(self, segment: Segment, c: int) -> int | None:
        """Where a revert of commit ``c`` may read the state just before it: ``c - 1``
        if protected, else the newest snapshot before ``c`` if the table had no
        commit since it and its log reaches back to it; None if neither."""
        if self.protected(c - 1):
            return c - 1
        earlier = [p for p in self.snapshots.values() if p < c]
        if not earlier:
            return None
        p = max(earlier)
        quiet = not any(p < x.ts < c and x.table == segment.key for x in self.commits)
        if quiet and segment.log_from <= p + 1:
            COUNTS["revert of a commit read at the snapshot before it"] += 1
            return p
        return None

    def times(self) -> list[int]:
        """Candidate times: every commit and snapshot, and the µs before and after each."""
        found = {self.tenant_from}
        for ts in [c.ts for c in self.commits] + list(self.snapshots.values()):
            found |= {ts - 1, ts, ts + 1}
        return sorted(found)

    def protected_times(self) -> list[int]:
        return [ts for ts in self.times() if self.protected(ts)]

    def horizon(self) -> int:
        """The tenant's change horizon (Protection.change_horizon), as the model sees it."""
        now = self.wall_now()
        if self.pitr_since is not None:
            return max(now - DAY_US, self.pitr_since)
        return max(self.snapshots.values()) if self.snapshots else now

    def new_segment(self, start: int, table_id: str, schema: TableSchema) -> Segment:
        key = f"k{len(self.segments)}"
        self.oracle.create_table(key, self.pk)
        self.schemas[key] = [(start, schema)]
        segment = Segment(start, key, table_id)
        self.segments.append(segment)
        return segment

    def write_model(self, key: str, ts: int, upserts: State, deletes: list[Key]) -> None:
        self.oracle.write(
            key,
            ts,
            upserts=[self.key_dict(k) | v for k, v in upserts.items()],
            deletes=[self.key_dict(k) for k in deletes],
        )

    # -- checks shared by the operations

    def nothing_written(self, run: Callable[[], Any], error: type[Exception]) -> Exception:
        """``run`` raises exactly ``error`` and leaves the commit log, the clock and
        the table as they were."""
        commits, now, rows = self.commit_count(), self.store.now(), self.read_now()
        with pytest.raises(error) as caught:
            run()
        assert type(caught.value) is error, caught.value
        assert (self.commit_count(), self.store.now(), self.read_now()) == (commits, now, rows)
        return caught.value

    def commit_count(self) -> int:
        return int(catalog_rows(self.store, "SELECT count(*) AS n FROM commits")[0]["n"])

    def read_now(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self.store.read(SRC, TABLE).to_pylist()
        return rows

    def check_now(self) -> None:
        now = self.store.now()
        expected = self.state(self.live(), now)
        assert expected is not None
        assert self.by_key(self.read_now()) == expected, f"read now (ts {now})"

    def check_protection(self) -> None:
        protection = self.store.protection(SRC)
        for ts in self.times():
            assert protection.covers(ts) == self.protected(ts), f"protection of {ts}"
        assert self.store.tenant(SRC).last_change_ts == self.last_change

    # -- operations

    def apply(self, op: Op) -> None:
        if not isinstance(op, Write) or op.tick:
            self.tick()
        if isinstance(op, Write):
            self.write(op)
        elif isinstance(op, WriteOther):
            result = self.store.write(
                SRC, OTHER, upserts=pa.table({"id": [op.key], "x": ["o"]}, OTHER_SCHEMA.arrow())
            )
            self.committed(result.ts, "write", OTHER)
        elif isinstance(op, AddColumn):
            self.add_column(op)
        elif isinstance(op, DropColumn):
            self.drop_column(op)
        elif isinstance(op, Compact):
            self.store.compact(SRC, target_bytes=op.target_bytes, full=op.full)
        elif isinstance(op, Snapshot):
            name = f"s{self.snapshots_made}"
            self.snapshots_made += 1
            self.snapshots[name] = self.store.create_snapshot(SRC, name).ts
        elif isinstance(op, SnapshotAt):
            if self.pitr_since is not None:
                times = self.protected_times()
                name = f"s{self.snapshots_made}"
                self.snapshots_made += 1
                at = times[-1 - op.pick % len(times)]
                self.snapshots[name] = self.store.create_snapshot(SRC, name, at=at).ts
                assert self.snapshots[name] == at
        elif isinstance(op, Bulk):
            self.bulk(op)
        elif isinstance(op, Touch):
            self.touch(op)
        elif isinstance(op, DropSnapshot):
            if self.snapshots:
                names = sorted(self.snapshots)
                name = names[op.pick % len(names)]
                self.store.drop_snapshot(SRC, name)
                del self.snapshots[name]
        elif isinstance(op, Pitr):
            self.pitr(op.on)
        elif isinstance(op, Gc):
            self.gc()
        elif isinstance(op, Restore):
            self.restore(op)
        elif isinstance(op, Diff):
            times = self.protected_times()
            a = times[-1 - op.a % len(times)]
            b = None if op.b is None else times[-1 - op.b % len(times)]
            if b is not None and b < a:
                a, b = b, a
            self.check_diff(a, b)
        elif isinstance(op, Revert):
            self.revert(op)
        else:
            self.bad(op)

    def write(self, op: Write) -> None:
        schema = self.schema_at(self.live().key, self.store.now() + 1)
        rows = {
            self.key(i): {
                c.name: value(c, (a, b)[j % 2] + j) for j, c in enumerate(self.values(schema))
            }
            for i, a, b in op.upserts
        }
        deleted = [self.key(i) for i in op.deletes]
        if rows or deleted:
            self.commit_rows(rows, deleted)
        if set(deleted) & set(rows):
            COUNTS["update as delete + upsert"] += 1

    def bulk(self, op: Bulk) -> None:
        """Many keys at once: objects of several batches and row groups."""
        schema = self.schema_at(self.live().key, self.store.now() + 1)
        keys = [self.key(i) for i in range(op.start, op.start + op.count)]
        if op.delete:
            self.commit_rows({}, keys)
        else:
            values = self.values(schema)
            self.commit_rows(
                {
                    k: {c.name: value(c, n + op.seed + j) for j, c in enumerate(values)}
                    for n, k in enumerate(keys)
                },
                [],
            )
        COUNTS["bulk " + ("delete" if op.delete else "upsert")] += 1

    def touch(self, op: Touch) -> None:
        state = self.state_of_key(self.live(), self.store.now())
        keys = [self.key(i) for i in op.keys]
        self.commit_rows(
            {k: state[k] for k in keys if k in state}, [k for k in keys if k not in state]
        )
        COUNTS["write of what is there (no change)"] += 1

    def commit_rows(self, upserts: State, deletes: list[Key]) -> int:
        """One write commit to the live table, booked in the model."""
        segment = self.live()
        schema = self.schema_at(segment.key, self.store.now() + 1)
        result = self.store.write(
            SRC,
            TABLE,
            upserts=pa.Table.from_pylist(
                [self.key_dict(k) | v for k, v in upserts.items()], schema=schema.arrow()
            )
            if upserts
            else None,
            deletes=self.keys_table(deletes, schema) if deletes else None,
        )
        self.write_model(segment.key, result.ts, upserts, deletes)
        self.committed(result.ts, "write", segment.key)
        return result.ts

    def add_column(self, op: AddColumn) -> None:
        self.columns_made += 1
        default = (7 if op.type == "int64" else "d") if op.with_default or not op.nullable else None
        column = Column(f"c{self.columns_made}", op.type, op.nullable, default)
        segment = self.live()
        record = self.store.alter_table(SRC, TABLE, add=[column])
        self.schemas[segment.key].append((record.schema_from_ts, record.schema))
        self.committed(record.schema_from_ts, "alter", segment.key)
        COUNTS["column added" + (" with a default" if default is not None else "")] += 1

    def drop_column(self, op: DropColumn) -> None:
        segment = self.live()
        schema = self.schema_at(segment.key, self.store.now() + 1)
        droppable = [c.name for c in self.values(schema)]
        if not droppable:
            return
        record = self.store.alter_table(SRC, TABLE, drop=[droppable[op.pick % len(droppable)]])
        self.schemas[segment.key].append((record.schema_from_ts, record.schema))
        self.committed(record.schema_from_ts, "alter", segment.key)
        COUNTS["column dropped"] += 1

    def pitr(self, on: bool) -> None:
        if on == (self.pitr_since is not None):
            return
        window = self.store.set_pitr(SRC, DAY_US if on else None)
        if on:
            assert window is not None
            assert window.since_ts == self.wall_now()  # protects from now on, nothing older
            self.pitr_since = window.since_ts
        else:
            self.pitr_since = None
        COUNTS[f"PITR {'on' if on else 'off'}"] += 1

    def gc(self) -> None:
        horizon = self.horizon()
        run_gc(self.store, dry_run=False, grace_us=0, allow_short_grace=True, compact=False)
        for segment in self.segments:
            if segment.log_from < horizon:
                segment.log_from = horizon

    def restore(self, op: Restore) -> None:
        times = [ts for ts in self.protected_times() if self.at(ts) is not None]
        source_ts = times[-1 - op.point % len(times)]
        source = self.at(source_ts)
        assert source is not None
        outcome = restore_table(self.store, SRC, TABLE, source_ts, executor="local")
        installed = outcome.installed_ts
        assert installed is not None
        table_id = self.store.tables(SRC)
        new_id = next(t.id for t in table_id if t.qualified == TABLE)
        assert new_id != source.table_id and new_id != self.live().table_id
        segment = self.new_segment(installed, new_id, self.schema_at(source.key, source_ts))
        self.write_model(segment.key, installed, self.state_of_key(source, source_ts), [])
        self.committed(installed, "restore", segment.key)
        COUNTS["restore in place"] += 1

    def state_of_key(self, segment: Segment, ts: int) -> State:
        state = self.state(segment, ts)
        assert state is not None
        return state

    # -- property 1: diffs

    def expected_diff(self, a: int, b: int) -> tuple[list[dict[str, Any]], bool, bool]:
        """(the diff's rows, whether it must scan, whether it must read the log)."""
        seg_a, seg_b = self.at(a), self.at(b)
        state_a, state_b = self.state(seg_a, a), self.state(seg_b, b)
        schema_a = None if seg_a is None else self.schema_at(seg_a.key, a)
        schema_b = None if seg_b is None else self.schema_at(seg_b.key, b)
        cols_b = self.values(schema_b) if schema_b else []
        cols_a = self.values(schema_a) if schema_a else []
        names_a = {c.name for c in cols_a}
        names_b = {c.name for c in cols_b}
        fields = [c.name for c in cols_b] + [c.name for c in cols_a if c.name not in names_b]
        state_a, state_b = state_a or {}, state_b or {}
        rows = []
        for key in sorted(set(state_a) | set(state_b)):
            before = None
            if key in state_a:
                before = {f: state_a[key][f] if f in names_a else None for f in fields}
            after = None
            if key in state_b:
                after = {f: state_b[key][f] if f in names_b else None for f in fields}
            if before is None:
                kind = "insert"
            elif after is None:
                kind = "delete"
            else:
                compared = [
                    (state_a[key][c.name] if c.name in names_a else c.default, after[c.name])
                    for c in cols_b
                ]
                if all(x == y for x, y in compared):
                    continue
                kind = "update"
            row: dict[str, Any] = {"__change": kind, **self.key_dict(key)}
            if fields:
                row |= {"before": before, "after": after}
            rows.append(row)
        same = seg_a is not None and seg_b is not None and seg_a is seg_b
        must_scan = not same
        must_log = same and seg_a is not None and seg_a.log_from <= a + 1
        return rows, must_scan, must_log

    def check_diff(self, a: int, b: int | None) -> None:
        to = self.store.now() if b is None else b
        if self.at(to) is None:  # the table did not exist yet, at A nor at B
            self.nothing_written(lambda: self.store.diff(SRC, TABLE, a, b), NotFound)
            COUNTS["diff: no table at A nor B"] += 1
            return
        rows, must_scan, must_log = self.expected_diff(a, to)
        # A snapshot's time is named by the snapshot about every other time.
        names = {ts: name for name, ts in sorted(self.snapshots.items()) if ts % 2}
        a_ref: int | str = names.get(a, a)
        b_ref: int | str | None = None if b is None else names.get(b, b)
        plan = plan_diff(self.store.catalog, SRC, TABLE, a_ref, b_ref)
        assert plan.from_ts == a
        # B by default is the present ("now"), never before the last commit
        assert plan.to_ts == to if b is not None else plan.to_ts >= to
        got = self.store.diff(SRC, TABLE, a_ref, b_ref).read_all().to_pylist()
        assert got == rows, f"diff {a} .. {to} ({'scan' if plan.scans else 'log'})"
        if must_scan:
            assert plan.scans, f"diff {a} .. {to} read one log across two table ids"
            COUNTS["diff: scan across a restore or the create"] += 1
        elif must_log:
            assert not plan.scans, f"diff {a} .. {to}: the log is complete, yet it scans"
            COUNTS["diff: change log"] += 1
        else:
            COUNTS[f"diff: log forgotten, {'scan' if plan.scans else 'log (none lost)'}"] += 1
        seg_a, seg_b = self.at(a), self.at(to)
        if seg_a is not None and seg_b is not None:
            names_a = self.schema_at(seg_a.key, a).names
            names_b = self.schema_at(seg_b.key, to).names
            assert plan.added == [n for n in names_b if n not in names_a]
            assert plan.dropped == [n for n in names_a if n not in names_b]
            if plan.added or plan.dropped:
                COUNTS["diff across a schema change"] += 1
        COUNTS["diff rows"] += len(rows)
        if not rows:
            COUNTS["diff: empty"] += 1

    # -- property 2 and 3: reverts

    def revert(self, op: Revert) -> None:
        segment = self.live()
        writes = [c.ts for c in self.commits if c.kind == "write" and c.table == segment.key]
        if not writes:
            return
        c = writes[-1 - op.pick % len(writes)]
        lo = self.state_before(segment, c)
        refused = lo is None or segment.log_from > lo + 1
        if refused:
            error = UnprotectedTime if lo is None else InvalidArgument
            self.nothing_written(
                lambda: self.store.revert(SRC, TABLE, c, skip_conflicts=op.skip), error
            )
            COUNTS[f"revert refused: {error.__name__}"] += 1
            return
        before = self.state(segment, c - 1)
        at_c = self.state(segment, c)
        now = self.store.now()
        current = self.state(segment, now)
        assert before is not None and at_c is not None and current is not None
        changed = {k for k in set(before) | set(at_c) if before.get(k) != at_c.get(k)}
        model = self.oracle.tables[segment.key]
        later = {e.key for e in model.events if e.ts > c}
        conflicts = changed & later
        if conflicts and not op.skip:
            refusal = self.nothing_written(lambda: self.store.revert(SRC, TABLE, c), RevertConflict)
            assert isinstance(refusal, RevertConflict)
            assert isinstance(refusal.keys, pa.Table)
            assert set(self.by_key(refusal.keys.to_pylist())) == conflicts
            COUNTS["revert refused: RevertConflict"] += 1
            return
        run = lambda: self.store.revert(  # noqa: E731
            SRC, TABLE, c, skip_conflicts=op.skip, dry_run=op.dry_run
        )
        if op.dry_run:
            commits, rows = self.commit_count(), self.read_now()
            result = run()
            assert (self.commit_count(), self.read_now()) == (commits, rows)
            assert result.ts is None and result.dry_run
        else:
            result = run()
        reported = set(self.by_key(result.conflicts.to_pylist()))
        assert result.conflicts.num_rows == len(reported)
        put_back = changed - conflicts
        kinds = Counter(
            "insert" if k not in before else "delete" if k not in at_c else "update"
            for k in changed
        )
        expected_changes = {k: kinds[k] for k in ("insert", "update", "delete")}
        assert reported == conflicts
        assert result.changes == expected_changes
        COUNTS["revert of a commit whose own ts is unprotected"] += not self.protected(c)
        assert result.upserted == len(put_back & set(before))
        assert result.deleted == len(put_back - set(before))
        COUNTS["revert: conflicts"] += bool(conflicts)
        COUNTS["revert: nothing to undo"] += not changed
        if op.dry_run:
            COUNTS["revert: dry run"] += 1
            return
        if not put_back:
            assert result.ts is None
            return
        assert result.ts is not None and result.ts > now
        # The history without c, now: c's keys as at c - 1 (no later event), in today's schema.
        without = Oracle()
        without.tables[segment.key] = ModelTable(
            model.primary_key, [e for e in model.events if e.ts != c]
        )
        replayed = self.state_of(without, segment.key, now)
        got = self.by_key(self.read_now())
        for key in set(got) | set(current) | set(replayed):
            expected = replayed.get(key) if key in put_back else current.get(key)
            assert got.get(key) == expected, f"key {key} after the revert of {c}"
        upserts = {k: replayed[k] for k in sorted(put_back) if k in replayed}
        self.write_model(segment.key, result.ts, upserts, sorted(put_back - set(replayed)))
        self.committed(result.ts, "write", segment.key)
        COUNTS["revert written"] += 1
        if op.undo:
            self.undo(result.ts, current)

    def undo(self, r: int, current: State) -> None:
        """Revert the revert's commit ``r``: the table reads as before the revert."""
        self.tick()
        segment = self.live()
        lo = self.state_before(segment, r)  # as any revert: r - 1, or a quiet snapshot before
        if lo is None or segment.log_from > lo + 1:
            error = UnprotectedTime if lo is None else InvalidArgument
            self.nothing_written(lambda: self.store.revert(SRC, TABLE, r), error)
            COUNTS[f"revert of a revert refused: {error.__name__}"] += 1
            return
        before_undo = self.state_of_key(segment, r)
        result = self.store.revert(SRC, TABLE, r)
        assert result.conflicts.num_rows == 0
        got = self.by_key(self.read_now())
        assert got == current, f"after reverting revert {r}"
        upserts = {k: v for k, v in current.items() if before_undo.get(k) != v}
        gone = sorted(set(before_undo) - set(current))
        assert (result.upserted, result.deleted) == (len(upserts), len(gone))
        if not upserts and not gone:
            # r put back only values of columns dropped since c: it changed nothing
            # today's schema shows, so there is nothing to undo.
            assert result.ts is None
            COUNTS["revert of a revert: nothing to undo"] += 1
            return
        assert result.ts is not None
        self.write_model(segment.key, result.ts, upserts, gone)
        self.committed(result.ts, "write", segment.key)
        COUNTS["revert of a revert"] += 1

    # -- property 4: bad inputs

    def bad(self, op: Bad) -> None:
        store = self.store
        live = self.live()
        commit_ts = {c.ts for c in self.commits}
        if op.kind == 0:  # no commit at that ts: a snapshot's, or just after a commit
            free = sorted(
                {ts for ts in self.times() if ts not in commit_ts and ts <= store.now()}
                - {self.tenant_from - 1}
            )
            ts = free[op.pick % len(free)]
            self.nothing_written(lambda: store.revert(SRC, TABLE, ts), NotFound)
            COUNTS["bad: no commit at ts"] += 1
        elif op.kind == 1:  # a DDL or restore commit of the live table
            ddl = [c.ts for c in self.commits if c.kind != "write" and c.table == live.key]
            ts = ddl[op.pick % len(ddl)]
            self.nothing_written(lambda: store.revert(SRC, TABLE, ts), InvalidArgument)
            COUNTS["bad: revert of a DDL commit"] += 1
        elif op.kind == 2:  # a commit of another table, or of the one a restore replaced
            others = [c.ts for c in self.commits if c.table != live.key]
            ts = others[op.pick % len(others)]
            self.nothing_written(lambda: store.revert(SRC, TABLE, ts), InvalidArgument)
            COUNTS["bad: revert of another table's commit"] += 1
        elif op.kind == 3:  # A after B
            times = self.protected_times()
            b = times[op.pick % (len(times) - 1)]
            after = [t for t in times if t > b]
            a = after[op.pick % len(after)]
            self.nothing_written(lambda: store.diff(SRC, TABLE, a, b), InvalidArgument)
            COUNTS["bad: diff A after B"] += 1
        else:  # an unprotected A: before the tenant, or a time PITR no longer covers
            lost = [ts for ts in self.times() if not self.protected(ts)]
            ts = lost[op.pick % len(lost)]
            self.nothing_written(lambda: store.diff(SRC, TABLE, ts), UnprotectedTime)
            COUNTS["bad: unprotected A" + (" (PITR off)" if ts >= self.tenant_from else "")] += 1


@pytest.fixture(scope="module", autouse=True)
def counts() -> Iterator[None]:
    """Print what the histories exercised (``-s``)."""
    COUNTS.clear()
    yield
    print("\nmodel diff/revert counts:")
    for name, n in sorted(COUNTS.items()):
        print(f"  {name}: {n}")


@given(
    history=histories(),
    key_kind=st.sampled_from(sorted(KEY_COLUMNS)),
    chunk_keys=st.sampled_from([CHUNK_KEYS, CHUNK_KEYS, 1, 3]),
    pairs=st.lists(st.tuples(picks, picks), min_size=END_PAIRS, max_size=END_PAIRS),
)
def test_diff_and_revert_match_the_oracle(
    s3_server: EmbeddedS3,
    new_catalog_uri: Callable[[], str],
    history: list[Op],
    key_kind: str,
    chunk_keys: int,
    pairs: list[tuple[int, int]],
) -> None:
    bucket = f"rewind-diff-{uuid.uuid4().hex[:12]}"
    s3_server.create_bucket(bucket)
    clock = ManualClock()
    clock.fixed = wall_clock_us()
    store = TableStore.open(
        new_catalog_uri(), f"s3://{bucket}/wh", s3=s3_server.settings, clock=clock
    )
    # Chunks of a key or three: every chunk boundary of the change-log path is crossed.
    chunked = functools.partial(diff_module.changed_keys, chunk_keys=chunk_keys)
    try:
        with mock.patch.object(diff_module, "changed_keys", chunked):
            m = Model(store, clock, key_kind)
            m.tenant_from = m.last_change = store.create_tenant(SRC).created_ts
            m.tick()
            window = store.set_pitr(SRC, DAY_US)
            assert window is not None
            m.pitr_since = window.since_ts
            m.tick()
            record = store.create_table(SRC, TABLE, m.base())
            m.new_segment(record.created_ts, record.id, m.base())
            m.committed(record.created_ts, "create", m.live().key)
            m.tick()
            other = store.create_table(SRC, OTHER, OTHER_SCHEMA)
            m.committed(other.created_ts, "create", OTHER)
            for op in history:
                m.apply(op)
                m.check_now()
            m.check_protection()
            times = m.protected_times()
            for i, j in pairs:
                a = times[i % len(times)]
                later = [t for t in times if t > a] or [a]
                m.check_diff(a, later[j % len(later)])
        event(f"{len(m.segments)} table id(s), keys {key_kind}")
    finally:
        store.close()


def test_a_diff_to_now_from_after_the_last_commit_is_empty(
    store: TableStore, clock: ManualClock
) -> None:
    clock.fixed = wall_clock_us()
    schema = TableSchema.of([("id", "int64"), ("v", "string")], ["id"])
    store.create_tenant("a")
    store.create_table("a", "db.t", schema)
    written = store.write("a", "db.t", upserts=pa.table({"id": [1], "v": ["x"]}, schema.arrow()))
    clock.fixed += 2_000_000  # two idle seconds: every time since the write reads as now
    assert store.protection("a").covers(written.ts + 1)
    assert store.diff("a", "db.t", written.ts + 1, written.ts + 2).read_all().num_rows == 0
    assert store.diff("a", "db.t", "-1s").read_all().num_rows == 0  # raises InvalidArgument


def test_a_revert_sees_what_its_commit_did_after_a_full_compaction(
    store: TableStore, clock: ManualClock
) -> None:
    clock.fixed = wall_clock_us()
    schema = TableSchema.of([("id", "int64"), ("v", "string")], ["id"])
    store.create_tenant("a")
    store.create_table("a", "db.t", schema)
    store.create_snapshot("a", "s")  # no PITR: the snapshot protects c - 1, nothing protects c
    c = store.write("a", "db.t", upserts=pa.table({"id": [1], "v": ["x"]}, schema.arrow())).ts
    clock.fixed += 1_000
    store.write("a", "db.t", deletes=pa.table({"id": [1]}, schema.key_arrow()))
    store.compact("a", full=True)  # no protected time needs the version at c: dropped
    result = store.revert("a", "db.t", c, dry_run=True, skip_conflicts=True)
    assert result.changes == {"insert": 1, "update": 0, "delete": 0}, result.changes  # all 0
    assert result.conflicts.to_pylist() == [{"id": 1}]
