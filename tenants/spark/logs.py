"""Spark's own log lines, hidden unless asked for.

A Spark JVM that Rewind starts (local mode, or a cluster driver started from
the CLI) prints a dozen lines a user did not ask for: log4j's profile, the
default level, a loopback-address warning, the native-Hadoop warning, and the
JVM's own ``WARNING: Using incubator modules`` (the launcher's default
options, which no log4j level reaches). Rewind's output is what the user reads,
so by default:

- the driver JVM gets :data:`CONFIG` (errors only) as its log4j2 configuration;
- while the JVM starts, its stderr goes through a filter that drops the lines
  above and passes everything else (an error still shows).

``rewind --verbose`` (:func:`show_spark_logs`) keeps Spark's defaults. Under
spark-submit the JVM is already running with the user's configuration, and a
session already active in the process (a notebook's) is not touched either.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CONFIG = Path(__file__).with_name("log4j2.properties")
# What a JVM start prints that says nothing to a Rewind user.
NOISE = re.compile(
    r"^(WARNING: Using incubator modules: jdk\.incubator\.vector"
    r"|Using Spark's default log4j profile: .*"
    r"|Setting default log level to .*"
    r"|To adjust logging level use sc\.setLogLevel.*"
    r"|\S+ \S+ WARN (NativeCodeLoader|Utils): .*)$"
)

_verbose = False


def show_spark_logs(verbose: bool) -> None:
    """Keep Spark's own log output (``--verbose``) or hide it (the default)."""
    global _verbose
    _verbose = verbose


def spark_logs_shown() -> bool:
    return _verbose


def java_options(given: str | None) -> str | None:
    """The driver's ``extraJavaOptions`` with Rewind's log4j2 configuration added,
    or None to leave them as they are (``--verbose``, or the user named a
    configuration of their own)."""
    if _verbose or (given and "log4j2.configurationFile" in given):
        return None
    ours = f"-Dlog4j2.configurationFile={CONFIG.as_uri()}"
    return f"{given} {ours}" if given else ours


@contextmanager
def filtered_jvm_stderr() -> Iterator[None]:
    """Run the body (a JVM start) with file descriptor 2 fed through :data:`NOISE`.

    The JVM inherits descriptor 2 when it starts and keeps it for its life, so
    the filter thread outlives the body: it forwards every other line to the
    original stderr until the JVM closes the pipe. Python's own writes during
    the body pass through the same filter, in order.
    """
    if _verbose:
        yield
        return
    read_end, write_end = os.pipe()
    original = os.dup(2)
    forward = threading.Thread(
        target=_forward, args=(read_end, original), name="rewind-spark-stderr", daemon=True
    )
    forward.start()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        os.dup2(original, 2)


def _forward(read_end: int, target: int) -> None:
    """Copy lines from ``read_end`` to ``target``, dropping :data:`NOISE`."""
    pending = b""
    with os.fdopen(read_end, "rb", buffering=0) as source:
        while chunk := source.read(65536):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            _write(target, [line for line in lines if not _noise(line)])
        if pending and not _noise(pending):
            _write(target, [pending])
    os.close(target)


def _noise(line: bytes) -> bool:
    return NOISE.match(line.decode("utf-8", "replace").rstrip("\r")) is not None


def _write(target: int, lines: list[bytes]) -> None:
    if not lines:
        return
    data = memoryview(b"".join(line + b"\n" for line in lines))
    try:
        while data:
            data = data[os.write(target, data) :]
    except OSError:
        pass  # the stderr it was started with is gone (a test's capture): drop it
