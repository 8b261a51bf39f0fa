"""Turning store results into rich tables for people and JSON for machines.

Every cell is built as a ``rich.text.Text``, never as markup, because cells hold
user data and error messages that may contain ``[brackets]``. Consoles are made
per call rather than at import, so they follow whatever ``sys.stdout`` is at the
time (a terminal, a pipe, or a test runner's capture).

Human output is sized for people (docs/decisions.md, "Human output"): tables
fit the terminal, or 100 columns off one, and wrap rather than cut (``--wide``:
no limit, a row a line); times are local, with their zone and µs
(:func:`local_time`); sizes are in units of 1024 (:func:`human_bytes`). JSON
keeps UTC times beside raw ts and byte counts, whatever the machine's zone.
"""

from __future__ import annotations

import base64
import json
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime, time
from decimal import Decimal
from itertools import groupby
from typing import TYPE_CHECKING, Any

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from engine.cli import log_format
from engine.cli.render_layout import (
    WIDE,
    Stack,
    console_width,
    fixed,
    human_bytes,
    local_time,
    local_time_or_blank,
    titled,
    wrapping,
)
from tenants.redaction import redact
from tenants.times import format_duration, format_ts

if TYPE_CHECKING:
    import pyarrow as pa
    from rich.traceback import Trace

    from tenants.compaction import CompactionResult
    from tenants.objects.record import ObjectRecord
    from tenants.tenancy import TableRecord, TenantRecord
    from tenants.writes import WriteResult


def stdout() -> Console:
    return Console(highlight=False, width=console_width(sys.stdout))


def stderr() -> Console:
    return Console(stderr=True, highlight=False, width=console_width(sys.stderr))


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


def print_error(message: str, kind: str | None = None) -> None:
    """The one-line red error every failed command ends with, on stderr (under
    ``--log-format json``, one JSON line naming the error's ``kind``).

    ``soft_wrap`` keeps it one line whatever the terminal width, so scripts
    can grep it and tests can count it. Any secret in it is redacted
    (tenants.redaction): an error often quotes the URI it could not open.
    """
    if log_format.stderr_json():
        log_format.print_line("error", message, kind)
        return
    one_line = " ".join(redact(message).split())
    stderr().print(Text(f"error: {one_line}", style="bold red"), soft_wrap=True)


def print_error_json(kind: str, message: str) -> None:
    """The error as one JSON line on stdout, for ``--json``: ``{"error": {"type", "message"}}``.

    stdout, unlike the text form: under ``--json`` a program reads stdout and
    gets exactly one JSON object whatever happened, a result or an error; the
    exit status says which. Redacted as :func:`print_error` is.
    """
    one_line = " ".join(redact(message).split())
    print(json_text({"error": {"type": kind, "message": one_line}}), file=sys.stdout, flush=True)


def print_traceback(error: BaseException) -> None:
    """``--verbose``: ``error``'s traceback on stderr, its chain's messages redacted.

    A cause's message is a driver's own text (SQLAlchemy's, libpq's), which may
    quote the URI it was given, password and all; no locals are shown, as they
    can hold credentials (S3 settings).
    """
    if log_format.stderr_json():  # --log-format json: one JSON line, no rich panel
        import traceback

        frames = "".join(traceback.format_exception(error))
        log_format.print_traceback_line(type(error).__name__, redact(frames))
        return
    from rich.traceback import Traceback

    trace = Traceback.extract(type(error), error, error.__traceback__, show_locals=False)
    stderr().print(Traceback(_redacted_trace(trace), show_locals=False))


def _redacted_trace(trace: Trace) -> Trace:
    for stack in trace.stacks:
        stack.exc_value = redact(stack.exc_value)
        stack.notes = [redact(note) for note in stack.notes]
        if stack.syntax_error is not None:
            stack.syntax_error.line = redact(stack.syntax_error.line)
        stack.exceptions = [_redacted_trace(inner) for inner in stack.exceptions]
    return trace


def warn(message: str) -> None:
    """One yellow ``warning:`` line on stderr: something the user should act on,
    while the command itself succeeded (under ``--log-format json``, one JSON line)."""
    if log_format.stderr_json():
        log_format.print_line("warning", message)
        return
    one_line = " ".join(redact(message).split())
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
    so the whole result is never held. If the stream fails after rows were
    printed, the array is closed before the error propagates: stdout is then
    that array and, on the last line, the error object (docs/engines.md)."""
    import pyarrow as pa

    first = True
    try:
        for part in [rows] if isinstance(rows, pa.Table) else rows:
            if _may_hold_floats(part.schema):
                lines = [json_text(row) for row in part.to_pylist()]
            else:  # no float anywhere: skip the walk over every value
                lines = [
                    json.dumps(r, default=json_default, allow_nan=False) for r in part.to_pylist()
                ]
            if lines:
                sys.stdout.write(("[\n" if first else ",\n") + ",\n".join(lines))
                first = False
    except Exception:
        # A stream that fails after rows were printed: close the array, so what
        # precedes the error object the command ends with is whole JSON.
        if not first:
            print("\n]", flush=True)
        raise
    print("[]" if first else "\n]")


def _may_hold_floats(schema: pa.Schema) -> bool:
    """True if any column, or any field nested in one, is a float type."""
    return any(_has_float(field.type) for field in schema)


def _has_float(kind: pa.DataType) -> bool:
    import pyarrow as pa

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


# rich tables, laid out by engine.cli.render_layout's rules


def _cells(values: Iterable[Any]) -> list[Text]:
    return [v if isinstance(v, Text) else Text("" if v is None else str(v)) for v in values]


def _count(n: int) -> str:
    return f"{n:,}"


def plural(n: int, noun: str) -> str:
    """``1 key``, ``2 keys``, ``1,000 rows``."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


