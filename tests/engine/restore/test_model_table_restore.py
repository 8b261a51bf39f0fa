"""Model-based test of table, database and tenant restores mixed with everything else.

Hypothesis generates histories on tenant ``src`` (PITR of a day, so every past
commit is a protected time) with tables ``db.items`` (whose schema may gain
and lose a ``note`` column), ``db.orders`` and ``aux.kept``, and a second
tenant ``other``: writes, full and partial compactions, snapshots, drops and
re-creations of tables, undrops, table restores (in place, ``--to`` and
``--to-tenant``), database restores and tenant restores in place, to a
snapshot or to any earlier commit, and GC with no grace.

The model maps each (tenant, database, table) name to *segments*: from a ts,
an oracle table (``tests/helpers/oracle.py``) holds what the name reads. A write
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
from dataclasses import dataclass, field, replace
from typing import Literal

import pyarrow as pa
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from engine.gc.purge import purge_tenant
from engine.gc.run import run_gc
from engine.pipeline import Installed
from engine.restore.job import RestoreOutcome, cancel_restore, restore_tenant, resume_restore
from engine.restore.journal import load_job
from engine.restore.tables import restore_database, restore_table, undrop_table
from tenants.compaction import DEFAULT_TARGET_BYTES
from tenants.errors import NotFound, RestoreInProgress
from tenants.objectstore.embedded import EmbeddedS3
from tenants.schema import Column, TableSchema
from tenants.store import TableStore
from tests.helpers.oracle import Oracle, Row

DEEP = os.environ.get("HYPOTHESIS_PROFILE", "ci") == "deep"
MAX_STEPS = 22 if DEEP else 12
SRC, OTHER = "src", "other"
DAY_US = 86_400_000_000

BASE = TableSchema.of([("id", "int64"), ("v", "string")], ["id"])
NOTE = Column("note", "string")
NAMES = (("db", "items"), ("db", "orders"), ("aux", "kept"))
Name = tuple[str, str, str]  # tenant, database, table
# How a restore runs: rewrite first; instant (installed before its rewrite, in the
# same call); or instant with the rewrite left for a later Finish.
Instant = Literal["no", "wait", "pending"]
instants = st.sampled_from(["no", "wait", "pending", "pending"])


def ref(name: Name) -> tuple[str, str]:
    """``(tenant, "db.table")``: how a TableStore method names the table."""
    return name[0], f"{name[1]}.{name[2]}"


# --- operations -------------------------------------------------------------------------


@dataclass(frozen=True)
class Write:
    table: int  # index into NAMES
    upserts: tuple[tuple[int, str | None], ...]
    deletes: tuple[int, ...]


@dataclass(frozen=True)
class WriteRestored:
    """A write to a table a restore made beside the originals (``--to``, ``--to-tenant``)."""

    pick: int  # among them, newest first
    upserts: tuple[tuple[int, str | None], ...]
    deletes: tuple[int, ...]


@dataclass(frozen=True)
class Compact:
    full: bool
    target_bytes: int
    tenant: str = SRC


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
    instant: Instant = "no"


@dataclass(frozen=True)
class RestoreDatabase:
    point: int
    by_snapshot: bool
    mode: Literal["in_place", "to", "to_tenant"] = "in_place"
    instant: Instant = "no"


@dataclass(frozen=True)
class RestoreTenant:
    point: int
    instant: Instant = "no"


@dataclass(frozen=True)
class Gc:
    pass


@dataclass(frozen=True)
class Finish:
    """Resume or cancel the instant job whose rewrite is pending, if any."""

    cancel: bool


@dataclass(frozen=True)
class DropSnapshot:
    index: int  # of the source's standing snapshots, modulo their number


@dataclass(frozen=True)
class Purge:
    """Purge every retired tenant (an in-place tenant restore's predecessors)."""


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
    | WriteRestored
    | Finish
    | DropSnapshot
    | Purge
)

