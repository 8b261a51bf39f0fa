"""Fault model: restores, cancels, resumes, GC and backup restores, killed anywhere.

Hypothesis generates interleavings on one warehouse: writes and snapshots of
a tenant, restores of it (physical and logical, in place and as clones), each
possibly killed at a chosen catalog statement (inside its transaction or right
after its commit), then resumed or cancelled from a second "process" (another
TableStore on the same catalog file), GC passes with no grace at all,
backup restores killed mid-load and rerun, and a second deployment's catalog
on the same warehouse (refused, or adopting it, writing and running its own GC
before this one adopts it back). A kill is ``SimulatedCrash``, a
BaseException no handler of the code under test catches, so the journal is
left exactly as a dead process leaves it.

Physical restores also run instant (installed first, the straddlers held
with a cut at S, then rewritten, verified and swapped in), waited for or
returning with the rewrite pending; a kill lands anywhere in the install,
the rewrite, the verification or the swap. An instant job killed after its
install leaves a live tenant that must read as the model says, however dead
its job.

After every step: every live tenant reads exactly as the model says (its
state at "now", and every snapshot name the model knows resolves, through
lineage, to the state at that snapshot); and no object the catalog records is
missing from the bucket. At the end, with every job done or cancelled, the
source is dropped and purged (its retired predecessors too) and GC runs with
no grace: the other tenants still read as the model says, and no key is left
in the bucket that no table, base or pin reaches.
"""

from __future__ import annotations

import copy
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from engine.backup.api import create_backup, restore_backup
from engine.gc.purge import purge_tenant
from engine.gc.run import run_gc
from engine.restore.job import AlreadyInstalled, cancel_restore, restore_tenant, resume_restore
from engine.restore.journal import RestoreInProgress, load_job
from tenants import catalog
from tenants.errors import WarehouseOwned
from tenants.objectstore.embedded import EmbeddedS3
from tenants.schema import TableSchema
from tenants.store import TableStore
from tests.helpers.restores import (
    FaultyCatalog,
    SimulatedCrash,
    catalog_rows,
    cut_members,
    unreached_keys,
    with_catalog,
)

DEEP = os.environ.get("HYPOTHESIS_PROFILE", "ci") == "deep"
MAX_STEPS = 16 if DEEP else 9
SOURCE = "acme"
DB = "db"
ITEMS = TableSchema.of([("id", "int64"), ("v", "string")], ["id"])
State = dict[int, str]  # id -> v of the visible rows of db.items

# Where a kill can land: (statement prefix, after its commit?). A prefix the run
# never reaches means no kill: the step simply completes.
KILLS: list[tuple[str, bool]] = [
    ("UPDATE restore_tasks", False),  # a rewrite task's result being journaled
    ("UPDATE restore_tasks", True),
    ("UPDATE restore_jobs SET state", True),  # right after a state change
    ("INSERT INTO tenants", False),  # inside the physical install
    ("INSERT INTO tenants", True),  # right after the physical install committed
    ("INSERT INTO membership (", False),  # the logical reload, mid-load
    ("UPDATE tenants SET state = 'active'", True),  # right after the logical swap
    # An instant job: its install's cut members (inside, and right after its commit),
    ("INSERT INTO membership (table_id, object_id, added_ts, max_ts, cut_ts)", False),
    ("INSERT INTO membership (table_id, object_id, added_ts, max_ts, cut_ts)", True),
    # a swap ending a cut member, and registering its copy (a rewrite-first
    # install registers its copies with the same statement)
    ("UPDATE membership SET removed_ts", False),
    ("UPDATE membership SET removed_ts", True),
    ("INSERT INTO objects", False),
    ("INSERT INTO objects", True),
]
# The kills an instant job meets: its tasks, its state changes, its install, its swap.
INSTANT_KILLS = [
    k
    for k in KILLS
    if k[0] != "INSERT INTO membership (" and not k[0].startswith("UPDATE tenants SET state")
]
# How a physical restore runs: rewrite first, instant, or instant returning once installed.
Instant = Literal["no", "wait", "no_wait"]


@dataclass(frozen=True)
class Write:
    upserts: tuple[tuple[int, str], ...]
    deletes: tuple[int, ...]


@dataclass(frozen=True)
class Snapshot:
    pass


