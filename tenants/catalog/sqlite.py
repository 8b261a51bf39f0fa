"""SQLite, the embedded catalog backend: WAL mode, ``BEGIN IMMEDIATE`` writes.

A writer waits up to ``BUSY_TIMEOUT_S`` for the write lock; past that the
catalog raises :class:`~tenants.errors.CatalogBusy`, naming the process that
holds the lock when the kernel can say (see :func:`lock_holder`). Readers
never wait: in WAL mode they read the last committed state beside a writer.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import sys
from pathlib import Path
from typing import NoReturn

from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_random_exponential

from tenants.errors import CatalogBusy, InvalidArgument, StorageError
from tenants.redaction import redact

BUSY_TIMEOUT_S = 60.0
# SQLite's WAL write lock: one byte of the -shm file at offset 120
# (UNIX_SHM_BASE = (22 + SQLITE_SHM_NLOCK) * 4, WAL_WRITE_LOCK = 0), held with
# a POSIX fcntl lock for as long as a write transaction is open.
WAL_WRITE_LOCK_BYTE = 120
PREFIX = "sqlite:///"
VALID = (
    "sqlite:///relative/path/catalog.db, sqlite:////absolute/path/catalog.db "
    "or postgresql://user@host:port/database"
)


def sqlite_path(uri: str) -> str:
    """The file a ``sqlite:///`` catalog URI names (see ``open_catalog``), checked."""

    def refuse(why: str) -> NoReturn:
        raise InvalidArgument(f"invalid catalog {redact(uri)!r}: {why}; use {VALID}")

    if not uri.startswith(PREFIX):
        if uri.startswith("sqlite:"):
            refuse("a sqlite catalog URI starts with sqlite:/// (three slashes) and takes no host")
        raise InvalidArgument(
            f"unsupported catalog {redact(uri)!r}: only SQLite and PostgreSQL catalogs are supported; use {VALID}"
        )
    path = uri[len(PREFIX) :]
    if not path.strip():
        refuse("it names no file")
    if path == ":memory:":
        refuse(
            "an in-memory catalog would vanish with the process (and with it the record of "
            "every object in the warehouse)"
        )
    if "?" in path or "#" in path:
        refuse("the URI takes no ?query or #fragment")
    if path.endswith("/") or Path(path).is_dir():
        refuse("it names a directory, not a catalog file")
    return path


def connect(path: str) -> sqlite3.Connection:
    """Open ``path`` (absolute, or relative to the working directory) in WAL mode.

    ``isolation_level=None`` hands transaction control to the catalog, which
    issues ``BEGIN IMMEDIATE`` itself so a write transaction takes the write
    lock up front instead of failing to upgrade a read lock mid-way.
    """
    timeout = BUSY_TIMEOUT_S
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=timeout)
        _enter_wal(conn, timeout)
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
    except sqlite3.OperationalError as e:
        busy = busy_error(e, path, timeout)
        if busy is not None:
            raise busy from e
        raise StorageError(f"cannot open catalog sqlite:///{path}: {e}") from e
    except (OSError, sqlite3.Error) as e:
        raise StorageError(f"cannot open catalog sqlite:///{path}: {e}") from e
    return conn


def _enter_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """``PRAGMA journal_mode=WAL``, retried while another connection holds the file.

    Switching a fresh file to WAL needs an exclusive lock, and SQLite answers
    SQLITE_BUSY at once there instead of calling its busy handler (waiting
    could deadlock), so processes opening a new catalog together would fail.
    """
    for attempt in Retrying(
        retry=retry_if_exception(lambda e: _is_busy(e)),
        wait=wait_random_exponential(multiplier=0.01, max=0.5),
        stop=stop_after_delay(timeout),
        reraise=True,
    ):
        with attempt:
            conn.execute("PRAGMA journal_mode=WAL")


def _is_busy(error: BaseException) -> bool:
    return isinstance(error, sqlite3.OperationalError) and str(
        getattr(error, "sqlite_errorname", "")
    ).startswith("SQLITE_BUSY")


def busy_error(error: BaseException, path: str, timeout: float | None = None) -> CatalogBusy | None:
    """``CatalogBusy`` for SQLite's "database is locked" (by its code, never its text)."""
    if not _is_busy(error):
        return None
    waited = BUSY_TIMEOUT_S if timeout is None else timeout
    holder = lock_holder(path)
    by = f"held by {holder}" if holder else "held by another process or connection"
    return CatalogBusy(
        f"catalog sqlite:///{path} busy, retry: its write lock is {by} and was not "
        f"released within {waited:g} s"
    )


def lock_holder(path: str) -> str | None:
    """Who holds the catalog's WAL write lock, as ``pid N on HOST (command)``, if known.

    Asked of the kernel (Linux ``/proc/locks``) rather than of a record the
    holder writes: that costs writers nothing and is never stale. It reads no
    file descriptor of the database: closing one would drop this process's own
    POSIX locks on it, which SQLite relies on. ``None`` off Linux, when the
    holder is gone, or when it is this very process (the kernel lists one
    owner per process).
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        info = os.stat(f"{path}-shm")
        inode = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
        with open("/proc/locks") as locks:
            for line in locks:
                fields = line.split()
                # "1: POSIX  ADVISORY  WRITE 1234 fe:00:2146885 120 120"
                if (
                    len(fields) >= 8
                    and fields[1] == "POSIX"
                    and fields[3] == "WRITE"
                    and fields[5] == inode
                    and int(fields[6]) <= WAL_WRITE_LOCK_BYTE <= _end(fields[7])
                ):
                    return _describe(int(fields[4]))
    except (OSError, ValueError):
        return None
    return None


def _end(field: str) -> int:
    return sys.maxsize if field == "EOF" else int(field)


def _describe(pid: int) -> str:
    where = f"pid {pid} on {socket.gethostname()}"
    if pid == os.getpid():
        return f"{where} (this process)"
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            command = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return where
    if len(command) > 120:
        command = command[:117] + "..."
    return f"{where} ({command})" if command else where
