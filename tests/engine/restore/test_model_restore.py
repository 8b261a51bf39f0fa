"""Model-based test of physical restore: random histories against ``tests/helpers/oracle.py``.

Hypothesis generates histories on one tenant with two tables: writes (new
keys, updates, deletes of present and absent keys, delete + upsert of one key
in one commit), partial and full compactions (small targets, so merged objects
split and straddle snapshots), snapshots created and some dropped, and
optionally a schema change (a column added, later maybe dropped). The oracle
tracks what every read must return.

Then, for every snapshot still standing and for "now", the tenant is restored
as a clone. The clone read at now must equal the oracle at S (with the schema
as of S); every snapshot at or before S must be carried and read as the oracle
says; a write to the clone must work; and the source must read as before.
Full compaction after a snapshot is dropped is the case DESIGN.md's "Lessons"
warn about: a tombstone a remaining snapshot needs must survive it.

Every S with straddlers, and now, is restored again as an instant clone
(installed first, its straddlers held with a cut at S, then rewritten and
swapped): waited for, with the clone read as the oracle at S from the moment
it is installed; or left pending, the clone then snapshotted, written,
compacted (a full compaction merges cut members) and collected by GC with no
grace before its rewrite is resumed, or cancelled (the clone keeps reading
through its cuts, and a clone of it inherits its cut members through a base).
At the end one more instant clone is left pending while the source is
dropped and purged and GC runs with no grace, then resumed or cancelled:
every clone still reads as it did, and no key is left in the bucket that no
table reaches.

Every example uses the local executor for every S, and the Spark executor for
the S with the most rewrite tasks (its result must equal the local one).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa
from hypothesis import event, given
from hypothesis import strategies as st

from engine.gc.purge import purge_tenant
from engine.gc.run import run_gc
from engine.pipeline import ACTIONS, Action, Installed, RestorePlan
from engine.restore.job import cancel_restore, restore_tenant, resume_restore
from engine.restore.plan import plan_restore
from tenants.compaction import DEFAULT_TARGET_BYTES
from tenants.objects.record import live_objects
from tenants.objectstore.embedded import EmbeddedS3
from tenants.schema import Column, TableSchema
from tenants.store import TableStore
from tests.helpers.oracle import Oracle, Row
from tests.helpers.restores import cut_members, job_state, reads, unreached_keys

DEEP = os.environ.get("HYPOTHESIS_PROFILE", "ci") == "deep"
MAX_STEPS = 24 if DEEP else 14
TENANT = "src"
DB = "db"

ITEMS = TableSchema.of([("id", "int64"), ("v", "string")], ["id"])
ORDERS = TableSchema(
    (Column("id", "int64"), Column("region", "string"), Column("qty", "int32", nullable=False)),
    ("id", "region"),
)
NOTE = Column("note", "string")

KEYS: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "items": st.fixed_dictionaries({"id": st.integers(0, 5)}),
    "orders": st.fixed_dictionaries(
        {"id": st.integers(0, 3), "region": st.sampled_from(["eu", "us"])}
    ),
}
VALUES: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "items": st.fixed_dictionaries(
        {"v": st.none() | st.text(max_size=3), "note": st.none() | st.sampled_from(["n", "m"])}
    ),
    "orders": st.fixed_dictionaries({"qty": st.integers(-(2**31), 2**31 - 1)}),
}
PRIMARY_KEYS = {"items": ("id",), "orders": ("id", "region")}


# --- operations ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Write:
    table: str
    upserts: tuple[Row, ...]  # carry a "note" value; kept only while items has the column
    deletes: tuple[Row, ...]


@dataclass(frozen=True)
class Compact:
    table: str | None  # None: every table
    full: bool
    target_bytes: int


@dataclass(frozen=True)
class Snapshot:
    pass


@dataclass(frozen=True)
class DropSnapshot:
    index: int  # of the snapshots standing, modulo their number


@dataclass(frozen=True)
class Alter:
    kind: Literal["add_note", "drop_note"]


Op = Write | Compact | Snapshot | DropSnapshot | Alter


@dataclass(frozen=True)
class Instant:
    """How one point's instant restore runs: waited for, or left pending while the
    clone is written, compacted and collected, then resumed or cancelled."""

    mode: Literal["wait", "resume", "cancel"]
    write: bool
    compact: Literal["none", "partial", "full"]
    target_bytes: int
    gc: bool
    grand_instant: bool  # cancel: the clone of the clone is restored instant too


def _key(table: str, row: Row) -> tuple[Any, ...]:
    return tuple(row[k] for k in PRIMARY_KEYS[table])


@st.composite
def writes(draw: st.DrawFn, table: str | None = None) -> Write:
    table = table or draw(st.sampled_from(["items", "orders"]))
    upsert_keys = draw(st.lists(KEYS[table], max_size=4, unique_by=lambda k: _key(table, k)))
    upserts = tuple({**k, **draw(VALUES[table])} for k in upsert_keys)
    deletes = draw(
        st.lists(
            KEYS[table],
            min_size=0 if upserts else 1,
            max_size=3,
            unique_by=lambda k: _key(table, k),
        )
    )
    return Write(table, upserts, tuple(deletes))


compactions = st.builds(
    Compact,
    table=st.sampled_from([None, "items", "orders"]),
    full=st.booleans(),
    target_bytes=st.sampled_from([1, 1_000, 1_500, DEFAULT_TARGET_BYTES]),
)
ops = st.one_of(
    writes(),
    writes(),
    writes(),
    compactions,
    st.just(Snapshot()),
    st.just(Snapshot()),
    st.builds(DropSnapshot, index=st.integers(0, 10)),
    st.builds(Alter, kind=st.sampled_from(["add_note", "drop_note"])),
)
part = st.lists(ops, max_size=MAX_STEPS // 3)
instants = st.lists(
    st.builds(
        Instant,
        mode=st.sampled_from(["wait", "resume", "cancel"]),
        write=st.booleans(),
        compact=st.sampled_from(["none", "partial", "full", "full"]),
        target_bytes=st.sampled_from([1, 1_500, DEFAULT_TARGET_BYTES]),
        gc=st.booleans(),
        grand_instant=st.booleans(),
    ),
    min_size=1,
    max_size=3,
)


@st.composite
def histories(draw: st.DrawFn) -> list[Op]:
    """Free sequences of operations, around writes to one table on both sides of a
    snapshot and a later compaction of it, so merged objects straddle snapshots
    (the layouts a restore must rewrite)."""
    table = draw(st.sampled_from(["items", "orders"]))
    before = draw(part) + draw(st.lists(writes(table), min_size=1, max_size=3))
    after = draw(part) + draw(st.lists(writes(table), min_size=1, max_size=3))
    compaction = Compact(
        draw(st.sampled_from([None, table])),
        draw(st.booleans()),
        draw(st.sampled_from([1_500, DEFAULT_TARGET_BYTES])),
    )
    return [*before, Snapshot(), *after, compaction, *draw(part)]


# --- the model ----------------------------------------------------------------------------------


class Model:
    """A fresh store (new bucket, new SQLite file) with the oracle beside it."""

    def __init__(self, s3: EmbeddedS3, catalog_uri: str, *, events: bool = True) -> None:
        self.events = events  # hypothesis events (a fixed history runs outside @given)
        bucket = f"rewind-restore-{uuid.uuid4().hex[:12]}"
        s3.create_bucket(bucket)
        self.store = TableStore.open(catalog_uri, f"s3://{bucket}/wh", s3=s3.settings)
        self.oracle = Oracle()
        self.store.create_tenant(TENANT)
        self.schemas: dict[str, list[tuple[int, TableSchema]]] = {}
        for name, schema in (("items", ITEMS), ("orders", ORDERS)):
            record = self.store.create_table(TENANT, f"{DB}.{name}", schema)
            self.schemas[name] = [(record.created_ts, schema)]
            self.oracle.create_table(name, schema.primary_key)
        self.snapshots: dict[str, int] = {}  # standing snapshots: name -> ts
        self.made = 0
        self.note_added = False  # a dropped column name may not be reused

    def close(self) -> None:
        self.store.close()

    def event(self, what: str) -> None:
        if self.events:
            event(what)

    def schema_at(self, table: str, ts: int) -> TableSchema:
        return [s for since, s in self.schemas[table] if since <= ts][-1]

    def expected(self, table: str, ts: int) -> list[Row]:
        names = self.schema_at(table, ts).names
        return [{n: row.get(n) for n in names} for row in self.oracle.read(table, ts)]

    def apply(self, op: Op) -> None:
        store = self.store
        if isinstance(op, Write):
            schema = self.schema_at(op.table, store.now())
            upserts = [{n: r.get(n) for n in schema.names} for r in op.upserts]
            result = store.write(
                TENANT,
                f"{DB}.{op.table}",
                upserts=pa.Table.from_pylist(upserts, schema=schema.arrow()) if upserts else None,
                deletes=(
                    pa.Table.from_pylist(list(op.deletes), schema=schema.key_arrow())
                    if op.deletes
                    else None
                ),
            )
            self.oracle.write(op.table, result.ts, upserts=upserts, deletes=op.deletes)
        elif isinstance(op, Compact):
            if op.table is None:
                store.compact(TENANT, target_bytes=op.target_bytes, full=op.full)
            else:
                store.compact(
                    TENANT, f"{DB}.{op.table}", target_bytes=op.target_bytes, full=op.full
                )
        elif isinstance(op, Snapshot):
            name = f"s{self.made}"
            self.made += 1
            self.snapshots[name] = store.create_snapshot(TENANT, name).ts
        elif isinstance(op, DropSnapshot):
            if self.snapshots:
                name = sorted(self.snapshots)[op.index % len(self.snapshots)]
                store.drop_snapshot(TENANT, name)
                del self.snapshots[name]
        else:
            current = self.schema_at("items", store.now())
            has_note = "note" in current.names
            if op.kind == "add_note" and not self.note_added:
                self.note_added = True
                record = store.alter_table(TENANT, f"{DB}.items", add=[NOTE])
            elif op.kind == "drop_note" and has_note:
                record = store.alter_table(TENANT, f"{DB}.items", drop=["note"])
            else:
                return
            self.schemas["items"].append((record.schema_from_ts, record.schema))

    def check_classification(self, plan: RestorePlan) -> None:
        """The catalog's set-based counts equal classifying each source object by hand."""
        with self.store.catalog.snapshot() as tx:
            for table in plan.tables:
                counts = {a: (0, 0) for a in ACTIONS}
                straddlers = []
                for o in live_objects(tx, table.source_table_id):
                    action: Action = (
                        "reuse"
                        if o.max_ts <= plan.at_ts
                        else "skip"
                        if o.min_ts > plan.at_ts
                        else "rewrite"
                    )
                    counts[action] = (counts[action][0] + 1, counts[action][1] + o.bytes)
                    if action == "rewrite":
                        straddlers.append(o)
                assert table.totals() == counts, table.qualified
                assert table.rewrites == tuple(straddlers), table.qualified

    def check_clone(
        self,
        clone: str,
        at_ts: int,
        now: dict[str, list[Row]] | None = None,
        own: dict[str, dict[str, list[Row]]] | None = None,
    ) -> None:
        """The clone reads as the oracle at S, with the DDL and snapshots as of S.

        ``now``: what it reads now instead (it took writes since); ``own``: the
        snapshots it took itself since (name -> table -> rows), after the carried ones.
        """
        store = self.store
        own = own or {}
        tables = {t.name: t for t in store.tables(clone)}
        assert sorted(tables) == ["items", "orders"]
        for table in ("items", "orders"):
            assert tables[table].schema == self.schema_at(table, at_ts), (clone, table)
            got = store.read(clone, f"{DB}.{table}").to_pylist()
            expected = self.expected(table, at_ts) if now is None else now[table]
            assert got == expected, f"{clone}/{table} restored to ts {at_ts}"
        carried = sorted((ts, name) for name, ts in self.snapshots.items() if ts <= at_ts)
        assert [s.name for s in store.snapshots(clone)] == [n for _, n in carried] + list(own)
        assert [(s.ts, s.name) for s in store.snapshots(clone)][: len(carried)] == carried
        for ts, name in carried:
            for table in ("items", "orders"):
                got = store.read(clone, f"{DB}.{table}", as_of=name).to_pylist()
                assert got == self.expected(table, ts), f"{clone}/{table} at snapshot {name}"
        for name, rows in own.items():
            for table in ("items", "orders"):
                got = store.read(clone, f"{DB}.{table}", as_of=name).to_pylist()
                assert got == rows[table], f"{clone}/{table} at its own snapshot {name}"

    def write_clone(self, clone: str, at_ts: int, now: dict[str, list[Row]]) -> None:
        """An update, an insert and a delete in each of the clone's tables; ``now``
        follows (the clone's schema is the source's as of S)."""
        schema = self.schema_at("items", at_ts)
        row = {n: None for n in schema.names} | {"id": 98, "v": "pending"}
        changes: dict[str, tuple[list[Row], list[Row]]] = {
            "items": ([row, {**row, "id": 1}], [{"id": 0}]),
            "orders": (
                [{"id": 9, "region": "eu", "qty": 7}, {"id": 0, "region": "us", "qty": -1}],
                [{"id": 1, "region": "eu"}],
            ),
        }
        for table, (upserts, deletes) in changes.items():
            schema = self.schema_at(table, at_ts)
            self.store.write(
                clone,
                f"{DB}.{table}",
                upserts=pa.Table.from_pylist(upserts, schema=schema.arrow()),
                deletes=pa.Table.from_pylist(deletes, schema=schema.key_arrow()),
            )
            pk = PRIMARY_KEYS[table]
            gone = {_key(table, r) for r in upserts} | {_key(table, r) for r in deletes}
            kept = [r for r in now[table] if _key(table, r) not in gone]
            now[table] = sorted(kept + upserts, key=lambda r: tuple(r[k] for k in pk))

    def check_instant(self, point: str | int, at_ts: int, case: Instant, index: int) -> None:
        """Restore ``point`` as an instant clone and check it before, during and after
        its rewrite (``case`` says how the rewrite runs and what happens meanwhile)."""
        store = self.store
        clone = f"inst{index}"
        at_s = {t: self.expected(t, at_ts) for t in ("items", "orders")}
        seen: list[int] = []

        def usable(installed: Installed) -> None:
            # Installed, not a byte rewritten: every straddler is read through its cut.
            assert installed.tenant.name == clone
            seen.append(len(cut_members(store, clone)))
            self.check_clone(clone, at_ts)

        outcome = restore_tenant(
            store,
            TENANT,
            point,
            to=clone,
            executor="local",
            instant=True,
            wait=case.mode == "wait",
            on_installed=usable,
        )
        tasks = outcome.plan.tasks
        assert outcome.instant and outcome.plan.at_ts == at_ts
        assert seen == [len(tasks)], "the install holds each straddler with a cut"
        if case.mode == "wait":
            self.event("instant restore, waited for")
            assert not outcome.rewrite_pending and outcome.rewritten == len(tasks)
            assert job_state(store, outcome.job_id) == "done"
            assert cut_members(store, clone) == []
            self.check_clone(clone, at_ts)
            return
        assert outcome.rewrite_pending and job_state(store, outcome.job_id) == "rewriting"
        cut = cut_members(store, clone)
        assert sorted(o.id for o in cut) == sorted(t.input.id for t in tasks)
        assert all(o.cut_ts == at_ts for o in cut)
        # While the rewrite is pending: a snapshot (a protected time inside it),
        # writes, a compaction (a full one merges the cut members) and GC with no grace.
        store.create_snapshot(clone, "during")
        own = {"during": at_s}
        now = dict(at_s)
        if case.write:
            self.write_clone(clone, at_ts, now)
        if case.compact != "none":
            store.compact(clone, target_bytes=case.target_bytes, full=case.compact == "full")
        if case.gc:
            run_gc(store, dry_run=False, grace_us=0, allow_short_grace=True, compact=False)
        self.check_clone(clone, at_ts, now, own)
        self.event(
            f"instant restore {case.mode}, {min(len(cut_members(store, clone)), 2)} cut left"
        )
        if case.mode == "resume":
            resumed = resume_restore(store, outcome.job_id)
            assert resumed.instant and not resumed.rewrite_pending
            assert resumed.rewritten == len(tasks)
            assert job_state(store, outcome.job_id) == "done"
            assert cut_members(store, clone) == []
            self.check_clone(clone, at_ts, now, own)
            return
        left = cut_members(store, clone)
        job = cancel_restore(store, outcome.job_id)
        assert job.state == "cancelled" and job.installed_ts == outcome.installed_ts
        assert cut_members(store, clone) == left  # only the rewrite is abandoned
        self.check_clone(clone, at_ts, now, own)
        # A clone of the clone inherits its cut members through a base, and keeps
        # reading them once both sides compact them away and GC runs with no grace.
        clone_reads = reads(store, clone)
        grand = f"{clone}-again"
        restore_tenant(
            store, clone, store.now(), to=grand, executor="local", instant=case.grand_instant
        )
        assert reads(store, grand) == clone_reads
        store.compact(clone, full=True)
        store.compact(grand, full=True)
        run_gc(store, dry_run=False, grace_us=0, allow_short_grace=True, compact=False)
        assert reads(store, grand) == clone_reads == reads(store, clone)
        assert reads(store, grand, "during") == {f"{DB}.{t}": rows for t, rows in at_s.items()}

    def check_restores(self, spark: bool, instants: list[Instant]) -> list[int]:
        """Restore a clone at every standing snapshot and at now, and an instant clone
        (``instants``, in turn, say how); rewrite tasks per point."""
        store = self.store
        now = store.now()
        source_before = reads(store, TENANT)
        objects_before = store.objects_of(TENANT)
        points: list[tuple[str | int, int]] = [(n, ts) for n, ts in self.snapshots.items()]
        points.append((now, now))
        for table in ("items", "orders"):
            assert source_before[f"{DB}.{table}"] == self.expected(table, now)

        rewrites = []
        for index, (point, at_ts) in enumerate(points):
            clone = f"clone{index}"
            outcome = restore_tenant(store, TENANT, point, to=clone, executor="local")
            assert outcome.plan.at_ts == at_ts
            self.check_classification(outcome.plan)
            rewrites.append(len(outcome.plan.tasks))
            self.check_clone(clone, at_ts)
            # The clone takes writes; the source does not see them.
            schema = self.schema_at("items", at_ts)
            row = {n: None for n in schema.names} | {"id": 99, "v": "clone"}
            store.write(
                clone, f"{DB}.items", upserts=pa.Table.from_pylist([row], schema=schema.arrow())
            )
            assert store.read(clone, f"{DB}.items").to_pylist() == sorted(
                [r for r in self.expected("items", at_ts) if r["id"] != 99] + [row],
                key=lambda r: r["id"],
            )
            assert reads(store, TENANT) == source_before
            # A clone of the clone inherits through two levels (docs/membership.md):
            # full compactions on either side change what neither reads.
            clone_reads = reads(store, clone)
            grand = f"{clone}-again"
            restore_tenant(store, clone, store.now(), to=grand, executor="local")
            assert reads(store, grand) == clone_reads
            store.compact(clone, full=True)
            store.compact(grand, full=True)
            assert reads(store, grand) == clone_reads == reads(store, clone)
            if outcome.plan.tasks or index == len(points) - 1:
                # Instant where it holds straddlers with a cut; at now, where none
                # straddles, the edge of a job with nothing to rewrite or swap.
                self.check_instant(point, at_ts, instants[index % len(instants)], index)
                assert reads(store, TENANT) == source_before

        if spark:
            best = max(range(len(points)), key=lambda i: rewrites[i])
            point, at_ts = points[best]
            plan = plan_restore(store.catalog, TENANT, point, to="sparkclone")
            outcome = restore_tenant(store, TENANT, point, to="sparkclone", executor="spark")
            assert outcome.executor == "spark"
            assert len(outcome.plan.tasks) == len(plan.tasks)
            self.check_clone("sparkclone", at_ts)

        assert reads(store, TENANT) == source_before
        assert store.objects_of(TENANT) == objects_before
        assert store.tenant(TENANT).source_tenant_id is None
        return rewrites

    def retire_source(self, pick: int, cancel: bool) -> None:
        """Restore one more instant clone and leave its rewrite pending; drop and purge
        the source (its installed job no longer reads it) and run GC with no grace:
        every clone reads as it did (those reading through cuts, and their clones,
        too), the pending one as the oracle at S. Then resume or cancel its rewrite,
        GC again: it still does, and no key is left that no table reaches."""
        store = self.store
        points: list[tuple[str | int, int]] = [(n, ts) for n, ts in self.snapshots.items()]
        points.append((store.now(), store.now()))
        point, at_ts = points[pick % len(points)]
        outcome = restore_tenant(
            store, TENANT, point, to="last", executor="local", instant=True, wait=False
        )
        clones = [t.name for t in store.tenants() if t.name != TENANT]
        before = {c: reads(store, c) for c in clones}
        purge_tenant(store.catalog, store.drop_tenant(TENANT).ref)

        def collect() -> None:
            run_gc(
                store,
                dry_run=False,
                grace_us=0,
                orphan_grace_us=0,
                allow_short_grace=True,
                compact=False,
            )
            self.check_clone("last", at_ts)

        collect()
        if cancel:
            cancel_restore(store, outcome.job_id)
        else:
            resume_restore(store, outcome.job_id)
            assert cut_members(store, "last") == []
        collect()
        assert {c: reads(store, c) for c in clones} == before  # GC deleted nothing they read
        assert unreached_keys(store) == set()
        self.event(f"source purged under a pending rewrite of {min(len(outcome.plan.tasks), 3)}")


