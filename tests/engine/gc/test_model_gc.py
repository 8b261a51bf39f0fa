"""Model-based test of GC: random histories of many tenants against ``tests/helpers/oracle.py``.

Hypothesis generates histories of writes (new keys, updates, deletes, a key
deleted and upserted in one commit) on two tables, snapshots created and
dropped, partial and full compactions, restores (clones and in place, of
active and of dropped tenants, at snapshots and at "now"), table restores in
place (the replaced table stays readable at earlier snapshots), each run
rewrite-first, instant, or instant with its rewrite left pending (its
straddlers held with a cut) until a later step resumes or cancels it, tenant drops,
purges, clock moves (minutes to past the retention) and GC runs (no grace, or
the real one-hour grace) interleaved. Writers also die: a write killed after
recording its intent, after its first upload, or inside its commit; a
compaction killed after its intent or in its swap; and a write slower than
the orphan grace, uploaded in one step and committed steps later (GC may have
revoked its intent meanwhile: its commit must then fail and change nothing). Each tenant id has its own oracle: a
restore copies its source's events up to the restore point.

After every GC: every protected read of every tenant that is not purged (each
of its snapshots, and now) equals its oracle, so GC deleted nothing a read
needs, tombstones included; every object row's key is in the bucket; every
key a killed writer left is gone once its intent is older than the orphan
grace (one pass after the grace, without listing the warehouse); and the
reclaimable rows GC reports from the measurements it kept equal a fresh
measurement of every table.

At the end, every snapshot is dropped, every dropped tenant purged, the clock
moved past retention and grace, and GC run twice: then every key in the
bucket is a live member of an active tenant's table (nothing leaked), and the
catalog knows no other object.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
from hypothesis import event, given
from hypothesis import strategies as st

from engine.gc.collect import SAMPLE, collect
from engine.gc.purge import purge_tenant
from engine.gc.reclaim import scan
from engine.gc.run import DEFAULT_ORPHAN_GRACE_US, run_gc
from engine.restore.job import RestoreOutcome, cancel_restore, restore_tenant, resume_restore
from engine.restore.journal import load_job
from engine.restore.tables import restore_table
from tenants.catalog.base import wall_clock_us
from tenants.catalog.totals import counted, totals_of
from tenants.compaction import DEFAULT_TARGET_BYTES
from tenants.errors import (
    ConcurrentModification,
    IntentRevoked,
    RestoreInProgress,
    TenantDropped,
)
from tenants.objectstore.embedded import EmbeddedS3
from tenants.schema import Column, TableSchema
from tenants.store import TableStore
from tenants.tenancy import active_tenant, find_table
from tenants.times import US
from tenants.writes import PreparedCommit, install_prepared, prepare_commit
from tests.helpers.gc import (
    ReadCountingStore,
    RecordingStore,
    bucket_listing,
    dangling_keys,
    live_member_keys,
    object_rows,
    pending_rows,
)
from tests.helpers.oracle import ModelTable, Oracle, Row
from tests.helpers.restores import FaultyCatalog, SimulatedCrash, with_catalog, with_objects

DEEP = os.environ.get("HYPOTHESIS_PROFILE", "ci") == "deep"
MAX_STEPS = 40 if DEEP else 30
DB = "db"
RETENTION = 7 * US["d"]

SCHEMAS = {
    "items": TableSchema.of([("id", "int64"), ("v", "string")], ["id"]),
    "orders": TableSchema(
        (Column("id", "int64"), Column("region", "string"), Column("qty", "int32", nullable=False)),
        ("id", "region"),
    ),
}
KEYS: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "items": st.fixed_dictionaries({"id": st.integers(0, 5)}),
    "orders": st.fixed_dictionaries(
        {"id": st.integers(0, 3), "region": st.sampled_from(["eu", "us"])}
    ),
}
VALUES: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "items": st.fixed_dictionaries({"v": st.none() | st.text(max_size=3)}),
    "orders": st.fixed_dictionaries({"qty": st.integers(-(2**31), 2**31 - 1)}),
}


# --- operations ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Write:
    pick: int  # which active tenant, modulo their number
    table: str
    upserts: tuple[Row, ...]
    deletes: tuple[Row, ...]


@dataclass(frozen=True)
class Snapshot:
    pick: int


@dataclass(frozen=True)
class DropSnapshot:
    pick: int  # which tenant that is not purged
    index: int


@dataclass(frozen=True)
class Compact:
    pick: int
    table: str | None
    full: bool
    target_bytes: int


# How a restore runs: rewrite first; instant (installed before its rewrite, which
# follows in the same call); or instant without waiting (the rewrite stays journaled
# until a FinishRewrite resumes or cancels it, while everything else goes on).
REWRITE_FIRST, INSTANT, INSTANT_NO_WAIT = 0, 1, 2
modes = st.sampled_from([REWRITE_FIRST, INSTANT, INSTANT_NO_WAIT])


@dataclass(frozen=True)
class Restore:
    pick: int  # source: any tenant that is not purged
    point: int  # index into its snapshots + [now]
    in_place: bool  # only for an active source; else a clone
    mode: int = REWRITE_FIRST


@dataclass(frozen=True)
class RestoreTable:
    pick: int  # an active tenant
    table: str
    point: int  # index into its snapshots + [now]
    mode: int = REWRITE_FIRST


@dataclass(frozen=True)
class FinishRewrite:
    pick: int  # among the instant jobs whose rewrite is pending
    cancel: bool  # abandon it (the tenant keeps reading through cuts) or resume it


@dataclass(frozen=True)
class DropTenant:
    pick: int


@dataclass(frozen=True)
class Purge:
    pick: int  # among dropped tenants not yet purged


@dataclass(frozen=True)
class Advance:
    us: int


# Where a killed writer dies: after its intent commits (nothing uploaded), after
# its first upload, or inside its commit's transaction (rolled back).
AFTER_INTENT, AFTER_UPLOAD, IN_COMMIT = 0, 1, 2
CRASH_SQL = {
    AFTER_INTENT: ("INSERT INTO write_intents", True),
    IN_COMMIT: ("UPDATE tenants SET last_change_ts", False),
}


@dataclass(frozen=True)
class KilledWrite:
    write: Write
    at: int


@dataclass(frozen=True)
class KilledCompaction:
    pick: int
    in_swap: bool  # in the swap's transaction, else right after its intent


@dataclass(frozen=True)
class SlowWrite:
    """Upload now (an intent and its objects), commit at the next CommitSlowWrite."""

    write: Write


@dataclass(frozen=True)
class CommitSlowWrite:
    pick: int


@dataclass(frozen=True)
class Gc:
    short: bool  # grace 0 (allow_short_grace), or the default one-hour grace
    compact: bool
    threshold: float
    deep: bool = False  # also list the whole warehouse, beside the audit (gc --deep)


Op = (
    Write
    | Snapshot
    | DropSnapshot
    | Compact
    | Restore
    | RestoreTable
    | DropTenant
    | Purge
    | Advance
    | Gc
    | FinishRewrite
    | KilledWrite
    | KilledCompaction
    | SlowWrite
    | CommitSlowWrite
)


def _key(table: str, row: Row) -> tuple[Any, ...]:
    return tuple(row[k] for k in SCHEMAS[table].primary_key)


@st.composite
def writes(draw: st.DrawFn) -> Write:
    table = draw(st.sampled_from(["items", "orders"]))
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
    return Write(draw(st.integers(0, 7)), table, upserts, tuple(deletes))


picks = st.integers(0, 7)
ops: st.SearchStrategy[Op] = st.one_of(
    writes(),
    writes(),
    writes(),
    writes(),
    st.builds(Snapshot, picks),
    st.builds(Snapshot, picks),
    st.builds(DropSnapshot, picks, st.integers(0, 9)),
    st.builds(
        Compact,
        picks,
        st.sampled_from([None, "items", "orders"]),
        st.booleans(),
        st.sampled_from([1, 1_000, DEFAULT_TARGET_BYTES]),
    ),
    st.builds(Restore, picks, st.integers(0, 9), st.booleans(), modes),
    st.builds(Restore, picks, st.integers(0, 9), st.booleans(), modes),
    st.builds(RestoreTable, picks, st.sampled_from(["items", "orders"]), st.integers(0, 9), modes),
    st.builds(FinishRewrite, picks, st.booleans()),
    st.builds(DropTenant, picks),
    st.builds(DropTenant, picks),
    st.builds(Purge, picks),
    st.builds(
        Advance, st.sampled_from([US["m"], 30 * US["m"], 2 * US["h"], US["d"], RETENTION + US["h"]])
    ),
    st.builds(Gc, st.booleans(), st.booleans(), st.sampled_from([0.01, 0.2, 1.0])),
    st.builds(Gc, st.booleans(), st.booleans(), st.sampled_from([0.01, 0.2, 1.0]), st.booleans()),
    st.builds(KilledWrite, writes(), st.sampled_from([AFTER_INTENT, AFTER_UPLOAD, IN_COMMIT])),
    st.builds(KilledCompaction, picks, st.booleans()),
    st.builds(SlowWrite, writes()),
    st.builds(CommitSlowWrite, picks),
)
part = st.lists(ops, max_size=MAX_STEPS // 3)


@st.composite
def histories(draw: st.DrawFn) -> list[Op]:
    """Free sequences, or ones that surely snapshot, restore and collect between writes,
    so objects are shared across tenants and straddle snapshots when GC runs."""
    shape = draw(st.integers(0, 2))
    if shape == 0:
        return draw(st.lists(ops, min_size=4, max_size=MAX_STEPS))
    if shape == 1:
        # One tenant's objects surely straddle a snapshot (writes on both sides,
        # then a full compaction), and it is restored instantly with its rewrite
        # left pending while the rest goes on: GC meets members held with a cut.
        pick = draw(picks)
        mine = st.lists(writes(), min_size=1, max_size=3).map(
            lambda ws: [replace(w, pick=pick) for w in ws]
        )
        return [
            *draw(mine),
            Snapshot(pick),
            *draw(mine),
            Compact(pick, None, True, DEFAULT_TARGET_BYTES),
            Restore(pick, 0, draw(st.booleans()), INSTANT_NO_WAIT),
            *draw(part),
            Gc(short=True, compact=draw(st.booleans()), threshold=0.2),
            *draw(part),
            FinishRewrite(0, draw(st.booleans())),
            *draw(part),
        ]
    return [
        *draw(st.lists(writes(), min_size=1, max_size=3)),
        Snapshot(draw(picks)),
        *draw(part),
        *draw(st.lists(writes(), min_size=1, max_size=2)),
        draw(st.builds(Restore, picks, st.integers(0, 9), st.booleans(), modes)),
        *draw(part),
        draw(
            st.builds(
                Gc, st.booleans(), st.booleans(), st.sampled_from([0.01, 0.2, 1.0]), st.booleans()
            )
        ),
        *draw(part),
    ]


# --- the model ------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.fixed = wall_clock_us()

    def __call__(self) -> int:
        return self.fixed


class TableHistory(Oracle):
    """An oracle whose tables an in-place table restore replaced: reads before the
    restore's ts see the table it replaced."""

    def __init__(self) -> None:
        super().__init__()
        self.earlier: dict[str, list[tuple[int, ModelTable]]] = {}  # (until ts, table)

    def replace(self, table: str, ts: int, at_ts: int) -> None:
        """From ``ts`` on, ``table`` holds what it held at ``at_ts``."""
        current = self.segment(table, at_ts)
        self.earlier.setdefault(table, []).append((ts, self.tables[table]))
        self.tables[table] = ModelTable(
            current.primary_key, [e for e in current.events if e.ts <= at_ts]
        )

    def segment(self, table: str, ts: int) -> ModelTable:
        """The model table ``table`` read at ``ts``."""
        for until, model in self.earlier.get(table, []):
            if ts < until:
                return model
        return self.tables[table]

    def read(self, table: str, as_of: int) -> list[Row]:
        probe = Oracle()
        probe.tables[table] = self.segment(table, as_of)
        return probe.read(table, as_of)


