"""Turning store results into rich tables for people and JSON for machines.

Every cell is built as a ``rich.text.Text``, never as markup, because cells hold
user data and error messages that may contain ``[brackets]``. Consoles are made
per call rather than at import, so they follow whatever ``sys.stdout`` is at the
time (a terminal, a pipe, or a test runner's capture).
"""

from __future__ import annotations

import base64
import json
import math
import os
import sys
from collections.abc import Iterable, Sequence
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any, TextIO

import pyarrow as pa
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from tenants.compaction import CompactionResult
from tenants.objects import ObjectRecord
from tenants.tenancy import TableRecord, TenantRecord
from tenants.times import format_ts
from tenants.writes import WriteResult

PIPE_WIDTH = 240


def _width(stream: TextIO) -> int | None:
    """Terminal width on a terminal; on a pipe or file a wide fixed one.

    Rich would assume 80 columns off a terminal and truncate cells, which is
    the wrong default for output headed to a file, a log or ``less -S``.
    ``COLUMNS`` still wins when set.
    """
    isatty = getattr(stream, "isatty", None)
    if (isatty is not None and isatty()) or os.environ.get("COLUMNS"):
        return None
    return PIPE_WIDTH


def stdout() -> Console:
    return Console(highlight=False, width=_width(sys.stdout))


def stderr() -> Console:
    return Console(stderr=True, highlight=False, width=_width(sys.stderr))


def show(renderable: RenderableType) -> None:
    """Print a table (or any renderable) to stdout."""
    stdout().print(renderable)


def show_all(parts: Iterable[RenderableType], console: Console | None = None) -> None:
    """Print tables and lines in turn (stdout by default): a string as :func:`say`
    prints it, anything else as :func:`show` does."""
    console = console or stdout()
    for part in parts:
        if isinstance(part, str):
            console.print(Text(part), soft_wrap=True)
        else:
            console.print(part)


def say(message: str) -> None:
    """One plain line on stdout (no markup, no wrapping)."""
    stdout().print(Text(message), soft_wrap=True)


def print_error(message: str) -> None:
    """The one-line red error every failed command ends with, on stderr.

    ``soft_wrap`` keeps it one line whatever the terminal width, so scripts
    can grep it and tests can count it.
    """
    one_line = " ".join(message.split())
    stderr().print(Text(f"error: {one_line}", style="bold red"), soft_wrap=True)


def print_error_json(kind: str, message: str) -> None:
    """The error as one JSON line on stdout, for ``--json``: ``{"error": {"type", "message"}}``.

    stdout, unlike the text form: under ``--json`` a program reads stdout and
    gets exactly one JSON object whatever happened, a result or an error; the
    exit status says which.
    """
    one_line = " ".join(message.split())
    print(json_text({"error": {"type": kind, "message": one_line}}), file=sys.stdout, flush=True)


def warn(message: str) -> None:
    """One yellow ``warning:`` line on stderr: something the user should act on,
    while the command itself succeeded."""
    one_line = " ".join(message.split())
    stderr().print(Text(f"warning: {one_line}", style="yellow"), soft_wrap=True)


# JSON


def json_default(value: Any) -> Any:
    """Encode the Python values Arrow hands back that ``json`` does not know."""
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return str(value)


def finite(value: Any) -> Any:
    """``value`` with every non-finite float spelled as a string.

    JSON has no NaN or infinity, and ``json.dumps`` would write the bare words
    ``NaN``/``Infinity``, which strict parsers (``jq``, browsers, Go) reject. As
    PostgreSQL's and Snowflake's JSON output do, they become the strings
    ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``: still distinct from null
    (an empty CSV field), and parseable back (``float("NaN")``).
    """
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def json_text(value: Any, *, indent: int | None = None) -> str:
    """Strict JSON (``allow_nan=False``): every document the CLI prints goes through here."""
    return json.dumps(finite(value), default=json_default, indent=indent, allow_nan=False)


def emit_json(value: Any) -> None:
    """One JSON document on stdout."""
    print(json_text(value, indent=2))


def emit_json_line(value: Any) -> None:
    """One JSON document on one line of stdout: a stream of them is JSON Lines
    (a command that loops, such as ``snapshot tick --every``)."""
    print(json_text(value), flush=True)


def emit_rows_json(rows: pa.Table | Iterable[pa.Table]) -> None:
    """Rows as a JSON array with one row object per line: one document, yet grep-able.

    Given an iterable of tables (a streamed read), each is printed as it comes,
    so the whole result is never held."""
    first = True
    for part in [rows] if isinstance(rows, pa.Table) else rows:
        if _may_hold_floats(part.schema):
            lines = [json_text(row) for row in part.to_pylist()]
        else:  # no float anywhere: skip the walk over every value
            lines = [json.dumps(r, default=json_default, allow_nan=False) for r in part.to_pylist()]
        if lines:
            sys.stdout.write(("[\n" if first else ",\n") + ",\n".join(lines))
            first = False
    print("[]" if first else "\n]")


def _may_hold_floats(schema: pa.Schema) -> bool:
    """True if any column, or any field nested in one, is a float type."""
    return any(_has_float(field.type) for field in schema)


def _has_float(kind: pa.DataType) -> bool:
    if pa.types.is_floating(kind):
        return True
    return any(_has_float(kind.field(i).type) for i in range(kind.num_fields))


def ts_json(ts: int | None) -> dict[str, Any]:
    return {"ts": ts, "at": None if ts is None else format_ts(ts)}


