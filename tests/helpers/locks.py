"""Another process holding the catalog's write lock, for the busy-catalog tests."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

HOLD_WRITE_LOCK = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE clock SET last_ts = last_ts")
print("held", flush=True)
sys.stdin.read()  # until the test closes our stdin
conn.execute("ROLLBACK")
"""


@contextmanager
def write_lock_held(catalog_path: str) -> Iterator[int]:
    """Another process holding the catalog's write lock (as a long transaction would)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_WRITE_LOCK, catalog_path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield holder.pid
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