@dataclass(frozen=True)
class Restore:
    method: Literal["physical", "logical"]
    clone: bool
    snapshot: int  # index into the snapshots taken so far
    kill: int | None  # index into KILLS
    occurrence: int
    instant: Instant = "no"  # physical only


@dataclass(frozen=True)
class Compact:
    target_bytes: int


@dataclass(frozen=True)
class Finish:
    how: Literal["resume", "cancel"]


@dataclass(frozen=True)
class Gc:
    pass


@dataclass(frozen=True)
class BackupRestore:
    snapshot: int
    killed: bool


@dataclass(frozen=True)
class SecondCatalog:
    """Another deployment's catalog pointed at the same warehouse."""

    adopt: bool


Op = Write | Snapshot | Compact | Restore | Finish | Gc | BackupRestore | SecondCatalog

write_ops = st.builds(
    Write,
    upserts=st.dictionaries(st.integers(0, 7), st.sampled_from(["a", "b", "c"]), max_size=3).map(
        lambda d: tuple(d.items())
    ),
    deletes=st.lists(st.integers(0, 7), max_size=2, unique=True).map(tuple),
)
restores = st.builds(
    Restore,
    method=st.sampled_from(["physical", "logical"]),
    clone=st.booleans(),
    snapshot=st.integers(0, 5),
    kill=st.none() | st.integers(0, len(KILLS) - 1) | st.integers(0, len(KILLS) - 1),
    # an instant job changes its state six times (the swap's batches once more each)
    occurrence=st.integers(1, 2) | st.integers(1, 6),
    instant=st.sampled_from(["no", "no", "wait", "no_wait"]),
).map(lambda r: r if r.instant == "no" else replace(r, method="physical"))
finishes = st.builds(Finish, how=st.sampled_from(["resume", "cancel"]))
ops = st.one_of(
    write_ops,
    st.just(Snapshot()),
    st.builds(Compact, target_bytes=st.sampled_from([1, 800])),  # merged objects straddle snapshots
    restores,
    restores,
    finishes,
    finishes,
    st.just(Gc()),
    st.builds(BackupRestore, snapshot=st.integers(0, 5), killed=st.booleans()),
    st.builds(SecondCatalog, adopt=st.booleans()),
)


@st.composite
def histories(draw: st.DrawFn) -> list[Op]:
    """Writes on both sides of a snapshot and a compaction first, so restores have
    objects to rewrite; then an instant restore of that snapshot (whose objects
    straddle it), killed anywhere or not, and a free interleaving."""
    before = draw(st.lists(write_ops, min_size=1, max_size=3))
    after = draw(st.lists(write_ops, min_size=1, max_size=3))
    kill = draw(st.none() | st.sampled_from(INSTANT_KILLS) | st.sampled_from(INSTANT_KILLS))
    instant = Restore(
        "physical",
        draw(st.booleans()),
        1,  # the snapshot between before and after
        None if kill is None else KILLS.index(kill),
        # a state change: any of the six (planned -> installing -> rewriting ->
        # verifying -> installing -> each swap batch -> done); else the first
        draw(st.integers(1, 6)) if kill == ("UPDATE restore_jobs SET state", True) else 1,
        draw(st.sampled_from(["wait", "no_wait"])),
    )
    free = draw(st.lists(ops, min_size=2, max_size=MAX_STEPS))
    return [*before, Snapshot(), *after, Compact(800), instant, *free]


