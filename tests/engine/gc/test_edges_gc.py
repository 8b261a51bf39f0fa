"""GC and warehouse ownership at the edges (issue 11).

Two catalogs on one warehouse, ages measured on a commit clock a backup
restore pushed ahead, temp files and multipart uploads of killed writers, and
one damaged object among many. Everything runs on the real moto S3 server (or
a real ``file://`` directory) and real SQLite catalog files.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from typer.testing import CliRunner

from engine.backup.api import create_backup, restore_backup
from engine.backup.destination import open_destination
from engine.cli.app import app
from engine.cli.gc_cmds import EXIT_DAMAGED, gc_json
from engine.gc.run import run_gc
from engine.gc.storage import storage
from tenants.catalog import open_catalog
from tenants.catalog.base import wall_clock_us
from tenants.catalog.ownership import adoptions, catalog_id
from tenants.errors import ForeignWarehouse, WarehouseOwned
from tenants.objectstore import open_object_store
from tenants.objectstore.embedded import PLACEHOLDER_KEY, EmbeddedS3
from tenants.store import TableStore
from tenants.times import US
from tenants.warehouse_owner import MARKER, read_marker
from tests.helpers.gc import (
    GRACE,
    Timeline,
    bucket_listing,
    keys_of,
    object_key_for,
    orphan_keys,
)
from tests.helpers.paths import ROOT
from tests.helpers.restores import (
    SCHEMA,
    FaultyCatalog,
    SimulatedCrash,
    crashed_at,
    keys,
    reads,
    rows,
    with_catalog,
)

H = GRACE
D = US["d"]


def seed(store: TableStore, name: str, *, batches: int = 3) -> None:
    """A tenant with one table ``db.items`` and ``batches`` commits (one object each)."""
    store.create_tenant(name)
    store.create_table(name, "db.items", SCHEMA)
    for b in range(batches):
        store.write(name, "db.items", upserts=rows(*[(b * 10 + i, f"v{b}-{i}") for i in range(5)]))


def table_of(store: TableStore, name: str) -> tuple[str, str]:
    """(tenant id, table id) of the tenant's one table."""
    [table_id] = {key.split("/")[2] for key in keys_of(store, name)}
    return store.tenant(name).id, table_id


def warehouse_of(store: TableStore) -> str:
    return store.objects.warehouse.uri


def s3_client(s3: EmbeddedS3) -> Any:
    return boto3.client("s3", **s3.settings.to_boto3())


def uploads(s3: EmbeddedS3, bucket: str) -> set[str]:
    """Keys of every incomplete multipart upload in the bucket."""
    listed = s3_client(s3).list_multipart_uploads(Bucket=bucket)
    return {u["Key"] for u in listed.get("Uploads", [])}


def start_upload(s3: EmbeddedS3, bucket: str, key: str) -> str:
    """A multipart upload with one part uploaded and never completed (a killed writer)."""
    client = s3_client(s3)
    upload_id = str(client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"])
    client.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=1, Body=b"x" * 1024)
    return upload_id


@pytest.fixture
def open_other(
    s3_server: EmbeddedS3, bucket: str, new_catalog_uri: Callable[[], str], clock: Any
) -> Iterator[Callable[..., TableStore]]:
    """Open another catalog (a second deployment, on the test's backend) against the
    ``store`` fixture's warehouse; the same ``name`` opens the same catalog again."""
    opened: list[TableStore] = []
    catalogs: dict[str, str] = {}

    def make(name: str = "other.db", *, adopt: bool = False) -> TableStore:
        if name not in catalogs:
            catalogs[name] = new_catalog_uri()
        other = TableStore.open(
            catalogs[name],
            f"s3://{bucket}/warehouse",
            s3=s3_server.settings,
            clock=clock,
            adopt_warehouse=adopt,
        )
        opened.append(other)
        return other

    yield make
    for other in opened:
        other.close()


# --- two catalogs on one warehouse --------------------------------------------------------------


