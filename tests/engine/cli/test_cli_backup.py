"""``rewind backup …`` and ``rewind restore-tenant --method logical`` end to end.

Commands run in-process through ``typer.testing.CliRunner`` against a real
SQLite catalog file, a moto warehouse bucket and a second moto bucket as the
backup destination. The source tenant is built through the API
(``backup_helpers.build_source``); results are checked through the CLI's
``--json`` output and through the API.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from typer.testing import Result

from tenants.objectstore import ObjectStore, open_object_store
from tenants.objectstore.embedded import EmbeddedS3
from tenants.store import TableStore
from tests.helpers.backups import AT_MON, build_source, dest_keys, tenant_rows
from tests.helpers.cli import as_json, ok
from tests.helpers.restores import reads

# Not the catalog's behaviour: on SQLite alone (conftest.py, one_catalog).
pytestmark = pytest.mark.one_catalog

Rewind = Callable[..., Result]


@pytest.fixture
def api(uris: tuple[str, str], s3_server: EmbeddedS3) -> Iterator[TableStore]:
    """The same catalog and warehouse through the API, holding the source tenant ``acme``."""
    table_store = TableStore.open(*uris)
    build_source(table_store)
    yield table_store
    table_store.close()


@pytest.fixture
def dest_uri(s3_server: EmbeddedS3) -> str:
    name = f"rewind-cli-backups-{uuid.uuid4().hex[:10]}"
    s3_server.create_bucket(name)
    return f"s3://{name}/bk"


@pytest.fixture
def dest(dest_uri: str, s3_server: EmbeddedS3) -> ObjectStore:
    return open_object_store(dest_uri, s3_server.settings)


def create(rewind: Rewind, dest_uri: str, kind: str, snapshot: str = "mon") -> dict[str, Any]:
    return dict(
        as_json(
            rewind(
                "--json",
                "backup",
                "create",
                "acme",
                "--snapshot",
                snapshot,
                "--to",
                dest_uri,
                "--kind",
                kind,
            )
        )
    )


@pytest.mark.parametrize("kind", ["physical", "logical"])
def test_backup_create_list_show_verify_delete_round_trip(
    rewind: Rewind, api: TableStore, dest_uri: str, dest: ObjectStore, kind: str
) -> None:
    created = create(rewind, dest_uri, kind)
    backup_id = created["backup_id"]
    assert created["kind"] == kind and created["uri"] == dest_uri
    assert created["objects"] == created["copied_objects"] > 0
    assert (created["rows"] is None) == (kind == "physical")

    [entry] = as_json(rewind("--json", "backup", "list", dest_uri))
    assert (
        entry["backup_id"],
        entry["complete"],
        entry["kind"],
        entry["tenant"],
        entry["at_label"],
    ) == (
        backup_id,
        True,
        kind,
        "acme",
        "mon",
    )
    text = ok(rewind("--wide", "backup", "list", dest_uri)).stdout  # ids whole, not wrapped
    assert backup_id in text and "1 backup(s)" in text

    shown = as_json(rewind("backup", "show", dest_uri, backup_id))
    assert (shown["source_tenant"], shown["at_label"]) == ("acme", "mon")

    verified = as_json(rewind("--json", "backup", "verify", dest_uri, backup_id))
    assert verified == {"backup_id": backup_id, "files_verified": created["objects"], "ok": True}
    assert "sizes and hashes match" in ok(rewind("backup", "verify", dest_uri, backup_id)).stdout

    text = ok(
        rewind("backup", "create", "acme", "--snapshot", "sun", "--to", dest_uri, "--kind", kind)
    ).stdout
    assert f"({kind}) of acme at sun written to {dest_uri}" in text
    assert len(as_json(rewind("--json", "backup", "list", dest_uri))) == 2

    deleted = as_json(rewind("--json", "backup", "delete", dest_uri, backup_id, "--yes"))
    assert deleted["backup_id"] == backup_id and deleted["deleted_files"] > 0
    assert backup_id not in {
        e["backup_id"] for e in as_json(rewind("--json", "backup", "list", dest_uri))
    }
    assert not any(backup_id in key for key in dest_keys(dest))


@pytest.mark.parametrize("kind", ["physical", "logical"])
def test_backup_restore_from_a_destination_as_a_new_tenant(
    rewind: Rewind, api: TableStore, dest_uri: str, kind: str
) -> None:
    backup_id = create(rewind, dest_uri, kind)["backup_id"]

    restored = as_json(
        rewind(
            "--json",
            "backup",
            "restore",
            "--from",
            dest_uri,
            "--backup",
            backup_id,
            "--tenant",
            "copy",
        )
    )

    assert restored["name"] == "copy" and restored["backup_id"] == backup_id
    assert reads(api, "copy") == AT_MON
    text = ok(
        rewind("backup", "restore", "--from", dest_uri, "--backup", backup_id, "--tenant", "copy2")
    ).stdout
    assert f"backup {backup_id} restored as tenant copy2@" in text
    assert reads(api, "copy2") == AT_MON


def test_backup_restore_without_backup_id_restores_the_newest_under_the_new_name(
    rewind: Rewind, api: TableStore, dest_uri: str
) -> None:
    """``--tenant`` names the restored tenant; the newest backup is chosen whatever its source."""
    create(rewind, dest_uri, "physical", snapshot="sun")
    newest = create(rewind, dest_uri, "physical", snapshot="mon")["backup_id"]

    restored = as_json(
        rewind("--json", "backup", "restore", "--from", dest_uri, "--tenant", "copy")
    )

    assert restored["backup_id"] == newest and restored["name"] == "copy"
    assert reads(api, "copy") == AT_MON


def test_backup_restore_replace_retires_the_existing_tenant(
    rewind: Rewind, api: TableStore, dest_uri: str
) -> None:
    backup_id = create(rewind, dest_uri, "logical")["backup_id"]
    old = api.tenant("acme")
    restored = as_json(
        rewind(
            "--json", "backup", "restore", "--from", dest_uri, "--backup", backup_id, "--replace"
        )
    )
    assert restored["name"] == "acme" and restored["id"] != old.id
    assert reads(api, "acme") == AT_MON
    assert api.tenant(old.ref).state == "dropped"


def test_restore_tenant_method_logical_clones_and_restores_in_place(
    rewind: Rewind, api: TableStore
) -> None:
    plan = as_json(
        rewind("--json", "restore-tenant", "acme", "--snapshot", "mon", "--to", "x", "--dry-run")
    )
    assert plan["method"] == "physical"  # auto

    clone = as_json(
        rewind(
            "--json",
            "restore-tenant",
            "acme",
            "--snapshot",
            "mon",
            "--to",
            "lclone",
            "--method",
            "logical",
        )
    )
    assert clone["tenant"].startswith("lclone@") and clone["state"] == "done"
    assert reads(api, "lclone") == AT_MON
    [job] = [
        j
        for j in as_json(rewind("--json", "history", "acme"))["jobs"]
        if j["job_id"] == clone["job_id"]
    ]
    # The restore's output and the job history say which method ran (auto hides it otherwise).
    assert (clone.get("method"), job.get("method")) == ("logical", "logical")

    old = api.tenant("acme")
    text = ok(
        rewind("restore-tenant", "acme", "--snapshot", "mon", "--method", "logical", "--yes")
    ).stdout
    assert "done" in text
    assert reads(api, "acme") == AT_MON
    assert api.tenant(old.ref).state == "dropped"
    assert list(api.objects.list("staging/")) == []


BAD_INPUTS: dict[str, tuple[list[str], str]] = {
    "foreign_destination": (
        ["backup", "create", "acme", "--snapshot", "mon", "--to", "{dest}"],
        "is not empty and is not a Rewind backup destination",
    ),
    "foreign_destination_list": (
        ["backup", "list", "{dest}"],
        "is not a Rewind backup destination",
    ),
    "unknown_kind": (
        ["backup", "create", "acme", "--snapshot", "mon", "--to", "{dest}", "--kind", "zip"],
        "unknown backup kind 'zip': use logical or physical",
    ),
    "unknown_method": (
        ["restore-tenant", "acme", "--snapshot", "mon", "--to", "y", "--method", "dump"],
        "unknown restore method 'dump'",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_exits_1_with_a_one_line_message_and_writes_nothing(
    rewind: Rewind, api: TableStore, dest_uri: str, dest: ObjectStore, case: str
) -> None:
    dest.put("someone-elses/data.csv", b"a\n1\n")
    keys = dest_keys(dest)
    tenants = tenant_rows(api)
    args, expected = BAD_INPUTS[case]

    result = rewind(*[a.format(dest=dest_uri) for a in args])

    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], (
        result.stderr
    )
    assert "Traceback" not in result.output
    assert dest_keys(dest) == keys
    assert tenant_rows(api) == tenants


@pytest.mark.parametrize("command", ["show", "verify", "delete", "restore"])
def test_unknown_backup_id_exits_1_with_a_one_line_message(
    rewind: Rewind, api: TableStore, dest_uri: str, command: str
) -> None:
    create(rewind, dest_uri, "physical")
    args = (
        ["backup", "restore", "--from", dest_uri, "--backup", "nope", "--tenant", "z"]
        if command == "restore"
        else ["backup", command, dest_uri, "nope", *(["--yes"] * (command == "delete"))]
    )
    result = rewind(*args)
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "nope" in lines[0], result.stderr
    assert "Traceback" not in result.output


def test_backup_restore_into_an_existing_name_without_replace_exits_1(
    rewind: Rewind, api: TableStore, dest_uri: str
) -> None:
    backup_id = create(rewind, dest_uri, "logical")["backup_id"]
    tenants = tenant_rows(api)
    result = rewind("backup", "restore", "--from", dest_uri, "--backup", backup_id)
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "'acme'" in lines[0] and "Traceback" not in result.output
    assert tenant_rows(api) == tenants
