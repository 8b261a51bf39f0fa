"""How human output is laid out: the width tables get, the columns that wrap
and those that never do, fields stacked in one cell, and times and sizes as
people read them (docs/decisions.md, "Human output").

The renderers (engine.cli.render, restore_render, snapshot_render and the
commands' own tables) build on these, so every table follows the same rules:
it fits the terminal, or 100 columns off one, without cutting a value short,
and ``--wide`` lays it out with no limit, one line a row.
"""

from __future__ import annotations

import os
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TextIO

from rich.table import Table

from tenants.times import EPOCH, ONE_US, format_ts

PIPE_WIDTH = 100
# --wide: wide enough that no table ever meets the edge, so every column keeps
# its natural width (a line as long as its longest cells, for `less -S` or grep).
WIDE_WIDTH = 100_000


# Set by the root command for the command it runs (engine.cli.app), from
# --wide; a context variable rather than an argument, so every console and
# renderer follows it without each command handing it along. Outside a
# command (the demo, a library caller) it is off.
WIDE: ContextVar[bool] = ContextVar("rewind_wide_output", default=False)


def console_width(stream: TextIO) -> int | None:
    """The width tables are laid out in: ``None`` (rich's own: the terminal's, or
    ``COLUMNS``) on a terminal or when ``COLUMNS`` is set; 100 columns on a pipe
    or file; no limit under ``--wide``.

    Off a terminal rich would assume 80 columns and cut cells short; 100 fits
    a log line, a review comment or a side-by-side diff, and every table is
    laid out to wrap (never truncate) within it (docs/decisions.md, "Human
    output"). ``--wide`` wins over both, as the flag given for this command.
    """
    if WIDE.get():
        return WIDE_WIDTH
    isatty = getattr(stream, "isatty", None)
    if (isatty is not None and isatty()) or os.environ.get("COLUMNS"):
        return None
    return PIPE_WIDTH


# Values as people read them. JSON keeps the raw values (ts and ISO-8601 UTC,
# bytes as integers): what a program reads must not depend on this machine.


def local_time(ts: int) -> str:
    """A ts as people read it: ISO-8601 in this process's zone (``TZ``), with the
    zone's offset and all six digits of µs: ``2026-11-25 21:04:05.123456+01:00``.

    All six digits because a ts is µs and this text is exact: given back to
    ``--at`` or ``--as-of`` (quoted: it holds a space) it names the same ts
    (tenants.times.parse_instant honours the offset). A space, not ``T``, as
    psql and ``git log --date=iso`` print times, and so that a narrow table
    wraps a time at the space, into the date and the time of day, rather than
    cutting it mid-number. The offset is always there, ``+00:00`` included:
    a time without its zone is a guess.

    Never fails: a ts whose local time falls outside the years 1-9999 (the
    last hours of 9999 east of UTC) is printed as :func:`~tenants.times.format_ts`
    prints it, in UTC.
    """
    try:
        moment = (EPOCH + ts * ONE_US).astimezone()
    except (OverflowError, ValueError, OSError):
        return format_ts(ts)
    return moment.isoformat(sep=" ", timespec="microseconds")


def local_time_or_blank(ts: int | None) -> str:
    """:func:`local_time`, or nothing for a time that is not there (not dropped,
    not installed)."""
    return "" if ts is None else local_time(ts)


def human_bytes(n: int) -> str:
    """A size in units of 1024, as ``--memory`` takes them: ``812 B``, ``1.5 KiB``,
    ``3.2 GiB`` (one decimal past bytes; exact counts are in ``--json``)."""
    size = float(n)
    for unit in _BYTE_UNITS:
        if abs(size) < 1024 or unit == _BYTE_UNITS[-1]:
            break
        size /= 1024
    return f"{n:,} B" if unit == "B" else f"{size:,.1f} {unit}"


_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


# Tables
#
# Every table is laid out to fit the width it is given (100 columns off a
# terminal) without cutting a value short: columns of short values of bounded
# width (states, kinds, counts, sizes, a ts) never wrap (``fixed``), every
# other one wraps, long words folded (``wrapping``), and a time wraps at its
# space into the date and the time of day. What does not fit beside the rest
# is stacked as lines of one cell rather than given a column of its own
# (docs/decisions.md, "Human output"). ``--wide`` gives each column its
# natural width instead.


def titled(title: str, caption: str | None = None, **options: Any) -> Table:
    """A table at least as wide as its title and caption, so neither wraps, when
    they fit in 100 columns; a longer one wraps over the table's own width
    rather than stretching every column to 100."""
    widest = max(len(title), len(caption or ""))
    return Table(
        title=title,
        caption=caption,
        min_width=widest if widest <= PIPE_WIDTH else None,
        **options,
    )


def wrapping(table: Table, header: str, *, right: bool = False) -> None:
    """A column that may wrap: names, ids, keys, times, messages. A word longer than
    the column is folded onto the next line, never cut short with an ellipsis."""
    table.add_column(header, overflow="fold", justify="right" if right else "left")


def fixed(table: Table, header: str, *, right: bool = False) -> None:
    """A column of short values that never wraps: a state, a kind, a count, a size, a ts."""
    table.add_column(header, no_wrap=True, justify="right" if right else "left")


def lines(*parts: str | None) -> str:
    """Lines of one cell, stacked; the empty and missing ones left out."""
    return "\n".join(p for p in parts if p)


@dataclass(frozen=True)
class Stack:
    """Fields that share one cell, a line each, so that a table of many fields
    fits 100 columns; under ``--wide`` each gets a column of its own again, so
    every row is one line (what ``grep`` and ``less -S`` want).

    ``labels`` (one per field) start each line of the shared cell when some
    field may be missing (``created ...``, ``dropped ...``), so no line is
    read as another; an empty label leaves that line bare. Without them the
    lines are the fields in order (a ts over its time), all always present.
    """

    headers: tuple[str, ...]
    header: str | None = None  # the shared column's; default: the headers, a line each
    labels: tuple[str, ...] | None = None

    def add_to(self, table: Table) -> None:
        if WIDE.get():
            for header in self.headers:
                wrapping(table, header)
        else:
            wrapping(table, self.header or "\n".join(self.headers))

    def cells(self, *values: str | None) -> list[str]:
        """The row's cells for these fields: one, or (``--wide``) one per field."""
        if WIDE.get():
            return [value or "" for value in values]
        if self.labels is None:
            return [lines(*values)]
        return [
            lines(
                *(
                    f"{label} {value}" if label else value
                    for label, value in zip(self.labels, values, strict=True)
                    if value
                )
            )
        ]