def test_a_second_catalog_is_refused_and_its_gc_deletes_nothing_of_the_first(
    new_catalog_uri: Callable[[], str],
    store: TableStore,
    clock: Any,
    s3_server: EmbeddedS3,
    bucket: str,
    tmp_path: Path,
    open_other: Callable[..., TableStore],
) -> None:
    at = Timeline(clock)
    seed(store, "a")
    expected = reads(store, "a")
    before = bucket_listing(store)
    mine = catalog_id(store.catalog)
    with pytest.raises(WarehouseOwned, match=f"belongs to catalog {mine}.*--adopt-warehouse"):
        open_other()
    # A program that builds its TableStore by hand skips the check at open; GC does not.
    other = TableStore(
        open_catalog(new_catalog_uri(), clock),
        open_object_store(f"s3://{bucket}/warehouse", s3_server.settings),
    )
    try:
        seed(other, "b", batches=1)  # it now knows one key under the prefix
        theirs = catalog_id(other.catalog)
        at(24 * 30)
        with pytest.raises(
            WarehouseOwned, match=f"belongs to catalog {mine}, not to catalog {theirs}"
        ):
            run_gc(other, dry_run=False)
    finally:
        other.close()
    assert before <= bucket_listing(store)
    assert reads(store, "a") == expected


def test_gc_never_deletes_keys_of_another_catalog(
    store: TableStore, clock: Any, open_other: Callable[..., TableStore]
) -> None:
    """Even after adopting the warehouse, GC deletes only keys under its own tenant ids:
    the other catalog's live objects and its own orphans are not this catalog's to judge."""
    at = Timeline(clock)
    seed(store, "a")
    a_id, a_table = table_of(store, "a")
    a_orphan = object_key_for(a_id, a_table)  # a crashed write of catalog A
    store.objects.put(a_orphan, b"A's orphan")
    expected = reads(store, "a")
    a_keys = bucket_listing(store)
    first = catalog_id(store.catalog)

    other = open_other(adopt=True)
    second = catalog_id(other.catalog)
    seed(other, "b", batches=1)
    b_id, b_table = table_of(other, "b")
    b_orphan = object_key_for(b_id, b_table)
    other.objects.put(b_orphan, b"B's orphan")
    at(24 * 30)
    report = run_gc(other, dry_run=False, deep=True)  # the planted orphans predate intents

    assert [o.key for o in report.orphans.orphans] == [b_orphan]
    assert report.orphans.foreign == len(a_keys) and report.orphans.foreign_tenants == (a_id,)
    assert a_keys <= bucket_listing(store)
    assert reads(store, "a") == expected
    # The adoption is recorded in the marker and in the adopting catalog.
    marker = read_marker(store.objects)
    assert marker is not None and marker.owner == second
    assert [(x.catalog_id, x.previous_owner) for x in marker.adoptions] == [(second, first)]
    assert [(x["warehouse"], x["previous_owner"]) for x in adoptions(other.catalog)] == [
        (warehouse_of(store), first)
    ]
    # The first catalog is now the one refused, at open and by GC.
    with pytest.raises(
        WarehouseOwned, match=f"belongs to catalog {second}, not to catalog {first}"
    ):
        TableStore.open(store.catalog.uri, warehouse_of(store), s3=store.objects.warehouse.s3)
    with pytest.raises(
        WarehouseOwned, match=f"belongs to catalog {second}, not to catalog {first}"
    ):
        run_gc(store, dry_run=False)
    assert a_keys <= bucket_listing(store)


def dead_writer(store: TableStore, tenant: str) -> set[str]:
    """A write of ``tenant`` killed inside its commit: the keys it left (under its intent)."""
    before = bucket_listing(store)
    broken = with_catalog(store, FaultyCatalog(store.catalog, "UPDATE tenants SET last_change_ts"))
    with pytest.raises(SimulatedCrash):
        broken.write(tenant, "db.items", upserts=rows((99, "lost")), deletes=keys(1))
    return bucket_listing(store) - before


