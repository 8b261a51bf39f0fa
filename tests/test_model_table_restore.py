"""Model-based test of table, database and tenant restores mixed with everything else.

Hypothesis generates histories on tenant ``src`` (PITR of a day, so every past
commit is a protected time) with tables ``db.items`` (whose schema may gain
and lose a ``note`` column), ``db.orders`` and ``aux.kept``, and a second
tenant ``other``: writes, full and partial compactions, snapshots, drops and
re-creations of tables, undrops, table restores (in place, ``--to`` and
``--to-tenant``), database restores and tenant restores in place, to a
snapshot or to any earlier commit, and GC with no grace.

The model maps each (tenant, database, table) name to *segments*: from a ts,
an oracle table (``tests/oracle.py``) holds what the name reads. A write
goes to the live segment; a restore at install ts R ends the replaced
segment at R and starts a new one whose oracle table is seeded at R with what
the source read at S. After every step every live table of both tenants reads
as its oracle now, and every name reads as its oracle at every earlier
commit and snapshot: the tables a restore did not name never change, and the
replaced ones stay readable (undoable) before the restore.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import pyarrow as pa
from hypothesis import event, given
from hypothesis import strategies as st
from oracle import Oracle, Row

from engine.gc.run import run_gc
from engine.restore.job import restore_tenant
from engine.restore.journal import load_job
from engine.restore.tables import restore_database, restore_table, undrop_table
from tenants.compaction import DEFAULT_TARGET_BYTES
from tenants.embedded_s3 import EmbeddedS3
from tenants.errors import NotFound
from tenants.schema import Column, TableSchema
from tenants.store import TableStore

DEEP = os.environ.get("HYPOTHESIS_PROFILE", "ci") == "deep"
MAX_STEPS = 22 if DEEP else 12
SRC, OTHER = "src", "other"
DAY_US = 86_400_000_000

BASE = TableSchema.of([("id", "int64"), ("v", "string")], ["id"])
NOTE = Column("note", "string")
NAMES = (("db", "items"), ("db", "orders"), ("aux", "kept"))
Name = tuple[str, str, str]  # tenant, database, table


# --- operations -------------------------------------------------------------------------


@dataclass(frozen=True)
class Write:
    table: int  # index into NAMES
    upserts: tuple[tuple[int, str | None], ...]
    deletes: tuple[int, ...]


@dataclass(frozen=True)
class Compact:
    full: bool
    target_bytes: int


@dataclass(frozen=True)
class Snapshot:
    pass


@dataclass(frozen=True)
class AddNote:
    pass


@dataclass(frozen=True)
class DropTable:
    table: int


@dataclass(frozen=True)
class CreateTable:
    table: int


@dataclass(frozen=True)
class Undrop:
    table: int


@dataclass(frozen=True)
class RestoreTable:
    table: int
    point: int  # index into the points so far (commits and snapshots), from the newest back
    mode: Literal["in_place", "to", "to_tenant"]
    by_snapshot: bool


@dataclass(frozen=True)
class RestoreDatabase:
    point: int
    by_snapshot: bool
    mode: Literal["in_place", "to", "to_tenant"] = "in_place"


@dataclass(frozen=True)
class RestoreTenant:
    point: int


@dataclass(frozen=True)
class Gc:
    pass


Op = (
    Write
    | Compact
    | Snapshot
    | AddNote
    | DropTable
    | CreateTable
    | Undrop
    | RestoreTable
    | RestoreDatabase
    | RestoreTenant
    | Gc
)

tables = st.integers(0, len(NAMES) - 1)
points = st.integers(0, 6)
writes = st.builds(
    Write,
    table=tables,
    upserts=st.lists(
        st.tuples(st.integers(0, 4), st.none() | st.text("ab", max_size=2)),
        max_size=3,
        unique_by=lambda r: r[0],
    ).map(tuple),
    deletes=st.lists(st.integers(0, 4), max_size=2, unique=True).map(tuple),
)
restore_tables = st.builds(
    RestoreTable,
    table=tables,
    point=points,
    mode=st.sampled_from(["in_place", "in_place", "to", "to_tenant"]),
    by_snapshot=st.booleans(),
)
restore_databases = st.builds(
    RestoreDatabase,
    point=points,
    by_snapshot=st.booleans(),
    mode=st.sampled_from(["in_place", "in_place", "to", "to_tenant"]),
)
ops = st.one_of(
    writes,
    writes,
    writes,
    st.builds(
        Compact, full=st.booleans(), target_bytes=st.sampled_from([1, 1_500, DEFAULT_TARGET_BYTES])
    ),
    st.just(Snapshot()),
    st.just(AddNote()),
    st.builds(DropTable, table=tables),
    st.builds(CreateTable, table=tables),
    st.builds(Undrop, table=tables),
    st.builds(
        RestoreTable,
        table=tables,
        point=points,
        mode=st.sampled_from(["in_place", "in_place", "to", "to_tenant"]),
        by_snapshot=st.booleans(),
    ),
    st.builds(
        RestoreDatabase,
        point=points,
        by_snapshot=st.booleans(),
        mode=st.sampled_from(["in_place", "in_place", "to", "to_tenant"]),
    ),
    st.builds(RestoreTenant, point=points),
    st.just(Gc()),
)


@st.composite
def histories(draw: st.DrawFn) -> list[Op]:
    """Some writes to every table first (so restores have something to restore),
    then free operations around a snapshot, a table restore and a database
    restore (at least one of each per example)."""
    first = [
        Write(
            i,
            draw(
                st.lists(
                    st.tuples(st.integers(0, 4), st.just("a")),
                    min_size=1,
                    max_size=3,
                    unique_by=lambda r: r[0],
                ).map(tuple)
            ),
            (),
        )
        for i in range(len(NAMES))
    ]
    part = st.lists(ops, max_size=MAX_STEPS // 3)
    return [
        *first,
        *draw(part),
        Snapshot(),
        *draw(part),
        draw(writes),
        Compact(False, DEFAULT_TARGET_BYTES),  # objects across the snapshot: straddlers
        draw(restore_tables),
        *draw(part),
        draw(restore_databases),
        *draw(part),
    ]


# --- the model --------------------------------------------------------------------------


@dataclass
class Segment:
    """From ``start`` (until ``end``), a name reads as oracle table ``key``."""

    start: int
    key: str
    epoch: int  # tenant restores of ``src`` before it began
    end: int | None = None
    dropped: bool = False  # ended by a drop or a table/database restore (undroppable)


@dataclass
class Model:
    store: TableStore
    oracle: Oracle = field(default_factory=Oracle)
    names: dict[Name, list[Segment]] = field(default_factory=dict)
    schemas: dict[str, list[tuple[int, TableSchema]]] = field(default_factory=dict)
    points: list[tuple[int, str | None]] = field(default_factory=list)  # (ts, snapshot name)
    made: int = 0
    note_added: bool = False
    epoch: int = 0  # tenant restores of ``src`` so far

    # -- bookkeeping

    def new_key(self, since: int, schema: TableSchema) -> str:
        key = f"k{len(self.schemas)}"
        self.oracle.create_table(key, ["id"])
        self.schemas[key] = [(since, schema)]
        return key

    def live(self, name: Name) -> Segment | None:
        segments = self.names.get(name, [])
        return segments[-1] if segments and segments[-1].end is None else None

    def at(self, name: Name, ts: int) -> Segment | None:
        for s in self.names.get(name, []):
            if s.start <= ts and (s.end is None or ts < s.end):
                return s
        return None

    def schema_at(self, key: str, ts: int) -> TableSchema:
        return [s for since, s in self.schemas[key] if since <= ts][-1]

    def expected(self, key: str, ts: int) -> list[Row]:
        names = self.schema_at(key, ts).names
        return [{n: row.get(n) for n in names} for row in self.oracle.read(key, ts)]

    def created(self, name: Name) -> None:
        record = self.store.create_table(name[0], name[1], name[2], BASE)
        key = self.new_key(record.created_ts, BASE)
        self.names.setdefault(name, []).append(Segment(record.created_ts, key, self.epoch))
        self.points.append((record.created_ts, None))

    def end(self, name: Name, ts: int, *, dropped: bool) -> None:
        live = self.live(name)
        if live is not None:
            live.end, live.dropped = ts, dropped

    def restored(
        self, name: Name, source: Segment, at_ts: int, ts: int, *, dropped: bool = True
    ) -> None:
        """``name`` reads from ``ts`` on what ``source`` read at ``at_ts``."""
        self.end(name, ts, dropped=dropped)
        key = self.new_key(ts, self.schema_at(source.key, at_ts))
        self.oracle.write(key, ts, upserts=self.oracle.read(source.key, at_ts))
        self.names.setdefault(name, []).append(Segment(ts, key, self.epoch))

    def point(self, index: int, by_snapshot: bool) -> tuple[str | int, int]:
        """A protected point: a snapshot's name or a past commit's ts."""
        snaps = [(ts, n) for ts, n in self.points if n is not None]
        if by_snapshot and snaps:
            ts, name = snaps[-1 - index % len(snaps)]
            return name, ts
        ts = self.points[-1 - index % len(self.points)][0]
        return ts, ts

    def tables_of(self, tenant: str) -> list[Name]:
        return [n for n in self.names if n[0] == tenant]

    # -- operations

    def apply(self, op: Op) -> None:
        store = self.store
        if isinstance(op, Write):
            name = (SRC, *NAMES[op.table])
            live = self.live(name)
            if live is None:
                return
            schema = self.schema_at(live.key, store.now())
            upserts = [
                {n: {"id": i, "v": v, "note": v}.get(n) for n in schema.names}
                for i, v in op.upserts
            ]
            deletes = [{"id": i} for i in op.deletes]
            if not upserts and not deletes:
                return
            result = store.write(
                SRC,
                name[1],
                name[2],
                upserts=pa.Table.from_pylist(upserts, schema=schema.arrow()) if upserts else None,
                deletes=pa.Table.from_pylist(deletes, schema=schema.key_arrow())
                if deletes
                else None,
            )
            self.oracle.write(live.key, result.ts, upserts=upserts, deletes=deletes)
            self.points.append((result.ts, None))
        elif isinstance(op, Compact):
            store.compact(SRC, target_bytes=op.target_bytes, full=op.full)
        elif isinstance(op, Snapshot):
            name = f"s{self.made}"
            self.made += 1
            self.points.append((store.create_snapshot(SRC, name).ts, name))
        elif isinstance(op, AddNote):
            name = (SRC, "db", "items")
            live = self.live(name)
            if live is None or self.note_added:
                return
            self.note_added = True
            record = store.alter_table(SRC, "db", "items", add=[NOTE])
            self.schemas[live.key].append((record.schema_from_ts, record.schema))
            self.points.append((record.schema_from_ts, None))
        elif isinstance(op, DropTable):
            name = (SRC, *NAMES[op.table])
            live = self.live(name)
            if live is None:
                return
            store.drop_table(*name)
            self.end(name, store.now(), dropped=True)
            self.points.append((store.now(), None))
        elif isinstance(op, CreateTable):
            name = (SRC, *NAMES[op.table])
            if self.live(name) is None:
                self.created(name)
        elif isinstance(op, Undrop):
            self.undrop((SRC, *NAMES[op.table]))
        elif isinstance(op, RestoreTable):
            self.restore_table(op)
        elif isinstance(op, RestoreDatabase):
            self.restore_database(op)
        elif isinstance(op, RestoreTenant):
            self.restore_tenant(op)
        else:
            run_gc(store, dry_run=False, grace_us=0, allow_short_grace=True, compact=False)

    def undrop(self, name: Name) -> None:
        """Undrop the name's last dropped table, if it was dropped since the last
        tenant restore (an older one's drop depends on what that restore carried)."""
        segments = self.names.get(name, [])
        if not segments or self.live(name) is not None:
            return
        dropped = segments[-1]
        if not dropped.dropped or dropped.epoch != self.epoch:
            return
        assert dropped.end is not None
        outcome = undrop_table(self.store, SRC, f"{name[1]}.{name[2]}", executor="local")
        ts = self.installed_at(outcome.job_id)
        self.restored(name, dropped, dropped.end - 1, ts)
        self.points.append((ts, None))

    def restore_table(self, op: RestoreTable) -> None:
        name = (SRC, *NAMES[op.table])
        point, at_ts = self.point(op.point, op.by_snapshot)
        source = self.at(name, at_ts)
        qualified = f"{name[1]}.{name[2]}"
        if source is None:
            try:
                restore_table(self.store, SRC, qualified, point, executor="local")
            except NotFound:
                return
            raise AssertionError(f"{qualified} did not exist at {at_ts}: the restore must refuse")
        if op.mode == "in_place":
            target = name
            outcome = restore_table(self.store, SRC, qualified, point, executor="local")
        else:
            self.made += 1
            tenant = OTHER if op.mode == "to_tenant" else SRC
            target = (tenant, name[1], f"{name[2]}_r{self.made}")
            outcome = restore_table(
                self.store,
                SRC,
                qualified,
                point,
                to=f"{target[1]}.{target[2]}",
                to_tenant=OTHER if op.mode == "to_tenant" else None,
                executor="local",
            )
        ts = self.installed_at(outcome.job_id)
        self.restored(target, source, at_ts, ts)
        self.points.append((ts, None))
        event(f"table restore {op.mode}, {outcome.rewritten} rewritten")

    def restore_database(self, op: RestoreDatabase) -> None:
        point, at_ts = self.point(op.point, op.by_snapshot)
        in_db = [n for n in self.tables_of(SRC) if n[1] == "db"]
        target_tenant, target_db = SRC, "db"
        if op.mode != "in_place":
            self.made += 1
            target_tenant = OTHER if op.mode == "to_tenant" else SRC
            target_db = f"db_r{self.made}"
        try:
            outcome = restore_database(
                self.store,
                SRC,
                "db",
                point,
                to=None if op.mode == "in_place" else target_db,
                to_tenant=OTHER if op.mode == "to_tenant" else None,
                executor="local",
            )
        except NotFound:
            # The database did not exist then (a restore carries every database
            # live at its point, empty ones too), so no table of it can have.
            assert not any(self.at(n, at_ts) for n in in_db)
            return
        ts = self.installed_at(outcome.job_id)
        for name in in_db:
            source = self.at(name, at_ts)
            target = (target_tenant, target_db, name[2])
            if source is not None:
                self.restored(target, source, at_ts, ts)
            elif op.mode == "in_place":
                self.end(name, ts, dropped=True)
        self.points.append((ts, None))
        event(f"database restore {op.mode}, {len(outcome.plan.tables)} tables")

    def restore_tenant(self, op: RestoreTenant) -> None:
        point, at_ts = self.point(op.point, False)
        outcome = restore_tenant(self.store, SRC, point, executor="local")
        ts = self.installed_at(outcome.job_id)
        self.epoch += 1
        for name in self.tables_of(SRC):
            source = self.at(name, at_ts)
            if source is not None:
                self.restored(name, source, at_ts, ts, dropped=False)
            else:
                self.end(name, ts, dropped=False)
        self.points.append((ts, None))
        event("tenant restore")

    def installed_at(self, job_id: str) -> int:
        installed = load_job(self.store.catalog, job_id).installed_ts
        assert installed is not None, job_id
        return installed

    # -- checks

    def check(self, full: bool) -> None:
        """Every live table reads as its oracle now; with ``full``, every name also
        at every recorded point (``src``'s through its lineage)."""
        store = self.store
        now = store.now()
        for tenant in (SRC, OTHER):
            live = {(tenant, t.database, t.name) for t in store.tables(tenant)}
            assert live == {n for n in self.tables_of(tenant) if self.live(n)}, tenant
            for name in live:
                segment = self.live(name)
                assert segment is not None
                got = store.read(*name).to_pylist()
                assert got == self.expected(segment.key, now), f"{name} now"
        if not full:
            return
        for ts, label in self.points:
            for name in self.tables_of(SRC):
                segment = self.at(name, ts)
                if segment is None:
                    continue
                got = store.read(*name, as_of=label or ts).to_pylist()
                assert got == self.expected(segment.key, ts), f"{name} at {label or ts}"


@given(history=histories())
def test_table_database_and_tenant_restores_read_as_the_oracle_at_every_time(
    s3_server: EmbeddedS3, new_catalog_uri: Callable[[], str], history: list[Op]
) -> None:
    bucket = f"rewind-tables-{uuid.uuid4().hex[:12]}"
    s3_server.create_bucket(bucket)
    store = TableStore.open(new_catalog_uri(), f"s3://{bucket}/wh", s3=s3_server.settings)
    try:
        m = Model(store)
        store.create_tenant(SRC)
        store.set_pitr(SRC, DAY_US)
        store.create_tenant(OTHER)
        for database, table in NAMES:
            m.created((SRC, database, table))
        for op in history:
            m.apply(op)
            m.check(full=False)
        m.check(full=True)
    finally:
        store.close()
