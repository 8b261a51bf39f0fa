"""The CLI guides a new user: ``--version``, ``-h`` everywhere, flags shown as
flags, an example in the help of each main command, shell completion, and
``history --commits --quiet`` to capture a commit's ts in a script.

Help runs in-process through ``typer.testing.CliRunner``; nothing here opens
a catalog but the ``--quiet`` test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.main import get_command
from typer.testing import CliRunner, Result

from engine.cli.app import app
from tenants import __version__
from tests.helpers.cli import as_json, ok

Rewind = Callable[..., Result]


def command_paths() -> Iterator[list[str]]:
    """Every command and group of ``rewind``, as the words that name it."""

    def walk(command: object, path: list[str]) -> Iterator[list[str]]:
        yield path
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, [*path, name])

    yield from walk(get_command(app), [])


COMMANDS = [" ".join(path) for path in command_paths()]
MAIN_COMMANDS = [
    "tenant create",
    "table create",
    "load",
    "delete",
    "query",
    "snapshot create",
    "restore-tenant",
    "restore-table",
    "backup create",
    "export",
    "gc",
]


def help_of(command: str, flag: str = "--help") -> str:
    result = CliRunner().invoke(app, [*command.split(), flag], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_version_prints_the_package_version() -> None:
    result = ok(CliRunner().invoke(app, ["--version"]))
    assert result.stdout == f"rewind {__version__}\n"
    assert as_json(CliRunner().invoke(app, ["--json", "--version"])) == {
        "name": "rewind",
        "version": __version__,
    }


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c or "rewind")
def test_every_command_takes_h_as_well_as_help(command: str) -> None:
    assert help_of(command, "-h") == help_of(command, "--help")


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c or "rewind")
def test_help_shows_flags_without_a_value_placeholder(command: str) -> None:
    shown = help_of(command)
    assert "<bool>" not in shown
    # A value is named for what it is (NAME, TIME, URI, N), as argparse, gh and
    # the AWS CLI name it, not by its Python type.
    for placeholder in ("<str>", "<int>", "<float>", "<path>", "<file>", "list[str]"):
        assert placeholder not in shown, (command, placeholder)
    assert "[[" not in shown  # an optional argument is bracketed once
    assert "{" + command.split()[-1] + "}" not in shown if command else True


def test_flags_show_bare_and_options_keep_their_placeholder() -> None:
    shown = help_of("restore-table")
    flag = next(line for line in shown.splitlines() if "--dry-run" in line)
    assert flag.split("--dry-run", 1)[1].split()[0:3] == ["Print", "the", "plan"]
    assert any("--executor" in line and "<local|spark|auto>" in line for line in shown.splitlines())
    assert any("--before" in line and "COMMIT" in line for line in shown.splitlines())


@pytest.mark.parametrize("command", MAIN_COMMANDS)
def test_main_commands_show_an_example(command: str) -> None:
    lines = help_of(command).splitlines()
    heading = next(i for i, line in enumerate(lines) if line.strip() in ("Example:", "Examples:"))
    assert lines[heading + 1].strip().startswith(f"rewind {command} "), lines[heading : heading + 3]


def test_the_root_help_says_where_to_start() -> None:
    shown = help_of("")
    assert "rewind tenant create NAME" in shown
    assert "--install-completion" in shown and "--version" in shown


def test_shell_completion_completes_commands() -> None:
    """What the script ``--install-completion`` installs asks: ``rewind tenant p<TAB>``."""
    result = CliRunner().invoke(
        app,
        [],
        prog_name="rewind",
        env={
            "_REWIND_COMPLETE": "complete_bash",
            "COMP_WORDS": "rewind tenant p",
            "COMP_CWORD": "2",
        },
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.split() == ["purge"]


def test_history_quiet_prints_only_commit_ts_for_scripts(rewind: Rewind, tmp_path: Path) -> None:
    ok(rewind("tenant", "create", "acme"))
    ok(rewind("table", "create", "acme", "shop.orders", "-c", "id:int64", "-k", "id"))
    (tmp_path / "rows.csv").write_text("id\n1\n2\n")
    first = as_json(rewind("--json", "load", "acme", "shop.orders", tmp_path / "rows.csv"))["ts"]
    (tmp_path / "keys.csv").write_text("id\n2\n")
    newest = as_json(
        rewind("--json", "delete", "acme", "shop.orders", "--keys", tmp_path / "keys.csv")
    )["ts"]
    quiet = ok(rewind("history", "acme", "--commits", "--table", "shop.orders", "-q"))
    assert quiet.stdout.split()[:2] == [str(newest), str(first)]  # then the table's creation
    one = ok(rewind("history", "acme", "--commits", "--limit", "1", "--quiet"))
    assert one.stdout == f"{newest}\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["history", "acme", "--quiet"], "--quiet goes with --commits"),
        (
            ["history", "acme", "--commits", "-q", "--json"],
            "give either --quiet (bare ts) or --json",
        ),
    ],
)
def test_history_quiet_refuses_what_it_cannot_mean(
    rewind: Rewind, args: list[str], message: str
) -> None:
    result = rewind(*args)
    assert result.exit_code == 1
    assert message in result.output
