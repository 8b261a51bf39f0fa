"""No id or name that reaches a key or path can leave the root it is joined to.

A backup id names ``backups/<id>/`` at its destination, a job id names
``staging/<id>/`` in the warehouse, a staging id names ``tenants/<id>/``. Each
is validated (tenants.names) before any I/O, and every object store refuses a
key that would step out of its root, whatever slipped past.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.backup.api import delete_backup, restore_backup, show_backup, verify_backup
from engine.logical.reload import reload_dump
from engine.restore.journal import load_job
from tenants.errors import InvalidArgument, InvalidName
from tenants.objectstore import ObjectStore
from tenants.objectstore.embedded import EmbeddedS3
from tenants.store import TableStore
from tests.helpers.cli import as_json, catalog_and_bucket, items_tenant, ok

pytestmark = pytest.mark.one_catalog

Rewind = Callable[..., Any]

# Each names something outside the root it would be joined to, or hides a separator.
PATHS = [
    "..",
    ".",
    "../../elsewhere/backups/x",
    "a/../../b",
    "/etc/passwd",
    "a\\..\\b",
    "%2e%2e",
    "%2e%2e%2fb",
    "a/b",
    "",
    "a.b",
]


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture
def two_destinations(rewind: Rewind, tmp_path: Path) -> tuple[str, str, str]:
    """Destination ``mine`` (empty, claimed) beside ``elsewhere`` holding one backup."""
    items_tenant(rewind, tmp_path)
    mine, elsewhere = tmp_path / "dest" / "mine", tmp_path / "dest" / "elsewhere"
    backup = as_json(
        rewind(
            "--json", "backup", "create", "acme", "--snapshot", "mon", "--to", f"file://{elsewhere}"
        )
    )["backup_id"]
    other = as_json(
        rewind("--json", "backup", "create", "acme", "--snapshot", "mon", "--to", f"file://{mine}")
    )["backup_id"]
    ok(rewind("backup", "delete", f"file://{mine}", other, "--yes"))
    return f"file://{mine}", f"../../elsewhere/backups/{backup}", backup


@pytest.mark.parametrize(
    "command",
    [
        ["backup", "show", "{mine}", "{bad}"],
        ["backup", "verify", "{mine}", "{bad}"],
        ["backup", "delete", "{mine}", "{bad}", "--yes"],
        ["backup", "restore", "--from", "{mine}", "--backup", "{bad}", "--tenant", "copy"],
    ],
)
def test_a_backup_id_that_is_a_path_never_reaches_another_destination(
    rewind: Rewind,
    two_destinations: tuple[str, str, str],
    uris: tuple[str, str],
    s3_server: EmbeddedS3,
    tmp_path: Path,
    command: list[str],
) -> None:
    mine, bad, _ = two_destinations
    bucket = uris[1].split("/")[2]
    before = catalog_and_bucket(uris[0], s3_server, bucket), tree(tmp_path / "dest")

    result = rewind(*(part.format(mine=mine, bad=bad) for part in command))

    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert "invalid backup id '../../elsewhere/backups/" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert (catalog_and_bucket(uris[0], s3_server, bucket), tree(tmp_path / "dest")) == before


@pytest.mark.parametrize("bad", [*PATHS, "a\0b"])
@pytest.mark.parametrize("call", ["show", "verify", "delete", "restore"])
def test_every_backup_api_refuses_an_id_that_is_not_one_before_any_io(
    store: TableStore, tmp_path: Path, bad: str, call: str
) -> None:
    missing = tmp_path / "never-made"  # no I/O: the destination is not even looked at
    uri = f"file://{missing}"
    calls = {
        "show": lambda: show_backup(uri, bad),
        "verify": lambda: verify_backup(uri, bad),
        "delete": lambda: delete_backup(uri, bad),
        "restore": lambda: restore_backup(store, uri, bad, tenant="copy"),
    }
    with pytest.raises(InvalidName, match="invalid backup id"):
        calls[call]()
    assert not missing.exists()


@pytest.mark.parametrize("bad", ["../x", "a/b", "%2e%2e", "a\\b"])
def test_a_job_id_that_is_a_path_is_refused_by_name(store: TableStore, bad: str) -> None:
    with pytest.raises(InvalidName, match="invalid restore job id"):
        load_job(store.catalog, bad)


def test_a_staging_id_that_is_a_path_is_refused_before_the_dump_is_read(
    store: TableStore, tmp_path: Path
) -> None:
    from tenants.objectstore import open_object_store

    dump = open_object_store(f"file://{tmp_path / 'dump'}")
    with pytest.raises(InvalidName, match="invalid staging tenant id"):
        reload_dump(store, dump, "d", target_name="copy", staging_id="../../x")


@pytest.mark.parametrize(
    "key", ["../x", "a/../../x", "/abs", "a\\b", "a\0b", "./a", "tenants/../../x.parquet"]
)
def test_an_object_store_never_reads_or_writes_outside_its_root(
    object_store: ObjectStore, tmp_path: Path, key: str
) -> None:
    outside = tree(tmp_path)
    for call in (
        lambda: object_store.put(key, b"x"),
        lambda: object_store.get(key),
        lambda: object_store.head(key),
        lambda: object_store.create(key, b"x"),
        lambda: object_store.delete_many([key]),
        lambda: list(object_store.list(key)),
    ):
        with pytest.raises(InvalidArgument, match="would reach outside it"):
            call()
    assert tree(tmp_path) == outside


def test_ids_rewind_makes_are_ids() -> None:
    from tenants.names import backup_id, job_id, staging_id

    made = uuid.uuid4().hex
    assert backup_id(made) == job_id(made) == staging_id(made) == made
