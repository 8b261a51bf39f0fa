"""A table of many short rows, laid out in one pass and printed as one ``Text``.

rich's ``Table`` measures and renders every cell as a renderable of its own:
about 600 Python calls a cell, seconds for a ``rewind status`` of 10,000
tenants before a line is printed. This grid draws the same table
(rich's heavy-headed box, a bold header aligned to its bottom line, the title
and caption centred) from plain strings: each column is as wide as its widest
cell; when the whole is wider than the width it is given, the columns marked
``wraps`` give up their slack in proportion (never below ``min_width``) and
their cells wrap at spaces, a word longer than the column folded, never cut
with an ellipsis. ``width=None`` means no limit (``--wide``: a row a line).
A cell's style colours all of its lines, on a terminal only (rich drops it
off one). Used where rows are many and cells short (engine.cli.status_render).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field

from rich.text import Span, Text

Cell = str | tuple[str, str]
"""A cell's text, or (text, rich style)."""


@dataclass(frozen=True)
class Column:
    header: str  # lines separated by "\n"
    right: bool = False
    wraps: bool = False
    min_width: int = 6


@dataclass
class Grid:
    columns: Sequence[Column]
    title: str | None = None
    caption: str | None = None
    rows: list[Sequence[Cell]] = field(default_factory=list)

    def add_row(self, *cells: Cell) -> None:
        self.rows.append(cells)

    def render(self, width: int | None) -> Text:
        """The table, laid out in ``width`` columns (None: no limit)."""
        texts = [[_text(c) for c in row] for row in self.rows]
        widths = self._widths(texts, width)
        starts = [2 + sum(widths[:i]) + 3 * i for i in range(len(widths))]
        total = sum(widths) + 3 * len(widths) + 1
        lines: list[str] = []
        spans: list[Span] = []
        at = 0  # where the next line starts in the whole text

        def add(line: str, styled: Sequence[tuple[int, int, str]] = ()) -> None:
            nonlocal at
            spans.extend(Span(at + start, at + end, style) for start, end, style in styled)
            lines.append(line)
            at += len(line) + 1

        if self.title:
            title = self.title.center(max(total, len(self.title))).rstrip()
            add(title, [(0, len(title), "italic")])
        add(_border("┏", "━", "┳", "┓", widths))
        headers = [c.header.split("\n") for c in self.columns]
        height = max(len(h) for h in headers)
        header_spans = [(s, s + w, "bold") for s, w in zip(starts, widths, strict=True)]
        for i in range(height):
            labels = [h[i - (height - len(h))] if i >= height - len(h) else "" for h in headers]
            add(_line("┃", labels, self.columns, widths), header_spans)
        add(_border("┡", "━", "╇", "┩", widths))
        for row, cells in zip(self.rows, texts, strict=True):
            styled = [
                (starts[i], starts[i] + widths[i], _style(cell))
                for i, cell in enumerate(row)
                if _style(cell)
            ]
            if all(len(text) <= w for text, w in zip(cells, widths, strict=True)):
                add(_line("│", cells, self.columns, widths), styled)
                continue
            wrapped = [
                _wrap(text, w) if column.wraps else [text]
                for column, text, w in zip(self.columns, cells, widths, strict=True)
            ]
            for i in range(max(len(parts) for parts in wrapped)):
                line = [parts[i] if i < len(parts) else "" for parts in wrapped]
                add(_line("│", line, self.columns, widths), styled)
        add(_border("└", "─", "┴", "┘", widths))
        if self.caption:
            caption = self.caption.center(max(total, len(self.caption))).rstrip()
            add(caption, [(0, len(caption), "dim")])
        return Text("\n".join(lines), spans=spans)

    def _widths(self, texts: list[list[str]], width: int | None) -> list[int]:
        natural = [
            max([len(line) for line in c.header.split("\n")] + [len(row[i]) for row in texts])
            for i, c in enumerate(self.columns)
        ]
        if width is None:
            return natural
        excess = sum(natural) + 3 * len(natural) + 1 - width
        slack = [
            max(n - min(_floor(c), n), 0) if c.wraps else 0
            for c, n in zip(self.columns, natural, strict=True)
        ]
        if excess <= 0 or not sum(slack):
            return natural
        cut = min(excess, sum(slack))
        shares = [cut * s // sum(slack) for s in slack]
        for i in sorted(range(len(slack)), key=lambda i: -slack[i]):  # the rounding's rest
            if sum(shares) < cut and shares[i] < slack[i]:
                shares[i] += 1
        return [n - s for n, s in zip(natural, shares, strict=True)]


def _floor(column: Column) -> int:
    """The narrowest a wrapping column gets: its ``min_width``, or its header's widest line."""
    return max(column.min_width, *(len(line) for line in column.header.split("\n")))


def _text(cell: Cell) -> str:
    return cell if isinstance(cell, str) else cell[0]


def _style(cell: Cell) -> str:
    return "" if isinstance(cell, str) else cell[1]


def _line(edge: str, cells: Sequence[str], columns: Sequence[Column], widths: Sequence[int]) -> str:
    """One line of the table: each cell padded to its column's width."""
    padded = (
        text.rjust(w) if column.right else text.ljust(w)
        for text, column, w in zip(cells, columns, widths, strict=True)
    )
    return f"{edge} " + f" {edge} ".join(padded) + f" {edge}"


def _wrap(text: str, width: int) -> list[str]:
    """Lines of at most ``width``, broken at spaces or after hyphens; a longer word folded."""
    if len(text) <= width:
        return [text]
    return textwrap.wrap(text, width, break_long_words=True) or [""]


def _border(left: str, line: str, cross: str, right: str, widths: Sequence[int]) -> str:
    return left + cross.join(line * (w + 2) for w in widths) + right
