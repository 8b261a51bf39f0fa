"""Backups that outlive the bucket: physical and logical backups in a second bucket.

The destination is another moto bucket. The strongest check empties the
source bucket with plain boto3 and restores from the backup alone; another
restores into a different catalog and warehouse (a second SQLite file and a
third bucket). A missing or altered file fails the verify and the restore
loudly (DESIGN.md, "Lessons": a backup once skipped missing files silently).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from engine.backup.api import (
    backups,
    create_backup,
    delete_backup,
    restore_backup,
    show_backup,
    verify_backup,
)
from engine.backup.destination import MARKER, open_destination
from engine.backup.physical import create_physical, read_physical_manifest
from engine.cli.app import app
from engine.logical.dump import dump_tenant
from tenants.catalog.base import wall_clock_us
from tenants.errors import AlreadyExists, CorruptObject, NotFound, ObjectMissing
from tenants.objectstore import ObjectStore, open_object_store
from tenants.objectstore.embedded import EmbeddedS3
from tenants.store import TableStore
from tests.helpers.backups import (
    AT_MON,
    AT_SUN,
    DB,
    FailPutWhere,
    Source,
    bucket_key_count,
    build_source,
    catalog_counts,
    dest_keys,
    empty_bucket,
    items,
    items_now,
    new_bucket,
    schema_of,
    tenant_rows,
    warehouse_keys,
)
from tests.helpers.restores import (
    FaultyCatalog,
    SimulatedCrash,
    WrappedObjectStore,
    crashed_at,
    reads,
    with_catalog,
    with_objects,
)

KINDS = ["physical", "logical"]


@pytest.fixture
def dest(uri: str, s3_server: EmbeddedS3) -> ObjectStore:
    """The destination read directly (no marker check)."""
    return open_object_store(uri, s3_server.settings)


@pytest.fixture
def source(store: TableStore) -> Source:
    return build_source(store)


@pytest.fixture
def other_store(
    new_catalog_uri: Callable[[], str], s3_server: EmbeddedS3, tmp_path: Path
) -> Iterator[TableStore]:
    """Another deployment: its own SQLite catalog and its own (third) bucket."""
    bucket = new_bucket(s3_server, "rewind-other")
    other = TableStore.open(new_catalog_uri(), f"s3://{bucket}/wh", s3=s3_server.settings)
    yield other
    other.close()


def check_restored(store: TableStore, name: str, kind: str, source_schema: dict[str, Any]) -> None:
    """Reads as the source at "mon"; a physical restore also carries sun and mon."""
    assert reads(store, name) == AT_MON
    assert schema_of(store, name) == source_schema
    if kind == "physical":
        assert [(s.name) for s in store.snapshots(name)] == ["sun", "mon"]
        assert reads(store, name, "sun") == AT_SUN
        assert reads(store, name, "mon") == AT_MON
    # The restored tenant takes writes.
    store.write(name, f"{DB}.items", upserts=items([1000]))
    assert reads(store, name)["shop.items"][-1] == {"id": 1000, "v": "v1000"}


# --- restore from the backup alone ----------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_backup_restores_exactly_after_every_key_of_the_source_bucket_is_deleted(
    store: TableStore, source: Source, s3_server: EmbeddedS3, bucket: str, uri: str, kind: str
) -> None:
    source_schema = schema_of(store, "acme", "mon")
    result = create_backup(store, "acme", "mon", uri, kind=kind)
    assert result.kind == kind and result.copied_objects == result.objects > 0
    assert empty_bucket(s3_server, bucket) > 0
    assert bucket_key_count(s3_server, bucket) == 0
    with pytest.raises(
        ObjectMissing, match=rf"object s3://{re.escape(bucket)}/\S+\.parquet is missing"
    ):
        store.read("acme", f"{DB}.items")  # the source is really gone

    tenant, _ = restore_backup(store, uri, result.backup_id, tenant="back")

    assert tenant.name == "back" and tenant.state == "active"
    assert tenant.source_ts == source.mon
    check_restored(store, "back", kind, source_schema)


@pytest.mark.parametrize("kind", KINDS)
def test_backup_restores_into_another_catalog_and_warehouse(
    store: TableStore, source: Source, other_store: TableStore, uri: str, kind: str
) -> None:
    source_schema = schema_of(store, "acme", "mon")
    result = create_backup(store, "acme", "mon", uri, kind=kind)

    tenant, _ = restore_backup(other_store, uri, result.backup_id)

    assert tenant.name == "acme"  # the backed-up name by default
    assert [t.name for t in other_store.tenants()] == ["acme"]
    check_restored(other_store, "acme", kind, source_schema)
    # Every object the new deployment reads lives in its own warehouse.
    own = set(warehouse_keys(other_store, f"tenants/{tenant.id}/"))
    assert {o.key for _, o in other_store.objects_of("acme")} <= own
    # The same backup restores again into the same catalog, under another name.
    restore_backup(other_store, uri, result.backup_id, tenant="twice")
    assert reads(other_store, "twice") == AT_MON
    assert reads(store, "acme") == source.now_reads


def test_physical_backup_rewrites_objects_that_straddle_s_and_reuses_the_rest(
    store: TableStore, source: Source, dest: ObjectStore, uri: str
) -> None:
    open_destination(uri, create=True)
    result = create_physical(store, "acme", "mon", dest, "b1")
    # build_source compacted items and orders across "mon": those objects straddle it.
    assert result.rewritten_objects >= 2
    raw = read_physical_manifest(dest, "b1")
    assert raw["at_ts"] == source.mon and raw["source_tenant"] == "acme"
    for entry in raw["objects"].values():
        record = entry["record"]
        assert record["max_ts"] <= source.mon
        assert dest_keys(dest, entry["path"])[entry["path"]] == record["bytes"]
    # The same straddler at the same S is stored once: a second backup copies nothing.
    again = create_physical(store, "acme", "mon", dest, "b2")
    assert (again.copied_objects, again.copied_bytes) == (0, 0)
    assert again.referenced_objects == again.objects == result.objects


# --- incremental ---------------------------------------------------------------------------------


def test_incremental_physical_backup_copies_exactly_the_new_objects(
    store: TableStore, dest: ObjectStore, uri: str
) -> None:
    build_source(store, compact=False)
    first = create_backup(store, "acme", "mon", uri, kind="physical")
    stored_first = dest_keys(dest, "objects/")
    assert first.copied_objects == len(stored_first) == first.objects
    assert first.copied_bytes == sum(stored_first.values())
    in_first = set(read_physical_manifest(dest, first.backup_id)["objects"])
    store.write("acme", f"{DB}.items", upserts=items_now([500, 501]))
    store.write("acme", f"{DB}.later", deletes=items([1]).select(["id"]))
    store.create_snapshot("acme", "tue")
    # Every object of acme: live at tue, or (shop.gone, dropped after mon) needed by the
    # carried snapshots sun and mon; no compaction ran, so none was replaced.
    at_tue = [o for _, o in store.objects_of("acme")]
    assert "shop.gone" in {q for q, _ in store.objects_of("acme")}
    # New since the first backup: the writes after "mon" (the first backup skipped them)
    # and the two just made.
    new = [o for o in at_tue if o.id not in in_first]
    assert len(new) >= 4

    second = create_backup(store, "acme", "tue", uri, kind="physical")

    assert second.copied_objects == len(new)
    assert second.copied_bytes == sum(o.bytes for o in new)
    assert second.referenced_objects == len(at_tue) - len(new) == second.objects - len(new)
    assert set(read_physical_manifest(dest, second.backup_id)["objects"]) == {o.id for o in at_tue}
    assert dest_keys(dest, "objects/") == stored_first | {
        f"objects/{o.id}.parquet": o.bytes for o in new
    }
    tenant, _ = restore_backup(store, uri, second.backup_id, tenant="tue")
    assert reads(store, tenant.name) == reads(store, "acme", "tue")


# --- verify ----------------------------------------------------------------------------------------


def backup_files(dest: ObjectStore, backup_id: str, kind: str) -> list[str]:
    if kind == "physical":
        return sorted(
            e["path"] for e in read_physical_manifest(dest, backup_id)["objects"].values()
        )
    return sorted(k for k in dest_keys(dest, f"backups/{backup_id}/tables/"))


@pytest.mark.parametrize("damage", ["tampered", "deleted"])
@pytest.mark.parametrize("kind", KINDS)
def test_verify_rereads_every_file_and_a_damaged_file_fails_verify_and_restore(
    store: TableStore, source: Source, dest: ObjectStore, uri: str, kind: str, damage: str
) -> None:
    result = create_backup(store, "acme", "mon", uri, kind=kind)
    files = backup_files(dest, result.backup_id, kind)
    assert verify_backup(uri, result.backup_id) == len(files) == result.objects
    victim = files[-1]
    if damage == "tampered":
        data = bytearray(dest.get(victim))
        data[len(data) // 2] ^= 0x01
        dest.put(victim, bytes(data))
        error: type[Exception] = CorruptObject
    else:
        dest.delete_many([victim])
        error = ObjectMissing
    tenants = tenant_rows(store)
    counts = catalog_counts(store)
    keys = warehouse_keys(store)

    with pytest.raises(error, match=victim.split("/")[-1]):
        verify_backup(uri, result.backup_id)
    with pytest.raises(error, match=victim.split("/")[-1]):
        restore_backup(store, uri, result.backup_id, tenant="back")

    # The restore loaded nothing: no tenant of any state, no catalog rows, no keys.
    assert tenant_rows(store) == tenants
    assert catalog_counts(store) == counts
    assert warehouse_keys(store) == keys


# --- delete ---------------------------------------------------------------------------------------


def test_delete_keeps_objects_another_backup_uses_and_removes_the_rest(
    store: TableStore, dest: ObjectStore, uri: str
) -> None:
    build_source(store, compact=False)
    first = create_backup(store, "acme", "mon", uri, kind="physical")
    store.write("acme", f"{DB}.items", upserts=items_now([500]))
    store.compact("acme", f"{DB}.items")  # replaces items' objects: only the first backup has them
    store.create_snapshot("acme", "tue")
    second = create_backup(store, "acme", "tue", uri, kind="physical")
    logical = create_backup(store, "acme", "tue", uri, kind="logical")
    paths = {
        b.backup_id: {
            e["path"] for e in read_physical_manifest(dest, b.backup_id)["objects"].values()
        }
        for b in (first, second)
    }
    shared = paths[first.backup_id] & paths[second.backup_id]
    only_first = paths[first.backup_id] - paths[second.backup_id]
    assert shared and only_first

    delete_backup(uri, first.backup_id)

    assert set(dest_keys(dest, "objects/")) == paths[second.backup_id]
    assert dest_keys(dest, f"backups/{first.backup_id}/") == {}
    assert {e.backup_id for e in backups(uri)} == {second.backup_id, logical.backup_id}
    assert verify_backup(uri, second.backup_id) == len(paths[second.backup_id])
    tenant, _ = restore_backup(store, uri, second.backup_id, tenant="tue")
    assert reads(store, tenant.name) == reads(store, "acme", "tue")

    delete_backup(uri, logical.backup_id)
    assert dest_keys(dest, f"backups/{logical.backup_id}/") == {}
    assert set(dest_keys(dest, "objects/")) == paths[second.backup_id]

    delete_backup(uri, second.backup_id)
    assert set(dest_keys(dest)) == {MARKER}
    assert backups(uri) == []
    with pytest.raises(NotFound, match=second.backup_id):
        delete_backup(uri, second.backup_id)


# --- list -----------------------------------------------------------------------------------------


def test_list_shows_every_backup_and_an_incomplete_logical_one_as_not_complete(
    store: TableStore, source: Source, dest: ObjectStore, uri: str
) -> None:
    physical = create_backup(store, "acme", "mon", uri, kind="physical")
    logical = create_backup(store, "acme", "sun", uri, kind="logical")
    open_destination(uri, create=True)
    crashing = FailPutWhere(dest, lambda key: key.endswith("manifest.json"))
    with pytest.raises(SimulatedCrash, match=r"crash at put backups/half/manifest\.json"):
        dump_tenant(store, "acme", "mon", crashing, "backups/half", dump_id="half")

    entries = {e.backup_id: e for e in backups(uri)}

    assert set(entries) == {physical.backup_id, logical.backup_id, "half"}
    assert (entries["half"].complete, entries["half"].kind, entries["half"].tenant) == (
        False,
        None,
        None,
    )
    assert entries["half"].bytes == sum(dest_keys(dest, "backups/half/").values()) > 0
    p, lg = entries[physical.backup_id], entries[logical.backup_id]
    assert (p.complete, p.kind, p.tenant, p.at_label, p.at_ts) == (
        True,
        "physical",
        "acme",
        "mon",
        source.mon,
    )
    assert (lg.complete, lg.kind, lg.tenant, lg.at_label, lg.at_ts) == (
        True,
        "logical",
        "acme",
        "sun",
        source.sun,
    )
    # An incomplete backup is never shown, verified or restored as if it were one.
    for call in (
        lambda: show_backup(uri, "half"),
        lambda: verify_backup(uri, "half"),
        lambda: restore_backup(store, uri, "half", tenant="half"),
    ):
        with pytest.raises(NotFound, match="incomplete"):
            call()
    # It can be deleted.
    delete_backup(uri, "half")
    assert "half" not in {e.backup_id for e in backups(uri)}


def test_list_shows_a_physical_backup_that_crashed_before_its_manifest_as_not_complete(
    store: TableStore, source: Source, dest: ObjectStore, uri: str
) -> None:
    open_destination(uri, create=True)
    crashing = FailPutWhere(dest, lambda key: key.endswith("manifest.json"))
    with pytest.raises(SimulatedCrash, match=r"crash at put backups/half/manifest\.json"):
        create_physical(store, "acme", "mon", crashing, "half")
    assert dest_keys(dest, "objects/") != {}  # it copied objects before dying

    entries = {e.backup_id: e for e in backups(uri)}

    assert "half" in entries and entries["half"].complete is False


def test_list_orders_backups_by_when_they_were_made(
    store: TableStore, source: Source, uri: str
) -> None:
    """``backup restore`` without --backup takes the newest: created_ts must be the time
    the backup was made, for either kind, not the catalog's last change."""
    made = []
    for kind in ("physical", "logical", "physical", "logical"):
        made.append(create_backup(store, "acme", "mon", uri, kind=kind).backup_id)
    assert [e.backup_id for e in backups(uri)] == made


