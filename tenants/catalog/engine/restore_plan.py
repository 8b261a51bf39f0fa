"""What the restore planner reads: tables and schemas at S, and members classified in SQL.

Planning is read-only: every function here runs in the planner's snapshot (or
the write transaction that starts a job), so all of them see one state of the
catalog. A table of 10^6 members is planned without reading them: its
``member_totals`` give what it holds, and only the members after S (one
``membership_view`` range per part of its view, ``tenants.catalog.inherited``)
are read, to be rewritten or skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tenants.catalog.base import Row, Tx
from tenants.catalog.inherited import chunked, view_select, views_select
from tenants.catalog.objects import MEMBER_COLUMNS


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


def database_rows_at(tx: Tx, tenant_id: str, at_ts: int) -> list[Row]:
    """``name`` and ``created_ts`` of every database of the tenant live at ``at_ts``,
    by name: a restore carries them, tables or none."""
    return tx.all(
        "SELECT name, created_ts FROM databases WHERE tenant_id = ? AND created_ts <= ? "
        "AND (dropped_ts IS NULL OR dropped_ts > ?) ORDER BY name",
        (tenant_id, at_ts, at_ts),
    )


def schema_version_rows(tx: Tx, table_ids: Sequence[str]) -> dict[str, list[Row]]:
    """Every schema version of each table, oldest first, in a statement per
    ``CHUNK`` of tables."""
    out: dict[str, list[Row]] = {}
    for chunk in chunked(table_ids):
        marks = ", ".join("?" for _ in chunk)
        for row in tx.all(
            f"SELECT * FROM schema_versions WHERE table_id IN ({marks}) "
            "ORDER BY table_id, valid_from_ts",
            chunk,
        ):
            out.setdefault(row["table_id"], []).append(row)
    return out


def members_after_tuples(tx: Tx, table_id: str, at_ts: int) -> list[tuple[Any, ...]]:
    """The table's live members with a row after ``at_ts`` (a restore to ``at_ts``
    rewrites or skips them, and reuses the rest), as ``MEMBER_COLUMNS`` tuples
    in no particular order."""
    return _member_tuples(tx, table_id, "AND m.max_ts > ?", (at_ts,))


def members_after_by_table(
    tx: Tx, table_ids: Sequence[str], at_ts: int
) -> dict[str, list[tuple[Any, ...]]]:
    """``members_after_tuples`` of many tables, by table id, read in one
    statement per ``CHUNK`` of tables (``views_select``)."""
    out: dict[str, list[tuple[Any, ...]]] = {table_id: [] for table_id in table_ids}
    for sql, params in views_select(tx, table_ids, MEMBER_COLUMNS, "AND m.max_ts > ?", (at_ts,)):
        for row in tx.tuples(sql, params):
            out[str(row[0])].append(tuple(row[1:]))
    return out


def _member_tuples(
    tx: Tx, table_id: str, where: str, params: tuple[Any, ...]
) -> list[tuple[Any, ...]]:
    return tx.tuples(*view_select(tx, table_id, MEMBER_COLUMNS, where, params))


def members_at_tuples(tx: Tx, table_id: str, at_ts: int) -> list[tuple[Any, ...]]:
    """The live members with rows at or before ``at_ts`` (reused or rewritten), as
    ``MEMBER_COLUMNS`` tuples in no particular order."""
    return _member_tuples(tx, table_id, "AND o.min_ts <= ?", (at_ts,))


def first_stranger(tx: Tx, table_id: str) -> Row | None:
    """One live member (``object_key``, ``fingerprint``) whose fingerprint is none of
    the table's schema versions, for the error that names it."""
    view, params = view_select(
        tx,
        table_id,
        "o.object_key, o.fingerprint",
        "AND o.fingerprint NOT IN (SELECT fingerprint FROM schema_versions WHERE table_id = ?)",
        (table_id,),
    )
    return tx.one(f"{view} LIMIT 1", params)
