"""Options that several commands declare alike, declared once.

Restore, table restore and export all name a point in time the same way, so a
user learns ``--snapshot`` and ``--at`` once; a help text fixed here is fixed
for every command.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated

import typer

from engine.cli.context import INT64_MAX, instant_arg, snapshot_arg
from engine.pipeline import INSTANT_BY_DEFAULT
from tenants.errors import InvalidArgument

MAX_COUNT = INT64_MAX


def count_parser(
    option: str, *, minimum: int = 1, ceiling: int | None = None
) -> Callable[[str], int]:
    """The parser of an option that takes a whole number (``--limit N``): ASCII digits
    from ``minimum`` to ``MAX_COUNT``.

    click's own int type takes any script's digits (``int("٣")`` is 3) and any
    size, so ``--limit 99999999999999999999`` reached the catalog as an
    overflow; checked here, it is refused as the user typed it, before any I/O.
    With ``ceiling``, a larger number is read as ``ceiling`` instead: for an
    option where "more than there is" means "all" (``query --limit``), or
    whose command refuses past its own, smaller bound (``--keep-last``).
    """

    def parse(text: str) -> int:
        value = str(text).strip()
        if re.fullmatch(r"[0-9]+", value):
            # Past 19 digits it is past int64 anyway (and int() refuses ~4300).
            number = int(value) if len(value) <= 19 else MAX_COUNT + 1
            if ceiling is not None and number > ceiling:
                return ceiling
            if minimum <= number <= MAX_COUNT:
                return number
        shown = value if len(value) <= 30 else f"{value[:24]}... ({len(value)} characters)"
        raise InvalidArgument(
            f"invalid {option} {shown!r}: give a whole number from {minimum} to {MAX_COUNT}"
        )

    return parse


SnapshotOption = Annotated[
    str | None,
    typer.Option(
        "--snapshot", metavar="NAME", help="Snapshot name (searched through the tenant's lineage)."
    ),
]
AtOption = Annotated[
    str | None,
    typer.Option(
        "--at",
        metavar="TIME",
        help="A protected time: -1h, PT15M (that long ago), now, an ISO-8601 instant "
        "or a ts in µs.",
    ),
]
BeforeOption = Annotated[
    str | None,
    typer.Option(
        "--before",
        metavar="COMMIT",
        help="Just before this commit (its ts, from `rewind history TENANT --commits`).",
    ),
]


def snapshot_or_time(snapshot: str | None, at: str | None, doing: str) -> str | int:
    """The time named by exactly one of ``--snapshot NAME`` and ``--at TIME``,
    checked before any I/O; ``doing`` ("export", ...) words the error."""
    if (snapshot is None) == (at is None):
        raise InvalidArgument(
            f"say which time to {doing}: exactly one of --snapshot NAME or --at TIME"
        )
    if snapshot is not None:
        return snapshot_arg(snapshot)
    assert at is not None
    return instant_arg("--at", at)


def restore_mode_help(instant_by_default: bool) -> tuple[str, str]:
    """The help of ``--instant`` and of ``--rewrite-first``, which names the
    default, whichever way ``INSTANT_BY_DEFAULT`` (engine.pipeline) says."""
    instant = (
        "Install first: the restored tenant or tables are usable at once, each object "
        "straddling the restore point read through a cut at it; the rewrite and swap "
        "follow (physical only)."
    )
    rewrite_first = (
        "Rewrite the straddling objects first, then install them in one transaction: "
        "usable only once the job is done."
    )
    if instant_by_default:
        return f"{instant} The default (not for --method logical).", rewrite_first
    return instant, f"{rewrite_first} The default."


_INSTANT_HELP, _REWRITE_FIRST_HELP = restore_mode_help(INSTANT_BY_DEFAULT)
InstantOption = Annotated[bool, typer.Option("--instant", help=_INSTANT_HELP)]
RewriteFirstOption = Annotated[bool, typer.Option("--rewrite-first", help=_REWRITE_FIRST_HELP)]
NoWaitOption = Annotated[
    bool,
    typer.Option(
        "--no-wait",
        help="With an instant restore: return once it is usable, leaving the rewrite "
        "journaled; finish it with --resume JOB (on any host), or drop only the rewrite "
        "with --cancel JOB (the restored data stays correct).",
    ),
]


def instant_choice(
    instant: bool, rewrite_first: bool, no_wait: bool, *, method: str = "physical"
) -> bool:
    """Whether a restore command installs first: ``--instant``, ``--rewrite-first``,
    or neither (``INSTANT_BY_DEFAULT``, never for a logical restore). Checked
    before any I/O, so a conflict is refused before a plan or a question.

    Raises:
        InvalidArgument: both were given, ``--instant`` with ``--method logical``, or
            ``--no-wait`` without instant.
    """
    if instant and rewrite_first:
        raise InvalidArgument("give either --instant or --rewrite-first, not both")
    if instant and method == "logical":
        # run_restore's own words, before the question an in-place restore asks
        raise InvalidArgument(
            "an instant restore is physical: it installs the source's objects in place and "
            "rewrites the straddling ones after; drop --instant, or use --method physical"
        )
    chosen = instant or (not rewrite_first and INSTANT_BY_DEFAULT and method != "logical")
    if no_wait and not chosen:
        # run_restore's own words: the same refusal, made before any I/O
        raise InvalidArgument(
            "--no-wait leaves an instant restore's rewrite for later; add --instant"
        )
    return chosen
