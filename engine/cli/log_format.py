"""``--log-format text|json`` (or ``REWIND_LOG_FORMAT``): what stderr carries.

``text``, the default, changes nothing: stderr holds the progress bars on a
terminal, an ``error:`` line, a ``warning:`` line. ``json`` is for a log
pipeline: every job step prints one JSON object on its own line of stderr as
it ends (tenants.observe.events, docs/operations.md "Structured events"), the
progress bars are off, and whatever else the command says on stderr (its
error, a warning, a Python warning or log record at WARNING) is one JSON
object on its own line too, so that every line of stderr parses. stdout is
untouched: the command's result, as text or ``--json``.

The word is checked as ``--executor`` is (engine.cli.choices): the check
raises :class:`~tenants.errors.InvalidArgument`, which the root command
reports in one line, exit 1. It lives here, not in engine.cli.choices, as
every command line parses it: this module imports nothing heavier than
``logging``.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Annotated, Literal, get_args

import typer

from tenants.errors import InvalidArgument
from tenants.observe.events import LOGGER, EventFormatter, iso_now, one_line

LogFormat = Literal["text", "json"]

JSON_STDERR: ContextVar[bool] = ContextVar("rewind_json_stderr", default=False)
"""Set while a command runs under ``--log-format json`` (the root callback)."""


def check_log_format(text: str) -> LogFormat:
    """``text`` as a log format.

    Raises:
        InvalidArgument: not ``text`` or ``json``.
    """
    if text not in get_args(LogFormat):
        raise InvalidArgument(f"unknown log format {text!r}: use text or json")
    return text  # type: ignore[return-value]


LogFormatOption = Annotated[
    LogFormat,
    typer.Option(
        "--log-format",
        envvar="REWIND_LOG_FORMAT",
        parser=check_log_format,
        help="text (default), or json: each job step (a restore's plan, rewrite, verify, "
        "install, swap; a GC phase...) as one JSON line on stderr as it ends, and no progress "
        "bars (also $REWIND_LOG_FORMAT; docs/operations.md).",
        show_default=False,
    ),
]


class _Stderr(logging.Handler):
    """One line per record on whatever ``sys.stderr`` is when the record comes (a
    test runner swaps it)."""

    def __init__(self, level: int = logging.NOTSET) -> None:
        super().__init__(level)
        self.setFormatter(EventFormatter())

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
        except Exception:
            self.handleError(record)


@contextmanager
def structured_stderr(log_format: LogFormat) -> Iterator[None]:
    """Under ``json``, for the body: step events (INFO) and any other record at
    WARNING, each one JSON line on stderr; Python warnings go through logging.
    Under ``text``, nothing changes."""
    if log_format != "json":
        yield
        return
    events = logging.getLogger(LOGGER)
    root = logging.getLogger()
    saved = events.level, events.propagate
    handler, others = _Stderr(), _Stderr(logging.WARNING)
    events.addHandler(handler)
    events.setLevel(logging.INFO)
    events.propagate = False  # once, through its own handler
    root.addHandler(others)
    logging.captureWarnings(True)
    token = JSON_STDERR.set(True)
    try:
        yield
    finally:
        JSON_STDERR.reset(token)
        logging.captureWarnings(False)
        root.removeHandler(others)
        events.removeHandler(handler)
        events.setLevel(saved[0])
        events.propagate = saved[1]


def stderr_json() -> bool:
    """Whether stderr is JSON lines now (``--log-format json``)."""
    return JSON_STDERR.get()


def print_traceback_line(kind: str, frames: str) -> None:
    """``--verbose`` under ``json``: the traceback as one JSON line on stderr,
    ``{"event": "traceback", "ts", "error_type", "traceback"}``, its text already
    redacted by the caller (a pipeline keeps every stderr line parseable)."""
    line = {"event": "traceback", "ts": iso_now(), "error_type": kind, "traceback": frames}
    print(json.dumps(line, ensure_ascii=False), file=sys.stderr, flush=True)


def print_line(event: Literal["error", "warning"], message: str, kind: str | None = None) -> None:
    """An error or a warning as one JSON line on stderr: ``{"event", "ts",
    "error_type", "error"}`` or ``{"event", "ts", "message"}``, redacted."""
    said = one_line(message)
    line: dict[str, object] = {"event": event, "ts": iso_now()}
    if event == "error":
        line |= {"error_type": kind, "error": said}
    else:
        line["message"] = said
    print(json.dumps(line, ensure_ascii=False), file=sys.stderr, flush=True)
