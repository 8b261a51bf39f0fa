"""Job pins: what a restore job reads or installs, held against GC.

A job pins the source by time: when it starts it writes, per source table, the
bases the table it installs will inherit (``tenants.catalog.inherited``): a
constant number of rows, however many objects they reach. Only the objects it
rewrites (which straddle S, so no base reaches them) get a ``job_pins`` row,
naming job, source table, object and action ``rewrite``. GC keeps every
pinned object and everything an unreleased base reaches; pins and uninstalled
bases go in the transaction that installs or cancels the job.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tenants.catalog.base import Tx
from tenants.catalog.engine.table_restore import release_locks
from tenants.catalog.inherited import delete_uninstalled_bases, view_select
from tenants.catalog.objects import MEMBER_COLUMNS, RECORD_COLUMNS


def pin_rewrites(tx: Tx, job_id: str, inputs: Sequence[tuple[str, str]]) -> None:
    """Pin each ``(source table id, object id)`` the job rewrites."""
    tx.insert_many(
        "job_pins",
        ("job_id", "table_id", "object_id", "action"),
        ((job_id, table_id, object_id, "rewrite") for table_id, object_id in inputs),
    )


def pinned_member_tuples(tx: Tx, job_id: str, action: str | None = None) -> list[tuple[Any, ...]]:
    """A job's pins (of ``action``, if given) as (source table id, action, then the
    object's ``RECORD_COLUMNS``) tuples, in no particular order."""
    sql = (
        f"SELECT p.table_id, p.action, {RECORD_COLUMNS} FROM job_pins p "
        "JOIN objects o ON o.id = p.object_id WHERE p.job_id = ?"
    )
    params: tuple[str, ...] = (job_id,)
    if action is not None:
        sql += " AND p.action = ?"
        params = (job_id, action)
    return tx.tuples(sql, params)


def inherited_member_tuples(tx: Tx, table_id: str) -> list[tuple[Any, ...]]:
    """What ``table_id`` inherits through its bases (written when its job started,
    so this answers before the install too), as ``MEMBER_COLUMNS`` tuples."""
    return tx.tuples(*view_select(tx, table_id, MEMBER_COLUMNS, own=False))


def inherited_key_sizes(tx: Tx, table_id: str) -> list[tuple[str, int]]:
    """(key, bytes) of what ``table_id`` inherits through its bases."""
    sql, params = view_select(tx, table_id, "o.object_key, o.byte_size", own=False)
    return [(key, int(size)) for key, size in tx.tuples(sql, params)]


def release_pins(tx: Tx, job_id: str) -> None:
    """Drop a job's pins, its bases that no install made a table's, and its holds
    on the tables and database it replaces. Only in the transaction that makes
    the job done or cancelled: until then GC must keep what the job reads or
    installs, and writers must keep off what it replaces."""
    tx.execute("DELETE FROM job_pins WHERE job_id = ?", (job_id,))
    delete_uninstalled_bases(tx, job_id)
    release_locks(tx, job_id)
