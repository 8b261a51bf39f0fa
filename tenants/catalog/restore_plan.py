"""What the restore planner reads: tables and schemas at S, and members classified in SQL.

Planning is read-only: every function here runs in the planner's snapshot (or
the write transaction that starts a job), so all of them see one state of the
catalog. The member queries are the hot path of a restore of 10^5-10^6
objects: they aggregate in SQL through ``LIVE_MEMBERS``, whose ``INDEXED BY``
hint keeps SQLite on the covering ``objects_plan`` index.
"""

from __future__ import annotations

from typing import Any

from tenants.catalog.base import Row, Tx
from tenants.catalog.objects import LIVE_MEMBERS, RECORD_COLUMNS

# Each member's action at S, as ``engine.restore.plan.classify`` decides it (bind S twice).
ACTION_AT = "CASE WHEN o.max_ts <= ? THEN 'reuse' WHEN o.min_ts > ? THEN 'skip' ELSE 'rewrite' END"


def plan_table_rows(tx: Tx, tenant_id: str, at_ts: int, oldest_needed: int) -> list[Row]:
    """The tenant's tables created by ``at_ts`` and not dropped by ``oldest_needed``
    (the oldest snapshot a restore carries), each ``tables`` row with
    ``database_name`` and ``database_created_ts``, by database, name and age."""
    return tx.all(
        "SELECT t.*, d.name AS database_name, d.created_ts AS database_created_ts "
        "FROM tables t JOIN databases d ON d.id = t.database_id "
        "WHERE t.tenant_id = ? AND t.created_ts <= ? "
        "AND (t.dropped_ts IS NULL OR t.dropped_ts > ?) ORDER BY d.name, t.name, t.created_ts",
        (tenant_id, at_ts, oldest_needed),
    )


def schema_version_rows(tx: Tx, table_id: str) -> list[Row]:
    """Every schema version of a table, oldest first."""
    return tx.all(
        "SELECT * FROM schema_versions WHERE table_id = ? ORDER BY valid_from_ts",
        (table_id,),
    )


def member_action_totals(tx: Tx, table_id: str, at_ts: int) -> list[tuple[Any, ...]]:
    """(action, objects, bytes, strangers) per action of the table's live members at
    ``at_ts``, one pass over them; ``strangers`` counts members whose fingerprint is
    none of the table's schema versions."""
    return tx.tuples(
        f"SELECT {ACTION_AT} AS action, COUNT(*), SUM(o.byte_size), "
        "SUM(CASE WHEN o.fingerprint IN (SELECT fingerprint FROM schema_versions "
        f"WHERE table_id = ?) THEN 0 ELSE 1 END) {LIVE_MEMBERS} GROUP BY action",
        (at_ts, at_ts, table_id, table_id),
    )


def straddling_member_tuples(tx: Tx, table_id: str, at_ts: int) -> list[tuple[Any, ...]]:
    """The live members with rows on both sides of ``at_ts`` (the ones a restore
    rewrites), as ``RECORD_COLUMNS`` tuples in no particular order."""
    return tx.tuples(
        f"SELECT {RECORD_COLUMNS} {LIVE_MEMBERS} AND o.max_ts > ? AND o.min_ts <= ?",
        (table_id, at_ts, at_ts),
    )


def members_at_tuples(tx: Tx, table_id: str, at_ts: int) -> list[tuple[Any, ...]]:
    """The live members with rows at or before ``at_ts`` (reused or rewritten), as
    ``RECORD_COLUMNS`` tuples in no particular order."""
    return tx.tuples(
        f"SELECT {RECORD_COLUMNS} {LIVE_MEMBERS} AND o.min_ts <= ?",
        (table_id, at_ts),
    )


def first_stranger(tx: Tx, table_id: str) -> Row | None:
    """One live member (``object_key``, ``fingerprint``) whose fingerprint is none of
    the table's schema versions, for the error that names it."""
    return tx.one(
        f"SELECT o.object_key, o.fingerprint {LIVE_MEMBERS} AND o.fingerprint NOT IN "
        "(SELECT fingerprint FROM schema_versions WHERE table_id = ?) LIMIT 1",
        (table_id, table_id),
    )