@dataclass
class Tenant:
    id: str
    name: str
    oracle: TableHistory
    snapshots: dict[str, int] = field(default_factory=dict)
    state: str = "active"  # active | dropped | purged

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.id}"


class Model:
    """A fresh store (new bucket, new SQLite file, own clock) with one oracle per tenant id."""

    def __init__(self, s3: EmbeddedS3, catalog_uri: str, *, events: bool) -> None:
        self.events = events
        bucket = f"rewind-gc-{uuid.uuid4().hex[:12]}"
        s3.create_bucket(bucket)
        self.clock = Clock()
        self.store = TableStore.open(
            catalog_uri, f"s3://{bucket}/wh", s3=s3.settings, clock=self.clock
        )
        self.tenants: list[Tenant] = []  # in creation order
        self.pending: list[str] = []  # instant jobs whose rewrite waits for a FinishRewrite
        self.made = 0
        self.gcs = 0
        self.orphans: dict[str, int] = {}  # keys killed writers left -> when (wall clock)
        self.slow: list[tuple[Tenant, Write, PreparedCommit]] = []  # uploaded, not committed
        for name in ("t0", "t1"):
            record = self.store.create_tenant(name)
            oracle = TableHistory()
            for table, schema in SCHEMAS.items():
                self.store.create_table(name, f"{DB}.{table}", schema)
                oracle.create_table(table, schema.primary_key)
            self.tenants.append(Tenant(record.id, name, oracle))

    def close(self) -> None:
        self.store.close()

    def event(self, what: str) -> None:
        if self.events:  # hypothesis statistics; only inside a @given test
            event(what)

    def of(self, states: tuple[str, ...], pick: int) -> Tenant | None:
        found = [t for t in self.tenants if t.state in states]
        return found[pick % len(found)] if found else None

    def fresh(self, prefix: str) -> str:
        self.made += 1
        return f"{prefix}{self.made}"

    # applying operations

    def apply(self, op: Op) -> None:
        store = self.store
        if isinstance(op, Write):
            tenant = self.of(("active",), op.pick)
            if tenant is None:
                return
            schema = SCHEMAS[op.table]
            result = store.write(
                tenant.ref,
                f"{DB}.{op.table}",
                upserts=pa.Table.from_pylist(list(op.upserts), schema=schema.arrow())
                if op.upserts
                else None,
                deletes=pa.Table.from_pylist(list(op.deletes), schema=schema.key_arrow())
                if op.deletes
                else None,
            )
            tenant.oracle.write(op.table, result.ts, upserts=op.upserts, deletes=op.deletes)
        elif isinstance(op, Snapshot):
            tenant = self.of(("active",), op.pick)
            if tenant is not None:
                name = self.fresh("s")
                tenant.snapshots[name] = store.create_snapshot(tenant.ref, name).ts
        elif isinstance(op, DropSnapshot):
            tenant = self.of(("active", "dropped"), op.pick)
            if tenant is not None and tenant.snapshots:
                name = sorted(tenant.snapshots)[op.index % len(tenant.snapshots)]
                store.drop_snapshot(tenant.ref, name)
                del tenant.snapshots[name]
        elif isinstance(op, Compact):
            tenant = self.of(("active",), op.pick)
            if tenant is not None:
                store.compact(
                    tenant.ref,
                    f"{DB}.{op.table}" if op.table else None,
                    target_bytes=op.target_bytes,
                    full=op.full,
                )
        elif isinstance(op, Restore):
            self.restore(op)
        elif isinstance(op, RestoreTable):
            self.restore_table(op)
        elif isinstance(op, DropTenant):
            tenant = self.of(("active",), op.pick)
            if tenant is not None:
                store.drop_tenant(tenant.ref)
                tenant.state = "dropped"
        elif isinstance(op, Purge):
            tenant = self.of(("dropped",), op.pick)
            if tenant is not None:
                purge_tenant(store.catalog, tenant.ref)
                tenant.state = "purged"
                tenant.snapshots.clear()
        elif isinstance(op, Advance):
            self.clock.fixed += op.us
        elif isinstance(op, FinishRewrite):
            self.finish_rewrite(op)
        elif isinstance(op, KilledWrite):
            self.killed_write(op)
        elif isinstance(op, KilledCompaction):
            self.killed_compaction(op)
        elif isinstance(op, SlowWrite):
            self.slow_write(op)
        elif isinstance(op, CommitSlowWrite):
            self.commit_slow_write(op)
        else:
            self.gc(op)

    def batch(self, op: Write) -> tuple[pa.Table | None, pa.Table | None]:
        schema = SCHEMAS[op.table]
        upserts = (
            pa.Table.from_pylist(list(op.upserts), schema=schema.arrow()) if op.upserts else None
        )
        deletes = (
            pa.Table.from_pylist(list(op.deletes), schema=schema.key_arrow())
            if op.deletes
            else None
        )
        return upserts, deletes

    def killed(self, run: Callable[[], object]) -> bool:
        """Run a writer that may die; the keys it left are orphans from now. Returns
        whether it died (a compaction with nothing to merge never gets there)."""
        before = bucket_listing(self.store)
        try:
            run()
        except SimulatedCrash:
            for key in bucket_listing(self.store) - before:
                self.orphans[key] = self.clock.fixed
            return True
        return False

    def killed_write(self, op: KilledWrite) -> None:
        tenant = self.of(("active",), op.write.pick)
        if tenant is None:
            return
        upserts, deletes = self.batch(op.write)
        if op.at == AFTER_UPLOAD:
            dying = with_objects(
                self.store, RecordingStore(self.store.objects, crash_after_put=True)
            )
        else:
            sql, after_commit = CRASH_SQL[op.at]
            dying = with_catalog(
                self.store, FaultyCatalog(self.store.catalog, sql, after_commit=after_commit)
            )
        table = f"{DB}.{op.write.table}"
        died = self.killed(lambda: dying.write(tenant.ref, table, upserts=upserts, deletes=deletes))
        assert died, "the write should have been killed"
        self.event(f"write killed at step {op.at}")

    def killed_compaction(self, op: KilledCompaction) -> None:
        tenant = self.of(("active",), op.pick)
        if tenant is None:
            return
        if op.in_swap:
            faulty = FaultyCatalog(self.store.catalog, "UPDATE membership SET removed_ts")
        else:
            faulty = FaultyCatalog(
                self.store.catalog, "INSERT INTO write_intents", after_commit=True
            )
        dying = with_catalog(self.store, faulty)
        if self.killed(lambda: dying.compact(tenant.ref, full=True)):
            self.event("compaction killed")

    def slow_write(self, op: SlowWrite) -> None:
        tenant = self.of(("active",), op.write.pick)
        if tenant is None:
            return
        upserts, deletes = self.batch(op.write)
        with self.store.catalog.snapshot() as tx:
            record = active_tenant(tx, tenant.ref)
            target = find_table(tx, record, DB, op.write.table, tx.last_ts())
        prepared = prepare_commit(
            self.store.catalog, self.store.objects, record, target, upserts, deletes
        )
        self.slow.append((tenant, op.write, prepared))
        for o in prepared.objects:
            self.orphans[o.key] = self.clock.fixed  # until it commits

    def commit_slow_write(self, op: CommitSlowWrite) -> None:
        if not self.slow:
            return
        tenant, write, prepared = self.slow.pop(op.pick % len(self.slow))
        keys = [o.key for o in prepared.objects]
        try:
            result = install_prepared(self.store.catalog, self.store.objects, prepared, tenant.ref)
        except IntentRevoked:
            self.event("slow write refused: its intent was swept")
            assert not set(keys) & set(object_rows(self.store).values())
            return
        except (ConcurrentModification, TenantDropped):  # replaced or dropped; uploads deleted
            self.event("slow write refused: the tenant changed")
            for key in keys:
                self.orphans.pop(key, None)
            assert not set(keys) & bucket_listing(self.store)
            return
        for key in keys:
            assert self.orphans.pop(key, None) is not None, f"{key} committed after its sweep"
        tenant.oracle.write(write.table, result.ts, upserts=write.upserts, deletes=write.deletes)
        self.event("slow write committed")

    def restore_options(self, mode: int) -> dict[str, Any]:
        return {"instant": mode != REWRITE_FIRST, "wait": mode != INSTANT_NO_WAIT}

    def started(self, outcome: RestoreOutcome, mode: int) -> None:
        """Note an instant job left pending, after checking the restored tenant holds
        its straddlers with a cut meanwhile."""
        if mode == INSTANT_NO_WAIT:
            assert outcome.rewrite_pending
            self.pending.append(outcome.job_id)
            if outcome.plan.tasks:
                self.event("instant restore pending with cut members")
        elif mode == INSTANT:
            assert outcome.instant and not outcome.rewrite_pending

    def finish_rewrite(self, op: FinishRewrite) -> None:
        """Resume or cancel a pending instant job: no read changes either way."""
        if not self.pending:
            return
        job_id = self.pending.pop(op.pick % len(self.pending))
        if op.cancel:
            job = cancel_restore(self.store, job_id)
            assert job.state == "cancelled" and job.installed_ts is not None
            self.event("instant rewrite cancelled")
        else:
            resume_restore(self.store, job_id)
            assert load_job(self.store.catalog, job_id).state == "done"
            self.event("instant rewrite resumed")
        self.check()

    def restore(self, op: Restore) -> None:
        source = self.of(("active", "dropped"), op.pick)
        if source is None:
            return
        record = self.store.tenant(source.ref)
        now = self.store.now() if source.state == "active" else record.dropped_ts
        assert now is not None
        points: list[tuple[str | int, int]] = sorted(
            source.snapshots.items(), key=lambda p: (p[1], p[0])
        )
        points.append((now, now))
        point, at_ts = points[op.point % len(points)]
        in_place = op.in_place and source.state == "active"
        clone = None if in_place else self.fresh("c")
        try:
            outcome = restore_tenant(
                self.store,
                source.ref,
                point,
                to=clone,
                executor="local",
                **self.restore_options(op.mode),
            )
        except RestoreInProgress:  # its pending instant rewrite holds the name
            assert self.pending
            return
        self.started(outcome, op.mode)
        assert outcome.plan.source.id == source.id and outcome.plan.at_ts == at_ts
        oracle = TableHistory()
        for table in source.oracle.tables:
            model = source.oracle.segment(table, at_ts)
            oracle.tables[table] = ModelTable(
                model.primary_key, [e for e in model.events if e.ts <= at_ts]
            )
        carried = {n: ts for n, ts in source.snapshots.items() if ts <= at_ts}
        new = Tenant(outcome.tenant.id, outcome.tenant.name, oracle, carried)
        assert {s.name: s.ts for s in self.store.snapshots(new.ref)} == carried
        if in_place:
            source.state = "dropped"
        self.tenants.append(new)
        self.event("restore in place" if in_place else "restore as clone")

    def restore_table(self, op: RestoreTable) -> None:
        """One table of an active tenant in place, at a snapshot or now: the old
        table stays readable at the tenant's earlier snapshots."""
        tenant = self.of(("active",), op.pick)
        if tenant is None:
            return
        points: list[tuple[str | int, int]] = sorted(
            tenant.snapshots.items(), key=lambda p: (p[1], p[0])
        )
        now = self.store.now()
        points.append((now, now))
        point, at_ts = points[op.point % len(points)]
        try:
            outcome = restore_table(
                self.store,
                tenant.ref,
                f"{DB}.{op.table}",
                point,
                executor="local",
                **self.restore_options(op.mode),
            )
        except RestoreInProgress:  # its pending instant rewrite holds the name
            assert self.pending
            return
        self.started(outcome, op.mode)
        installed = load_job(self.store.catalog, outcome.job_id).installed_ts
        assert installed is not None
        tenant.oracle.replace(op.table, installed, at_ts)
        self.event("table restore in place")

    def queue_complete(self) -> None:
        """GC examines only the objects the catalog queued as possibly freed: every
        object unreferenced now (at any age: grace 0) is among them, i.e. a full
        scan finds no garbage the queue lacks (both dry runs)."""
        store = self.store
        queued = collect(store.catalog, store.objects, grace_us=0)
        scanned = collect(store.catalog, store.objects, grace_us=0, full_scan=True)
        assert scanned.candidate_count <= SAMPLE
        missed = {c.key for c in scanned.candidates} - {c.key for c in queued.candidates}
        assert not missed, f"{len(missed)} unreferenced object(s) not in GC's queue"
        assert queued.candidate_count == scanned.candidate_count

    def gc(self, op: Gc) -> None:
        store = self.store
        self.queue_complete()
        if op.short:
            report = run_gc(
                store,
                dry_run=False,
                grace_us=0,
                allow_short_grace=True,
                compact=op.compact,
                threshold=op.threshold,
                deep=op.deep,
            )
        else:
            report = run_gc(
                store, dry_run=False, compact=op.compact, threshold=op.threshold, deep=op.deep
            )
        self.gcs += 1
        purged = {p.tenant for p in report.collected.purged}
        for tenant in self.tenants:
            if tenant.ref in purged:
                # Only retention expiry purges on its own, and only dropped tenants.
                assert tenant.state == "dropped"
                record = store.tenant(tenant.ref)
                assert record.retain_until is not None and record.retain_until < self.clock.fixed
                tenant.state = "purged"
                tenant.snapshots.clear()
        listing = bucket_listing(store)
        for key, since in list(self.orphans.items()):
            if since + DEFAULT_ORPHAN_GRACE_US <= self.clock.fixed:
                assert key not in listing, f"orphan {key} outlived its grace by a pass"
                del self.orphans[key]
        if report.intents.orphans:
            self.event("gc swept orphans under intents")
        if report.collected.deleted_objects:
            self.event("gc deleted objects")
        if report.compacted:
            self.event("gc compacted a table")
        if purged:
            self.event("gc purged a tenant past its retention")
        self.check()
        self.queue_complete()
        self.check_measures()

    # checking

    def check(self) -> None:
        """Every protected read of every tenant that is not purged equals its oracle,
        and no catalog row points at an object the bucket lacks."""
        store = self.store
        for tenant in self.tenants:
            if tenant.state == "purged":
                continue
            for table in SCHEMAS:
                got = store.read(tenant.ref, f"{DB}.{table}").to_pylist()
                assert got == tenant.oracle.read(table, 2**62), f"{tenant.ref}/{table} now"
                for name, ts in tenant.snapshots.items():
                    got = store.read(tenant.ref, f"{DB}.{table}", as_of=name).to_pylist()
                    assert got == tenant.oracle.read(table, ts), f"{tenant.ref}/{table} at {name}"
        assert pending_rows(store) == []
        assert dangling_keys(store) == set()
        with store.catalog.snapshot() as tx:
            # what planning trusts instead of reading every member
            for (table_id,) in tx.tuples(
                "SELECT t.id FROM tables t JOIN tenants n ON n.id = t.tenant_id "
                "WHERE n.purged_ts IS NULL"
            ):
                assert totals_of(tx, table_id) == counted(tx, table_id), table_id
            # the change log never names a collected object (GC keeps what it logs),
            # and never a commit before the point its table says it is complete from
            assert not tx.tuples(
                "SELECT c.object_id FROM change_objects c LEFT JOIN objects o "
                "ON o.id = c.object_id WHERE o.id IS NULL"
            )
            assert not tx.tuples(
                "SELECT c.table_id FROM change_objects c JOIN tables t ON t.id = c.table_id "
                "WHERE c.ts < t.changes_from_ts"
            )
            # a member's max_ts is its object's, or its cut where that is older
            assert not tx.tuples(
                "SELECT m.object_id FROM membership m JOIN objects o ON o.id = m.object_id "
                "WHERE m.max_ts <> CASE WHEN m.cut_ts IS NOT NULL AND m.cut_ts < o.max_ts "
                "THEN m.cut_ts ELSE o.max_ts END"
            )

    def check_measures(self) -> None:
        """What GC reports from its kept measurements (engine/gc/reclaim.py) equals a
        fresh measurement of every table: reusing one never makes a number wrong."""
        store = self.store
        counting = ReadCountingStore(store.objects)
        kept = scan(store.catalog, counting, remember=False)  # type: ignore[arg-type]
        assert kept == scan(store.catalog, store.objects, fresh=True, remember=False)
        if len(counting.tables_read()) < len(kept):
            self.event("gc reused kept measurements")
        if any(r.reclaimable_rows for r in kept):
            self.event("gc reports reclaimable rows")

    def finish(self) -> None:
        """Finish every pending rewrite, drop every protection, wait out retention and
        grace, GC twice: nothing is left over."""
        store = self.store
        while self.pending:
            self.finish_rewrite(FinishRewrite(0, cancel=False))
        for tenant in self.tenants:
            if tenant.state == "purged":
                continue
            for name in list(tenant.snapshots):
                store.drop_snapshot(tenant.ref, name)
            tenant.snapshots.clear()
            if tenant.state == "dropped":
                purge_tenant(store.catalog, tenant.ref)
                tenant.state = "purged"
        self.clock.fixed += RETENTION + 2 * US["h"]
        self.queue_complete()
        run_gc(store, dry_run=False)
        self.clock.fixed += 2 * US["h"]
        run_gc(store, dry_run=False)
        self.check()
        listing = bucket_listing(store)
        live = live_member_keys(store, active_only=True)
        leaked = listing - live
        assert not leaked, f"{len(leaked)} key(s) in the bucket no active table references"
        assert set(object_rows(store).values()) == live == listing
        self.event(f"tenants at the end: {min(len(self.tenants), 6)}")