def test_show_reports_the_manifest_without_its_file_list(
    store: TableStore, source: Source, uri: str
) -> None:
    physical = create_backup(store, "acme", "mon", uri, kind="physical")
    logical = create_backup(store, "acme", "mon", uri, kind="logical")
    shown = show_backup(uri, physical.backup_id)
    assert (shown["kind"], shown["source_tenant"], shown["at_ts"]) == (
        "physical",
        "acme",
        source.mon,
    )
    assert (
        shown["object_count"] == physical.objects and "plan" not in shown and "objects" not in shown
    )
    shown = show_backup(uri, logical.backup_id)
    assert (shown["format"], shown["source_tenant"], shown["at_label"]) == (
        "rewind-dump",
        "acme",
        "mon",
    )
    assert [t["name"] for t in shown["tables"]] == ["empty", "gone", "items", "orders"]
    json.dumps(shown)


# --- bad inputs ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_destination_that_is_not_empty_and_not_a_rewind_backup_is_refused_and_nothing_written(
    store: TableStore, source: Source, dest: ObjectStore, uri: str, kind: str
) -> None:
    dest.put("data/2025/file.csv", b"a,b\n1,2\n")
    before = dest_keys(dest)

    with pytest.raises(AlreadyExists, match="not a Rewind backup destination"):
        create_backup(store, "acme", "mon", uri, kind=kind)
    with pytest.raises(AlreadyExists, match="not a Rewind backup destination"):
        backups(uri)

    assert dest_keys(dest) == before


