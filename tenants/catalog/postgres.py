"""PostgreSQL, the shared catalog backend: psycopg 3, one connection per ``Catalog``.

Transactions (the step-2 rule, see docs/catalog.md): a write transaction is
``BEGIN`` at READ COMMITTED and then locks the one ``clock`` row (``SELECT ...
FOR UPDATE``) before anything else, so PostgreSQL writers serialise exactly as
SQLite's ``BEGIN IMMEDIATE`` writers do, and every check-then-insert the code
does (a name's holder, one restore per tenant) sees every earlier commit: each
statement at READ COMMITTED reads the state after the previous writer's commit.
Reads are ``REPEATABLE READ READ ONLY``: one snapshot for the whole
transaction, like SQLite's WAL readers, and they take no row lock.

A writer waits up to ``LOCK_TIMEOUT_S`` for the clock row; past that (or on a
serialization failure or deadlock) the catalog raises
:class:`~tenants.errors.CatalogBusy` naming the session that holds the lock.
A URI's password never appears in a message (:func:`redact`).
"""

from __future__ import annotations

import os
import socket
import sys
import uuid
from collections.abc import Iterator
from functools import cache
from typing import TYPE_CHECKING, Any

from tenants.catalog.base import Tx
from tenants.catalog.dialect import Dialect, to_pyformat
from tenants.errors import CatalogBusy, CatalogUnavailable, InvalidArgument, StorageError
from tenants.redaction import redact

if TYPE_CHECKING:
    import psycopg

# psycopg is imported where it is used, not with this module: the catalog opener
# (tenants.catalog.base.open_catalog) imports this module to tell a PostgreSQL URI
# from a SQLite one, and a SQLite catalog never needs the driver.

LOCK_TIMEOUT_S = 60.0
PREFIXES = ("postgresql://", "postgres://")
VALID = "postgresql://user@host:port/database"
# SQLSTATEs that mean "another transaction was in the way; retrying may work":
# serialization_failure, deadlock_detected, lock_not_available (lock_timeout).
BUSY_SQLSTATES = frozenset({"40001", "40P01", "55P03"})
# Serialises migration steps across processes before the clock row exists.
MIGRATION_LOCK_KEY = 0x5265_7769_6E64  # "Rewind"


def is_postgres_uri(uri: str) -> bool:
    return uri.startswith(PREFIXES)


def check_uri(uri: str) -> None:
    """Refuse a ``postgresql://`` URI libpq cannot parse or that names no database."""
    import psycopg

    shown = redact(uri)
    try:
        params = psycopg.conninfo.conninfo_to_dict(uri)
    except psycopg.ProgrammingError as e:
        raise InvalidArgument(f"invalid catalog {shown!r}: {redact(str(e))}; use {VALID}") from None
    if not params.get("dbname"):
        raise InvalidArgument(f"invalid catalog {shown!r}: it names no database; use {VALID}")


