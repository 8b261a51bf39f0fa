"""The catalog: every metadata change is one SQL transaction.

``Catalog`` owns a DB-API connection and the timestamp oracle. Callers get a
``Tx`` from :meth:`Catalog.transaction` (a write transaction, holding the
database's write lock from its first statement) or :meth:`Catalog.snapshot`
(a consistent read). SQL is always parameterized with ``?`` placeholders.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tenants.catalog.dialect import SQLITE, Dialect
from tenants.catalog.migrations import (
    LATEST_VERSION,
    MIGRATIONS,
    ddl_fingerprint,
    statement_for,
)
from tenants.catalog.moved import refuse_if_moved
from tenants.errors import CatalogVersionError, NotFound, RewindError

Row = dict[str, Any]
Clock = Callable[[], int]
BusyTranslator = Callable[[BaseException], RewindError | None]


def wall_clock_us() -> int:
    """Microseconds since the Unix epoch."""
    return time.time_ns() // 1000


class Tx:
    """One open transaction. Only valid inside its ``with`` block."""

    def __init__(self, conn: Any, catalog: Catalog) -> None:
        self._conn = conn
        self.catalog = catalog
        self._ts: int | None = None

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run a statement; return the number of rows it changed."""
        cursor = self._conn.execute(sql, tuple(params))
        return int(cursor.rowcount)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self._conn.executemany(sql, [tuple(r) for r in rows])

    def insert_many(
        self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]
    ) -> None:
        """Bulk-insert rows: ``executemany`` on SQLite, ``COPY ... FROM STDIN`` on
        PostgreSQL (about 2x faster there, docs/catalog.md). ``table`` and
        ``columns`` are the catalog's own names, never input."""
        placeholders = ", ".join("?" for _ in columns)
        self._conn.executemany(
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({placeholders})",
            (tuple(r) for r in rows),
        )

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        cursor = self._conn.execute(sql, tuple(params))
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def tuples(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows as plain tuples, for hot paths that build records positionally."""
        return list(self._conn.execute(sql, tuple(params)).fetchall())

    def batches(
        self, sql: str, params: Sequence[Any] = (), size: int = 10_000
    ) -> Iterator[tuple[list[str], list[tuple[Any, ...]]]]:
        """The result in batches of ``size`` rows, with its column names: memory stays
        bounded however many rows the statement returns."""
        cursor = self._conn.execute(sql, tuple(params))
        names = [d[0] for d in cursor.description]
        while rows := cursor.fetchmany(size):
            yield names, rows

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        rows = self.all(sql, params)
        return rows[0] if rows else None

    def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        row = self._conn.execute(sql, tuple(params)).fetchone()
        return None if row is None else row[0]

    @contextmanager
    def unique(self, conflict: Callable[[], RewindError]) -> Iterator[None]:
        """Statements whose unique-index violation means ``conflict()``.

        Uniqueness (one active tenant per name, one snapshot name per tenant,
        one live table name per database, one unfinished restore per tenant) is
        the database's to enforce: callers check first for a friendly message,
        and this turns the constraint's refusal, should two writers race past
        the check, into the same error instead of a driver exception. The
        transaction is then rolled back by the caller's ``with``.
        """
        try:
            yield
        except Exception as e:
            if self.catalog.dialect.unique_violation(e):
                raise conflict() from e
            raise

    def commit_ts(self) -> int:
        """The timestamp of this transaction's commit, allocated once, inside it.

        ``max(previous + 1, now)`` keeps timestamps strictly increasing across
        the deployment even if the wall clock steps back. Because the clock row
        is updated inside the write transaction, commit order equals ts order.
        """
        if self._ts is None:
            last = int(self.scalar("SELECT last_ts FROM clock WHERE id = 1"))
            ts = max(last + 1, self.catalog.clock())
            self.execute("UPDATE clock SET last_ts = ? WHERE id = 1", (ts,))
            self._ts = ts
        return self._ts

    def observe_ts(self, ts: int) -> None:
        """Never allocate a ts at or below ``ts`` again (data imported from another
        deployment whose clock ran ahead carries timestamps up to ``ts``)."""
        self.execute("UPDATE clock SET last_ts = ? WHERE id = 1 AND last_ts < ?", (ts, ts))

    def last_ts(self) -> int:
        """The newest committed timestamp ("now" for reads)."""
        return int(self.scalar("SELECT last_ts FROM clock WHERE id = 1"))


class Catalog:
    """A SQL catalog on one connection, serialised by a lock for thread safety."""

    def __init__(
        self,
        conn: Any,
        uri: str,
        clock: Clock = wall_clock_us,
        *,
        busy: BusyTranslator | None = None,
        dialect: Dialect = SQLITE,
        reconnect: Callable[[], Any] | None = None,
        create: bool = True,
    ) -> None:
        """``busy`` turns the backend's lock-timeout error into ``CatalogBusy``
        (or returns ``None`` for any other error). ``uri`` is shown in messages:
        give it with any password redacted. ``reconnect`` opens a new connection
        when the dialect finds the old one broken (a server's catalog).
        ``create=False`` refuses (``NotFound``) a database without Rewind's
        tables instead of creating them: a command that only reads creates nothing."""
        self._conn = conn
        self._reconnect = reconnect
        self.dialect = dialect
        self._tx = dialect.tx_class()
        self._begin_write = dialect.begin_write
        self._lock = threading.RLock()
        self.uri = uri
        self.clock = clock
        self._busy = busy
        # What a "not found" names: the catalog, and its warehouse once a
        # TableStore opens the two together (so a wrong directory is obvious).
        self.searched = f"catalog {uri}"
        self._create = create
        self._open_again: Callable[[], Catalog] | None = None  # set by open_catalog
        self._migrate()

    @contextmanager
    def transaction(self, *, rollback: bool = False, moving: bool = False) -> Iterator[Tx]:
        """A write transaction: all or nothing, holding the write lock throughout.

        ``rollback=True`` runs the same statements and then discards them: a dry
        run sees exactly what the real run would decide. ``moving=True`` is for
        ``tenants.catalog.moved`` alone: the one write a moved catalog allows.

        Raises:
            CatalogBusy: another process kept the write lock past the busy timeout.
            CatalogMoved: ``rewind catalog copy`` moved this catalog; it writes no more.
        """
        # Not shared with _migration_step through another context manager: one
        # more generator frame costs the commit path about 5% on SQLite.
        with self._lock, self._translated():
            if self._reconnect is not None and self.dialect.broken(self._conn):
                self._reopen()
            self._begin_write(self._conn)
            try:
                tx = self._tx(self._conn, self)
                if not moving:
                    # Under the write lock, so no write commits after the mark does.
                    refuse_if_moved(tx, self.uri)
                yield tx
            except BaseException:
                self._rollback()
                raise
            self._conn.execute("ROLLBACK" if rollback else "COMMIT")

    @contextmanager
    def _migration_step(self) -> Iterator[Tx]:
        """A write transaction for one migration step (the clock row may not exist yet)."""
        with self._lock, self._translated():
            self.dialect.begin_migration(self._conn)
            try:
                yield self._tx(self._conn, self)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    @contextmanager
    def snapshot(self) -> Iterator[Tx]:
        """A read-only transaction with a consistent view (never waits for a writer)."""
        with self._lock, self._translated():
            if self._reconnect is not None and self.dialect.broken(self._conn):
                self._reopen()
            self.dialect.begin_read(self._conn)
            try:
                yield self._tx(self._conn, self)
            finally:
                self._rollback()

    def _rollback(self) -> None:
        """End the transaction; on a broken connection the server has ended it already."""
        if not self.dialect.broken(self._conn):
            self._conn.execute("ROLLBACK")

    def _reopen(self) -> None:
        """Replace a broken connection (the server restarted, or killed our session)."""
        assert self._reconnect is not None
        try:
            self._conn.close()
        except Exception:  # noqa: BLE001 - it is broken already
            pass
        self._conn = self._reconnect()

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """Lock timeouts anywhere in a transaction become ``CatalogBusy``."""
        try:
            yield
        except Exception as e:
            error = self._busy(e) if self._busy is not None else None
            if error is None:
                raise
            raise error from e

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def open_again(self) -> Catalog | None:
        """Another connection to this catalog, with the same clock, for work that must
        run beside this connection's transactions rather than after them (``gc
        --deep`` merges the listing on one while the audit writes on the other);
        ``None`` for a catalog :func:`open_catalog` did not open. Close it after."""
        return self._open_again() if self._open_again is not None else None

    @property
    def schema_version(self) -> int:
        with self.snapshot() as tx:
            return int(tx.scalar("SELECT value FROM meta WHERE key = 'schema_version'"))

    def _migrate(self) -> None:
        """Bring the catalog to ``LATEST_VERSION``, one step per transaction.

        The version is read in a read transaction: opening an up-to-date catalog
        never waits for a writer, so read-only commands run beside a long write.
        Each step re-checks the version under the write lock.
        """
        with self.snapshot() as tx:
            exists = self.dialect.schema_exists(tx)
            version = 0
            if exists:
                version = int(tx.scalar("SELECT value FROM meta WHERE key = 'schema_version'"))
                recorded = tx.scalar("SELECT value FROM meta WHERE key = 'ddl_fingerprint'")
                if version > LATEST_VERSION:
                    raise CatalogVersionError(
                        f"catalog {self.uri} has schema version {version}, but this Rewind "
                        f"knows only up to {LATEST_VERSION}: upgrade Rewind to open it"
                    )
                if recorded != ddl_fingerprint(version):
                    raise CatalogVersionError(
                        f"catalog {self.uri} schema version {version} has DDL fingerprint "
                        f"{recorded}, expected {ddl_fingerprint(version)}: it was not written "
                        "by this Rewind's migrations"
                    )
        if not exists and not self._create:
            raise NotFound(f"catalog {self.uri} does not exist (it has no Rewind tables)")
        while version < LATEST_VERSION:
            self.apply_migration(version + 1)
            version += 1

    def apply_migration(self, version: int) -> None:
        """Apply step ``version`` (from ``version - 1``) in one transaction."""
        _, statements = MIGRATIONS[version - 1]
        with self._migration_step() as tx:
            # Another process may have applied this step since we looked: the
            # write lock is ours now, so check again before applying it.
            if self.dialect.schema_exists(tx):
                current = int(tx.scalar("SELECT value FROM meta WHERE key = 'schema_version'"))
                if current >= version:
                    return
            for statement in statements:
                text = statement_for(statement, self.dialect.name)
                if text is not None:
                    tx.execute(text)
            for key, value in (
                ("schema_version", str(version)),
                ("ddl_fingerprint", ddl_fingerprint(version)),
            ):
                if tx.execute("UPDATE meta SET value = ? WHERE key = ?", (value, key)) == 0:
                    tx.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (key, value))


def open_catalog(uri: str, clock: Clock = wall_clock_us, *, create: bool = True) -> Catalog:
    """Open (creating and migrating as needed) the catalog named by ``uri``.

    With ``create=False`` a catalog that does not exist is refused instead
    (``NotFound``), and nothing is created: no SQLite file or directory, no
    tables in a PostgreSQL schema. Commands that only read open it so.

    ``sqlite:///relative/path.db`` is relative to the working directory and
    ``sqlite:////absolute/path.db`` absolute (SQLAlchemy's convention). A URI
    naming no file, ``:memory:`` (a catalog that vanishes with the process,
    taking the only record of the warehouse's objects with it), a directory, a
    host or a ``?query`` is refused before anything is created.

    ``postgresql://user@host:port/database`` (or ``postgres://``) opens a
    PostgreSQL catalog (tenants/catalog/postgres.py); its password, if the URI
    carries one, is never shown.

    Raises:
        InvalidArgument: the URI is malformed; the message shows valid ones.
        NotFound: ``create`` is False and there is no catalog at ``uri``.
    """
    catalog = _open(uri, clock, create)
    catalog._open_again = lambda: open_catalog(uri, clock, create=False)
    return catalog


def _open(uri: str, clock: Clock, create: bool) -> Catalog:
    """:func:`open_catalog` but for the second connection it can open."""
    from tenants.catalog import postgres

    if postgres.is_postgres_uri(uri):
        shown = postgres.redact(uri)
        waits = postgres.LOCK_TIMEOUT_S
        first = postgres.connect(uri, waits)
        opened: list[Catalog] = []  # the busy translator asks the current connection

        def busy(error: BaseException) -> RewindError | None:
            conn = opened[0]._conn if opened else first
            return postgres.busy_error(error, conn, shown, waits)

        try:
            catalog = Catalog(
                first,
                shown,
                clock,
                busy=busy,
                dialect=postgres.POSTGRES,
                reconnect=lambda: postgres.connect(uri, waits),
                create=create,
            )
        except BaseException:
            first.close()
            raise
        opened.append(catalog)
        return catalog

    from tenants.catalog.sqlite import busy_error, connect, sqlite_path

    path = sqlite_path(uri)
    if not create and not Path(path).is_file():  # connect() would create the file
        raise NotFound(f"catalog {uri} does not exist (no file {path})")
    conn = connect(path)
    try:
        return Catalog(conn, uri, clock, busy=lambda error: busy_error(error, path), create=create)
    except BaseException:
        conn.close()
        raise
