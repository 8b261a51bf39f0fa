"""The dialect seam: what differs between the catalog's SQLite and PostgreSQL backends.

Catalog SQL is written once, in SQLite's spelling (``?`` placeholders, the
planner's ``INDEXED BY`` hints). A ``Dialect`` says how a backend opens its
transactions, asks whether the schema exists, and which ``Tx`` runs the
statements. Byte order is spelled ``COLLATE BINARY`` (SQLite's default
collation, memcmp of the UTF-8 bytes); PostgreSQL's default collation is the
database's locale, so there it becomes ``COLLATE "C"``. SQLite's ``Tx`` passes
every statement to the driver untouched, so the seam costs SQLite nothing;
PostgreSQL's translates each statement text once (:func:`to_pyformat`, cached)
and then reuses it.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tenants.catalog.base import Tx


class Dialect:
    """One backend's transaction verbs and schema probe (SQLite's by default)."""

    name = "sqlite"

    def tx_class(self) -> type[Tx]:
        from tenants.catalog.base import Tx

        return Tx

    def begin_write(self, conn: Any) -> None:
        """Open a write transaction that holds the catalog's writer lock from here on.

        SQLite: ``BEGIN IMMEDIATE`` takes the database's one write lock up front
        (a deferred ``BEGIN`` could fail to upgrade a read lock mid-way)."""
        conn.execute("BEGIN IMMEDIATE")

    def begin_migration(self, conn: Any) -> None:
        """Open the write transaction of a migration step (the schema may not exist yet)."""
        conn.execute("BEGIN IMMEDIATE")

    def begin_read(self, conn: Any) -> None:
        """Open a read-only transaction with one consistent view, never waiting for a writer."""
        conn.execute("BEGIN")

    def schema_exists(self, tx: Tx) -> bool:
        """Whether the catalog's ``meta`` table exists (0: a new, empty catalog)."""
        return bool(
            tx.scalar("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'")
        )

    def broken(self, conn: Any) -> bool:
        """Whether the connection is lost (a server's; a SQLite file never is)."""
        return False

    def unique_violation(self, error: BaseException) -> bool:
        """Whether ``error`` is a statement refused by a unique index or key."""
        import sqlite3

        return isinstance(error, sqlite3.IntegrityError) and "UNIQUE constraint failed" in str(
            error
        )

    def table_names(self, tx: Tx) -> list[str]:
        """The catalog's tables, by name (what a dump or a copy walks)."""
        return [
            str(r[0])
            for r in tx.tuples(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]


SQLITE = Dialect()

_INDEX_HINT = re.compile(r"\s+INDEXED\s+BY\s+\w+", re.IGNORECASE)
_BYTE_ORDER = re.compile(r"\bCOLLATE\s+BINARY\b", re.IGNORECASE)


@lru_cache(maxsize=4096)
def to_pyformat(sql: str) -> str:
    """SQLite's spelling of a statement as psycopg takes it: each ``?`` outside a
    quoted literal becomes ``%s``, each literal ``%`` is doubled, and SQLite's
    ``INDEXED BY <index>`` hints (which PostgreSQL's planner neither takes nor
    needs) are dropped, and its ``COLLATE BINARY`` (byte order) becomes
    ``COLLATE "C"``, PostgreSQL's byte order.

    Cached: the catalog's statements are a few hundred fixed texts (plus ``IN``
    lists of a few lengths), so each is translated once per process.
    """
    sql = _BYTE_ORDER.sub('COLLATE "C"', _INDEX_HINT.sub("", sql))
    out: list[str] = []
    quote: str | None = None
    for char in sql:
        if char == "%":
            out.append("%%")
        elif quote is not None:
            out.append(char)
            if char == quote:
                quote = None
        elif char in ("'", '"'):
            quote = char
            out.append(char)
        elif char == "?":
            out.append("%s")
        else:
            out.append(char)
    return "".join(out)
