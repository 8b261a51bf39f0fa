"""The one gate every destructive command passes: ``--yes``, or "y" at a terminal.

A command that deletes, retires or replaces data (``tenant drop|purge``, an
in-place ``restore-tenant|table|database``, ``gc`` without ``--dry-run``,
``backup delete``, ``snapshot drop``) calls :func:`confirm` after checking its
arguments and before changing anything:

- with ``--yes`` it goes ahead without a word;
- at a terminal it prints the plan (what would go), then asks, default no;
- otherwise (a script, a pipe, CI) nobody can answer, so it refuses with one
  line naming ``--yes``.

The real error comes first: making the plan resolves the names the command
was given (tenant, table, snapshot, time, backup), so the plan is made before
asking or refusing, and ``restore-tenant acme --snapshot nope`` in a script
says there is no snapshot ``nope`` rather than asking for ``--yes``, which
would not help. The plan reads; it changes nothing. ``gc``'s plan is a whole
dry run and it has no names to check, so it passes ``plan_checks=False`` and
a refusal there does no I/O. A restore of tables asks only if it replaces
live ones, which its plan tells (engine.cli.table_restore_cmds).

A refusal or a "no" raises :class:`~tenants.errors.NotConfirmed`, which the
root command reports like every error: one line, exit 1, JSON under
``--json``. Under ``--json`` the plan and the question go to stderr, so stdout
still holds only the one JSON result.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Annotated

import typer
from rich.console import RenderableType

from engine.cli import render
from tenants.errors import NotConfirmed

YesOption = Annotated[
    bool,
    typer.Option(
        "--yes",
        "-y",
        help="Go ahead without asking. Needed where nobody can answer (a script, a pipe, "
        "CI); at a terminal the command shows what it would do and asks.",
    ),
]


def stdin_is_terminal() -> bool:
    """Whether a person can answer a question (tests patch this to play one)."""
    isatty = getattr(sys.stdin, "isatty", None)
    return bool(isatty is not None and isatty())


def confirm(
    action: str,
    *,
    yes: bool,
    as_json: bool,
    plan: Callable[[], Iterable[RenderableType]] = lambda: (),
    plan_checks: bool = True,
) -> None:
    """Go ahead only if the user said so.

    Args:
        action: what the command will do, as a verb phrase ("purge tenant
            acme@1f2e"): the question and the refusal name it.
        yes: ``--yes`` was given.
        as_json: ``--json``: show the plan and ask on stderr.
        plan: the lines or tables that say what would change; not called
            under ``--yes`` (the command itself checks what it acts on).
        plan_checks: making the plan resolves the command's arguments (the
            default), so it is made before a refusal, whose error would
            otherwise hide the real one; ``False``: only when someone will
            be asked.

    Raises:
        NotConfirmed: stdin is not a terminal and ``yes`` is false, or the
            answer was not yes. Nothing was changed.
        RewindError: whatever making the plan raised (no such tenant, ...).
    """
    if yes:
        return
    shown = list(plan()) if plan_checks else None
    if not stdin_is_terminal():
        raise NotConfirmed(
            f"refusing to {action} without --yes: stdin is not a terminal, so there is "
            "nobody to ask; nothing was changed"
        )
    render.show_all(
        plan() if shown is None else shown, render.stderr() if as_json else render.stdout()
    )
    try:
        answer = typer.confirm(f"{action}?", default=False, err=as_json)
    except typer.Abort:  # end of input or Ctrl-C at the question
        answer = False
    if not answer:
        raise NotConfirmed(f"not confirmed: did not {action}; nothing was changed")