tables = st.integers(0, len(NAMES) - 1)
points = st.integers(0, 6)
upserts = st.lists(
    st.tuples(st.integers(0, 4), st.none() | st.text("ab", max_size=2)),
    max_size=3,
    unique_by=lambda r: r[0],
).map(tuple)
deletes = st.lists(st.integers(0, 4), max_size=2, unique=True).map(tuple)
writes = st.builds(Write, table=tables, upserts=upserts, deletes=deletes)
restore_tables = st.builds(
    RestoreTable,
    table=tables,
    point=points,
    mode=st.sampled_from(["in_place", "in_place", "to", "to_tenant"]),
    by_snapshot=st.booleans(),
    instant=instants,
)
restore_databases = st.builds(
    RestoreDatabase,
    point=points,
    by_snapshot=st.booleans(),
    mode=st.sampled_from(["in_place", "in_place", "to", "to_tenant"]),
    instant=instants,
)
ops = st.one_of(
    writes,
    writes,
    writes,
    st.builds(WriteRestored, pick=st.integers(0, 9), upserts=upserts, deletes=deletes),
    st.builds(
        Compact,
        full=st.booleans(),
        target_bytes=st.sampled_from([1, 1_500, DEFAULT_TARGET_BYTES]),
        tenant=st.sampled_from([SRC, SRC, OTHER]),
    ),
    st.just(Snapshot()),
    st.just(AddNote()),
    st.builds(DropTable, table=tables),
    st.builds(CreateTable, table=tables),
    st.builds(Undrop, table=tables),
    restore_tables,
    restore_databases,
    st.builds(RestoreTenant, point=points, instant=instants),
    st.just(Gc()),
    st.builds(Finish, cancel=st.booleans()),
    st.builds(DropSnapshot, index=st.integers(0, 9)),
    st.just(Purge()),
)


