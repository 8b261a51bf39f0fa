"""Databases, tables and their schema versions, as of a commit ts.

``databases`` and ``tables`` rows live from ``created_ts`` until ``dropped_ts``
(``NULL`` while live): one exists at T when ``created_ts <= T`` and it was not
dropped at or before T, so a name can be reused after a drop and every past
time still finds the table it had. ``schema_versions`` holds a table's schema
from ``valid_from_ts`` until the next version's; versions are only added.

Table rows come back with every ``tables`` column plus ``database_name``;
``tenants.tenancy`` builds its records from them. This module imports no
domain code.
"""

from __future__ import annotations

from tenants.catalog.base import Row, Tx
from tenants.errors import AlreadyExists


def _live_at(alias: str) -> str:
    """Rows of ``alias`` that exist at a ts (bind that ts twice)."""
    return f"{alias}.created_ts <= ? AND ({alias}.dropped_ts IS NULL OR {alias}.dropped_ts > ?)"


def database_row_at(tx: Tx, tenant_id: str, name: str, as_of: int) -> Row | None:
    """The tenant's database called ``name`` that existed at ``as_of``."""
    return tx.one(
        f"SELECT * FROM databases d WHERE d.tenant_id = ? AND d.name = ? AND {_live_at('d')}",
        (tenant_id, name, as_of, as_of),
    )


def insert_database(tx: Tx, database_id: str, tenant_id: str, name: str, ts: int) -> None:
    """Create a database at commit ts ``ts``.

    The caller checks first that no live database has the name
    (:func:`database_row_at`); the index ``databases_live_name`` enforces it.

    Raises:
        AlreadyExists: a live database of the tenant has ``name``.
    """
    taken = f"tenant {tenant_id} already has a database named {name!r}"
    with tx.unique(lambda: AlreadyExists(taken)):
        tx.execute(
            "INSERT INTO databases (id, tenant_id, name, created_ts) VALUES (?, ?, ?, ?)",
            (database_id, tenant_id, name, ts),
        )


def table_row_at(tx: Tx, tenant_id: str, database: str, table: str, as_of: int) -> Row | None:
    """The tenant's table ``database.table`` that existed at ``as_of`` (with ``database_name``)."""
    return tx.one(
        "SELECT t.*, d.name AS database_name FROM tables t JOIN databases d ON d.id = t.database_id "
        f"WHERE t.tenant_id = ? AND d.name = ? AND t.name = ? AND {_live_at('t')}",
        (tenant_id, database, table, as_of, as_of),
    )


def table_rows_at(tx: Tx, tenant_id: str, as_of: int) -> list[Row]:
    """Every table of the tenant that existed at ``as_of`` (with ``database_name``), by
    database then name."""
    return tx.all(
        "SELECT t.*, d.name AS database_name FROM tables t JOIN databases d ON d.id = t.database_id "
        f"WHERE t.tenant_id = ? AND {_live_at('t')} ORDER BY d.name, t.name",
        (tenant_id, as_of, as_of),
    )


def insert_table(
    tx: Tx, table_id: str, tenant_id: str, database_id: str, name: str, ts: int
) -> None:
    """Create a table at commit ts ``ts``; it needs a schema version from ``ts``
    (:func:`insert_schema_version`) in the same transaction.

    The caller checks first that no live table has the name
    (:func:`table_row_at`); the index ``tables_live_name`` enforces it.

    Raises:
        AlreadyExists: a live table of the database has ``name``.
    """
    taken = f"database {database_id} of tenant {tenant_id} already has a table named {name!r}"
    with tx.unique(lambda: AlreadyExists(taken)):
        tx.execute(
            "INSERT INTO tables (id, tenant_id, database_id, name, created_ts, changes_from_ts) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (table_id, tenant_id, database_id, name, ts, ts),
        )


def mark_table_dropped(tx: Tx, table_id: str, ts: int) -> int:
    """Drop a live table at commit ts ``ts``; returns 0 if it was already dropped."""
    return tx.execute(
        "UPDATE tables SET dropped_ts = ? WHERE id = ? AND dropped_ts IS NULL", (ts, table_id)
    )


def insert_schema_version(
    tx: Tx,
    table_id: str,
    ts: int,
    columns_json: str,
    primary_key_json: str,
    fingerprint: str,
) -> None:
    """Record the table's schema valid from commit ts ``ts`` on (one version per ts)."""
    tx.execute(
        "INSERT INTO schema_versions (table_id, valid_from_ts, columns_json, primary_key_json, "
        "fingerprint) VALUES (?, ?, ?, ?, ?)",
        (table_id, ts, columns_json, primary_key_json, fingerprint),
    )


def schema_version_row_at(tx: Tx, table_id: str, as_of: int) -> Row | None:
    """The table's schema version valid at ``as_of``: the newest from at or before it."""
    return tx.one(
        "SELECT * FROM schema_versions WHERE table_id = ? AND valid_from_ts <= ? "
        "ORDER BY valid_from_ts DESC LIMIT 1",
        (table_id, as_of),
    )


def schema_columns_ever(tx: Tx, table_id: str) -> list[str]:
    """The ``columns_json`` of every schema version the table ever had."""
    return [
        str(row["columns_json"])
        for row in tx.all(
            "SELECT columns_json FROM schema_versions WHERE table_id = ?", (table_id,)
        )
    ]