def test_destination_with_many_backups_is_still_recognised(
    store: TableStore, source: Source, uri: str
) -> None:
    """The marker sorts after backups/ and objects/: it is not among the first keys listed."""
    for _ in range(3):
        create_backup(store, "acme", "mon", uri, kind="logical")
    create_backup(store, "acme", "mon", uri, kind="physical")
    assert len(backups(uri)) == 4


def test_empty_destination_holds_no_backups(uri: str, dest: ObjectStore) -> None:
    with pytest.raises(NotFound, match="holds no Rewind backups"):
        backups(uri)
    assert dest_keys(dest) == {}  # looking does not claim it


@pytest.mark.parametrize(
    "call",
    ["show", "verify", "delete", "restore"],
)
def test_unknown_backup_id_is_not_found(
    store: TableStore, source: Source, uri: str, call: str
) -> None:
    create_backup(store, "acme", "mon", uri, kind="physical")
    tenants = tenant_rows(store)
    calls = {
        "show": lambda: show_backup(uri, "nope"),
        "verify": lambda: verify_backup(uri, "nope"),
        "delete": lambda: delete_backup(uri, "nope"),
        "restore": lambda: restore_backup(store, uri, "nope", tenant="x"),
    }
    with pytest.raises(NotFound, match="nope"):
        calls[call]()
    assert tenant_rows(store) == tenants


