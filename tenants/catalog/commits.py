"""The commit log: one row per commit per table, for people finding a bad change.

Every write, load and DDL statement, and every table a restore installs,
records (tenant, ts, table, kind, rows upserted and deleted, objects, bytes)
in the transaction that makes it. ``rewind history --commits`` lists them
newest first, with the table's name, so a user can find the commit that did
the damage and restore to just before it (``--before TS``). Compaction and
GC change no content and are not listed.
"""

from __future__ import annotations

from tenants.catalog.base import Row, Tx

KINDS = ("write", "create", "alter", "drop", "restore", "replace")


def record_commit(
    tx: Tx,
    tenant_id: str,
    ts: int,
    table_id: str,
    kind: str,
    *,
    upserted: int = 0,
    deleted: int = 0,
    objects: int = 0,
    size: int = 0,
) -> None:
    """Log the commit at ``ts`` of ``kind`` (one of ``KINDS``) on ``table_id``."""
    tx.execute(
        "INSERT INTO commits (tenant_id, ts, table_id, kind, rows_upserted, rows_deleted, "
        "objects, bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (tenant_id, ts, table_id, kind, upserted, deleted, objects, size),
    )


def commit_rows(
    tx: Tx,
    tenant_id: str,
    *,
    until_ts: int | None = None,
    table: tuple[str, str] | None = None,
    limit: int = 50,
) -> list[Row]:
    """The tenant's commits (at or before ``until_ts``; on tables named ``table``,
    (database, name), if given), newest first, each with ``database_name`` and
    ``table_name``."""
    where: list[str] = ["c.tenant_id = ?"]
    params: list[object] = [tenant_id]
    if until_ts is not None:
        where.append("c.ts <= ?")
        params.append(until_ts)
    if table is not None:
        where.append("d.name = ? AND t.name = ?")
        params.extend(table)
    return tx.all(
        "SELECT c.*, d.name AS database_name, t.name AS table_name FROM commits c "
        "JOIN tables t ON t.id = c.table_id JOIN databases d ON d.id = t.database_id "
        f"WHERE {' AND '.join(where)} ORDER BY c.ts DESC, t.name LIMIT ?",
        (*params, limit),
    )


def commit_at(tx: Tx, tenant_id: str, ts: int) -> Row | None:
    """One commit of the tenant at ``ts``, if it made one."""
    return tx.one("SELECT * FROM commits WHERE tenant_id = ? AND ts = ? LIMIT 1", (tenant_id, ts))


def forget_commits(tx: Tx, tenant_id: str) -> None:
    """Drop a purged tenant's commit log (its history is gone)."""
    tx.execute("DELETE FROM commits WHERE tenant_id = ?", (tenant_id,))


def commits_at(tx: Tx, tenant_id: str, ts: int) -> list[Row]:
    """The tenant's commits at ``ts`` (one per table it changed), each with
    ``database_name`` and ``table_name``."""
    return tx.all(
        "SELECT c.*, d.name AS database_name, t.name AS table_name FROM commits c "
        "JOIN tables t ON t.id = c.table_id JOIN databases d ON d.id = t.database_id "
        "WHERE c.tenant_id = ? AND c.ts = ? ORDER BY d.name, t.name",
        (tenant_id, ts),
    )


def table_changed_between(tx: Tx, table_id: str, after_ts: int, until_ts: int) -> bool:
    """Whether ``table_id`` has a commit (a write or DDL) with ``after_ts < ts <= until_ts``."""
    row = tx.one(
        "SELECT 1 FROM commits WHERE table_id = ? AND ts > ? AND ts <= ?",
        (table_id, after_ts, until_ts),
    )
    return row is not None
