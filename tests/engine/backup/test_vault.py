"""Locked backups in a vault (an S3 bucket with Object Lock), against moto's S3 server over HTTP.

moto enforces Object Lock deletes: a version under COMPLIANCE retention cannot
be deleted by version id, with or without ``BypassGovernanceRetention``; a
GOVERNANCE one only with it; a legal hold blocks both. moto does not refuse
*shortening* a COMPLIANCE retention (real S3 does), so the tests record every
retention Rewind sends and check that none shortens or weakens a lock.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest

import tenants.objectstore.object_lock as object_lock
from engine.backup.api import (
    backups,
    create_backup,
    delete_backup,
    restore_backup,
    show_backup,
    verify_backup,
)
from engine.backup.locked import set_hold
from engine.gc.run import run_gc
from tenants.errors import CorruptObject, Locked
from tenants.objectstore.embedded import EmbeddedS3
from tenants.store import TableStore
from tests.helpers.backups import AT_MON, AT_SUN, Source, build_source, items_now, new_bucket
from tests.helpers.cli import fails, ok
from tests.helpers.restores import reads


@pytest.fixture
def vault(s3_server: EmbeddedS3) -> str:
    name = f"rewind-vault-{uuid.uuid4().hex[:12]}"
    s3_server.create_bucket(name, object_lock=True)
    return name


@pytest.fixture
def vault_uri(vault: str) -> str:
    return f"s3://{vault}/rewind"


@pytest.fixture
def s3(s3_server: EmbeddedS3) -> Any:
    """A boto3 client with exactly the credentials Rewind uses (the attacker's)."""
    return boto3.client("s3", **s3_server.settings.to_boto3())


@pytest.fixture
def source(store: TableStore) -> Source:
    return build_source(store)


@pytest.fixture
def cli_store(uris: tuple[str, str], s3_server: EmbeddedS3) -> Iterator[TableStore]:
    """The source tenant in the deployment the ``rewind`` fixture's CLI opens."""
    opened = TableStore.open(*uris, s3=s3_server.settings)
    build_source(opened)
    yield opened
    opened.close()


@pytest.fixture
def sent_retentions(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """Every PutObjectRetention Rewind sends, with the version's lock just before it."""
    sent: list[dict[str, Any]] = []
    real = object_lock._call

    def spy(objects: Any, method: str, key: str, action: str, **kwargs: Any) -> Any:
        if method == "put_object_retention":
            before = real(objects, "head_object", key, "stat", VersionId=kwargs["VersionId"])
            sent.append({"key": key, "before": before, "sent": kwargs["Retention"]})
        return real(objects, method, key, action, **kwargs)

    monkeypatch.setattr(object_lock, "_call", spy)
    yield sent


def all_versions(s3: Any, bucket: str) -> dict[tuple[str, str], str]:
    """(key, version id) -> sha256 of its bytes, for every version (markers excluded)."""
    out = {}
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        for v in page.get("Versions", []):
            body = s3.get_object(Bucket=bucket, Key=v["Key"], VersionId=v["VersionId"])["Body"]
            out[(v["Key"], v["VersionId"])] = hashlib.sha256(body.read()).hexdigest()
    return out


def retain_until(s3: Any, bucket: str, key: str, version: str) -> datetime:
    head = s3.head_object(Bucket=bucket, Key=key, VersionId=version)
    return head["ObjectLockRetainUntilDate"]


def fresh_store(
    new_catalog_uri: Callable[[], str], s3_server: EmbeddedS3, prefix: str
) -> TableStore:
    """A new deployment: an empty catalog and an empty warehouse in a new bucket."""
    bucket = new_bucket(s3_server, prefix)
    return TableStore.open(new_catalog_uri(), f"s3://{bucket}/wh", s3=s3_server.settings)


# --- locking --------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["physical", "logical"])
def test_a_locked_backup_locks_every_object_version_and_its_manifest_until_its_date(
    kind: str, store: TableStore, source: Source, vault: str, vault_uri: str, s3: Any
) -> None:
    before = datetime.now(UTC)
    result = create_backup(
        store, "acme", "mon", vault_uri, kind=kind, lock="compliance", retain="2d"
    )
    shown = show_backup(vault_uri, result.backup_id)
    assert shown["lock"]["mode"] == "COMPLIANCE"
    assert shown["lock_mode"] == "compliance" and shown["legal_hold"] is False
    locked = 0
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=vault):
        for v in page.get("Versions", []):
            if v["Key"].endswith("pending.json"):
                continue  # the backup's own in-progress record, deleted when it completed
            head = s3.head_object(Bucket=vault, Key=v["Key"], VersionId=v["VersionId"])
            assert head["ObjectLockMode"] == "COMPLIANCE", v["Key"]
            assert head["ObjectLockRetainUntilDate"] > before + timedelta(days=2) - timedelta(
                minutes=1
            )
            locked += 1
    assert locked == result.objects + 2  # every object, the manifest and the marker
    [entry] = backups(vault_uri)
    assert entry.lock_mode == "COMPLIANCE" and entry.retain_until_us is not None


def test_an_incremental_backup_extends_the_objects_it_shares_and_never_shortens_a_lock(
    store: TableStore,
    source: Source,
    vault: str,
    vault_uri: str,
    s3: Any,
    sent_retentions: list[dict[str, Any]],
) -> None:
    long = create_backup(store, "acme", "mon", vault_uri, lock="governance", retain="3d")
    shared = {(e["path"], e["version_id"]) for e in show_objects(vault_uri, long.backup_id)}
    dates = {kv: retain_until(s3, vault, f"rewind/{kv[0]}", kv[1]) for kv in shared}
    # A shorter lock over the same objects leaves them as they are; a stronger mode raises them.
    create_backup(store, "acme", "mon", vault_uri, lock="compliance", retain="1d")
    for (path, version), until in dates.items():
        head = s3.head_object(Bucket=vault, Key=f"rewind/{path}", VersionId=version)
        assert head["ObjectLockRetainUntilDate"] == until
        assert head["ObjectLockMode"] == "COMPLIANCE"
    longer = create_backup(store, "acme", "mon", vault_uri, lock="governance", retain="5d")
    for path, version in shared:
        assert retain_until(s3, vault, f"rewind/{path}", version) > max(dates.values())
    assert longer.referenced_objects == len(shared)
    for call in sent_retentions:  # nothing Rewind sent shortened or weakened a lock
        before = call["before"]
        if before.get("ObjectLockRetainUntilDate") is not None:
            assert call["sent"]["RetainUntilDate"] >= before["ObjectLockRetainUntilDate"]
        if before.get("ObjectLockMode") == "COMPLIANCE":
            assert call["sent"]["Mode"] == "COMPLIANCE"


def show_objects(uri: str, backup_id: str) -> list[dict[str, Any]]:
    from engine.backup.destination import open_destination
    from engine.backup.physical import read_physical_manifest

    raw = read_physical_manifest(open_destination(uri, create=False), backup_id)
    return list(raw["objects"].values())


# --- the compromise drill -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["physical", "logical"])
def test_compromise_drill_no_destructive_call_succeeds_and_the_vault_alone_restores(
    kind: str,
    store: TableStore,
    source: Source,
    vault: str,
    vault_uri: str,
    s3: Any,
    s3_server: EmbeddedS3,
    new_catalog_uri: Callable[[], str],
    rewind: Callable[..., Any],
) -> None:
    result = create_backup(
        store, "acme", "mon", vault_uri, kind=kind, lock="compliance", retain="1d"
    )
    schema = {t.qualified: t.schema.columns for t in store.tables("acme", "mon")}
    protected = all_versions(s3, vault)
    succeeded: list[str] = []

    def attempt(what: str, call: Callable[[], Any]) -> None:
        try:
            response = call()
        except Exception:
            return
        errors = response.get("Errors") if isinstance(response, dict) else None
        if not errors:
            succeeded.append(what)

    for key, version in list(protected):
        if key.endswith("pending.json"):
            continue  # deleted by the backup itself: never locked, not part of it
        target = {"Bucket": vault, "Key": key, "VersionId": version}
        attempt(f"delete {key}@{version}", lambda t=target: s3.delete_object(**t))  # type: ignore[misc]
        attempt(
            f"bypass-delete {key}@{version}",
            lambda t=target: s3.delete_object(**t, BypassGovernanceRetention=True),  # type: ignore[misc]
        )
    batch = [{"Key": k, "VersionId": v} for k, v in protected if not k.endswith("pending.json")]
    attempt("batch delete", lambda: s3.delete_objects(Bucket=vault, Delete={"Objects": batch}))
    # Plain deletes and overwrites "succeed" in S3's terms, adding a marker or a version:
    # they destroy nothing, which is what the checks below prove.
    for key, _ in protected:
        s3.put_object(Bucket=vault, Key=key, Body=b"ransom note")
        s3.delete_object(Bucket=vault, Key=key)
    s3.put_bucket_lifecycle_configuration(  # moto stores it and never runs it: see docs/vault.md
        Bucket=vault,
        LifecycleConfiguration={
            "Rules": [
                {
                    "ID": "expire-all",
                    "Status": "Enabled",
                    "Filter": {"Prefix": ""},
                    "Expiration": {"Days": 1},
                    "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
                }
            ]
        },
    )
    fails(rewind("backup", "delete", vault_uri, result.backup_id, "--yes"), "locked .*until")
    fails(
        rewind("backup", "delete", vault_uri, result.backup_id, "--yes", "--bypass-governance"),
        "compliance mode",
    )
    with pytest.raises(Locked, match="locked"):
        delete_backup(vault_uri, result.backup_id, now_us=2**62)  # Rewind's clock moved: S3's not
    run_gc(store, dry_run=False, grace_us=0, allow_short_grace=True, orphan_grace_us=0)
    # Not attempted: shortening a COMPLIANCE retention, which real S3 refuses and moto
    # allows (docs/vault.md); the retention test proves Rewind never sends one.
    assert succeeded == []
    after = all_versions(s3, vault)
    assert {kv: after.get(kv) for kv in protected if not kv[0].endswith("pending.json")} == {
        kv: h for kv, h in protected.items() if not kv[0].endswith("pending.json")
    }
    with pytest.raises(CorruptObject, match="hidden by a delete marker|overwritten"):
        verify_backup(vault_uri, result.backup_id)  # the attack is named
    # The disaster: catalog and warehouse gone; a fresh deployment restores from the vault.
    fresh = fresh_store(new_catalog_uri, s3_server, "rewind-drill")
    try:
        tenant, _ = restore_backup(fresh, vault_uri, result.backup_id)
        assert tenant.name == "acme"
        assert reads(fresh, "acme") == AT_MON
        if kind == "physical":  # a physical backup carries the snapshots up to its S
            assert reads(fresh, "acme", "sun") == AT_SUN
            assert reads(fresh, "acme", "mon") == AT_MON
        assert {t.qualified: t.schema.columns for t in fresh.tables("acme")} == schema
    finally:
        fresh.close()


# --- deletes: refused exactly by date, mode and hold ---------------------------------------------


@pytest.mark.parametrize("kind", ["physical", "logical"])
def test_governance_backup_is_deleted_for_good_only_with_bypass(
    kind: str, store: TableStore, source: Source, vault: str, vault_uri: str, s3: Any
) -> None:
    result = create_backup(
        store, "acme", "mon", vault_uri, kind=kind, lock="governance", retain="1d"
    )
    with pytest.raises(Locked, match=r"governance\) until .*--bypass-governance"):
        delete_backup(vault_uri, result.backup_id)
    assert delete_backup(vault_uri, result.backup_id, bypass_governance=True) > 0
    assert backups(vault_uri) == []
    left = [k for k, _ in all_versions(s3, vault) if "/objects/" in k or "/backups/" in k]
    assert [k for k in left if not k.endswith("pending.json")] == []


def test_a_backup_whose_lock_ended_is_deleted_and_a_held_one_only_after_release(
    store: TableStore, source: Source, vault_uri: str
) -> None:
    held = create_backup(
        store, "acme", "mon", vault_uri, kind="logical", lock="compliance", retain="2s"
    )
    free = create_backup(store, "acme", "sun", vault_uri, lock="compliance", retain="2s")
    assert set_hold(vault_uri, held.backup_id, True) == held.objects + 1
    assert [e.legal_hold for e in backups(vault_uri)] == [True, False]
    time.sleep(2.5)  # S3's clock (moto's: the real one) passes both retain-until dates
    with pytest.raises(Locked, match="legal hold"):
        delete_backup(vault_uri, held.backup_id)
    assert delete_backup(vault_uri, free.backup_id) > 0
    set_hold(vault_uri, held.backup_id, False)
    assert delete_backup(vault_uri, held.backup_id) > 0
    assert backups(vault_uri) == []


def test_an_unlocked_backup_in_a_vault_restores_and_deletes_as_anywhere(
    store: TableStore, source: Source, vault_uri: str
) -> None:
    result = create_backup(store, "acme", "mon", vault_uri)
    assert show_backup(vault_uri, result.backup_id)["lock"] is None
    verify_backup(vault_uri, result.backup_id)
    assert delete_backup(vault_uri, result.backup_id) > 0
    assert backups(vault_uri) == []


# --- tamper evidence ------------------------------------------------------------------------------


def test_verify_names_a_replaced_manifest_of_an_unlocked_backup_through_the_chain(
    store: TableStore, source: Source, uri: str, s3: Any, dest_bucket: str
) -> None:
    first = create_backup(store, "acme", "mon", uri)
    store.write("acme", "shop.items", upserts=items_now([500]))
    store.create_snapshot("acme", "later")
    second = create_backup(store, "acme", "later", uri)
    assert show_backup(uri, second.backup_id)["previous"]["backup_id"] == first.backup_id
    key = f"backups/backups/{first.backup_id}/manifest.json"  # the destination is .../backups
    body = s3.get_object(Bucket=dest_bucket, Key=key)["Body"].read()
    s3.put_object(Bucket=dest_bucket, Key=key, Body=body.replace(b'"mon"', b'"Mon"'))
    with pytest.raises(CorruptObject, match=f"{first.backup_id}.*was replaced"):
        verify_backup(uri, first.backup_id)
    with pytest.raises(CorruptObject, match="previous backup .* was replaced"):
        verify_backup(uri, second.backup_id)


# --- bad inputs: one line, exit 1, nothing written -------------------------------------------------


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--lock", "compliance", "--retain", "-1d"], "invalid duration"),
        (["--lock", "compliance", "--retain", "0s"], "longer than zero"),
        (["--lock", "compliance", "--retain", "36501d"], "at most 100 years"),
        (["--lock", "compliance", "--retain", "99999999999999999999d"], "invalid duration"),
        (["--lock", "forever", "--retain", "1d"], "invalid lock mode 'forever'"),
        (["--lock", "compliance"], "needs both --lock"),
        (["--retain", "1d"], "needs both --lock"),
    ],
)
def test_a_bad_lock_is_one_line_and_writes_nothing(
    cli_store: TableStore,
    rewind: Callable[..., Any],
    vault: str,
    vault_uri: str,
    s3: Any,
    args: list[str],
    match: str,
) -> None:
    fails(rewind("backup", "create", "acme", "--snapshot", "mon", "--to", vault_uri, *args), match)
    assert s3.list_object_versions(Bucket=vault).get("Versions", []) == []


