"""Bad inputs to a physical restore fail with a specific error, and nothing changes.

"Nothing changes" is checked the same way everywhere: the tenant rows (live
and dropped), the source's reads, every key in the bucket, and the restore
journal. A missing or corrupt object is found only once the job runs, so
there outputs may exist under the new prefix, but nothing is installed and
the job is ``failed``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import boto3
import pytest

from engine.pipeline import ExecutorName
from engine.restore.job import restore_tenant, resume_restore
from engine.restore.journal import RestoreInProgress, start_job
from engine.restore.plan import plan_restore
from tenants.catalog.totals import add_totals, counted
from tenants.errors import (
    AlreadyExists,
    CorruptObject,
    InvalidArgument,
    InvalidName,
    NotFound,
    ObjectMissing,
    TenantDropped,
    UnprotectedTime,
)
from tenants.objects.record import ObjectRecord
from tenants.store import TableStore
from tests.helpers.restores import (
    SCHEMA,
    T0,
    M,
    Minutes,
    bucket_keys,
    catalog_rows,
    job_state,
    keys,
    reads,
    rows,
    tenant_rows,
    unique,
)


@dataclass
class World:
    store: TableStore
    s3: Any
    name: str  # a tenant ref: its name, or name@id once it is dropped
    mon: int
    items_data: ObjectRecord  # straddles "mon": rewritten
    users_data: ObjectRecord  # wholly before "mon": reused

    def observe(self) -> tuple[Any, ...]:
        return (
            tenant_rows(self.store),
            reads(self.store, self.name),
            bucket_keys(self.store),
            catalog_rows(self.store, "SELECT * FROM restore_jobs ORDER BY id"),
            catalog_rows(self.store, "SELECT * FROM job_pins ORDER BY job_id, object_id"),
        )

    def put_raw(self, record: ObjectRecord, data: bytes) -> None:
        warehouse = self.store.objects.warehouse
        self.s3.put_object(Bucket=warehouse.bucket, Key=warehouse.key(record.key), Body=data)

    def delete_raw(self, record: ObjectRecord) -> None:
        warehouse = self.store.objects.warehouse
        self.s3.delete_object(Bucket=warehouse.bucket, Key=warehouse.key(record.key))

    def only_job(self) -> str:
        [row] = catalog_rows(self.store, "SELECT id FROM restore_jobs")
        return str(row["id"])


@pytest.fixture
def world(store: TableStore, clock: Any, s3_server: Any) -> World:
    at = Minutes(clock)
    at(0)
    name = unique("acme")
    store.create_tenant(name)
    store.create_table(name, "db.items", SCHEMA)
    store.create_table(name, "db.users", SCHEMA)
    at(1)
    store.write(name, "db.items", upserts=rows((1, "a"), (2, "b"), (3, "c")))
    store.write(name, "db.users", upserts=rows((1, "u"), (2, "w")))
    at(2)
    mon = store.create_snapshot(name, "mon")
    at(3)
    store.write(name, "db.items", upserts=rows((4, "d")), deletes=keys(1))
    store.write(name, "db.users", upserts=rows((3, "x")))
    store.compact(name, "db.items")
    at(4)
    objects = store.objects_of(name)
    [items_data] = [o for q, o in objects if q == "db.items" and o.kind == "data"]
    [users_data] = [o for q, o in objects if q == "db.users" and o.max_ts <= mon.ts]
    assert items_data.min_ts <= mon.ts < items_data.max_ts
    client = boto3.client("s3", **s3_server.settings.to_boto3())
    return World(store, client, name, mon.ts, items_data, users_data)


# --- rejected before anything is written -------------------------------------------------------


def test_unknown_tenant_is_not_found_and_changes_nothing(world):
    before = world.observe()
    with pytest.raises(NotFound, match="tenant 'nobody' does not exist"):
        restore_tenant(world.store, "nobody", "mon", executor="local")
    assert world.observe() == before


def test_unknown_snapshot_is_not_found_and_names_the_known_ones(world):
    before = world.observe()
    with pytest.raises(NotFound, match="has no snapshot 'nope'; newest: mon"):
        restore_tenant(world.store, world.name, "nope", executor="local")
    assert world.observe() == before


def test_unprotected_time_is_refused_naming_the_recoverable_range(world):
    before = world.observe()
    with pytest.raises(UnprotectedTime, match=r"not protected .*nearest snapshots: mon"):
        restore_tenant(world.store, world.name, T0 + M + M // 2, executor="local")
    with pytest.raises(UnprotectedTime, match="not protected"):
        restore_tenant(world.store, world.name, "2026-01-05T00:01:30Z", to="x", executor="local")
    assert world.observe() == before


def test_time_in_the_future_is_refused(world):
    before = world.observe()
    with pytest.raises(InvalidArgument, match="in the future"):
        restore_tenant(world.store, world.name, T0 + 24 * 60 * M, executor="local")
    assert world.observe() == before


def test_clone_onto_an_active_tenant_name_is_refused(world):
    other = unique("other")
    world.store.create_tenant(other)
    before = world.observe()
    for target in (other, world.name):
        with pytest.raises(AlreadyExists, match=f"cannot restore into '{target}'"):
            restore_tenant(world.store, world.name, "mon", to=target, executor="local")
    assert world.observe() == before


def test_invalid_target_name_is_refused_before_any_io(world):
    before = world.observe()
    with pytest.raises(InvalidName, match="invalid tenant name 'Bad Name'"):
        restore_tenant(world.store, world.name, "mon", to="Bad Name", executor="local")
    assert world.observe() == before


def test_in_place_restore_of_a_dropped_tenant_is_refused(world):
    dropped = world.store.drop_tenant(world.name)
    world.name = dropped.ref
    before = world.observe()
    with pytest.raises(TenantDropped, match="restore it as a clone with --to NEW"):
        restore_tenant(world.store, dropped.ref, "mon", executor="local")
    assert world.observe() == before


@pytest.mark.parametrize(
    "verify, executor, message",
    [
        ("everything", "local", "unknown verify level 'everything': use none, objects or full"),
        ("objects", "gpu", "unknown executor 'gpu': use local, spark or auto"),
    ],
)
def test_invalid_verify_level_or_executor_is_refused(world, verify, executor, message):
    before = world.observe()
    with pytest.raises(InvalidArgument, match=message):
        restore_tenant(world.store, world.name, "mon", executor=executor, verify=verify)
    assert world.observe() == before


def test_resume_of_an_unknown_job_is_not_found(world):
    before = world.observe()
    with pytest.raises(NotFound, match="restore job 'f00' does not exist"):
        resume_restore(world.store, "f00")
    assert world.observe() == before


@pytest.mark.parametrize(
    "first, second",
    [
        ("in_place", "in_place"),
        ("in_place", "clone"),
        ("clone", "clone_same_target"),
        ("clone", "in_place"),
        ("clone", "clone"),
    ],
)
def test_a_second_restore_of_the_same_tenant_is_refused_while_one_is_unfinished(
    world, first, second
):
    """DESIGN.md: one restore per tenant at a time, whatever the mode of either."""
    target = unique("copy")
    plan = plan_restore(
        world.store.catalog, world.name, "mon", to=target if first == "clone" else None
    )
    job = start_job(world.store.catalog, plan, executor="local", verify="objects")
    before = world.observe()

    to = {"in_place": None, "clone": unique("other"), "clone_same_target": target}[second]
    with pytest.raises(
        RestoreInProgress, match=rf"restore job {job.id} \(planned.*--resume {job.id}"
    ):
        restore_tenant(world.store, world.name, "mon", to=to, executor="local")

    assert world.observe() == before
    assert job_state(world.store, job.id) == "planned"


def test_fingerprint_that_is_not_a_schema_of_its_table_fails_the_plan_before_any_write(world):
    with world.store.catalog.transaction() as tx:  # a foreign writer's change, on any backend
        tx.execute(
            "UPDATE objects SET fingerprint = ? WHERE id = ?", ("0" * 32, world.users_data.id)
        )
        # counted as a writer counts what it registers: planning reads the totals
        for (table_id,) in tx.tuples("SELECT id FROM tables"):
            tx.execute("DELETE FROM member_totals WHERE table_id = ?", (table_id,))
            add_totals(tx, ((table_id, *group, *n) for group, n in counted(tx, table_id).items()))
    before = world.observe()

    with pytest.raises(CorruptObject, match=rf"{world.users_data.key}.*not a schema version"):
        restore_tenant(world.store, world.name, "mon", executor="local")
    with pytest.raises(CorruptObject, match="not a schema version"):
        plan_restore(world.store.catalog, world.name, "mon", to=unique("x"))

    assert world.observe() == before


# --- found while the job runs: the job fails, nothing is installed ----------------------------


def _fails_without_installing(
    world: World,
    before_tenants: Any,
    error: type[Exception],
    match: str,
    executor: ExecutorName = "local",
) -> str:
    with pytest.raises(error, match=match):
        restore_tenant(world.store, world.name, "mon", executor=executor)
    job_id = world.only_job()
    assert job_state(world.store, job_id) == "failed"
    assert tenant_rows(world.store) == before_tenants
    assert (
        catalog_rows(world.store, "SELECT id FROM tenants WHERE restore_job_id = ?", (job_id,))
        == []
    )
    return job_id


@pytest.mark.parametrize("which", ["rewritten", "reused"])
def test_missing_object_fails_the_job_naming_the_key_and_installs_nothing(world, which):
    victim = world.items_data if which == "rewritten" else world.users_data
    other_table = "users" if which == "rewritten" else "items"
    other_rows = world.store.read(world.name, f"db.{other_table}").to_pylist()
    tenants_before = tenant_rows(world.store)
    world.delete_raw(victim)

    job_id = _fails_without_installing(
        world, tenants_before, ObjectMissing, rf"{victim.key} is missing.*--resume"
    )

    assert world.store.read(world.name, f"db.{other_table}").to_pylist() == other_rows
    with pytest.raises(ObjectMissing, match=victim.key):
        resume_restore(world.store, job_id)
    assert tenant_rows(world.store) == tenants_before


@pytest.mark.parametrize("which", ["rewritten", "reused"])
def test_truncated_object_fails_the_job_as_corrupt_and_installs_nothing(world, which):
    victim = world.items_data if which == "rewritten" else world.users_data
    other_table = "users" if which == "rewritten" else "items"
    other_rows = world.store.read(world.name, f"db.{other_table}").to_pylist()
    tenants_before = tenant_rows(world.store)
    data = world.store.objects.get(victim.key)
    world.put_raw(victim, data[: len(data) // 2])

    _fails_without_installing(world, tenants_before, CorruptObject, rf"{victim.key} has \d+ bytes")

    assert world.store.read(world.name, f"db.{other_table}").to_pylist() == other_rows
