"""``--executor``, ``--verify``, ``--method`` and ``backup create --kind`` are choices.

``--help`` lists the words each takes (the API's own tuples), and a word
outside them is refused while the command line is parsed: one ``error:`` line
naming the valid words (one JSON line under ``--json``), exit 1, and nothing
changed: no restore job, no tenant, no object.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

import pytest
from typer.testing import CliRunner, Result

from engine.backup.api import Kind
from engine.cli.app import app
from engine.pipeline import EXECUTOR_NAMES, METHODS, VERIFY_LEVELS
from tenants.objectstore.embedded import EmbeddedS3
from tests.helpers.cli import as_json, catalog_and_bucket, items_tenant, ok

# Not the catalog's behaviour: on SQLite alone (conftest.py, one_catalog).
pytestmark = pytest.mark.one_catalog

Rewind = Callable[..., Result]


def choices(words: tuple[str, ...]) -> str:
    """How ``--help`` shows an option's choices."""
    return "<" + "|".join(words) + ">"


EXECUTOR = choices(EXECUTOR_NAMES)
VERIFY = choices(VERIFY_LEVELS)
METHOD = choices(METHODS)
BACKUP_KIND = choices(("logical", "physical"))


@pytest.fixture
def world(rewind: Rewind, tmp_path: Path) -> None:
    """Tenant ``acme`` with ``shop.items``, two rows and snapshot ``mon``."""
    items_tenant(rewind, tmp_path)


@pytest.fixture
def everything(uris: tuple[str, str], s3_server: EmbeddedS3) -> Callable[[], Any]:
    """What a command could have changed: every catalog row and every bucket key."""
    catalog_uri, warehouse = uris
    bucket = warehouse[len("s3://") :].split("/")[0]

    def take() -> Any:
        return catalog_and_bucket(catalog_uri, s3_server, bucket)

    return take


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        (["restore-tenant"], [EXECUTOR, VERIFY, METHOD]),
        (["restore-table"], [EXECUTOR, VERIFY]),
        (["restore-database"], [EXECUTOR, VERIFY]),
        (["table", "undrop"], [EXECUTOR]),
        (["backup", "create"], [BACKUP_KIND]),
    ],
    ids=["restore-tenant", "restore-table", "restore-database", "undrop", "backup"],
)
def test_help_lists_the_words_each_choice_takes(command: list[str], shown: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    for words in shown:
        assert words in result.stdout, result.stdout


def test_the_backup_kinds_offered_are_the_apis() -> None:
    assert BACKUP_KIND == choices(get_args(Kind))


# A restore that would run (and write a job row) but for the one bad word.
RESTORE_TENANT = ["restore-tenant", "acme", "--snapshot", "mon", "--to", "copy"]
RESTORE_TABLE = ["restore-table", "acme", "shop.items", "--snapshot", "mon", "--to", "shop.old"]
RESTORE_DATABASE = ["restore-database", "acme", "shop", "--snapshot", "mon", "--to", "old"]
BAD_WORDS = {
    "tenant executor": (
        [*RESTORE_TENANT, "--executor", "gpu"],
        "unknown executor 'gpu': use local, spark or auto",
    ),
    "tenant verify": (
        [*RESTORE_TENANT, "--verify", "everything"],
        "unknown verify level 'everything': use none, objects or full",
    ),
    "tenant method": (
        [*RESTORE_TENANT, "--method", "dump"],
        "unknown restore method 'dump': use physical, logical or auto",
    ),
    "tenant method, case": (
        [*RESTORE_TENANT, "--method", "Physical"],
        "unknown restore method 'Physical': use physical, logical or auto",
    ),
    "table executor": (
        [*RESTORE_TABLE, "--executor", "threads"],
        "unknown executor 'threads': use local, spark or auto",
    ),
    "table verify": (
        [*RESTORE_TABLE, "--verify", ""],
        "unknown verify level '': use none, objects or full",
    ),
    "database executor": (
        [*RESTORE_DATABASE, "--executor", "gpu"],
        "unknown executor 'gpu': use local, spark or auto",
    ),
    "undrop executor": (
        ["table", "undrop", "acme", "shop.items", "--executor", "gpu"],
        "unknown executor 'gpu': use local, spark or auto",
    ),
    "backup kind": (
        ["backup", "create", "acme", "--snapshot", "mon", "--to", "s3://rewind-never-made/bk",
         "--kind", "zip"],
        "unknown backup kind 'zip': use logical or physical",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD_WORDS))
def test_a_bad_choice_is_one_line_naming_the_choices_and_changes_nothing(
    rewind: Rewind, world: None, everything: Callable[[], Any], case: str
) -> None:
    args, message = BAD_WORDS[case]
    before = everything()

    result = rewind(*args)

    assert result.exit_code == 1, f"{result.output}\n{result.exception!r}"
    assert result.stdout == ""
    assert result.stderr.splitlines() == [f"error: {message}"]
    assert everything() == before  # no restore job, no tenant, no object


def test_a_bad_choice_under_json_is_one_json_error_line(
    rewind: Rewind, world: None, everything: Callable[[], Any]
) -> None:
    before = everything()

    result = rewind("--json", *RESTORE_TENANT, "--verify", "all")

    assert result.exit_code == 1, result.output
    assert result.stderr == ""
    [line] = result.stdout.splitlines()
    assert json.loads(line) == {
        "error": {
            "type": "InvalidArgument",
            "message": "unknown verify level 'all': use none, objects or full",
        }
    }
    assert everything() == before


def test_a_bad_choice_is_refused_before_the_command_looks_at_anything(rewind: Rewind) -> None:
    # No tenant exists: the command, had it run, would say so; the parser speaks first.
    result = rewind("restore-tenant", "nobody", "--snapshot", "mon", "--executor", "gpu")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == ["error: unknown executor 'gpu': use local, spark or auto"]


def test_the_chosen_words_reach_the_restore_job_as_given(rewind: Rewind, world: None) -> None:
    ok(rewind(*RESTORE_TENANT, "--executor", "local", "--verify", "full", "--method", "physical"))
    ok(rewind(*RESTORE_TABLE, "--executor", "local", "--verify", "none"))
    jobs = as_json(rewind("--json", "history", "acme"))["jobs"]
    assert sorted((j["scope"], j["method"], j["executor"], j["verify"]) for j in jobs) == [
        ("table", "physical", "local", "none"),
        ("tenant", "physical", "local", "full"),
    ]