_TENANT_TIMES = Stack(("created", "dropped"), header="times", labels=("created", "dropped"))


def tenants_table(
    tenants: Sequence[TenantRecord], *, objectives: Mapping[str, int] | None = None
) -> Table:
    """One tenant a row, named ``name@id`` (what ``undrop`` and every command
    take). When one was dropped, its times stack in one cell, labelled, so a
    tenant still fits on one line. ``objectives`` (recovery point objectives in
    µs by name) adds their column, shown for active tenants."""
    table = titled("tenants", caption=f"{len(tenants)} tenant(s)")
    any_dropped = any(t.dropped_ts is not None for t in tenants)
    wrapping(table, "tenant")
    fixed(table, "state")
    if objectives is not None:
        fixed(table, "rpo", right=True)
    if any_dropped:
        _TENANT_TIMES.add_to(table)
    else:
        wrapping(table, "created")
    for t in tenants:
        state = Text(t.state, style="green" if t.state == "active" else "dim")
        cells: list[Any] = [t.ref, state]
        if objectives is not None:
            rpo = objectives.get(t.name) if t.state == "active" else None
            cells.append("" if rpo is None else format_duration(rpo))
        if any_dropped:
            cells += _TENANT_TIMES.cells(
                local_time(t.created_ts), local_time_or_blank(t.dropped_ts)
            )
        else:
            cells.append(local_time(t.created_ts))
        table.add_row(*_cells(cells))
    return table


def tables_table(tenant: str, tables: Sequence[TableRecord]) -> Table:
    table = titled(f"tables of {tenant}", caption=f"{len(tables)} table(s)")
    for name in ("table", "columns", "key", "created"):
        wrapping(table, name)
    for t in tables:
        columns = ", ".join(f"{c.name}:{c.type}" for c in t.schema.columns)
        table.add_row(
            *_cells(
                [t.qualified, columns, ", ".join(t.schema.primary_key), local_time(t.created_ts)]
            )
        )
    return table


def objects_tables(tenant: str, objects: Sequence[tuple[str, ObjectRecord]]) -> list[Table]:
    """The object layout of a tenant: what a restore planner will classify. One
    table per DB.TABLE, named in its title; under ``--wide``, one table with a
    ``table`` column, every object on one line.

    An object's first and last ts are shown as times (exact to the µs, so
    ``--as-of`` takes them back), the first over the last in one cell; the
    key wraps whole (``--json`` has every field as the catalog holds it).
    """
    if WIDE.get() or not objects:
        return [_objects_table(f"objects of {tenant}", objects, with_table=True)]
    return [
        _objects_table(f"objects of {tenant}: {qualified}", list(group), with_table=False)
        for qualified, group in groupby(
            sorted(objects, key=lambda pair: pair[0]), key=lambda pair: pair[0]
        )
    ]


_OBJECT_TIMES = Stack(("first time", "last time"))


def _objects_table(
    title: str, objects: Sequence[tuple[str, ObjectRecord]], *, with_table: bool
) -> Table:
    rows = sum(o.rows for _, o in objects)
    size = sum(o.bytes for _, o in objects)
    table = titled(title, f"{len(objects)} object(s), {_count(rows)} rows, {human_bytes(size)}")
    if with_table:
        wrapping(table, "table")
    fixed(table, "kind")
    fixed(table, "rows", right=True)
    fixed(table, "size", right=True)
    _OBJECT_TIMES.add_to(table)
    fixed(table, "sorted")
    wrapping(table, "key")
    for qualified, o in objects:
        cells = [qualified] if with_table else []
        cells += [o.kind, _count(o.rows), human_bytes(o.bytes)]
        cells += _OBJECT_TIMES.cells(local_time(o.min_ts), local_time(o.max_ts))
        cells += ["yes" if o.sorted else "no", o.key]
        table.add_row(*_cells(cells))
    return table


def rows_table(title: str, rows: pa.Table, more: bool, ts: int) -> Table:
    """Query results read at ``ts``; ``more``: the ``--limit`` left rows out (a limited
    read stops there, so it does not know how many)."""
    import pyarrow as pa

    counted = plural(rows.num_rows, "row")
    shown = f"first {counted}, more follow" if more else counted
    table = titled(title, f"{shown}, ts {ts}")
    for field in rows.schema:
        numeric = (
            pa.types.is_integer(field.type)
            or pa.types.is_floating(field.type)
            or pa.types.is_decimal(field.type)
        )
        wrapping(table, field.name, right=numeric)
    for row in rows.to_pylist():
        table.add_row(*_cells(row.values()))
    return table


def compaction_table(tenant: str, results: Sequence[CompactionResult]) -> Table:
    table = titled(f"compaction of {tenant}")
    wrapping(table, "table")
    for name in ("inputs", "outputs", "rows", "size in", "size out"):
        fixed(table, name, right=True)
    for r in results:
        table.add_row(
            *_cells(
                [
                    r.table,
                    r.inputs,
                    r.outputs,
                    _count(r.rows),
                    human_bytes(r.bytes_in),
                    human_bytes(r.bytes_out),
                ]
            )
        )
    return table