@contextmanager
def model(s3: EmbeddedS3, catalog_uri: str, *, events: bool = True) -> Iterator[Model]:
    m = Model(s3, catalog_uri, events=events)
    try:
        yield m
    finally:
        m.close()


@given(history=histories())
def test_gc_never_deletes_what_a_protected_read_needs_and_leaks_nothing(
    s3_server: EmbeddedS3, new_catalog_uri: Callable[[], str], history: list[Op]
) -> None:
    with model(s3_server, new_catalog_uri()) as m:
        for op in history:
            m.apply(op)
        m.gc(Gc(short=True, compact=True, threshold=0.2))
        m.finish()


def test_gc_after_in_place_restores_and_purges_keeps_every_clone_readable(
    s3_server: EmbeddedS3,
    new_catalog_uri: Callable[[], str],
) -> None:
    """A fixed history: a clone shares objects with a source that is restored in place,
    retired, purged and collected, while the clone full-compacts its own history."""
    history: list[Op] = [
        Write(0, "items", ({"id": 1, "v": "a"}, {"id": 2, "v": "b"}), ()),
        Snapshot(0),
        Write(0, "items", (), ({"id": 1},)),
        Snapshot(0),
        Write(0, "items", ({"id": 1, "v": "again"},), ({"id": 2},)),
        Restore(0, 1, False),  # clone c1 at the second snapshot
        Compact(0, None, False, DEFAULT_TARGET_BYTES),
        Restore(0, 0, True),  # t0 in place to the first snapshot
        Gc(True, True, 0.01),
        DropSnapshot(2, 0),  # the clone drops its carried first snapshot
        Gc(True, True, 0.01),
        Purge(0),
        Advance(2 * US["h"]),
        Gc(False, True, 0.01),
        Advance(RETENTION + US["h"]),
        Gc(False, True, 0.2),
    ]
    with model(s3_server, new_catalog_uri(), events=False) as m:
        for op in history:
            m.apply(op)
        m.finish()


