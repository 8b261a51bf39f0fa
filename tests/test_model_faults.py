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

After every step: every live tenant reads exactly as the model says (its
state at "now", and every snapshot name the model knows resolves, through
lineage, to the state at that snapshot); and no object the catalog records is
missing from the bucket.
"""

from __future__ import annotations

import copy
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from restore_helpers import FaultyCatalog, SimulatedCrash, catalog_rows, with_catalog

from engine.backup.api import create_backup, restore_backup
from engine.gc.run import run_gc
from engine.restore.job import AlreadyInstalled, cancel_restore, restore_tenant, resume_restore
from engine.restore.journal import RestoreInProgress
from tenants import catalog
from tenants.embedded_s3 import EmbeddedS3
from tenants.errors import WarehouseOwned
from tenants.schema import TableSchema
from tenants.store import TableStore

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
]


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
    occurrence=st.integers(1, 2),
)
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
    objects to rewrite; then a free interleaving."""
    before = draw(st.lists(write_ops, min_size=1, max_size=3))
    after = draw(st.lists(write_ops, min_size=1, max_size=3))
    free = draw(st.lists(ops, min_size=2, max_size=MAX_STEPS))
    return [*before, Snapshot(), *after, Compact(800), *free]


class Model:
    """The store, a second handle on it (the "other process"), and the expected states."""

    def __init__(self, s3: EmbeddedS3, new_catalog_uri: Callable[[], str]) -> None:
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
        self.store.create_table(SOURCE, DB, "items", ITEMS)
        self.live: dict[str, State] = {SOURCE: {}}  # tenant name -> expected rows now
        self.snapshots: list[tuple[str, State]] = []  # of SOURCE's lineage, in order
        self.pending: tuple[str, Restore, str, State] | None = None  # job, op, target, state at S
        self.backups: dict[int, str] = {}  # snapshot index -> backup id
        self.made = 0

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
            self.store.compact(SOURCE, DB, "items", target_bytes=op.target_bytes)
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
            DB,
            "items",
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
            restore_tenant(
                store,
                SOURCE,
                name,
                to=target if op.clone else None,
                method=op.method,
                executor="local",
                verify="objects",
            )
        except SimulatedCrash:
            event(f"killed: {op.method} at {KILLS[op.kill or 0]}")
            [job] = catalog_rows(
                self.store,
                "SELECT id, state FROM restore_jobs ORDER BY created_ts DESC, id LIMIT 1",
            )
            if job["state"] == "done":
                self.installed(target, at_s)
            else:
                self.pending = (str(job["id"]), op, target, at_s)
            return
        self.installed(target, at_s)

    def installed(self, target: str, at_s: State) -> None:
        self.live[target] = copy.deepcopy(at_s)

    def finish(self, op: Finish) -> None:
        if self.pending is None:
            return
        job_id, _, target, at_s = self.pending
        self.pending = None
        if op.how == "resume":
            resume_restore(self.other, job_id)
            self.installed(target, at_s)
            return
        try:
            cancel_restore(self.other, job_id)
        except AlreadyInstalled:
            self.installed(target, at_s)

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
                event("backup restore killed mid-load")
        restore_backup(self.other, self.backup_uri, self.backups[index], tenant=target)
        self.installed(target, at_s)

    def second_catalog(self, op: SecondCatalog) -> None:
        """A second catalog is refused; adopting, it writes and runs GC, then ours adopts back.

        Neither GC may delete a key of the other catalog's tenants.
        """
        uri = self.second_uri
        if not op.adopt:
            with pytest.raises(WarehouseOwned):
                TableStore.open(uri, self.uris[1], s3=self.s3.settings)
            return
        second = TableStore.open(uri, self.uris[1], s3=self.s3.settings, adopt_warehouse=True)
        try:
            if self.second_rows is None:
                second.create_tenant("beta")
                second.create_table("beta", DB, "items", ITEMS)
                self.second_rows = {}
            key = len(self.second_rows)
            second.write("beta", DB, "items", upserts=pa.table({"id": [key], "v": ["b"]}))
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

    def rows(self, tenant: str, as_of: str | None = None) -> State:
        return self.rows_of(self.store, tenant, as_of)

    @staticmethod
    def rows_of(store: TableStore, tenant: str, as_of: str | None = None) -> State:
        table = store.read(tenant, DB, "items", as_of)
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
    finally:
        model.close()


def test_the_model_kills_land_where_they_say() -> None:
    """Each kill's statement prefix is one the catalog layer really has."""
    text = "".join(path.read_text() for path in Path(catalog.__file__).parent.glob("*.py"))
    for prefix, _ in KILLS:
        assert prefix in text, prefix
