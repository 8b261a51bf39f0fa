"""SQLite, the embedded catalog backend: WAL mode, ``BEGIN IMMEDIATE`` writes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tenants.errors import StorageError


def connect(path: str) -> sqlite3.Connection:
    """Open ``path`` (absolute, or relative to the working directory) in WAL mode.

    ``isolation_level=None`` hands transaction control to the catalog, which
    issues ``BEGIN IMMEDIATE`` itself so a write transaction takes the write
    lock up front instead of failing to upgrade a read lock mid-way.
    """
    try:
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=60.0)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=60000")
    except (OSError, sqlite3.Error) as e:
        raise StorageError(f"cannot open catalog sqlite:///{path}: {e}") from e
    return conn