class Model:
    """The store, a second handle on it (the "other process"), and the expected states."""

    def __init__(
        self, s3: EmbeddedS3, new_catalog_uri: Callable[[], str], *, events: bool = True
    ) -> None:
        self.events = events  # hypothesis events (a fixed history runs outside @given)
        bucket = f"rewind-faults-{uuid.uuid4().hex[:12]}"
        s3.create_bucket(bucket)
        backups = f"rewind-faults-bk-{uuid.uuid4().hex[:12]}"
        s3.create_bucket(backups)
        self.backup_uri = f"s3://{backups}/b"
        self.s3 = s3
        self.uris = (new_catalog_uri(), f"s3://{bucket}/wh")
        self.second_uri = new_catalog_uri()
        self.store = TableStore.open(*self.uris, s3=s3.settings)
        self.other = TableStore.open(*self.uris, s3=s3.settings)
        self.second_rows: State | None = None  # what the second catalog's tenant holds
        self.store.create_tenant(SOURCE)
        self.store.create_table(SOURCE, f"{DB}.items", ITEMS)
        self.live: dict[str, State] = {SOURCE: {}}  # tenant name -> expected rows now
        self.snapshots: list[tuple[str, State]] = []  # of SOURCE's lineage, in order
        # job, op, target, state at S, and whether its tenant is installed (an
        # instant job's, before its rewrite): the tenant is then live already
        self.pending: tuple[str, Restore, str, State, bool] | None = None
        self.backups: dict[int, str] = {}  # snapshot index -> backup id
        self.made = 0
        self.killed: list[str] = []  # the job of each restore a kill landed in

    def event(self, what: str) -> None:
        if self.events:
            event(what)

    def close(self) -> None:
        self.other.close()
        self.store.close()

    # --- steps ------------------------------------------------------------------------------

    def apply(self, op: Op) -> None:
        if isinstance(op, Write):
            self.write(op)
        elif isinstance(op, Snapshot):
            name = f"s{len(self.snapshots)}"
            self.store.create_snapshot(SOURCE, name)
            self.snapshots.append((name, copy.deepcopy(self.live[SOURCE])))
        elif isinstance(op, Compact):
            self.store.compact(SOURCE, f"{DB}.items", target_bytes=op.target_bytes)
        elif isinstance(op, Restore):
            self.restore(op)
        elif isinstance(op, Finish):
            self.finish(op)
        elif isinstance(op, Gc):
            run_gc(
                self.other,
                dry_run=False,
                grace_us=0,
                orphan_grace_us=0,
                allow_short_grace=True,
                compact=False,
            )
        elif isinstance(op, BackupRestore):
            self.backup_restore(op)
        else:
            self.second_catalog(op)

    def write(self, op: Write) -> None:
        if not op.upserts and not op.deletes:
            return
        self.store.write(
            SOURCE,
            f"{DB}.items",
            upserts=pa.table(
                {
                    "id": pa.array([k for k, _ in op.upserts], pa.int64()),
                    "v": [v for _, v in op.upserts],
                }
            )
            if op.upserts
            else None,
            deletes=pa.table({"id": pa.array(list(op.deletes), pa.int64())})
            if op.deletes
            else None,
        )
        state = self.live[SOURCE]
        for key in op.deletes:
            state.pop(key, None)
        state.update(dict(op.upserts))

    def restore(self, op: Restore) -> None:
        if not self.snapshots or self.pending is not None:
            return  # one restore per tenant: the model starts a new one only when none is left
        name, at_s = self.snapshots[op.snapshot % len(self.snapshots)]
        target = f"c{self.made}" if op.clone else SOURCE
        self.made += 1
        store = self.store
        if op.kill is not None:
            prefix, after_commit = KILLS[op.kill]
            store = with_catalog(
                store,
                FaultyCatalog(
                    store.catalog, prefix, occurrence=op.occurrence, after_commit=after_commit
                ),
            )
        try:
            outcome = restore_tenant(
                store,
                SOURCE,
                name,
                to=target if op.clone else None,
                method=op.method,
                executor="local",
                verify="objects",
                instant=op.instant != "no",
                wait=op.instant != "no_wait",
            )
        except SimulatedCrash:
            self.event(f"killed: {op.method} {op.instant} at {KILLS[op.kill or 0]}")
            [row] = catalog_rows(
                self.store,
                "SELECT id FROM restore_jobs ORDER BY created_ts DESC, id LIMIT 1",
            )
            job = load_job(self.store.catalog, str(row["id"]))
            self.killed.append(job.id)
            if job.installed_ts is not None:
                # Installed: live and correct from the install's commit on, with its job dead.
                self.installed(target, at_s)
            if job.state != "done":
                self.pending = (job.id, op, target, at_s, job.installed_ts is not None)
            if job.installed_ts is not None and job.state != "done":
                self.event("killed after an instant install: live tenant, dead job")
            return
        self.installed(target, at_s)
        if outcome.rewrite_pending:
            self.pending = (outcome.job_id, op, target, at_s, True)
            if cut_members(self.store, target):
                self.event("instant rewrite left pending with cut members")

    def installed(self, target: str, at_s: State) -> None:
        self.live[target] = copy.deepcopy(at_s)

    def finish(self, op: Finish) -> None:
        if self.pending is None:
            return
        job_id, _, target, at_s, live = self.pending
        self.pending = None
        if op.how == "resume":
            resume_restore(self.other, job_id)
            if not live:
                self.installed(target, at_s)
            assert load_job(self.store.catalog, job_id).state == "done"
            return
        try:
            job = cancel_restore(self.other, job_id)
        except AlreadyInstalled:
            assert not live, "an installed instant job's rewrite is cancellable"
            self.installed(target, at_s)
            return
        assert job.state == "cancelled"
        # An instant job's installed tenant stays, reading through its cuts.
        assert (job.installed_ts is not None) == live, job_id

    def backup_restore(self, op: BackupRestore) -> None:
        if not self.snapshots:
            return
        index = op.snapshot % len(self.snapshots)
        name, at_s = self.snapshots[index]
        if index not in self.backups:
            self.backups[index] = create_backup(
                self.store, SOURCE, name, self.backup_uri, kind="logical"
            ).backup_id
        target = f"b{self.made}"
        self.made += 1
        if op.killed:
            faulty = with_catalog(
                self.store, FaultyCatalog(self.store.catalog, "INSERT INTO membership (")
            )
            try:
                restore_backup(faulty, self.backup_uri, self.backups[index], tenant=target)
            except SimulatedCrash:
                self.event("backup restore killed mid-load")
        restore_backup(self.other, self.backup_uri, self.backups[index], tenant=target)
        self.installed(target, at_s)

    def second_catalog(self, op: SecondCatalog) -> None:
        """A second catalog is refused; adopting, it writes and runs GC, then ours adopts back.

        Neither GC may delete a key of the other catalog's tenants.
        """
        uri = self.second_uri
        if not op.adopt:
            with pytest.raises(WarehouseOwned, match="belongs to catalog .* --adopt-warehouse"):
                TableStore.open(uri, self.uris[1], s3=self.s3.settings)
            return
        second = TableStore.open(uri, self.uris[1], s3=self.s3.settings, adopt_warehouse=True)
        try:
            if self.second_rows is None:
                second.create_tenant("beta")
                second.create_table("beta", f"{DB}.items", ITEMS)
                self.second_rows = {}
            key = len(self.second_rows)
            second.write("beta", f"{DB}.items", upserts=pa.table({"id": [key], "v": ["b"]}))
            self.second_rows[key] = "b"
            run_gc(second, dry_run=False, grace_us=0, orphan_grace_us=0, allow_short_grace=True)
            assert self.rows_of(second, "beta") == self.second_rows
        finally:
            second.close()
        for handle in (self.store, self.other):  # this deployment takes its warehouse back
            handle.close()
        self.store = TableStore.open(*self.uris, s3=self.s3.settings, adopt_warehouse=True)
        self.other = TableStore.open(*self.uris, s3=self.s3.settings)

    # --- the invariants ---------------------------------------------------------------------

    def check(self) -> None:
        for tenant, state in self.live.items():
            assert self.rows(tenant) == state, tenant
        for name, state in self.snapshots:
            assert self.rows(SOURCE, name) == state, f"{SOURCE} as of {name}"
        staging = catalog_rows(self.store, "SELECT id FROM tenants WHERE state = 'staging'")
        if self.pending is None or self.pending[1].method == "physical":
            assert staging == [], "a staging tenant outlived its load"
        present = {info.key for info in self.store.objects.list("tenants/")}
        recorded = {
            r["object_key"]
            for r in catalog_rows(
                self.store,
                "SELECT object_key FROM objects WHERE id NOT IN (SELECT object_id FROM gc_pending)",
            )
        }
        assert recorded <= present, f"missing: {sorted(recorded - present)[:3]}"
        if self.second_rows is not None:  # the second catalog's objects survived our GC
            second = TableStore.open(
                self.second_uri,
                self.uris[1],
                s3=self.s3.settings,
                adopt_warehouse=True,
            )
            try:
                assert self.rows_of(second, "beta") == self.second_rows
            finally:
                second.close()
            # ... and opening it took the warehouse: ours adopts it back.
            self.store.close()
            self.store = TableStore.open(*self.uris, s3=self.s3.settings, adopt_warehouse=True)

    def retire_source(self) -> None:
        """With every job finished: drop and purge the source (and the tenants it
        retired), run GC with no grace. The other tenants read as before (an instant
        clone's cut members are its own), and nothing is left that nothing reaches."""
        assert self.pending is None
        self.store.drop_tenant(SOURCE)
        for tenant in self.store.tenants(include_dropped=True):
            if tenant.state == "dropped" and tenant.purged_ts is None:
                purge_tenant(self.store.catalog, tenant.ref)
        del self.live[SOURCE]
        self.snapshots.clear()
        run_gc(
            self.other,
            dry_run=False,
            grace_us=0,
            orphan_grace_us=0,
            allow_short_grace=True,
            compact=False,
        )
        self.check()
        leaked = unreached_keys(self.store)
        assert not leaked, f"{len(leaked)} key(s) nothing reaches, e.g. {sorted(leaked)[:2]}"

    def rows(self, tenant: str, as_of: str | None = None) -> State:
        return self.rows_of(self.store, tenant, as_of)

    @staticmethod
    def rows_of(store: TableStore, tenant: str, as_of: str | None = None) -> State:
        table = store.read(tenant, f"{DB}.items", as_of)
        return dict(zip(table.column("id").to_pylist(), table.column("v").to_pylist(), strict=True))


