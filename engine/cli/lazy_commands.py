"""The root command's commands, each imported and built when it is first looked up.

typer builds a click command for every command it knows before it parses the
command line, and knowing one means importing its module: every ``*_cmds``
module and some fifty commands built on each start, for a ``rewind tenant
list`` that runs one (benchmarks/bench_cli_start.py). :class:`LazyCommands`
stands where click keeps a group's commands (``commands``, name to command):
its names are engine.cli.command_index's, known without an import, and looking
one up imports that command's module and builds that command alone. So
typer's and click's own code (resolving the command line, "did you mean",
completion) builds only what it looks up, and a caller that walks every
command (``commands.items()``, as the tests' walks of the tree do) gets every
command, built.

``rewind -h`` must not build them all to show one line each:
:meth:`LazyCommands.listed` answers it with a stand-in that carries the
index's line for each command not yet built (engine.cli.app uses it while it
prints the root's help).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

import typer
from typer.core import MarkupMode, TyperCommand, TyperGroup
from typer.main import get_command_from_info, get_group_from_info
from typer.models import CommandInfo, TyperInfo

from engine.cli.command_index import Entry

Command = TyperCommand | TyperGroup
"""Every command typer builds is one of these."""

PRETTY_EXCEPTIONS_SHORT = True
"""typer's default, which the root app keeps (it only marks a command's frames
for typer's traceback filter; the root reports every error itself)."""


class LazyCommands(MutableMapping[str, Command]):
    """A group's commands by name, in the index's order: those the index names are
    imported and built on first look-up, those typer built already are kept as they are.
    """

    def __init__(
        self,
        built: Mapping[str, Command],
        index: Mapping[str, Entry],
        *,
        rich_markup_mode: MarkupMode,
        suggest_commands: bool,
    ) -> None:
        self._commands: dict[str, Command | Entry] = {**index, **built}
        self._rich_markup_mode = rich_markup_mode
        self._suggest_commands = suggest_commands

    def __getitem__(self, name: str) -> Command:
        found = self._commands[name]
        if isinstance(found, Entry):
            found = self._commands[name] = self._build(name, found)
        return found

    def __contains__(self, name: object) -> bool:  # Mapping's would build it
        return name in self._commands

    def __iter__(self) -> Iterator[str]:
        return iter(self._commands)

    def __len__(self) -> int:
        return len(self._commands)

    def __setitem__(self, name: str, command: Command) -> None:
        self._commands[name] = command

    def __delitem__(self, name: str) -> None:
        del self._commands[name]

    def listed(self, name: str) -> Command | None:
        """``name``'s command if it is built, else a stand-in with the index's help
        line: enough for a help's list of commands, nothing to run."""
        found = self._commands.get(name)
        if isinstance(found, Entry):
            return TyperCommand(name=name, help=found.help)
        return found

    def _build(self, name: str, entry: Entry) -> Command:
        """What ``app.add_typer(target, name=name)`` or ``app.command(name)(target)``
        would have made of ``entry``'s target, with the commands it adds to a group."""
        target = _imported(entry.where)
        if not isinstance(target, typer.Typer):
            return self._command(name, target)
        group = get_group_from_info(
            TyperInfo(target, name=name),
            pretty_exceptions_short=PRETTY_EXCEPTIONS_SHORT,
            rich_markup_mode=self._rich_markup_mode,
            suggest_commands=self._suggest_commands,
        )
        for sub, where in entry.also:
            group.add_command(self._command(sub, _imported(where)))
        return group

    def _command(self, name: str, function: Any) -> TyperCommand:
        command = get_command_from_info(
            CommandInfo(name=name, callback=function),
            pretty_exceptions_short=PRETTY_EXCEPTIONS_SHORT,
            rich_markup_mode=self._rich_markup_mode,
        )
        assert isinstance(command, TyperCommand)
        return command


def _imported(where: str) -> Any:
    """The attribute ``where`` (``module:attribute``) names, its module imported."""
    module, _, attribute = where.partition(":")
    # Not importlib.import_module: `python -X importtime` (the tests' measure of
    # what a command imports, and anyone's of its start) logs only the imports
    # that go through __import__, as an import statement's do.
    return getattr(__import__(module, fromlist=[attribute]), attribute)