def tenant_json(tenant: TenantRecord) -> dict[str, Any]:
    return {
        "name": tenant.name,
        "id": tenant.id,
        "state": tenant.state,
        "created_ts": tenant.created_ts,
        "created": format_ts(tenant.created_ts),
        "dropped_ts": tenant.dropped_ts,
        "dropped": None if tenant.dropped_ts is None else format_ts(tenant.dropped_ts),
    }


def table_json(table: TableRecord) -> dict[str, Any]:
    return {
        "table": table.qualified,
        "id": table.id,
        "created_ts": table.created_ts,
        "created": format_ts(table.created_ts),
        "columns": [
            {"name": c.name, "type": c.type, "nullable": c.nullable} for c in table.schema.columns
        ],
        "primary_key": list(table.schema.primary_key),
        "fingerprint": table.schema.fingerprint,
    }


def object_json(table: str, record: ObjectRecord) -> dict[str, Any]:
    return {
        "table": table,
        **record.to_json(),
        "min_time": format_ts(record.min_ts),
        "max_time": format_ts(record.max_ts),
        "created": format_ts(record.created_ts),
    }


def with_times(value: dict[str, Any], *keys: str) -> dict[str, Any]:
    """``value`` with the ISO-8601 time beside each raw ts ``keys`` names
    (``at_ts`` → ``at``, ``created_ts`` → ``created``; None stays None)."""
    times = {
        k.removesuffix("_ts"): None if value.get(k) is None else format_ts(value[k]) for k in keys
    }
    return value | times


def write_json(tenant: str, table: str, result: WriteResult) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "table": table,
        **ts_json(result.ts),
        "upserted": result.upserted,
        "deleted": result.deleted,
        "objects": list(result.object_ids),
    }


# rich tables


def _cells(values: Iterable[Any]) -> list[Text]:
    return [v if isinstance(v, Text) else Text("" if v is None else str(v)) for v in values]


def _count(n: int) -> str:
    return f"{n:,}"


def plural(n: int, noun: str) -> str:
    """``1 key``, ``2 keys``, ``1,000 rows``."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def _table(title: str, caption: str | None = None) -> Table:
    """A table at least as wide as its title and caption, so neither wraps."""
    return Table(title=title, caption=caption, min_width=max(len(title), len(caption or "")))


def tenants_table(tenants: Sequence[TenantRecord]) -> Table:
    table = _table("tenants", caption=f"{len(tenants)} tenant(s)")
    for name in ("name", "id", "state", "created", "dropped"):
        table.add_column(name, overflow="fold")
    for t in tenants:
        state = Text(t.state, style="green" if t.state == "active" else "dim")
        dropped = None if t.dropped_ts is None else format_ts(t.dropped_ts)
        table.add_row(*_cells([t.name, t.id, state, format_ts(t.created_ts), dropped]))
    return table


def tables_table(tenant: str, tables: Sequence[TableRecord]) -> Table:
    table = _table(f"tables of {tenant}", caption=f"{len(tables)} table(s)")
    for name in ("table", "columns", "key", "created"):
        table.add_column(name)
    for t in tables:
        columns = ", ".join(f"{c.name}:{c.type}" for c in t.schema.columns)
        table.add_row(
            *_cells(
                [t.qualified, columns, ", ".join(t.schema.primary_key), format_ts(t.created_ts)]
            )
        )
    return table


def objects_table(tenant: str, objects: Sequence[tuple[str, ObjectRecord]]) -> Table:
    """The object layout of a tenant: what a restore planner will classify."""
    rows = sum(o.rows for _, o in objects)
    size = sum(o.bytes for _, o in objects)
    table = _table(
        f"objects of {tenant}",
        f"{len(objects)} object(s), {_count(rows)} rows, {_count(size)} bytes",
    )
    # Raw ts, not ISO: they are what --as-of takes and what a restore compares.
    # Only the key may shrink (it is long: three ids); --json has it whole.
    for name in ("table", "kind", "rows", "bytes", "min ts", "max ts", "sorted"):
        numeric = name in ("rows", "bytes")
        table.add_column(name, no_wrap=True, justify="right" if numeric else "left")
    table.add_column("key", overflow="ellipsis")
    for qualified, o in objects:
        table.add_row(
            *_cells(
                [
                    qualified,
                    o.kind,
                    _count(o.rows),
                    _count(o.bytes),
                    o.min_ts,
                    o.max_ts,
                    "yes" if o.sorted else "no",
                    o.key,
                ]
            )
        )
    return table


def rows_table(title: str, rows: pa.Table, more: bool, ts: int) -> Table:
    """Query results read at ``ts``; ``more``: the ``--limit`` left rows out (a limited
    read stops there, so it does not know how many)."""
    shown = (
        f"first {_count(rows.num_rows)} rows, more follow"
        if more
        else f"{_count(rows.num_rows)} rows"
    )
    table = _table(title, f"{shown}, ts {ts}")
    for field in rows.schema:
        numeric = (
            pa.types.is_integer(field.type)
            or pa.types.is_floating(field.type)
            or pa.types.is_decimal(field.type)
        )
        table.add_column(field.name, justify="right" if numeric else "left")
    for row in rows.to_pylist():
        table.add_row(*_cells(row.values()))
    return table


def compaction_table(tenant: str, results: Sequence[CompactionResult]) -> Table:
    table = _table(f"compaction of {tenant}")
    for name in ("table", "inputs", "outputs", "rows", "bytes in", "bytes out"):
        table.add_column(name, justify="left" if name == "table" else "right")
    for r in results:
        table.add_row(
            *_cells(
                [
                    r.table,
                    r.inputs,
                    r.outputs,
                    _count(r.rows),
                    _count(r.bytes_in),
                    _count(r.bytes_out),
                ]
            )
        )
    return table
