"""Restore drills (`rewind backup drill`): a backup restored into a scratch deployment,
checked against its manifest, journaled, and cleaned up; the tenant it protects untouched.

Real parts throughout: backups on the moto S3 server, damage done to them with
plain boto3, both catalogs for the journal, and the foreground loop as a real
process stopped by a real SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

import engine.backup.drill as drill_module
from engine.backup.api import create_backup
from engine.backup.drill import DrillResult, drill_backup
from tenants.catalog.base import wall_clock_us
from tenants.catalog.engine.runs import recent_runs
from tenants.errors import CorruptObject, InvalidArgument, NotFound
from tenants.objectstore.embedded import EmbeddedS3
from tenants.store import TableStore
from tests.helpers.backups import AT_MON, build_source, new_bucket, s3_client
from tests.helpers.cli import as_json, catalog_and_bucket, fails, ok
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.usefixtures("s3_server")

ROWS_AT_MON = {table: len(rows) for table, rows in AT_MON.items()}


@pytest.fixture
def scratch_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The temporary directory drills make their scratch catalog in: empty after each."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder


@pytest.fixture
def cli_store(uris: tuple[str, str], s3_server: EmbeddedS3) -> Iterator[TableStore]:
    """The source tenant ``acme`` in the deployment the ``rewind`` fixture's CLI opens."""
    opened = TableStore.open(*uris, s3=s3_server.settings)
    build_source(opened)
    yield opened
    opened.close()


def drills(store: TableStore) -> list[Any]:
    with store.catalog.snapshot() as tx:
        return list(recent_runs(tx, "drill"))