@pytest.mark.parametrize("kind", KINDS)
def test_restore_into_an_existing_name_needs_replace_and_then_retires_the_old_tenant(
    store: TableStore, source: Source, uri: str, kind: str
) -> None:
    result = create_backup(store, "acme", "mon", uri, kind=kind)
    old = store.tenant("acme")
    tenants = tenant_rows(store)
    counts = catalog_counts(store)
    keys = warehouse_keys(store)

    with pytest.raises(AlreadyExists, match="'acme'"):
        restore_backup(store, uri, result.backup_id)

    assert tenant_rows(store) == tenants
    assert catalog_counts(store) == counts
    assert warehouse_keys(store) == keys, "a refused restore copied objects into the warehouse"

    tenant, _ = restore_backup(store, uri, result.backup_id, replace=True)

    assert store.tenant("acme").id == tenant.id != old.id
    assert store.tenant(old.ref).state == "dropped"
    assert reads(store, "acme") == AT_MON
    assert reads(store, old.ref) == source.now_reads


@pytest.mark.parametrize("kind", KINDS)
def test_backup_restores_into_a_deployment_whose_clock_is_behind_the_source(
    store: TableStore, clock: Any, other_store: TableStore, uri: str, kind: str
) -> None:
    """Deployments do not share a timestamp oracle: the source's clock may run ahead of the
    target's (here by ten minutes). The restored tenant must still read its rows now."""
    clock.fixed = wall_clock_us() + 10 * 60 * 1_000_000
    source = build_source(store)
    assert source.mon > wall_clock_us()
    result = create_backup(store, "acme", "mon", uri, kind=kind)

    restore_backup(other_store, uri, result.backup_id)

    assert reads(other_store, "acme") == AT_MON
    if kind == "physical":
        assert reads(other_store, "acme", "mon") == AT_MON