@st.composite
def histories(draw: st.DrawFn) -> list[Op]:
    """Some writes to every table first (so restores have something to restore),
    then free operations around a snapshot, a table restore and a database
    restore (at least one of each per example). Right after the compaction that
    makes straddlers, an instant restore of the newest snapshot, most often left
    pending through a write to what it restored, a compaction and GC."""
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
    straddling = draw(
        st.builds(
            Write,
            st.integers(0, 1),  # a table of db: a database restore straddles too
            upserts.filter(bool) | st.just(((4, "z"),)),
            deletes,
        )
    )
    modes = st.sampled_from(["in_place", "to", "to_tenant"])
    how = st.sampled_from(["wait", "pending", "pending"])
    instant = draw(
        st.builds(RestoreTable, st.just(straddling.table), st.just(0), modes, st.just(True), how)
        | st.builds(RestoreDatabase, st.just(0), st.just(True), modes, how)
    )
    during = draw(
        st.permutations(
            [
                draw(writes.map(lambda w: replace(w, table=straddling.table))),
                draw(st.builds(WriteRestored, st.just(0), upserts, deletes)),
                draw(
                    st.builds(
                        Compact,
                        st.booleans(),
                        st.just(DEFAULT_TARGET_BYTES),
                        modes.map(lambda m: OTHER if m == "to_tenant" else SRC),
                    )
                ),
                Gc(),
            ]
        )
    )
    return [
        *first,
        *draw(part),
        Snapshot(),
        *draw(part),
        straddling,
        Compact(False, DEFAULT_TARGET_BYTES),  # objects across the snapshot: straddlers
        instant,
        *during,
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
    pending: str | None = None  # the instant job whose rewrite waits for a Finish
    pending_tasks: int = 0  # its straddlers, held with a cut until swapped
    floor: int = 0  # times before it are gone (their holder purged), but for carried snapshots

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
        record = self.store.create_table(name[0], f"{name[1]}.{name[2]}", BASE)
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
        times = [ts for ts, _ in self.points if ts >= self.floor]
        ts = times[-1 - index % len(times)]
        return ts, ts

    def tables_of(self, tenant: str) -> list[Name]:
        return [n for n in self.names if n[0] == tenant]

    # -- operations

    def apply(self, op: Op) -> None:
        store = self.store
        if self.pending is not None and self.pending_tasks:
            event(f"{type(op).__name__} while straddlers are held with a cut")
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
                f"{name[1]}.{name[2]}",
                upserts=pa.Table.from_pylist(upserts, schema=schema.arrow()) if upserts else None,
                deletes=pa.Table.from_pylist(deletes, schema=schema.key_arrow())
                if deletes
                else None,
            )
            self.oracle.write(live.key, result.ts, upserts=upserts, deletes=deletes)
            self.points.append((result.ts, None))
        elif isinstance(op, WriteRestored):
            self.write_restored(op)
        elif isinstance(op, Compact):
            store.compact(op.tenant, target_bytes=op.target_bytes, full=op.full)
        elif isinstance(op, Snapshot):
            snapshot = f"s{self.made}"
            self.made += 1
            self.points.append((store.create_snapshot(SRC, snapshot).ts, snapshot))
        elif isinstance(op, AddNote):
            name = (SRC, "db", "items")
            live = self.live(name)
            if live is None or self.note_added:
                return
            self.note_added = True
            record = store.alter_table(SRC, "db.items", add=[NOTE])
            self.schemas[live.key].append((record.schema_from_ts, record.schema))
            self.points.append((record.schema_from_ts, None))
        elif isinstance(op, DropTable):
            name = (SRC, *NAMES[op.table])
            live = self.live(name)
            if live is None:
                return
            store.drop_table(*ref(name))
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
        elif isinstance(op, Finish):
            self.finish(op.cancel)
        elif isinstance(op, DropSnapshot):
            self.drop_snapshot(op)
        elif isinstance(op, Purge):
            self.purge()
        else:
            run_gc(store, dry_run=False, grace_us=0, allow_short_grace=True, compact=False)

    def write_restored(self, op: WriteRestored) -> None:
        """A write to a live table a restore made beside the originals, in either
        tenant (``pick`` 0: the newest)."""
        made = sorted(
            (n for n in self.names if self.live(n) and (n[0] == OTHER or n[1:] not in NAMES)),
            key=lambda n: (-self.names[n][-1].start, n),
        )
        if not made:
            return
        name = made[op.pick % len(made)]
        live = self.live(name)
        assert live is not None
        schema = self.schema_at(live.key, self.store.now())
        upserts = [
            {n: {"id": i, "v": v, "note": v}.get(n) for n in schema.names} for i, v in op.upserts
        ]
        deletes = [{"id": i} for i in op.deletes]
        if not upserts and not deletes:
            return
        result = self.store.write(
            *ref(name),
            upserts=pa.Table.from_pylist(upserts, schema=schema.arrow()) if upserts else None,
            deletes=pa.Table.from_pylist(deletes, schema=schema.key_arrow()) if deletes else None,
        )
        self.oracle.write(live.key, result.ts, upserts=upserts, deletes=deletes)
        if name[0] == SRC:
            self.points.append((result.ts, None))
        event("write to a restored table" + (" (rewrite pending)" if self.pending else ""))

    def drop_snapshot(self, op: DropSnapshot) -> None:
        """Drop one of the source's snapshots: its time is still read by ts (the
        PITR window), no longer by its name."""
        standing = [s.name for s in self.store.snapshots(SRC)]
        if not standing:
            return
        name = standing[op.index % len(standing)]
        self.store.drop_snapshot(SRC, name)
        self.points = [(ts, None if label == name else label) for ts, label in self.points]
        self.keep_readable()

    def purge(self) -> None:
        """Purge every retired tenant: times only they held are gone, but for the
        snapshots the current tenant carried. A pending instant tenant restore's
        source may go too: its install no longer reads it."""
        purged = 0
        for tenant in self.store.tenants(include_dropped=True):
            if tenant.state == "dropped" and tenant.purged_ts is None:
                purge_tenant(self.store.catalog, tenant.ref)
                purged += 1
        if not purged:
            return
        self.floor = self.store.tenant(SRC).created_ts
        self.keep_readable()
        event("retired tenants purged" + (" (rewrite pending)" if self.pending else ""))

    def keep_readable(self) -> None:
        """Forget the points no read can reach any more: before the floor, unless a
        snapshot the current tenant holds names them."""
        standing = {s.name for s in self.store.snapshots(SRC)}
        self.points = [
            (ts, label)
            for ts, label in self.points
            if ts >= self.floor or (label is not None and label in standing)
        ]

    def finish(self, cancel: bool) -> None:
        """Resume or cancel the pending instant job: no read changes either way."""
        if self.pending is None:
            return
        job_id, self.pending = self.pending, None
        if cancel:
            job = cancel_restore(self.store, job_id)
            assert job.state == "cancelled" and job.installed_ts is not None
            event("instant rewrite cancelled")
        else:
            outcome = resume_restore(self.store, job_id)
            assert outcome.instant and not outcome.rewrite_pending
            assert load_job(self.store.catalog, job_id).state == "done"
            event("instant rewrite resumed")

    def run(
        self,
        call: Callable[..., RestoreOutcome],
        instant: Instant,
        on_installed: Callable[[int], None],
    ) -> RestoreOutcome:
        """Run a restore job ``instant`` as said; ``on_installed`` books its install.

        While an instant job's rewrite is pending the restore is refused (that
        job holds the tenant's name), and runs once it is resumed. An instant
        restore is checked the moment it is installed, before its rewrite.
        """
        if self.pending is not None:
            with pytest.raises(RestoreInProgress, match="already has restore job"):
                call()
            self.finish(cancel=False)
        if instant == "no":
            outcome = call()
            on_installed(self.installed_at(outcome.job_id))
            return outcome

        def installed(done: Installed) -> None:
            on_installed(done.ts)
            self.check(full=False)  # installed: every straddler read through its cut

        outcome = call(instant=True, wait=instant == "wait", on_installed=installed)
        assert outcome.instant and outcome.rewrite_pending == (instant == "pending")
        if instant == "pending":
            self.pending, self.pending_tasks = outcome.job_id, len(outcome.plan.tasks)
        event(f"instant {instant}, {min(len(outcome.plan.tasks), 2)} straddling")
        return outcome

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
        end = dropped.end

        def installed(ts: int) -> None:
            self.restored(name, dropped, end - 1, ts)
            self.points.append((ts, None))

        self.run(
            lambda: undrop_table(self.store, SRC, f"{name[1]}.{name[2]}", executor="local"),
            "no",
            installed,
        )

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
        to: str | None = None  # in place
        to_tenant: str | None = None
        if op.mode == "in_place":
            target = name
        else:
            self.made += 1
            tenant = OTHER if op.mode == "to_tenant" else SRC
            target = (tenant, name[1], f"{name[2]}_r{self.made}")
            to = f"{target[1]}.{target[2]}"
            to_tenant = OTHER if op.mode == "to_tenant" else None

        def installed(ts: int) -> None:
            self.restored(target, source, at_ts, ts)
            self.points.append((ts, None))

        outcome = self.run(
            lambda **more: restore_table(
                self.store,
                SRC,
                qualified,
                point,
                to=to,
                to_tenant=to_tenant,
                executor="local",
                **more,
            ),
            op.instant,
            installed,
        )
        tasks = len(outcome.plan.tasks)
        event(f"table restore {op.mode}, {min(tasks, 2)} straddling, instant {op.instant}")

    def restore_database(self, op: RestoreDatabase) -> None:
        point, at_ts = self.point(op.point, op.by_snapshot)
        in_db = [n for n in self.tables_of(SRC) if n[1] == "db"]
        target_tenant, target_db = SRC, "db"
        if op.mode != "in_place":
            self.made += 1
            target_tenant = OTHER if op.mode == "to_tenant" else SRC
            target_db = f"db_r{self.made}"

        def installed(ts: int) -> None:
            for name in in_db:
                source = self.at(name, at_ts)
                target = (target_tenant, target_db, name[2])
                if source is not None:
                    self.restored(target, source, at_ts, ts)
                elif op.mode == "in_place":
                    self.end(name, ts, dropped=True)
            self.points.append((ts, None))

        try:
            outcome = self.run(
                lambda **more: restore_database(
                    self.store,
                    SRC,
                    "db",
                    point,
                    to=None if op.mode == "in_place" else target_db,
                    to_tenant=OTHER if op.mode == "to_tenant" else None,
                    executor="local",
                    **more,
                ),
                op.instant,
                installed,
            )
        except NotFound:
            # The database did not exist then (a restore carries every database
            # live at its point, empty ones too), so no table of it can have.
            assert not any(self.at(n, at_ts) for n in in_db)
            return
        event(f"database restore {op.mode}, {len(outcome.plan.tables)} tables, {op.instant}")

    def restore_tenant(self, op: RestoreTenant) -> None:
        point, at_ts = self.point(op.point, False)

        def installed(ts: int) -> None:
            self.epoch += 1
            for name in self.tables_of(SRC):
                source = self.at(name, at_ts)
                if source is not None:
                    self.restored(name, source, at_ts, ts, dropped=False)
                else:
                    self.end(name, ts, dropped=False)
            self.points.append((ts, None))

        self.run(
            lambda **more: restore_tenant(self.store, SRC, point, executor="local", **more),
            op.instant,
            installed,
        )
        event(f"tenant restore, instant {op.instant}")

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
                got = store.read(*ref(name)).to_pylist()
                assert got == self.expected(segment.key, now), f"{name} now"
        if not full:
            return
        for ts, label in self.points:
            for name in self.tables_of(SRC):
                segment = self.at(name, ts)
                if segment is None:
                    continue
                got = store.read(*ref(name), as_of=label or ts).to_pylist()
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
        if m.pending is not None:  # whatever is left can still be finished
            m.finish(cancel=False)
            m.check(full=True)
    finally:
        store.close()