class PostgresTx(Tx):
    """A ``Tx`` on psycopg: statements are translated once (``?`` → ``%s``, no hints)."""

    def execute(self, sql: str, params: Any = ()) -> int:
        return int(self._conn.execute(to_pyformat(sql), tuple(params)).rowcount)

    def executemany(self, sql: str, rows: Any) -> None:
        with self._conn.cursor() as cursor:
            cursor.executemany(to_pyformat(sql), [tuple(r) for r in rows])

    def all(self, sql: str, params: Any = ()) -> list[dict[str, Any]]:
        cursor = self._conn.execute(to_pyformat(sql), tuple(params))
        names = [c.name for c in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def tuples(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        return list(self._conn.execute(to_pyformat(sql), tuple(params)).fetchall())

    def scalar(self, sql: str, params: Any = ()) -> Any:
        row = self._conn.execute(to_pyformat(sql), tuple(params)).fetchone()
        return None if row is None else row[0]

    def insert_many(self, table: str, columns: Any, rows: Any) -> None:
        with self._conn.cursor() as cursor:
            with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(tuple(row))

    def batches(
        self, sql: str, params: Any = (), size: int = 10_000
    ) -> Iterator[tuple[list[str], list[tuple[Any, ...]]]]:
        # A server-side cursor: libpq would otherwise buffer the whole result.
        # Valid inside the transaction the catalog opened (DECLARE needs one).
        with self._conn.cursor(name=f"rewind_{uuid.uuid4().hex[:12]}") as cursor:
            cursor.execute(to_pyformat(sql), tuple(params))
            names = [c.name for c in cursor.description]
            while rows := cursor.fetchmany(size):
                yield names, rows


class PostgresDialect(Dialect):
    name = "postgresql"

    def tx_class(self) -> type[Tx]:
        return PostgresTx

    def begin_write(self, conn: Any) -> None:
        # Step-2 rule: READ COMMITTED plus the clock-row lock, taken first. The
        # commit clock's UPDATE would take the same lock later anyway; taking it
        # up front makes writers queue before they read what they check.
        conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
        try:
            conn.execute("SELECT last_ts FROM clock WHERE id = 1 FOR UPDATE")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def begin_migration(self, conn: Any) -> None:
        # No clock row before step 1: a transaction-scoped advisory lock
        # serialises the processes that migrate a new catalog together.
        conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
        try:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def begin_read(self, conn: Any) -> None:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")

    def broken(self, conn: Any) -> bool:
        return bool(conn.broken or conn.closed)

    def schema_exists(self, tx: Tx) -> bool:
        # A scan of pg_tables, not to_regclass: name lookups go through the
        # backend's catalog caches, which a migration step waiting on the
        # advisory lock does not refresh, so it would miss the ``meta`` another
        # process created meanwhile and run step 1 again (DuplicateTable). A
        # scan reads with the statement's fresh READ COMMITTED snapshot.
        return bool(
            tx.scalar(
                "SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema() "
                "AND tablename = 'meta'"
            )
        )

    def unique_violation(self, error: BaseException) -> bool:
        import psycopg

        return isinstance(error, psycopg.errors.UniqueViolation)  # SQLSTATE 23505

    def table_names(self, tx: Tx) -> list[str]:
        # The catalog's schema is the first on the connection's search_path.
        return [
            str(r[0])
            for r in tx.tuples(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                "ORDER BY tablename"
            )
        ]


POSTGRES = PostgresDialect()


@cache
def _integral_numeric_loader() -> type:
    """The loader of ``numeric`` that returns an ``int`` when there is no fraction:
    ``SUM`` of a ``BIGINT`` column is ``numeric`` on PostgreSQL, and callers get the
    ints SQLite gives them. (Made on first use: it subclasses a psycopg class.)"""
    from psycopg.types.numeric import NumericLoader

    class _IntegralNumericLoader(NumericLoader):
        def load(self, data: Any) -> Any:
            text = bytes(data)
            digits = text[1:] if text[:1] == b"-" else text
            if digits.isdigit():
                return int(text)
            return super().load(data)

    return _IntegralNumericLoader


def application_name() -> str:
    """How this process shows in ``pg_stat_activity`` (what ``CatalogBusy`` names)."""
    command = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
    return f"rewind pid {os.getpid()} on {socket.gethostname()} ({command})"[:63]


def connect(uri: str, lock_timeout_s: float | None = None) -> psycopg.Connection[Any]:
    """Connect to ``uri`` with transactions under the catalog's control.

    ``autocommit=True`` hands transaction control to the catalog, which issues
    ``BEGIN``/``COMMIT``/``ROLLBACK`` itself as it does on SQLite. A lock wait
    gives up after ``lock_timeout_s`` (default ``LOCK_TIMEOUT_S``).
    """
    import psycopg

    check_uri(uri)
    if lock_timeout_s is None:
        lock_timeout_s = LOCK_TIMEOUT_S
    try:
        conn = psycopg.connect(uri, autocommit=True, application_name=application_name())
        conn.adapters.register_loader("numeric", _integral_numeric_loader())
        conn.execute(f"SET lock_timeout = {int(lock_timeout_s * 1000)}")
    except psycopg.Error as e:
        raise StorageError(f"cannot open catalog {redact(uri)}: {redact(str(e)).strip()}") from None
    return conn


def busy_error(
    error: BaseException, conn: Any, uri: str, lock_timeout_s: float | None = None
) -> CatalogBusy | CatalogUnavailable | None:
    """``CatalogBusy`` for a lock timeout, serialization failure or deadlock (by SQLSTATE);
    ``CatalogUnavailable`` when the connection broke."""
    import psycopg

    if isinstance(error, psycopg.OperationalError) and (
        conn.broken or conn.closed or (error.sqlstate or "").startswith(("08", "57P"))
    ):
        return CatalogUnavailable(
            f"lost the connection to catalog {redact(uri)} "
            f"({redact(str(error)).strip().splitlines()[0] if str(error).strip() else 'no reason given'}); "
            "the transaction in progress did not commit unless it was already committing, "
            "and the next command reconnects: retry"
        )
    if not isinstance(error, psycopg.Error) or error.sqlstate not in BUSY_SQLSTATES:
        return None
    holder = lock_holder(conn)
    by = f"held by {holder}" if holder else "held by another session"
    if error.sqlstate == "55P03":
        waited = LOCK_TIMEOUT_S if lock_timeout_s is None else lock_timeout_s
        why = (
            f"its writer lock (the clock row) is {by} and was not released within "
            f"the lock timeout ({waited:g} s)"
        )
    else:
        why = f"the transaction conflicted with another ({error.sqlstate}: {error.diag.message_primary})"
    return CatalogBusy(f"catalog {redact(uri)} busy, retry: {why}")


def lock_holder(conn: Any) -> str | None:
    """The session holding the catalog's writer lock (a granted lock on ``clock``
    by a session not itself waiting), as its application name, backend pid and
    client, if PostgreSQL can say. Runs after the failed transaction rolled back."""
    import psycopg

    try:
        row = conn.execute(
            "SELECT a.application_name, a.pid, a.client_addr, a.xact_start "
            "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'relation' AND l.relation = to_regclass('clock') AND l.granted "
            "AND l.pid <> pg_backend_pid() AND a.wait_event_type IS DISTINCT FROM 'Lock' "
            "ORDER BY a.xact_start LIMIT 1"
        ).fetchone()
    except psycopg.Error:
        return None
    if row is None:
        return None
    name, pid, addr, since = row
    where = f"backend pid {pid}" + (f" from {addr}" if addr else "")
    started = f", transaction open since {since:%Y-%m-%d %H:%M:%S %Z}" if since else ""
    return f"{name or 'a session'} ({where}{started})"