def test_killed_and_late_writers_are_swept_one_pass_after_the_orphan_grace(
    s3_server: EmbeddedS3,
    new_catalog_uri: Callable[[], str],
) -> None:
    """A fixed history: writers killed at each step, a compaction killed in its swap, and
    a write slower than the orphan grace, whose commit comes after GC swept its intent."""
    history: list[Op] = [
        Write(0, "items", ({"id": 1, "v": "a"}, {"id": 2, "v": "b"}), ()),
        Write(0, "items", ({"id": 3, "v": "c"},), ({"id": 1},)),
        KilledWrite(Write(0, "items", ({"id": 4, "v": "lost"},), ()), AFTER_INTENT),
        KilledWrite(Write(0, "items", ({"id": 5, "v": "lost"},), ({"id": 2},)), AFTER_UPLOAD),
        KilledWrite(Write(1, "orders", ({"id": 1, "region": "eu", "qty": 1},), ()), IN_COMMIT),
        KilledCompaction(0, in_swap=True),
        SlowWrite(Write(1, "items", ({"id": 9, "v": "late"},), ())),
        SlowWrite(Write(0, "items", ({"id": 8, "v": "on time"},), ())),
        CommitSlowWrite(1),  # the second: committed well within the grace
        Advance(2 * US["h"]),
        Gc(True, False, 0.2),  # nothing is old enough yet
        Advance(US["d"]),
        Gc(False, True, 0.2),  # every orphan goes, the late write's uploads too
        CommitSlowWrite(0),  # refused: its intent was swept
        Gc(True, True, 0.2),
    ]
    with model(s3_server, new_catalog_uri(), events=False) as m:
        for op in history:
            m.apply(op)
        assert m.orphans == {} and m.slow == []
        with m.store.catalog.snapshot() as tx:
            assert tx.scalar("SELECT COUNT(*) FROM write_intents") == 0
        m.finish()
