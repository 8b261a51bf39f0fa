"""Structured events: one line per job step, for a log pipeline that follows a job.

Every step of a job (a restore's plan, rewrite, verify, install and swap; a
backup's copy; each phase of a GC pass; a load; a compaction) ends in one
:class:`StepEvent` on the ``rewind.events`` logger, at INFO, with the event as
the record's ``event`` attribute: which job (kind, tenant, job id), which step,
how it ended, how long it took and what it moved. A step's start and end make
one event, at its end, so no line is left without its outcome.

Which job a step belongs to lives in a context variable (:func:`job`), set
where the job starts, so the layers below need not thread it through: the
same design as progress (tenants.progress). With no handler listening, a step
costs two clock reads and a level check.

Nothing is printed unless asked: ``rewind --log-format json`` prints each
event as one JSON object on stderr (:class:`EventFormatter`), and a program
using the API attaches a handler to the logger (docs/operations.md)::

    handler = logging.StreamHandler()
    handler.setFormatter(EventFormatter())
    events = logging.getLogger("rewind.events")
    events.addHandler(handler)
    events.setLevel(logging.INFO)

An error is redacted (tenants.redaction) and cut to its first line before it
becomes part of an event, so no handler ever sees a secret through one.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from tenants.redaction import redact

LOGGER = "rewind.events"
log = logging.getLogger(LOGGER)

Outcome = Literal["ok", "failed", "stopped"]
JobKind = Literal[
    "restore", "table_restore", "backup", "backup_restore", "gc", "compaction", "load"
]


@dataclass(frozen=True)
class StepEvent:
    """One step of a job, ended: the line a log pipeline reads.

    ``ts`` is when the step ended (ISO-8601, UTC); it began ``seconds``
    before. ``bytes``, ``rows``, ``objects`` and ``table`` are None where the
    step does not know them (a verify moves no bytes); ``error`` and
    ``error_type`` only on a failed or stopped step, the error redacted and
    one line.
    """

    ts: str
    kind: str | None
    tenant: str | None
    job_id: str | None
    step: str
    outcome: Outcome
    seconds: float
    bytes: int | None = None
    rows: int | None = None
    objects: int | None = None
    table: str | None = None
    error: str | None = None
    error_type: str | None = None
    event: Literal["step"] = "step"

    def to_dict(self) -> dict[str, Any]:
        """Every field, always (None as null), in a fixed order: one schema per line."""
        return {
            "event": self.event,
            "ts": self.ts,
            "kind": self.kind,
            "tenant": self.tenant,
            "job_id": self.job_id,
            "step": self.step,
            "outcome": self.outcome,
            "seconds": self.seconds,
            "bytes": self.bytes,
            "rows": self.rows,
            "objects": self.objects,
            "table": self.table,
            "error": self.error,
            "error_type": self.error_type,
        }

    def to_json(self) -> str:
        """One line of JSON."""
        return json.dumps(self.to_dict(), ensure_ascii=False)

    def describe(self) -> str:
        """The event in words: the log record's message, for a plain handler."""
        job = " ".join(
            part
            for part in (self.kind, self.tenant, f"job {self.job_id}" if self.job_id else None)
            if part
        )
        counts = ", ".join(
            f"{value} {name}"
            for name, value in (
                ("bytes", self.bytes),
                ("rows", self.rows),
                ("objects", self.objects),
            )
            if value is not None
        )
        said = f"{job or 'job'}: {self.step} {self.outcome} in {self.seconds:.3f} s"
        if self.table:
            said += f" ({self.table})"
        if counts:
            said += f" [{counts}]"
        if self.error:
            said += f": {self.error}"
        return said


@dataclass(frozen=True)
class JobScope:
    """Which job the steps begun in this context belong to."""

    kind: JobKind
    tenant: str | None = None
    job_id: str | None = None


_scope: ContextVar[JobScope | None] = ContextVar("rewind_event_scope", default=None)


@contextmanager
def job(kind: JobKind, tenant: str | None = None, job_id: str | None = None) -> Iterator[JobScope]:
    """The steps begun inside the body (in this context) belong to this job.

    Nested, the inner scope wins: a restore job's own scope (with its id)
    inside the caller's (which knew only the tenant).
    """
    scope = JobScope(kind, tenant, job_id)
    token = _scope.set(scope)
    try:
        yield scope
    finally:
        _scope.reset(token)


def current() -> JobScope | None:
    """The job of this context, if any."""
    return _scope.get()


@dataclass
class Measure:
    """What a step tells its event while it runs: what it moved, and whether it
    stopped short (a GC phase out of time) rather than finishing."""

    bytes: int | None = None
    rows: int | None = None
    objects: int | None = None
    table: str | None = None
    stopped: bool = False
    about: JobScope | None = None  # the job, when the step itself finds it out (a plan names it)


@contextmanager
def step(name: str, *, stops: tuple[type[BaseException], ...] = ()) -> Iterator[Measure]:
    """A step of the current job: one :class:`StepEvent` when the body ends.

    Its outcome is ``ok``; ``stopped`` if the body set ``Measure.stopped`` or
    raised one of ``stops`` (a stop on request) or KeyboardInterrupt; else,
    if it raised, ``failed`` with the error. The exception propagates.
    """
    measure = Measure()
    started = time.perf_counter()
    try:
        yield measure
    except BaseException as e:
        stopped = isinstance(e, (*stops, KeyboardInterrupt, SystemExit))
        _emit(name, measure, started, "stopped" if stopped else "failed", e)
        raise
    _emit(name, measure, started, "stopped" if measure.stopped else "ok", None)


def _emit(
    name: str, measure: Measure, started: float, outcome: Outcome, error: BaseException | None
) -> None:
    if not log.isEnabledFor(logging.INFO):
        return
    seconds = time.perf_counter() - started
    scope = measure.about or _scope.get()
    event = StepEvent(
        ts=iso_now(),
        kind=scope.kind if scope else None,
        tenant=scope.tenant if scope else None,
        job_id=scope.job_id if scope else None,
        step=name,
        outcome=outcome,
        seconds=round(seconds, 6),
        bytes=measure.bytes,
        rows=measure.rows,
        objects=measure.objects,
        table=measure.table,
        error=None if error is None else one_line(str(error)) or type(error).__name__,
        error_type=None if error is None else type(error).__name__,
    )
    log.info("%s", event.describe(), extra={"event": event})


def one_line(text: str) -> str:
    """``text`` redacted, its first non-blank line, spaces collapsed."""
    for line in redact(text).splitlines():
        if line.strip():
            return " ".join(line.split())
    return ""


def iso_now() -> str:
    """Now as ISO-8601 in UTC, to the millisecond: ``2026-11-28T10:00:00.123Z``."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class EventFormatter(logging.Formatter):
    """Each record as one line of JSON: a step event as :meth:`StepEvent.to_json`;
    any other record (a warning) as ``{"event": "log", "ts", "level",
    "logger", "message"}``, its message redacted and one line."""

    def format(self, record: logging.LogRecord) -> str:
        event = getattr(record, "event", None)
        if isinstance(event, StepEvent):
            return event.to_json()
        return json.dumps(
            {
                "event": "log",
                "ts": datetime.fromtimestamp(record.created, UTC)
                .isoformat(timespec="milliseconds")
                .replace("+00:00", "Z"),
                "level": record.levelname.lower(),
                "logger": record.name,
                "message": one_line(record.getMessage()),
            },
            ensure_ascii=False,
        )
