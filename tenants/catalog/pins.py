"""Job pins: the objects a restore job reads or installs, held against GC.

A ``job_pins`` row names a job, a source table, an object and the object's
action at the job's point (``reuse`` or ``rewrite``; ``legacy`` for a pin
written before pins named their action). Pins are written once, in the
transaction that starts the job, straight from live membership; they go in
the transaction that installs or cancels the job. GC keeps every pinned
object, so while a job runs nothing it needs can be collected.
"""

from __future__ import annotations

from typing import Any

from tenants.catalog.base import Tx
from tenants.catalog.objects import LIVE_MEMBERS, RECORD_COLUMNS
from tenants.catalog.restore_plan import ACTION_AT


def pin_table_members(tx: Tx, job_id: str, table_id: str, at_ts: int) -> None:
    """Pin the table's live members with rows at or before ``at_ts``, each with its
    action at ``at_ts``: one ``INSERT ... SELECT``, never a row through Python.

    Call it in the job's starting transaction; it reads live membership, which GC
    never collects from, so an object GC is deleting cannot be pinned.
    """
    tx.execute(
        "INSERT INTO job_pins (job_id, table_id, object_id, action) "
        f"SELECT ?, m.table_id, m.object_id, {ACTION_AT} {LIVE_MEMBERS} AND o.min_ts <= ?",
        (job_id, at_ts, at_ts, table_id, at_ts),
    )


def pinned_totals(tx: Tx, job_id: str) -> dict[tuple[str, str], tuple[int, int]]:
    """(objects, bytes) of a job's pins per (source table id, action)."""
    return {
        (table_id, action): (int(count), int(size))
        for table_id, action, count, size in tx.tuples(
            "SELECT p.table_id, p.action, COUNT(*), SUM(o.byte_size) FROM job_pins p "
            "JOIN objects o INDEXED BY objects_plan ON o.id = p.object_id "
            "WHERE p.job_id = ? GROUP BY p.table_id, p.action",
            (job_id,),
        )
    }


def pinned_rewrite_ids(tx: Tx, job_id: str) -> set[str]:
    """The ids of the objects a job pinned to rewrite."""
    return {
        r[0]
        for r in tx.tuples(
            "SELECT object_id FROM job_pins WHERE job_id = ? AND action = 'rewrite'",
            (job_id,),
        )
    }


def has_legacy_pins(tx: Tx, job_id: str) -> bool:
    """Whether the job was pinned before pins named their action (catalog step 6)."""
    return (
        tx.one("SELECT 1 FROM job_pins WHERE job_id = ? AND action = 'legacy'", (job_id,))
        is not None
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


def pinned_key_sizes(tx: Tx, job_id: str, action: str) -> list[tuple[str, int]]:
    """(key, bytes) of a job's pins of ``action``."""
    return [
        (key, int(size))
        for key, size in tx.tuples(
            "SELECT o.object_key, o.byte_size FROM job_pins p JOIN objects o ON o.id = p.object_id "
            "WHERE p.job_id = ? AND p.action = ?",
            (job_id, action),
        )
    ]


def release_pins(tx: Tx, job_id: str) -> None:
    """Drop a job's pins. Only in the transaction that makes the job done or
    cancelled: until then GC must keep what the job reads or installs."""
    tx.execute("DELETE FROM job_pins WHERE job_id = ?", (job_id,))