def flip_a_byte(s3: EmbeddedS3, uri: str, key_part: str) -> str:
    """Flip one byte in the middle of the first key under ``uri`` containing
    ``key_part``, with plain boto3 (same size, other bytes). Returns the key."""
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    client = s3_client(s3)
    keys = [
        item["Key"]
        for item in client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
        if key_part in item["Key"]
    ]
    key = sorted(keys)[0]
    body = bytearray(client.get_object(Bucket=bucket, Key=key)["Body"].read())
    body[len(body) // 2] ^= 0xFF
    client.put_object(Bucket=bucket, Key=key, Body=bytes(body))
    return key


def bucket_keys(s3: EmbeddedS3, bucket: str) -> list[str]:
    page = s3_client(s3).list_objects_v2(Bucket=bucket)
    return sorted(item["Key"] for item in page.get("Contents", []))


# --- a drill that passes ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["physical", "logical"])
def test_a_drill_restores_checks_and_journals_done_with_its_figures(
    kind: str, store: TableStore, uri: str, scratch_tmp: Path
) -> None:
    build_source(store)
    backup = create_backup(store, "acme", "mon", uri, kind=kind)
    before = wall_clock_us()
    result = drill_backup(store, uri)
    assert isinstance(result, DrillResult)
    assert (result.backup_id, result.tenant, result.kind) == (backup.backup_id, "acme", kind)
    assert result.at_ts == store.resolve_time("acme", "mon") and result.at_label == "mon"
    assert result.table_rows == ROWS_AT_MON and result.rows == sum(ROWS_AT_MON.values())
    assert result.tables == 4 and result.objects == backup.objects > 0
    (run,) = drills(store)
    assert run["state"] == "done" and run["error"] is None and run["id"] == result.run_id
    assert (run["tenant_name"], run["method"], run["backup_id"]) == ("acme", kind, backup.backup_id)
    assert run["target"] == uri and run["point_ts"] == result.at_ts
    assert (run["bytes"], run["objects"], run["row_count"]) == (
        result.bytes,
        result.objects,
        result.rows,
    )
    assert before <= run["started_us"] <= run["ended_us"] <= wall_clock_us()
    assert list(scratch_tmp.iterdir()) == []  # the scratch catalog and warehouse are gone


def test_a_drill_never_changes_the_tenant_it_checks(
    store: TableStore,
    uri: str,
    dest_bucket: str,
    bucket: str,
    default_catalog_uri: str,
    s3_server: EmbeddedS3,
    scratch_tmp: Path,
) -> None:
    build_source(store)
    create_backup(store, "acme", "mon", uri, kind="physical")
    create_backup(store, "acme", "mon", uri, kind="logical")
    rows, keys = catalog_and_bucket(default_catalog_uri, s3_server, bucket)
    backups_before = bucket_keys(s3_server, dest_bucket)
    reads_before = {t: store.read("acme", t).to_pylist() for t in ("shop.items", "shop.orders")}
    for _ in range(2):
        drill_backup(store, uri)
    physical = [r for r in drills(store) if r["method"] == "physical"]
    assert physical == []  # --latest drilled the newest backup twice
    rows_after, keys_after = catalog_and_bucket(default_catalog_uri, s3_server, bucket)
    runs_before, runs_after = rows.pop("runs"), rows_after.pop("runs")
    newest_before, newest_after = rows.pop("runs_newest"), rows_after.pop("runs_newest")
    assert rows_after == rows  # every catalog row but the journal's, as it was
    assert len(newest_after) == len(newest_before) + 1  # the drill, a recurring job of its own
    assert len(runs_after) == len(runs_before) + 2
    assert keys_after == keys  # not a key of the warehouse written or deleted
    assert bucket_keys(s3_server, dest_bucket) == backups_before
    assert {t: store.read("acme", t).to_pylist() for t in reads_before} == reads_before


def test_latest_picks_the_newest_complete_backup_of_the_tenant(
    store: TableStore, uri: str, s3_server: EmbeddedS3, dest_bucket: str, scratch_tmp: Path
) -> None:
    build_source(store)
    build_source(store, "other", compact=False)
    older = create_backup(store, "acme", "sun", uri)
    newer = create_backup(store, "acme", "mon", uri, kind="logical")
    create_backup(store, "other", "mon", uri)  # the newest at the destination, another tenant's
    # An unfinished backup, newer still: a pending record and no manifest.
    s3_client(s3_server).put_object(
        Bucket=dest_bucket,
        Key="backups/backups/ffffffffffffffffffffffffffffffff/pending.json",
        Body=b'{"objects": []}',
    )
    result = drill_backup(store, uri, tenant="acme")
    assert result.backup_id == newer.backup_id and result.tenant == "acme"
    assert drill_backup(store, uri, older.backup_id, tenant="acme").table_rows == {
        "shop.empty": 0,
        "shop.gone": 2,
        "shop.items": 30,
        "shop.orders": 4,
    }
    assert drill_backup(store, uri).tenant == "other"  # no tenant: the newest of all


def test_a_locked_backup_in_a_vault_drills(
    store: TableStore, s3_server: EmbeddedS3, scratch_tmp: Path
) -> None:
    vault = f"rewind-vault-{uuid.uuid4().hex[:12]}"
    s3_server.create_bucket(vault, object_lock=True)
    vault_uri = f"s3://{vault}/rewind"
    build_source(store)
    backup = create_backup(store, "acme", "mon", vault_uri, lock="compliance", retain="1d")
    result = drill_backup(store, vault_uri, backup.backup_id)
    assert result.table_rows == ROWS_AT_MON
    assert [r["state"] for r in drills(store)] == ["done"]


# --- a drill that fails -------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "damaged"), [("physical", "objects/"), ("logical", "/tables/")])
def test_a_corrupted_backup_fails_naming_the_object_journals_failed_and_leaves_no_scratch(
    kind: str,
    damaged: str,
    cli_store: TableStore,
    rewind: Callable[..., Result],
    uri: str,
    s3_server: EmbeddedS3,
    scratch_tmp: Path,
) -> None:
    backup = create_backup(cli_store, "acme", "mon", uri, kind=kind)
    key = flip_a_byte(s3_server, uri, damaged)
    scratch_bucket = new_bucket(s3_server, "rewind-scratch")
    line = fails(
        rewind("backup", "drill", uri, "--scratch", f"s3://{scratch_bucket}/drills"),
        f"drill of backup {backup.backup_id} \\(acme\\): .*{key.split('/', 1)[1]}",
    )
    assert "match" in line  # what differs: its bytes against the manifest
    (run,) = drills(cli_store)
    assert run["state"] == "failed" and run["backup_id"] == backup.backup_id
    assert (
        run["error"].startswith("CorruptObject: drill of backup")
        and key.split("/")[-1] in run["error"]
    )
    assert bucket_keys(s3_server, scratch_bucket) == []  # no scratch object left
    assert list(scratch_tmp.iterdir()) == []  # nor the scratch catalog
    with pytest.raises(CorruptObject, match=key.split("/")[-1]):
        drill_backup(cli_store, uri, backup.backup_id)  # the API raises what the CLI said


def test_bad_input_is_one_line_exit_1_and_journals_nothing(
    cli_store: TableStore,
    rewind: Callable[..., Result],
    uri: str,
    uris: tuple[str, str],
    s3_server: EmbeddedS3,
    tmp_path: Path,
) -> None:
    empty = f"s3://{new_bucket(s3_server, 'rewind-empty')}/backups"
    fails(rewind("backup", "drill", empty), "holds no Rewind backups")
    backup = create_backup(cli_store, "acme", "mon", uri)
    missing = "0" * 32
    fails(rewind("backup", "drill", uri, missing), f"no backup {missing} at")
    fails(
        rewind("backup", "drill", uri, "--tenant", "ghost"), "no complete backup of tenant 'ghost'"
    )
    fails(
        rewind("backup", "drill", uri, backup.backup_id, "--tenant", "ghost"),
        "of tenant 'acme', not 'ghost'",
    )
    fails(rewind("backup", "drill", uri, backup.backup_id, "--latest"), "not both")
    fails(rewind("backup", "drill", uri, "../x"), "backup id")
    fails(rewind("backup", "drill", uri, "--count", "2"), "--count goes with --every")
    fails(rewind("backup", "drill", uri, "--every", "soon"), "invalid duration")
    fails(rewind("backup", "drill", uri, "--scratch", f"{uris[1]}/scratch"), "inside the warehouse")
    fails(rewind("backup", "drill", uri, "--scratch", f"{uri}/x"), "inside the backup destination")
    fails(rewind("backup", "drill", f"file://{tmp_path / 'nothing'}"), "holds no Rewind backups")
    assert drills(cli_store) == []
    assert not (tmp_path / "nothing").exists()
    with pytest.raises(NotFound):
        drill_backup(cli_store, uri, tenant="ghost")
    with pytest.raises(InvalidArgument, match="inside the warehouse"):
        drill_backup(cli_store, uri, scratch=uris[1])
    assert drills(cli_store) == []


# --- the command line ---------------------------------------------------------------------------


@pytest.mark.parametrize("new_catalog_uri", ["sqlite"], indirect=True)
def test_the_cli_says_what_it_checked_as_text_and_json(
    cli_store: TableStore, rewind: Callable[..., Result], uri: str, scratch_tmp: Path
) -> None:
    backup = create_backup(cli_store, "acme", "mon", uri)
    text = ok(rewind("backup", "drill", uri, "--tenant", "acme", "--latest")).stdout
    assert text.startswith(f"drill of backup {backup.backup_id} (physical, acme at mon) passed: ")
    assert "44 row(s) verified" in text and text.strip().endswith("scratch removed")
    document = as_json(rewind("backup", "drill", uri, backup.backup_id, "--json"))
    assert document["ok"] is True and document["backup_id"] == backup.backup_id
    assert document["table_rows"] == ROWS_AT_MON and document["at"].endswith("Z")
    assert [r["state"] for r in drills(cli_store)] == ["done", "done"]


@pytest.mark.parametrize("new_catalog_uri", ["sqlite"], indirect=True)
def test_every_drills_each_period_and_stops_cleanly_on_sigterm(
    cli_store: TableStore, uris: tuple[str, str], uri: str, tmp_path: Path
) -> None:
    create_backup(cli_store, "acme", "mon", uri)
    scratch_tmp = tmp_path / "tmp"
    scratch_tmp.mkdir()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engine.cli.app",
            "--catalog",
            uris[0],
            "--warehouse",
            uris[1],
            "--json",
            "backup",
            "drill",
            uri,
            "--every",
            "1s",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(scratch_tmp)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines = [json.loads(process.stdout.readline()) for _ in range(2)]
        assert [line["ok"] for line in lines] == [True, True]
        assert lines[0]["run_id"] != lines[1]["run_id"]
        time.sleep(0.2)  # in its sleep, or in its third drill: either stops cleanly
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    runs = drills(cli_store)
    assert len(runs) >= 2 and "running" not in {r["state"] for r in runs}
    assert [r["state"] for r in runs[-2:]] == ["done", "done"]  # the first two, oldest last
    interrupted = [r for r in runs if r["state"] == "failed"]
    assert all("SIGTERM" in r["error"] for r in interrupted)
    assert list(scratch_tmp.iterdir()) == []


@pytest.mark.parametrize("new_catalog_uri", ["sqlite"], indirect=True)
def test_a_drill_stopped_by_sigterm_removes_its_scratch_and_journals_failed(
    cli_store: TableStore,
    rewind: Callable[..., Result],
    uri: str,
    scratch_tmp: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    create_backup(cli_store, "acme", "mon", uri)
    real = drill_module._check_physical

    def killed_mid_check(*args: Any, **kwargs: Any) -> Any:
        os.kill(os.getpid(), signal.SIGTERM)  # what `kill` or Kubernetes sends
        return real(*args, **kwargs)

    monkeypatch.setattr(drill_module, "_check_physical", killed_mid_check)
    before = signal.getsignal(signal.SIGTERM)
    fails(rewind("backup", "drill", uri), "drill stopped by SIGTERM before it finished")
    (run,) = drills(cli_store)
    assert run["state"] == "failed" and run["error"] == "DrillStopped: SIGTERM"
    assert list(scratch_tmp.iterdir()) == []
    assert signal.getsignal(signal.SIGTERM) == before  # the handler is put back
