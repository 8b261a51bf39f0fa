"""The statements of a table or database restore: locks, lineage, and the swap.

A table restore installs new tables into a tenant that already exists: the
tables it replaces are dropped and the new ones created in the same
transaction (``engine.restore.install``). While its job runs, the live tables
it will replace (and, for a database restore, the database) carry the job's
id in ``lock_job_id``; writers and DDL refuse a locked table
(``tenants.tenancy``), so no acknowledged write can be lost by the swap. The
install and a cancel clear the locks.
"""

from __future__ import annotations

from collections.abc import Sequence

from tenants.catalog.base import Row, Tx
from tenants.catalog.inherited import chunked
from tenants.errors import AlreadyExists, ConcurrentModification

_LIVE_TABLES_OF_DATABASE = (
    "SELECT t.*, d.name AS database_name, d.created_ts AS database_created_ts "
    "FROM tables t JOIN databases d ON d.id = t.database_id "
    "WHERE t.tenant_id = ? AND d.name = ? AND t.dropped_ts IS NULL AND d.dropped_ts IS NULL"
)


def live_tables_of_database(tx: Tx, tenant_id: str, database: str) -> list[Row]:
    """The live tables of the tenant's live database ``database``, by name."""
    return tx.all(f"{_LIVE_TABLES_OF_DATABASE} ORDER BY t.name", (tenant_id, database))


def last_dropped_table(tx: Tx, tenant_id: str, database: str, table: str) -> Row | None:
    """The tenant's most recently dropped table ``database.table`` (with
    ``database_name`` and ``database_created_ts``), whichever database of that
    name held it."""
    return tx.one(
        "SELECT t.*, d.name AS database_name, d.created_ts AS database_created_ts "
        "FROM tables t JOIN databases d ON d.id = t.database_id "
        "WHERE t.tenant_id = ? AND d.name = ? AND t.name = ? AND t.dropped_ts IS NOT NULL "
        "ORDER BY t.dropped_ts DESC LIMIT 1",
        (tenant_id, database, table),
    )


def lock_tables(
    tx: Tx, job_id: str, table_ids: Sequence[str], database_id: str | None = None
) -> None:
    """Hold the live tables ``table_ids`` (and the database ``database_id``) for job
    ``job_id``: writes and DDL to them are refused until ``release_locks``.

    Raises:
        ConcurrentModification: one of them was dropped, or another job holds it,
            since the plan read it.
    """
    locked = 0
    for chunk in chunked(table_ids):
        marks = ", ".join("?" for _ in chunk)
        locked += tx.execute(
            f"UPDATE tables SET lock_job_id = ? WHERE id IN ({marks}) "
            "AND dropped_ts IS NULL AND lock_job_id IS NULL",
            (job_id, *chunk),
        )
    if locked != len(table_ids):
        raise ConcurrentModification(
            f"restore job {job_id}: a table it replaces was dropped or taken by another job "
            "since it was planned; plan again"
        )
    if database_id is not None and not tx.execute(
        "UPDATE databases SET lock_job_id = ? WHERE id = ? AND dropped_ts IS NULL "
        "AND lock_job_id IS NULL",
        (job_id, database_id),
    ):
        raise ConcurrentModification(
            f"restore job {job_id}: database {database_id} was dropped or taken by another job "
            "since it was planned; plan again"
        )


def release_locks(tx: Tx, job_id: str) -> None:
    """Clear job ``job_id``'s holds on tables and databases (its install, or a cancel)."""
    tx.execute("UPDATE tables SET lock_job_id = NULL WHERE lock_job_id = ?", (job_id,))
    tx.execute("UPDATE databases SET lock_job_id = NULL WHERE lock_job_id = ?", (job_id,))


def drop_replaced_tables(tx: Tx, job_id: str, table_ids: Sequence[str], ts: int) -> None:
    """Drop at ``ts`` the live tables job ``job_id`` replaces (it holds each).

    Raises:
        ConcurrentModification: one is no longer live and held by the job.
    """
    dropped = 0
    for chunk in chunked(table_ids):
        marks = ", ".join("?" for _ in chunk)
        dropped += tx.execute(
            f"UPDATE tables SET dropped_ts = ? WHERE id IN ({marks}) "
            "AND dropped_ts IS NULL AND lock_job_id = ?",
            (ts, *chunk, job_id),
        )
    if dropped != len(table_ids):
        raise ConcurrentModification(
            f"restore job {job_id}: a table it replaces is no longer live and held by it; "
            "cancel the job and restore again"
        )


def insert_restored_tables(
    tx: Tx, rows: Sequence[tuple[str, str, str, str, int, str, int, str]]
) -> None:
    """Tables a table or database restore creates, as (id, tenant_id, database_id,
    name, created_ts, source_table_id, source_ts, restore_job_id) tuples.

    Raises:
        AlreadyExists: a live table of the database has one of the names (it was
            created while the job ran).
    """
    taken = "a table of that name was created while the restore job ran"
    with tx.unique(lambda: AlreadyExists(taken)):
        # The change log starts with the install (tenants.catalog.changes).
        tx.executemany(
            "INSERT INTO tables (id, tenant_id, database_id, name, created_ts, "
            "source_table_id, source_ts, restore_job_id, changes_from_ts) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(*row, tx.commit_ts()) for row in rows],
        )


def tables_installed_by(tx: Tx, job_id: str) -> int:
    """How many tables job ``job_id`` installed (0 until its install commits)."""
    return int(tx.scalar("SELECT COUNT(*) FROM tables WHERE restore_job_id = ?", (job_id,)))
