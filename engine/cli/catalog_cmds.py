"""``rewind catalog copy SRC DST``: move a catalog between SQLite and PostgreSQL.

Needs no warehouse: only the two catalogs are opened. The copy and its check
are ``tenants.catalog.engine.copy``; this prints one row per catalog table (rows in
the source, rows copied, verified) and fails if any table does not verify.
"""

from __future__ import annotations

from typing import Annotated

import typer

from engine.cli import render
from engine.cli.context import cli_state
from engine.cli.render_layout import fixed, titled, wrapping
from tenants.catalog import open_catalog
from tenants.errors import CopyMismatch, InvalidArgument
from tenants.redaction import redact

app = typer.Typer(help="Copy a catalog to another backend.", no_args_is_help=True)

Source = Annotated[
    str, typer.Argument(metavar="SOURCE", help="The catalog to copy.", show_default=False)
]
Destination = Annotated[
    str,
    typer.Argument(
        metavar="DESTINATION",
        help="A new, empty catalog (its database exists).",
        show_default=False,
    ),
]


@app.command("copy")
def copy(ctx: typer.Context, source: Source, destination: Destination) -> None:
    """Move the SOURCE catalog to the new, empty DESTINATION: copy every row and verify it.

    SOURCE is marked moved first: from then on it refuses writes, restores and
    GC (reads still work) and names DESTINATION, so exactly one catalog writes
    to the warehouse. Run it again if it was interrupted.

    Example:
      rewind catalog copy sqlite:///.rewind/catalog.db postgresql://rewind@db.internal:5432/rewind
    """
    from tenants.catalog.engine.copy import move_catalog

    state = cli_state(ctx)
    if source == destination:
        raise InvalidArgument(f"source and destination are the same catalog ({source})")
    src = open_catalog(source, create=False)  # a copy of nothing is a typo, not a new catalog
    try:
        dst = open_catalog(destination)
        try:
            copied = move_catalog(src, dst)
            shown = (redact(src.uri), redact(dst.uri))  # as every printed URI
        finally:
            dst.close()
    finally:
        src.close()
    bad = [c.table for c in copied if not c.verified]
    if state.json:
        render.emit_json(
            {
                "source": shown[0],
                "destination": shown[1],
                "tables": [
                    {"table": c.table, "rows": c.source_rows, "copied": c.copied_rows,
                     "verified": c.verified}
                    for c in copied
                ],
            }
        )  # fmt: skip
    else:
        table = titled(f"copied {shown[0]} to {shown[1]}")
        wrapping(table, "table")
        for column in ("rows", "copied", "verified"):
            fixed(table, column, right=column != "verified")
        for c in copied:
            table.add_row(c.table, f"{c.source_rows:,}", f"{c.copied_rows:,}",
                          "yes" if c.verified else "[red]NO[/]")  # fmt: skip
        render.show(table)
    if bad:
        raise CopyMismatch(
            f"the copy in {shown[1]} does not match {shown[0]} in table(s) {bad}: do not use "
            f"it; {shown[0]} stays marked moved to it and writes nothing: empty {shown[1]} "
            "and run this copy again"
        )