def test_neither_the_intent_sweep_nor_deep_touches_keys_of_another_catalog(
    store: TableStore, clock: Any, open_other: Callable[..., TableStore]
) -> None:
    """Catalog A's keys, its dead writers' included, stay when catalog B (which adopted
    the warehouse) sweeps its own stale intents and then lists everything."""
    at = Timeline(clock)
    seed(store, "a")
    a_orphans = dead_writer(store, "a")
    a_keys = bucket_listing(store)
    other = open_other(adopt=True)
    seed(other, "b", batches=1)
    b_orphans = dead_writer(other, "b")
    at(24 * 30)
    report = run_gc(other, dry_run=False)
    assert orphan_keys(report) == b_orphans and report.intents.foreign == 0
    report = run_gc(other, dry_run=False, deep=True)
    assert orphan_keys(report) == set()
    assert report.orphans.foreign == len(a_keys) and a_orphans <= a_keys
    assert a_keys <= bucket_listing(store)
    assert not b_orphans & bucket_listing(store)


def test_the_catalog_id_is_created_once_even_when_processes_race_to_create_it(
    new_catalog_uri: Callable[[], str],
    tmp_path: Path,
) -> None:
    uri = new_catalog_uri()
    start = time.time() + 2.0  # every process opens the catalog, then asks at the same moment
    code = (
        "import sys, time\n"
        "from tenants.catalog import open_catalog\n"
        "from tenants.catalog.ownership import catalog_id\n"
        "catalog = open_catalog(sys.argv[1])\n"
        "time.sleep(max(0.0, float(sys.argv[2]) - time.time()))\n"
        "print(catalog_id(catalog))\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, uri, str(start)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outputs]
    ids = {out.strip() for out, _ in outputs}
    assert len(ids) == 1
    [the_id] = ids
    assert re.fullmatch(r"[0-9a-f]{32}", the_id)
    catalog = open_catalog(uri)
    try:
        assert catalog_id(catalog) == the_id
        with catalog.snapshot() as tx:
            assert tx.scalar("SELECT COUNT(*) FROM meta WHERE key = 'catalog_id'") == 1
    finally:
        catalog.close()


@pytest.mark.parametrize("scheme", ["file", "s3"])
def test_catalogs_claiming_a_fresh_warehouse_at_once_get_exactly_one_owner(
    new_catalog_uri: Callable[[], str], scheme: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    for round_ in range(3):
        if scheme == "s3":
            s3: EmbeddedS3 = request.getfixturevalue("s3_server")
            bucket: str = request.getfixturevalue("bucket")
            warehouse, settings = f"s3://{bucket}/race{round_}", s3.settings
        else:
            warehouse, settings = f"file://{tmp_path / f'race{round_}'}", None
        uris = [new_catalog_uri() for n in range(4)]
        won, refused = claim_at_once(uris, warehouse, settings)
        assert len(won) == 1 and len(refused) == 3, (won, refused)
        marker = read_marker(won[0].objects)
        assert marker is not None and marker.owner == catalog_id(won[0].catalog)
        won[0].close()


def claim_at_once(
    uris: list[str], warehouse: str, settings: Any
) -> tuple[list[TableStore], list[WarehouseOwned]]:
    """Open each catalog against ``warehouse`` from its own thread, all at the same moment."""
    barrier = threading.Barrier(len(uris))
    won: list[TableStore] = []
    refused: list[WarehouseOwned] = []

    def claim(uri: str) -> None:
        catalog = open_catalog(uri)
        catalog_id(catalog)  # the id exists before the race starts
        catalog.close()
        barrier.wait()
        try:
            won.append(TableStore.open(uri, warehouse, s3=settings))
        except WarehouseOwned as e:
            refused.append(e)

    threads = [threading.Thread(target=claim, args=(uri,)) for uri in uris]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return won, refused


@pytest.mark.parametrize("scheme", ["file", "s3"])
def test_the_marker_names_its_owner_and_holds_no_credentials_or_local_paths(
    new_catalog_uri: Callable[[], str], scheme: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if scheme == "s3":
        s3: EmbeddedS3 = request.getfixturevalue("s3_server")
        bucket: str = request.getfixturevalue("bucket")
        warehouse, settings = f"s3://{bucket}/wh", s3.settings
    else:
        warehouse, settings = f"file://{tmp_path / 'wh'}", None
    store = TableStore.open(new_catalog_uri(), warehouse, s3=settings)
    try:
        data = store.objects.get(MARKER)
        raw = json.loads(data)
        assert set(raw) == {
            "format",
            "format_version",
            "owner_catalog_id",
            "created_at",
            "adoptions",
        }
        assert raw["format"] == "rewind-warehouse" and raw["format_version"] == 1
        assert raw["owner_catalog_id"] == catalog_id(store.catalog)
        assert raw["adoptions"] == []
        text = data.decode()
        for secret in (PLACEHOLDER_KEY, str(tmp_path), "sqlite", "c.db"):
            assert secret not in text
        if scheme == "file":
            assert (tmp_path / "wh" / MARKER).is_file()
    finally:
        store.close()


def test_a_warehouse_from_before_markers_gets_one_if_its_catalog_wrote_everything_in_it(
    store: TableStore,
) -> None:
    seed(store, "a")
    store.objects.delete_many([MARKER])  # as an older Rewind left it
    reopened = TableStore.open(
        store.catalog.uri, warehouse_of(store), s3=store.objects.warehouse.s3
    )
    try:
        marker = read_marker(store.objects)
        assert marker is not None and marker.owner == catalog_id(store.catalog)
        assert marker.adoptions == () and adoptions(store.catalog) == []
        assert reads(reopened, "a") == reads(store, "a")
    finally:
        reopened.close()


def test_a_warehouse_from_before_markers_holding_tenants_this_catalog_never_created_is_refused_unless_adopted(
    store: TableStore, clock: Any, open_other: Callable[..., TableStore]
) -> None:
    at = Timeline(clock)
    seed(store, "a")
    a_id, _ = table_of(store, "a")
    expected = reads(store, "a")
    a_keys = bucket_listing(store)
    store.objects.delete_many([MARKER])  # both deployments predate markers
    with pytest.raises(
        ForeignWarehouse, match=rf"1 prefix\(es\), e.g. tenants/{a_id}/.*--adopt-warehouse"
    ):
        open_other()
    assert read_marker(store.objects) is None  # refused: nothing written
    other = open_other(adopt=True)
    marker = read_marker(store.objects)
    assert marker is not None and marker.owner == catalog_id(other.catalog)
    assert [(x.catalog_id, x.previous_owner) for x in marker.adoptions] == [
        (catalog_id(other.catalog), None)
    ]
    assert [x["previous_owner"] for x in adoptions(other.catalog)] == [None]
    at(24 * 30)
    report = run_gc(other, dry_run=False, grace_us=0, allow_short_grace=True, deep=True)
    assert report.orphans.orphans == () and report.orphans.foreign == len(a_keys)
    assert a_keys <= bucket_listing(store)
    assert reads(store, "a") == expected


def test_a_backup_destination_is_refused_as_a_warehouse(
    new_catalog_uri: Callable[[], str], s3_server: EmbeddedS3, bucket: str, tmp_path: Path
) -> None:
    open_destination(f"s3://{bucket}/backups", create=True)
    with pytest.raises(ForeignWarehouse, match="is a Rewind backup destination"):
        TableStore.open(new_catalog_uri(), f"s3://{bucket}/backups", s3=s3_server.settings)


def test_the_cli_refuses_a_second_catalog_in_one_line_and_adopt_warehouse_takes_over(
    new_catalog_uri: Callable[[], str], uris: tuple[str, str], tmp_path: Path
) -> None:
    catalog, warehouse = uris
    other = new_catalog_uri()
    runner = CliRunner()

    def run(*args: str) -> Any:
        return runner.invoke(app, list(args))

    assert (
        run("--catalog", catalog, "--warehouse", warehouse, "tenant", "create", "acme").exit_code
        == 0
    )
    open_catalog(other).close()  # a second catalog that exists (a read creates none)
    refused = run("--catalog", other, "--warehouse", warehouse, "tenant", "list")
    assert refused.exit_code == 1
    [line] = refused.stderr.strip().splitlines()
    assert line.startswith(f"error: warehouse {warehouse} belongs to catalog ")
    assert "--adopt-warehouse" in line and "Traceback" not in refused.output
    adopted = run(
        "--catalog", other, "--warehouse", warehouse, "--adopt-warehouse", "tenant", "list"
    )
    assert adopted.exit_code == 0, adopted.output
    again = run("--catalog", catalog, "--warehouse", warehouse, "gc", "--dry-run")
    assert again.exit_code == 1 and "--adopt-warehouse" in again.stderr


# --- ages on the wall clock, never on a commit clock pushed ahead -------------------------------


@pytest.mark.parametrize("push", ["backup_restore", "clock_stepped_back"])
def test_gc_keeps_fresh_unregistered_outputs_when_the_commit_clock_runs_far_ahead(
    new_catalog_uri: Callable[[], str],
    store: TableStore,
    clock: Any,
    s3_server: EmbeddedS3,
    bucket: str,
    tmp_path: Path,
    push: str,
) -> None:
    seed(store, "a")
    a_id, a_table = table_of(store, "a")
    if push == "backup_restore":
        # Another deployment whose clock runs 30 days ahead; restoring its backup
        # here carries its timestamps into this catalog's commit clock.
        source = TableStore.open(
            new_catalog_uri(),
            f"s3://{bucket}/ahead",
            s3=s3_server.settings,
            clock=lambda: wall_clock_us() + 30 * D,
        )
        try:
            seed(source, "far", batches=1)
            backup = create_backup(source, "far", source.now(), f"s3://{bucket}/backups")
        finally:
            source.close()
        restore_backup(store, f"s3://{bucket}/backups", backup.backup_id)
    else:
        clock.fixed = wall_clock_us() + 30 * D
        store.create_tenant("far")  # a commit at wall + 30 days ...
        clock.fixed = None  # ... then the wall clock is set right again
    assert store.now() > wall_clock_us() + 29 * D
    expected = reads(store, "a")

    # A compaction whose swap never committed leaves fresh, unregistered outputs,
    before = bucket_listing(store)
    with pytest.raises(SimulatedCrash, match=crashed_at("UPDATE membership SET removed_ts")):
        with_catalog(
            store, FaultyCatalog(store.catalog, "UPDATE membership SET removed_ts")
        ).compact("a")
    outputs = bucket_listing(store) - before
    assert outputs
    # and a writer is still uploading a large object in parts.
    in_flight = f"warehouse/{object_key_for(a_id, a_table)}"
    start_upload(s3_server, bucket, in_flight)

    report = run_gc(store, dry_run=False, deep=True)  # default graces
    assert outputs <= bucket_listing(store)
    assert report.intents.stale == 0  # the compaction's intent began on the wall clock
    assert report.orphans.orphans == () and report.orphans.too_young == len(outputs)
    assert in_flight in uploads(s3_server, bucket)
    assert report.partial.stale == () and report.partial.too_young == 1
    assert reads(store, "a") == expected


def test_replaced_objects_and_retired_tenants_wait_real_time_when_the_commit_clock_runs_ahead(
    store: TableStore, clock: Any
) -> None:
    at = Timeline(clock)
    seed(store, "a")
    before = keys_of(store, "a")
    store.compact("a")
    replaced = before - keys_of(store, "a")
    assert replaced
    seed(store, "old", batches=1)
    old = store.drop_tenant("old")  # retained for 7 days
    old_keys = {o.key for _, o in store.objects_of(old.ref)}
    with store.catalog.transaction() as tx:
        tx.observe_ts(at.base + 30 * D)  # what restoring a backup from a clock 30 days ahead does

    report = run_gc(store, dry_run=False)  # 1 h grace, 7 d retention: neither has passed
    assert report.collected.candidates == () and report.collected.purged == ()
    assert replaced | old_keys <= bucket_listing(store)
    assert store.tenant(old.ref).purged_ts is None

    at(2)  # two real hours: the grace has passed, the retention has not
    report = run_gc(store, dry_run=False)
    assert {c.key for c in report.collected.candidates} == replaced
    assert not replaced & bucket_listing(store) and old_keys <= bucket_listing(store)
    assert report.collected.purged == ()

    at(24 * 7 + 1)  # past the retention, in real time
    report = run_gc(store, dry_run=False)
    assert [p.tenant for p in report.collected.purged] == [old.ref]


# --- leftovers of killed writers ------------------------------------------------------------------


KILLED_WRITER = (
    "import os, signal, sys\n"
    "import tenants.objectstore.local as local\n"
    "from tenants.objectstore import open_object_store\n"
    "# die after the temp file is written, before it is renamed into place\n"
    "local.os.replace = lambda a, b: os.kill(os.getpid(), signal.SIGKILL)\n"
    "open_object_store(sys.argv[1]).put(sys.argv[2], b'x' * 4096)\n"
)


def test_temp_files_of_killed_writers_are_swept_from_a_file_warehouse_after_the_grace(
    new_catalog_uri: Callable[[], str], tmp_path: Path, clock: Any
) -> None:
    at = Timeline(clock)
    root = tmp_path / "wh"
    store = TableStore.open(new_catalog_uri(), f"file://{root}", clock=clock)
    try:
        seed(store, "a", batches=1)
        expected = reads(store, "a")
        a_id, a_table = table_of(store, "a")
        key = object_key_for(a_id, a_table)
        done = subprocess.run(
            [sys.executable, "-c", KILLED_WRITER, f"file://{root}", key], cwd=ROOT, check=False
        )
        assert done.returncode == -signal.SIGKILL
        [temp] = (root / key).parent.glob(".*.tmp")
        assert not (root / key).exists()
        # A temp file under a tenant another catalog created is not ours to remove.
        foreign = root / object_key_for(uuid.uuid4().hex, uuid.uuid4().hex)
        foreign.parent.mkdir(parents=True)
        foreign_temp = foreign.with_name(f".{foreign.name}.4242.tmp")
        foreign_temp.write_bytes(b"someone else's")

        at(23)
        report = run_gc(store, dry_run=False, deep=True)
        assert temp.exists() and report.partial.too_young == 1 and report.partial.not_ours == 1
        at(25)
        dry = run_gc(store, dry_run=True, deep=True)
        assert [w.key for w in dry.partial.stale] == [key] and temp.exists()
        report = run_gc(store, dry_run=False, deep=True)
        assert [w.key for w in report.partial.stale] == [key] and report.partial.discarded == 1
        assert report.partial.count("temp") == 1
        assert not temp.exists() and foreign_temp.exists()
        assert reads(store, "a") == expected
    finally:
        store.close()


def test_stale_multipart_uploads_of_this_catalog_are_aborted_and_all_others_kept(
    store: TableStore, clock: Any, s3_server: EmbeddedS3, bucket: str
) -> None:
    at = Timeline(clock)
    seed(store, "a", batches=1)
    expected = reads(store, "a")
    a_id, a_table = table_of(store, "a")
    ours = f"warehouse/{object_key_for(a_id, a_table)}"
    foreign = f"warehouse/{object_key_for(uuid.uuid4().hex, uuid.uuid4().hex)}"
    outside = f"elsewhere/{object_key_for(a_id, a_table)}"
    for key in (ours, foreign, outside):
        start_upload(s3_server, bucket, key)

    at(23)
    report = run_gc(store, dry_run=False, deep=True)
    assert uploads(s3_server, bucket) == {ours, foreign, outside}
    assert (report.partial.too_young, report.partial.not_ours) == (1, 1)
    at(25)
    dry = run_gc(store, dry_run=True, deep=True)
    assert [w.key for w in dry.partial.stale] == [ours.removeprefix("warehouse/")]
    assert uploads(s3_server, bucket) == {ours, foreign, outside}
    report = run_gc(store, dry_run=False, deep=True)
    assert uploads(s3_server, bucket) == {foreign, outside}
    assert report.partial.discarded == 1
    summary = gc_json(report)["incomplete_writes"]
    assert summary["multipart_uploads_aborted"] == 1 and summary["not_ours"] == 1
    assert reads(store, "a") == expected


# --- one damaged object does not stop GC or the storage report -----------------------------------


def damage(store: TableStore, key: str, how: str) -> None:
    data = store.objects.get(key)
    if how == "missing":
        store.objects.delete_many([key])
    elif how == "truncated":
        store.objects.put(key, data[: len(data) // 2])
    else:  # same size, other bytes: only the checksum can tell
        middle = len(data) // 2
        store.objects.put(key, data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :])


def reclaimable_world(store: TableStore) -> str:
    """Tenants ``bad`` and ``good``, both with overwritten rows no protected time needs;
    one object of ``bad`` damaged. Returns its key."""
    for name in ("bad", "good"):
        seed(store, name)
        store.write(name, "db.items", upserts=rows(*[(i, "again") for i in range(5)]))
    return sorted(keys_of(store, "bad"))[0]


@pytest.mark.parametrize("how", ["checksum", "truncated", "missing"])
def test_one_damaged_object_does_not_stop_gc_or_storage_and_is_never_deleted(
    store: TableStore, clock: Any, how: str
) -> None:
    at = Timeline(clock)
    victim = reclaimable_world(store)
    damage(store, victim, how)
    at(2)
    report = run_gc(store, dry_run=False)
    assert [(d.tenant, d.table, d.key) for d in report.damaged] == [("bad", "db.items", victim)]
    assert [r.tenant for r, _ in report.compacted] == ["good"]  # the rest carried on
    assert victim in keys_of(store, "bad")  # still a member: nothing decided on it
    assert (victim in bucket_listing(store)) == (how != "missing")

    bad = storage(store.catalog, store.objects, "bad")
    assert [d.key for d in bad.damaged] == [victim]
    assert bad.tables[0].history_only_bytes is None and bad.bytes > 0
    good = storage(store.catalog, store.objects, "good")
    assert good.damaged == () and good.tables[0].history_only_bytes == 0


def test_the_cli_reports_damaged_objects_finishes_the_rest_and_exits_3(
    store: TableStore, clock: Any
) -> None:
    victim = reclaimable_world(store)
    damage(store, victim, "checksum")
    runner = CliRunner()
    base = ["--catalog", store.catalog.uri, "--warehouse", warehouse_of(store)]

    gc = runner.invoke(app, [*base, "--json", "gc", "--yes"])
    assert gc.exit_code == EXIT_DAMAGED, gc.output
    out = json.loads(gc.stdout)
    assert [(d["tenant"], d["table"], d["key"]) for d in out["damaged"]] == [
        ("bad", "db.items", victim)
    ]
    assert [c["tenant"] for c in out["compacted"]] == ["good"]
    [line] = gc.stderr.strip().splitlines()
    assert line.startswith("error: 1 damaged object(s) in 1 table(s), e.g. bad/db.items ")

    text = runner.invoke(app, [*base, "storage", "bad"])
    assert text.exit_code == EXIT_DAMAGED and victim in text.stdout and "damaged" in text.stdout
    assert runner.invoke(app, [*base, "storage", "good"]).exit_code == 0
