"""The root's commands are built as they are looked up, from engine.cli.command_index.

``rewind -h`` lists them from the index without importing their modules, so
the index must say what the commands themselves say: each entry's help line is
the first paragraph of its command's help, and the root's help is the same
text with every command built. Which modules a command line imports is
tests/engine/cli/test_cli_start.py's subject.
"""

from __future__ import annotations

import inspect

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from engine.cli.app import RewindGroup, app
from engine.cli.command_index import INDEX

pytestmark = pytest.mark.one_catalog


def _root() -> RewindGroup:
    root = get_command(app)
    assert isinstance(root, RewindGroup)
    return root


def _shown_help(root: RewindGroup, capsys: pytest.CaptureFixture[str]) -> str:
    """What ``rewind -h`` prints for ``root``, as its commands stand."""
    with pytest.raises(SystemExit) as exited:
        root.main(["-h"], prog_name="rewind")
    assert exited.value.code == 0
    return capsys.readouterr().out


def test_each_entry_holds_its_commands_own_help_line() -> None:
    built = dict(_root().commands)
    assert list(built) == list(INDEX)
    for name, command in built.items():
        own = inspect.cleandoc(command.short_help or command.help or "").split("\n\n")[0]
        assert INDEX[name].help == own, name


def test_the_root_help_is_the_same_with_every_command_built(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    listed = _shown_help(_root(), capsys)
    root = _root()
    dict(root.commands)  # builds every one
    assert _shown_help(root, capsys) == listed
    assert all(name in listed for name in INDEX)


def test_a_group_is_built_with_the_commands_another_module_adds() -> None:
    table = _root().commands["table"]
    assert list(getattr(table, "commands", {})) == ["create", "list", "drop", "alter", "undrop"]


def test_a_mistyped_command_is_matched_against_every_name() -> None:
    result = CliRunner().invoke(app, ["restore-tenat"])
    assert result.exit_code == 2
    assert "Did you mean 'restore-tenant'" in result.stderr