def test_a_lock_where_s3_cannot_lock_is_refused_before_anything_is_written(
    cli_store: TableStore,
    rewind: Callable[..., Any],
    uri: str,
    dest_bucket: str,
    s3: Any,
    tmp_path: Path,
) -> None:
    lock = ["--lock", "compliance", "--retain", "1d"]
    fails(
        rewind("backup", "create", "acme", "--snapshot", "mon", "--to", uri, *lock),
        "does not have S3 Object Lock enabled",
    )
    assert s3.list_objects_v2(Bucket=dest_bucket).get("KeyCount") == 0
    local = tmp_path / "backups"
    fails(
        rewind("backup", "create", "acme", "--snapshot", "mon", "--to", local.as_uri(), *lock),
        "file:// destinations cannot lock",
    )
    assert not local.exists() or list(local.iterdir()) == []


def test_cli_locks_lists_holds_and_refuses(
    cli_store: TableStore, rewind: Callable[..., Any], vault_uri: str
) -> None:
    made = ok(
        rewind(
            "--json",
            "backup",
            "create",
            "acme",
            "--snapshot",
            "mon",
            "--to",
            vault_uri,
            "--lock",
            "governance",
            "--retain",
            "1d",
        )
    )
    backup_id = json.loads(made.stdout)["backup_id"]
    listed = ok(rewind("backup", "list", vault_uri)).stdout
    assert "governance until" in listed
    ok(rewind("backup", "hold", "set", vault_uri, backup_id))
    assert "legal hold" in ok(rewind("backup", "list", vault_uri)).stdout
    fails(rewind("backup", "delete", vault_uri, backup_id, "--yes"), "locked")
    fails(
        rewind("backup", "delete", vault_uri, backup_id, "--yes", "--bypass-governance"),
        "legal hold",
    )
    ok(rewind("backup", "hold", "release", vault_uri, backup_id))
    ok(rewind("backup", "delete", vault_uri, backup_id, "--yes", "--bypass-governance"))
    fails(rewind("backup", "hold", "set", vault_uri, backup_id), "does not exist")


def test_the_next_locked_backup_sends_nothing_for_objects_a_compliance_chain_covers(
    store: TableStore,
    source: Source,
    vault_uri: str,
    sent_retentions: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A backup's cost follows what changed: shared objects locked (with slack) by the
    previous backup's COMPLIANCE lock need neither a HEAD nor a retention."""
    first = create_backup(store, "acme", "mon", vault_uri, lock="compliance", retain="10d")
    assert len(sent_retentions) == first.objects + 2  # objects, manifest, marker
    heads: list[str] = []
    real = object_lock.lock_of

    def counted(objects: Any, key: str, version_id: str) -> Any:
        heads.append(key)
        return real(objects, key, version_id)

    monkeypatch.setattr(object_lock, "lock_of", counted)
    sent_retentions.clear()
    second = create_backup(store, "acme", "mon", vault_uri, lock="compliance", retain="10d")
    assert second.referenced_objects == first.objects
    assert [c["key"] for c in sent_retentions if "/objects/" in c["key"]] == []
    assert [k for k in heads if "/objects/" in k or k.startswith("objects/")] == []
