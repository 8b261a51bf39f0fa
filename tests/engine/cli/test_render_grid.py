"""The grid ``rewind status`` prints its many rows with: rich's table's rules, drawn in one pass.

It fits the width it is given by wrapping only the columns that may wrap,
never cuts a value short, keeps every row one line when given no limit, and
colours only the cells given a style.
"""

from __future__ import annotations

from engine.cli.render_grid import Column, Grid

COLUMNS = (
    Column("name", wraps=True, min_width=6),
    Column("age\nof point", right=True),
    Column("notes", wraps=True, min_width=8),
)


def grid(*rows: tuple[str, ...]) -> Grid:
    table = Grid(COLUMNS, title="a title", caption="a caption")
    for row in rows:
        table.add_row(*row)
    return table


def test_a_grid_that_fits_is_a_line_a_row_with_its_header_at_the_bottom() -> None:
    text = grid(("acme", "3h", "fine"), ("globex", "12m30s", "")).render(100).plain
    lines = text.splitlines()
    assert lines[0].strip() == "a title" and lines[-1].strip() == "a caption"
    assert lines[2] == "┃        ┃      age ┃       ┃"
    assert lines[3] == "┃ name   ┃ of point ┃ notes ┃"
    assert lines[5] == "│ acme   │       3h │ fine  │"
    assert lines[6] == "│ globex │   12m30s │       │"
    assert len({len(line) for line in lines[1:-1]}) == 1


def test_a_grid_too_wide_wraps_its_wrapping_columns_and_cuts_nothing() -> None:
    long_name = "a-tenant-with-a-rather-long-name"
    notes = "backup physical failed, restore stale, drill 3h"
    text = grid((long_name, "3h", notes)).render(40).plain
    body = [line for line in text.splitlines()[1:-1]]
    assert max(len(line) for line in body) <= 40
    assert "…" not in text
    names = "".join(line.split("│")[1].strip() for line in body[4:-1])
    assert names == long_name
    words = " ".join(line.split("│")[3].strip() for line in body[4:-1]).split()
    assert " ".join(words) == notes


def test_no_limit_keeps_every_row_one_line() -> None:
    long_name = "x" * 150
    text = grid((long_name, "3h", "a b c " * 30)).render(None).plain
    (row,) = [line for line in text.splitlines() if line.startswith("│")]
    assert long_name in row


def test_only_styled_cells_are_coloured() -> None:
    table = Grid(COLUMNS)
    table.add_row("acme", ("3h", "bold red"), "")
    table.add_row("globex", "1h", "")
    text = table.render(100)
    styled = {text.plain[s.start : s.end].strip(): str(s.style) for s in text.spans}
    assert styled.pop("3h") == "bold red"
    assert set(styled) == {"name", "age", "of point", "notes", ""}  # the bold header