@contextmanager
def model(s3: EmbeddedS3, catalog_uri: str, *, events: bool = True) -> Iterator[Model]:
    m = Model(s3, catalog_uri, events=events)
    try:
        yield m
    finally:
        m.close()


@given(
    history=histories(),
    instant=instants,
    last=st.tuples(st.integers(0, 10), st.booleans()),
)
def test_clone_restore_at_every_protected_time_reads_as_the_oracle(
    s3_server: EmbeddedS3,
    new_catalog_uri: Callable[[], str],
    spark: Any,
    history: list[Op],
    instant: list[Instant],
    last: tuple[int, bool],
) -> None:
    with model(s3_server, new_catalog_uri()) as m:
        for op in history:
            m.apply(op)
        rewrites = m.check_restores(spark=True, instants=instant)
        m.retire_source(*last)
    event(f"restore points: {len(rewrites)}")
    event(
        f"most rewrite tasks at one point: {min(max(rewrites), 5)}{'+' if max(rewrites) >= 5 else ''}"
    )


def test_full_compaction_after_dropping_a_snapshot_keeps_tombstones_a_later_restore_needs(
    s3_server: EmbeddedS3,
    new_catalog_uri: Callable[[], str],
) -> None:
    """A fixed history of the GC lesson: the tombstone hiding key 1 at s1 must survive."""
    history: list[Op] = [
        Write("items", ({"id": 1, "v": "a", "note": None}, {"id": 2, "v": "b", "note": None}), ()),
        Snapshot(),  # s0: 1 and 2
        Write("items", (), ({"id": 1},)),
        Snapshot(),  # s1: 2 only
        Write("items", ({"id": 1, "v": "again", "note": None},), ({"id": 2},)),
        DropSnapshot(0),
        Compact(None, True, DEFAULT_TARGET_BYTES),
        Write("items", ({"id": 3, "v": "c", "note": None},), ()),
        Compact(None, False, DEFAULT_TARGET_BYTES),
    ]
    with model(s3_server, new_catalog_uri(), events=False) as m:
        for op in history:
            m.apply(op)
        assert sorted(m.snapshots) == ["s1"]
        m.check_restores(
            spark=False,
            instants=[
                Instant("cancel", True, "full", DEFAULT_TARGET_BYTES, True, True),
                Instant("resume", True, "partial", 1, True, False),
            ],
        )
        m.retire_source(0, cancel=True)
