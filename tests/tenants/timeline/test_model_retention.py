"""Model test of snapshots, PITR windows, schema changes, table re-creation and retention.

Hypothesis generates histories on one table name of one tenant: upserts and
deletes, snapshots created and dropped, PITR windows set and cleared, columns
added, the table dropped and created again, partial and full compactions, and
the clock moving on. After every step, a read at every protected time equals
the oracle (rows projected onto the schema as of that time). After every full
compaction the table stores exactly the data versions some protected time
needs — the union of the versions visible at each protected time — never more
(and, by the reads, never less).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from tenants.errors import NotFound
from tenants.objects.io import read_object
from tenants.objects.record import live_objects
from tenants.objectstore.embedded import EmbeddedS3
from tenants.schema import TS, Column, TableSchema
from tenants.store import TableStore
from tests.helpers.oracle import Oracle

TENANT = "acme"
DB, TABLE = "db", "t"
SECOND = 1_000_000
START = 1_900_000_000 * SECOND

Op = tuple[Any, ...]
ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("write"),
            st.lists(st.integers(0, 4), max_size=4, unique=True),
            st.lists(st.integers(0, 4), max_size=2, unique=True),
        ),
        st.tuples(st.just("snapshot")),
        st.tuples(st.just("drop_snapshot"), st.integers(0, 5)),
        st.tuples(st.just("pitr"), st.sampled_from([None, 3, 30])),
        st.tuples(st.just("add_column")),
        st.tuples(st.just("recreate")),
        st.tuples(st.just("compact"), st.booleans()),
        st.tuples(st.just("tick"), st.integers(1, 10)),
    ),
    min_size=3,
    max_size=14,
)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> int:
        return self.now


@dataclass
class Incarnation:
    """One life of the table name: an oracle table and its columns over time."""

    name: str
    created: int
    dropped: int | None = None
    columns: list[tuple[str, int]] = field(default_factory=list)  # (column, added at ts)

    def live_at(self, ts: int) -> bool:
        return self.created <= ts and (self.dropped is None or ts < self.dropped)

    def columns_at(self, ts: int) -> list[str]:
        return ["k"] + [c for c, since in self.columns if since <= ts]


@dataclass
class World:
    store: TableStore
    clock: Clock
    oracle: Oracle = field(default_factory=Oracle)
    lives: list[Incarnation] = field(default_factory=list)
    commits: list[int] = field(default_factory=list)
    snapshots: list[str] = field(default_factory=list)
    counter: int = 0

    @property
    def current(self) -> Incarnation:
        return self.lives[-1]

    def schema(self) -> TableSchema:
        cols = [Column("k", "int64", False), Column("v", "string")]
        cols += [Column(c, "int64") for c, _ in self.current.columns[1:]]
        return TableSchema(tuple(cols), ("k",))

    def create(self) -> None:
        life = Incarnation(f"life{len(self.lives)}", 0)
        self.oracle.create_table(life.name, ["k"])
        self.lives.append(life)
        record = self.store.create_table(
            TENANT, f"{DB}.{TABLE}", TableSchema.of([("k", "int64"), ("v", "string")], ["k"])
        )
        life.created = record.created_ts
        life.columns = [("v", record.created_ts)]
        self.commits.append(record.created_ts)

    def apply(self, op: Op) -> None:
        self.clock.now += SECOND
        kind = op[0]
        if kind == "write":
            ups, dels = op[1], op[2]
            if not ups and not dels:
                return
            self.counter += 1
            extra = [c for c, _ in self.current.columns[1:]]
            rows = [
                {"k": k, "v": f"v{self.counter}", **{c: self.counter for c in extra}} for k in ups
            ]
            upserts = pa.Table.from_pylist(rows, schema=self.schema().arrow()) if rows else None
            deletes = pa.table({"k": pa.array(dels, pa.int64())}) if dels else None
            result = self.store.write(TENANT, f"{DB}.{TABLE}", upserts=upserts, deletes=deletes)
            self.oracle.write(
                self.current.name, result.ts, upserts=rows, deletes=[{"k": k} for k in dels]
            )
            self.commits.append(result.ts)
        elif kind == "snapshot":
            name = f"s{len(self.commits)}_{self.counter}_{len(self.snapshots)}"
            if name not in self.snapshots:
                self.store.create_snapshot(TENANT, name)
                self.snapshots.append(name)
        elif kind == "drop_snapshot" and self.snapshots:
            self.store.drop_snapshot(TENANT, self.snapshots.pop(op[1] % len(self.snapshots)))
        elif kind == "pitr":
            self.store.set_pitr(TENANT, None if op[1] is None else op[1] * SECOND)
        elif kind == "add_column":
            name = f"c{len(self.current.columns)}"
            record = self.store.alter_table(TENANT, f"{DB}.{TABLE}", add=[Column(name, "int64")])
            self.current.columns.append((name, record.schema_from_ts))
            self.commits.append(record.schema_from_ts)
        elif kind == "recreate":
            record = self.store.drop_table(TENANT, f"{DB}.{TABLE}")
            self.current.dropped = self.store.now()
            self.commits.append(self.current.dropped)
            del record
            self.create()
        elif kind == "compact":
            full = op[1]
            before = self.stored_rows()
            self.store.compact(TENANT, f"{DB}.{TABLE}", full=full, target_bytes=2_000)
            if full:
                self.check_retention()
            else:
                assert self.stored_rows() == before, "a partial compaction dropped rows"
        elif kind == "tick":
            self.clock.now += op[1] * SECOND

    def live_objects(self) -> list[Any]:
        """The current table's objects (a dropped table of the same name has its own)."""
        [table] = [t for t in self.store.tables(TENANT) if t.qualified == f"{DB}.{TABLE}"]
        with self.store.catalog.snapshot() as tx:
            return live_objects(tx, table.id)

    def stored_rows(self) -> int:
        return sum(o.rows for o in self.live_objects())

    def protected_times(self) -> list[int]:
        guard = self.store.protection(TENANT)
        candidates = set(self.commits) | set(guard.points) | {guard.current_from, self.store.now()}
        if guard.window:
            candidates.add(guard.window[0])
        return sorted(t for t in candidates if guard.covers(t))

    def check_reads(self) -> None:
        for ts in self.protected_times():
            life = next((x for x in self.lives if x.live_at(ts)), None)
            if life is None:
                try:
                    self.store.read(TENANT, f"{DB}.{TABLE}", ts)
                except NotFound:
                    continue
                raise AssertionError(f"table read at ts {ts} where it did not exist")
            columns = life.columns_at(ts)
            expected = [{c: row.get(c) for c in columns} for row in self.oracle.read(life.name, ts)]
            got = self.store.read(TENANT, f"{DB}.{TABLE}", ts).to_pylist()
            assert got == expected, f"read at ts {ts}"

    def check_retention(self) -> None:
        """Stored data versions of the live table == the union of versions visible at
        protected times (the needed set): nothing more is kept."""
        needed: set[tuple[Any, int]] = set()
        for ts in self.protected_times():
            if self.current.live_at(ts):
                needed |= self.oracle.visible_versions(self.current.name, ts)
        stored: list[tuple[Any, int]] = []
        for record in self.live_objects():
            if record.kind == "data":
                rows = read_object(self.store.objects, record)
                stored += [
                    ((k,), t)
                    for k, t in zip(
                        rows.column("k").to_pylist(), rows.column(TS).to_pylist(), strict=True
                    )
                ]
        assert len(stored) == len(set(stored)), "a version is stored twice"
        assert set(stored) == needed, (
            f"stored {sorted(set(stored) - needed)} not needed; missing {sorted(needed - set(stored))}"
        )


@given(history=ops)
def test_protected_reads_equal_the_model_and_full_compaction_keeps_exactly_what_is_needed(
    s3_server: EmbeddedS3, new_catalog_uri: Callable[[], str], history: list[Op]
) -> None:
    bucket = f"rewind-ret-{uuid.uuid4().hex[:12]}"
    s3_server.create_bucket(bucket)
    clock = Clock()
    store = TableStore.open(
        new_catalog_uri(), f"s3://{bucket}/wh", s3=s3_server.settings, clock=clock
    )
    try:
        store.create_tenant(TENANT)
        world = World(store, clock)
        world.create()
        for op in history:
            world.apply(op)
            world.check_reads()
        world.apply(("compact", True))
        world.check_reads()
    finally:
        store.close()
