"""The CLI's watcher of long work (tenants.progress): a rich bar on stderr.

Shown only when a person is watching: stderr is a terminal and the command is
not under ``--json``. A pipe, a file, a cron job or a test gets nothing, so
output stays exactly the command's result. Bars are transient: once a step
ends its bar goes, and what stays on the screen is the result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console

from engine.cli import render
from tenants.progress import SILENT, Step, watching

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID


class _Bar:
    """One step's row in the bars (what the watcher hands back as the step)."""

    def __init__(self, progress: Progress, task: TaskID) -> None:
        self.progress = progress
        self.task = task

    def advance(self, amount: int) -> None:
        self.progress.advance(self.task, amount)


class RichWatcher:
    """Each step a row: what it does, a bar, bytes done of the total, speed, ETA."""

    def __init__(self, console: Console) -> None:
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(binary_units=True),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.open = 0

    def begin(self, what: str, total: int | None) -> Step:
        if self.open == 0:
            self.progress.start()
        self.open += 1
        return _Bar(self.progress, self.progress.add_task(what, total=total))

    def end(self, step: Step) -> None:
        assert isinstance(step, _Bar)
        self.progress.remove_task(step.task)
        self.open -= 1
        if self.open == 0:
            self.progress.stop()


def shown(as_json: bool) -> bool:
    """Whether a person watches: not ``--json``, and stderr is a terminal."""
    return not as_json and render.stderr().is_terminal


class CliWatcher:
    """Bars when :func:`shown` at a step's start, else nothing.

    Installed for every command by the root callback, before the command has
    parsed its own ``--json``: hence ``as_json`` is asked when a step begins
    (the command's :func:`~engine.cli.context.cli_state` folds its ``--json``
    into the state by then).
    """

    def __init__(self, as_json: Callable[[], bool]) -> None:
        self.as_json = as_json
        self.bars: RichWatcher | None = None

    def begin(self, what: str, total: int | None) -> Step:
        if not shown(self.as_json()):
            return SILENT
        if self.bars is None:
            self.bars = RichWatcher(render.stderr())
        return self.bars.begin(what, total)

    def end(self, step: Step) -> None:
        if self.bars is not None and isinstance(step, _Bar):
            self.bars.end(step)

    def close(self) -> None:
        if self.bars is not None and self.bars.open:
            self.bars.progress.stop()


@contextmanager
def watched(as_json: Callable[[], bool]) -> Iterator[CliWatcher]:
    """The command's long work reported to a :class:`CliWatcher`."""
    watcher = CliWatcher(as_json)
    try:
        with watching(watcher):
            yield watcher
    finally:
        watcher.close()