def test_backup_of_an_unknown_tenant_claims_no_destination(
    store: TableStore, s3_server: Any, tmp_path: Path
) -> None:
    destination = tmp_path / "bk"
    with pytest.raises(NotFound, match="tenant 'ghost' does not exist"):
        create_backup(store, "ghost", "mon", f"file://{destination}", kind="physical")
    assert not destination.exists()


# --- a killed logical backup restore leaves nothing behind ----------------------------------------


def _killed_restore(store: TableStore, uri: str, backup_id: str, name: str, kind: str) -> str:
    """Restore ``backup_id`` as ``name`` and die mid-load (the reload's 2nd data commit, or
    the 2nd object copied); the staging tenant's id."""
    faulty = (
        with_catalog(store, FaultyCatalog(store.catalog, "INSERT INTO membership (", occurrence=2))
        if kind == "logical"
        else with_objects(store, WrappedObjectStore(store.objects, fail_put_at=2))
    )
    crash = (
        crashed_at("INSERT INTO membership (")
        if kind == "logical"
        else r"crash at put tenants/\S+\.parquet"  # an object the restore copies
    )
    with pytest.raises(SimulatedCrash, match=crash):
        restore_backup(faulty, uri, backup_id, tenant=name)
    [staging] = [t for t in tenant_rows(store) if t[2] == "staging"]
    assert warehouse_keys(store, f"tenants/{staging[1]}/") != {}
    return staging[1]


@pytest.mark.parametrize("kind", KINDS)
def test_rerun_of_a_killed_backup_restore_replaces_its_staging_tenant(
    store: TableStore, source: Source, uri: str, kind: str
) -> None:
    backup = create_backup(store, "acme", "mon", uri, kind=kind)
    staging_id = _killed_restore(store, uri, backup.backup_id, "back", kind)

    tenant, _ = restore_backup(store, uri, backup.backup_id, tenant="back")

    assert [t for t in tenant_rows(store) if t[2] == "staging"] == []
    assert tenant.id == staging_id  # the same staging id, loaded afresh and swapped in
    assert reads(store, "back") == AT_MON
    # Exactly the installed objects are under its prefix: the killed load's are gone.
    assert set(warehouse_keys(store, f"tenants/{tenant.id}/")) == {
        o.key for _, o in store.objects_of("back")
    }
    # Restoring the same backup under the same name again (after a drop) still works.
    store.drop_tenant("back")
    again, _ = restore_backup(store, uri, backup.backup_id, tenant="back")
    assert again.id != tenant.id and reads(store, "back") == AT_MON


@pytest.mark.parametrize("kind", KINDS)
def test_tenant_purge_discards_a_staging_tenant_a_killed_backup_restore_left(
    store: TableStore, source: Source, uri: str, kind: str
) -> None:
    backup = create_backup(store, "acme", "mon", uri, kind=kind)
    staging_id = _killed_restore(store, uri, backup.backup_id, "back", kind)
    catalog_uri = store.catalog.uri
    warehouse_uri = store.objects.warehouse.uri
    result = CliRunner().invoke(
        app,
        [
            "--catalog",
            catalog_uri,
            "--warehouse",
            warehouse_uri,
            "tenant",
            "purge",
            f"back@{staging_id}",
            "--yes",
        ],
    )

    assert result.exit_code == 0, result.output
    assert "discarded the half-loaded staging tenant" in result.output
    assert [t for t in tenant_rows(store) if t[2] == "staging"] == []
    assert warehouse_keys(store, f"tenants/{staging_id}/") == {}
    assert reads(store, "acme") == source.now_reads
