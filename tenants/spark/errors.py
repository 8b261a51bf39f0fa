"""A failed Spark task, told as Rewind's own error rather than a Py4J stack trace.

Spark hands a Python task's failure to the driver as a Java exception whose
text carries the worker (``Lost task 0.3 in stage 1.0 (TID 7) (10.0.0.5
executor 2)``) and the Python traceback. This module reads those two back: the
Rewind error class a task raised keeps its class on the driver, anything else
becomes a :class:`~tenants.errors.TaskFailed` naming the worker and the
exception. Messages are cut to one line.
"""

from __future__ import annotations

import re

from tenants import errors
from tenants.errors import ClusterMisconfigured, RewindError, TaskFailed

_WHERE = re.compile(r"Lost task [\d.]+ in stage [\d.]+ \(TID \d+\) \(([^)]*)\)")
_REWIND = re.compile(r"^tenants\.errors\.(\w+): (.*)$", re.MULTILINE)
_PY_ERROR = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failed)): ?(.*)$")
_MISSING_MODULE = re.compile(r"No module named '([\w.]+)'")
MAX_MESSAGE = 500


def worker_of(error: BaseException) -> str | None:
    """``host executor N`` of the task attempt that failed last, if Spark said."""
    found = _WHERE.findall(str(error))
    return found[-1] if found else None


def python_error(error: BaseException) -> str | None:
    """The last Python exception line of the task's traceback (``Type: message``)."""
    text = str(error)
    start = text.rfind("Traceback (most recent call last):")
    if start < 0:
        return None
    last = None
    for line in text[start:].splitlines()[1:]:
        if line.startswith(("\tat ", "\t... ")):
            break
        match = _PY_ERROR.match(line.strip()) if not line.startswith(" ") else None
        if match:
            last = f"{match.group(1)}: {match.group(2)}".rstrip(": ")
    return last


def task_failure(error: BaseException) -> str:
    """One line: where a task failed and with what (for messages)."""
    where = worker_of(error)
    lines = str(error).strip().splitlines()
    what = python_error(error) or (lines[0] if lines else type(error).__name__)
    return (f"on {where}: " if where else "") + what[:MAX_MESSAGE]


def translate_task_error(error: BaseException, context: str) -> RewindError:
    """The driver-side error for a failed Spark job; ``context`` says what the job was
    (``restore job J of tenant T``).

    A Rewind error raised in a task keeps its class and message (tasks put the
    object and worker in it); a worker that cannot import a module is a
    :class:`ClusterMisconfigured`; anything else is a :class:`TaskFailed`.
    """
    if isinstance(error, RewindError):
        return error
    text = str(error)
    matches = _REWIND.findall(text)
    if matches:
        name, message = matches[-1]
        cls = getattr(errors, name, None)
        if isinstance(cls, type) and issubclass(cls, RewindError):
            told = message if message.startswith(context) else f"{context}: {message}"
            return cls(told[: MAX_MESSAGE * 2])
    failure = task_failure(error)
    missing = _MISSING_MODULE.search(python_error(error) or "")
    if missing:
        return ClusterMisconfigured(
            f"{context}: a Spark worker cannot import {missing.group(1)} ({failure}); "
            "give the workers a Python with pyarrow and boto3 (docs/cluster.md)"
        )
    return TaskFailed(f"{context}: a Spark task failed {failure}")
