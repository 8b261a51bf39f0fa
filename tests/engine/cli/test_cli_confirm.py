"""Destructive commands are safe by default (engine.cli.confirm).

``tenant drop|purge``, an in-place ``restore-tenant|table|database``, ``gc``
without ``--dry-run``, ``backup delete`` and ``snapshot drop``:

- without a terminal and without ``--yes`` they refuse with one line naming
  ``--yes``, exit 1, and change nothing (no catalog row, no bucket key, no
  backup file);
- at a terminal they print the plan, then ask; "n" changes nothing, "y" goes
  ahead, as ``--yes`` does without asking.

Commands run in-process through ``typer.testing.CliRunner``, whose stdin is not
a terminal; a test plays a person at one by patching
``engine.cli.confirm.stdin_is_terminal`` and typing the answer as input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from engine.cli import confirm
from engine.cli.app import app
from engine.restore import job as restore_job
from engine.restore.members import PlanOutdated
from tenants.objectstore.embedded import EmbeddedS3
from tests.helpers.cli import as_json, catalog_and_bucket, items_tenant, ok

# Not the catalog's behaviour: on SQLite alone (conftest.py, one_catalog).
pytestmark = pytest.mark.one_catalog

Rewind = Callable[..., Result]


@dataclass(frozen=True)
class World:
    """Tenant ``acme`` (``shop.items``, snapshot ``mon``, a later write), a dropped
    tenant ``old``, and a backup of ``acme`` at ``mon`` in a directory."""

    rewind: Rewind
    old_ref: str
    backup_dir: Path
    backup_id: str
    state: Callable[[], Any]


@pytest.fixture
def world(uris: tuple[str, str], s3_server: EmbeddedS3, tmp_path: Path) -> World:
    catalog_uri, warehouse = uris
    runner = CliRunner()

    def rewind(*args: str | Path, input: str | None = None) -> Result:
        """``rewind --catalog … --warehouse … ARGS``, with ``input`` typed at stdin."""
        return runner.invoke(
            app, ["--catalog", catalog_uri, "--warehouse", warehouse, *map(str, args)], input=input
        )

    items_tenant(rewind, tmp_path)
    (tmp_path / "later.csv").write_text("id,v\n3,c\n")
    ok(rewind("load", "acme", "shop.items", tmp_path / "later.csv"))
    ok(rewind("tenant", "create", "old"))
    old_ref = "old@" + as_json(rewind("--json", "tenant", "drop", "old", "--yes"))["id"]
    backups = tmp_path / "backups"
    created = as_json(
        rewind("--json", "backup", "create", "acme", "--snapshot", "mon", "--to", str(backups))
    )

    bucket = warehouse[len("s3://") :].split("/")[0]

    def state() -> Any:
        """Every catalog row, every warehouse key and every backup file."""
        rows, keys = catalog_and_bucket(catalog_uri, s3_server, bucket)
        files = sorted(str(p.relative_to(backups)) for p in backups.rglob("*"))
        return rows, keys, files

    return World(rewind, old_ref, backups, created["backup_id"], state)


@dataclass(frozen=True)
class Destructive:
    """A destructive command, a line of the plan it shows before asking, and
    a check that it did its work."""

    args: Callable[[World], list[str]]
    plan: str
    done: Callable[[World], bool]


def snapshot_names(world: World) -> list[str]:
    return [s["name"] for s in as_json(world.rewind("--json", "snapshot", "list", "acme"))]


def tenant_names(world: World) -> list[str]:
    return [t["name"] for t in as_json(world.rewind("--json", "tenant", "list"))]


def item_ids(world: World) -> list[int]:
    return [r["id"] for r in as_json(world.rewind("--json", "query", "acme", "shop.items"))]


COMMANDS = {
    "tenant drop": Destructive(
        lambda w: ["tenant", "drop", "acme"],
        "tenants",
        lambda w: "acme" not in tenant_names(w),
    ),
    "tenant purge": Destructive(
        lambda w: ["tenant", "purge", w.old_ref],
        "can no longer be undropped",
        lambda w: "already purged" in w.rewind("tenant", "purge", w.old_ref, "--yes").stderr,
    ),
    "restore-tenant": Destructive(
        lambda w: ["restore-tenant", "acme", "--snapshot", "mon"],
        "restore plan",
        lambda w: item_ids(w) == [1, 2],
    ),
    "restore-table": Destructive(
        lambda w: ["restore-table", "acme", "shop.items", "--snapshot", "mon"],
        "restore plan",
        lambda w: item_ids(w) == [1, 2],
    ),
    "restore-database": Destructive(
        lambda w: ["restore-database", "acme", "shop", "--snapshot", "mon"],
        "restore plan",
        lambda w: item_ids(w) == [1, 2],
    ),
    "gc": Destructive(
        lambda w: ["gc"],
        "a dry run would delete 0 object(s)",
        lambda w: True,  # nothing is old enough to delete: it ran, exit 0
    ),
    "backup delete": Destructive(
        lambda w: ["backup", "delete", str(w.backup_dir), w.backup_id],
        "backups at",
        lambda w: as_json(w.rewind("--json", "backup", "list", str(w.backup_dir))) == [],
    ),
    "snapshot drop": Destructive(
        lambda w: ["snapshot", "drop", "acme", "mon"],
        "mon: ts ",
        lambda w: "mon" not in snapshot_names(w),
    ),
}


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """A person at a terminal: stdin is one, and the test types the answer."""
    monkeypatch.setattr(confirm, "stdin_is_terminal", lambda: True)


@pytest.mark.parametrize("name", COMMANDS)
def test_without_a_terminal_a_destructive_command_needs_yes(world: World, name: str) -> None:
    command = COMMANDS[name]
    before = world.state()
    refused = world.rewind(*command.args(world))
    assert refused.exit_code == 1, refused.output
    [line] = refused.stderr.strip().splitlines()
    assert line.startswith("error: refusing to ") and "without --yes" in line, line
    assert "nothing was changed" in line and refused.stdout == ""
    assert world.state() == before

    ok(world.rewind(*command.args(world), "--yes"))
    assert command.done(world)


@pytest.mark.parametrize("name", COMMANDS)
def test_at_a_terminal_it_shows_the_plan_and_asks(world: World, name: str, terminal: None) -> None:
    command = COMMANDS[name]
    before = world.state()
    declined = world.rewind(*command.args(world), input="n\n")
    assert declined.exit_code == 1, declined.output
    assert command.plan in declined.stdout
    assert "[y/N]:" in declined.stdout
    [line] = declined.stderr.strip().splitlines()
    assert line.startswith("error: not confirmed: did not ") and "nothing was changed" in line
    assert world.state() == before

    accepted = ok(world.rewind(*command.args(world), input="y\n"))
    assert command.plan in accepted.stdout and "[y/N]:" in accepted.stdout
    assert command.done(world)


def test_the_default_answer_is_no(world: World, terminal: None) -> None:
    before = world.state()
    result = world.rewind("tenant", "drop", "acme", input="\n")
    assert result.exit_code == 1 and "not confirmed" in result.stderr
    assert world.state() == before


def test_end_of_input_at_the_question_is_a_no(world: World, terminal: None) -> None:
    before = world.state()
    result = world.rewind("snapshot", "drop", "acme", "mon", input="")
    assert result.exit_code == 1 and "not confirmed" in result.stderr
    assert world.state() == before


def test_yes_does_not_ask_even_at_a_terminal(world: World, terminal: None) -> None:
    result = ok(world.rewind("snapshot", "drop", "acme", "mon", "-y"))
    assert "[y/N]" not in result.output
    assert "mon" not in snapshot_names(world)


@pytest.mark.parametrize(
    "args",
    [
        ["restore-tenant", "acme", "--snapshot", "mon", "--to", "acme_mon"],
        ["restore-table", "acme", "shop.items", "--snapshot", "mon", "--to", "shop.items_mon"],
        ["restore-database", "acme", "shop", "--snapshot", "mon", "--to", "shop_mon"],
        ["restore-tenant", "acme", "--snapshot", "mon", "--dry-run"],
        ["restore-table", "acme", "shop.items", "--snapshot", "mon", "--dry-run"],
        ["gc", "--dry-run"],
    ],
    ids=["tenant-to", "table-to", "database-to", "tenant-dry-run", "table-dry-run", "gc-dry-run"],
)
def test_what_replaces_nothing_is_never_asked(world: World, args: list[str]) -> None:
    result = ok(world.rewind(*args))
    assert "[y/N]" not in result.output


def test_json_asks_on_stderr_and_keeps_stdout_one_json_result(world: World, terminal: None) -> None:
    result = ok(world.rewind("--json", "snapshot", "drop", "acme", "mon", input="y\n"))
    assert "[y/N]" in result.stderr and "mon: ts " in result.stderr
    # CliRunner echoes what is typed to stdout, where a terminal would show it.
    typed, output = result.stdout.split("\n", 1)
    assert typed.strip() == "y"
    assert json.loads(output)["dropped"][0]["name"] == "mon"


def test_bad_input_is_refused_before_the_question(world: World) -> None:
    """A wrong argument gets its own message, not a request for --yes."""
    result = world.rewind("snapshot", "drop", "acme", "--older-than", "6x")
    assert result.exit_code == 1 and "invalid duration '6x'" in result.stderr
    result = world.rewind("gc", "--grace", "1m")
    assert result.exit_code == 1 and "--allow-short-grace" in result.stderr


RESTORES = ["restore-tenant", "restore-table", "restore-database"]


@pytest.mark.parametrize("name", RESTORES)
def test_a_confirmed_restore_runs_the_plan_it_showed(
    world: World, name: str, terminal: None
) -> None:
    """The job that runs is the plan the question showed (its id, objects, executor and
    method), not a second plan made after the yes."""
    accepted = ok(world.rewind(*COMMANDS[name].args(world), input="y\n"))
    shown = re.findall(r"restore plan (\w+)", accepted.stdout)
    ran = re.search(r"^restore job (\w+) done", accepted.stdout, re.MULTILINE)
    assert shown and ran is not None, accepted.stdout
    assert set(shown) == {ran.group(1)}, accepted.stdout


@pytest.mark.parametrize("name", RESTORES)
def test_an_approved_plan_outdated_before_its_job_starts_is_refused_not_redone(
    world: World, name: str, terminal: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GC outdating the plan between the yes and the job: the restore stops and says
    so (run it again to see the new plan); it never runs a plan nobody saw."""
    started = restore_job.start_job

    def outdated(*args: Any, **kwargs: Any) -> Any:
        raise PlanOutdated("GC replaced an object the plan counted")

    monkeypatch.setattr(restore_job, "start_job", outdated)
    before = world.state()
    refused = world.rewind(*COMMANDS[name].args(world), input="y\n")
    assert refused.exit_code == 1, refused.output
    [line] = refused.stderr.strip().splitlines()
    assert re.search(r"changed after restore plan \w+ was shown", line), line
    assert "nothing was changed: run the command again" in line, line
    assert world.state() == before
    monkeypatch.setattr(restore_job, "start_job", started)
    ok(world.rewind(*COMMANDS[name].args(world), "--yes"))
    assert COMMANDS[name].done(world)