@given(history=histories())
def test_no_interleaving_of_kills_cancels_resumes_and_gc_loses_data(
    s3_server: EmbeddedS3, new_catalog_uri: Callable[[], str], history: list[Op]
) -> None:
    model = Model(s3_server, new_catalog_uri)
    try:
        model.apply(Write(((1, "a"), (2, "b"), (3, "c")), ()))
        model.apply(Snapshot())
        for op in history:
            try:
                model.apply(op)
            except RestoreInProgress:
                raise AssertionError(f"{op}: the model left a job unfinished") from None
            model.check()
        if model.pending is not None:  # whatever is left can still be finished
            model.apply(Finish("resume"))
            model.check()
        model.retire_source()
    finally:
        model.close()


STATE_CHANGE = ("UPDATE restore_jobs SET state", True)
# Every step of an instant job: each kill it meets, at each of its six state changes.
INSTANT_STEPS = [
    (KILLS.index(k), occurrence)
    for k in INSTANT_KILLS
    for occurrence in (range(1, 7) if k == STATE_CHANGE else (1,))
]


# The catalog's part is proven on both backends by the hypothesis model above;
# this sweep is about where a kill lands: SQLite alone, but for the deep profile.
@pytest.mark.one_catalog
@pytest.mark.parametrize(("kill", "occurrence"), INSTANT_STEPS)
def test_an_instant_restore_killed_at_any_step_is_live_once_installed_and_finishes(
    s3_server: EmbeddedS3, new_catalog_uri: Callable[[], str], kill: int, occurrence: int
) -> None:
    """A fixed history per step: a straddling snapshot, an instant restore killed
    there (in place or a clone, in turn), a write, compaction and GC with no
    grace while its job is dead, then resumed or cancelled (in turn) from the
    other process, and the source retired."""
    step = INSTANT_STEPS.index((kill, occurrence))
    history: list[Op] = [
        Write(((1, "a"), (2, "a"), (4, "a")), ()),
        Snapshot(),
        Write(((1, "b"), (5, "b")), (2,)),
        Compact(100_000),
        Restore("physical", step % 4 < 2, 1, kill, occurrence, "wait"),
        Write(((6, "c"),), (4,)),
        Compact(1),
        Gc(),
        Finish("cancel" if step % 2 else "resume"),
    ]
    model = Model(s3_server, new_catalog_uri, events=False)
    try:
        for op in history:
            model.apply(op)
            model.check()
        assert model.killed, f"{KILLS[kill]} #{occurrence} did not land"
        model.retire_source()
    finally:
        model.close()


def test_the_model_kills_land_where_they_say() -> None:
    """Each kill's statement prefix is one the catalog layer really has."""
    text = "".join(path.read_text() for path in Path(catalog.__file__).parent.rglob("*.py"))
    for prefix, _ in KILLS:
        assert prefix in text, prefix
