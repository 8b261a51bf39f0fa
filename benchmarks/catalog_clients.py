"""The catalog's statements through each library the catalog could use (issue 12).

``benchmarks/bench_catalog_driver.py`` times these side by side. Each client runs
the same five operations (a small write transaction, a bulk insert, the install
``INSERT ... SELECT``, the planner's grouped counts, reading records) on one
connection, with today's SQL (``tenants/``, ``engine/``) as the single source:
the raw drivers run it as written (``?`` on SQLite, ``%s`` on PostgreSQL, no
SQLite index hints there), ``SqlalchemyText`` as ``text()``, and
``SqlalchemyCore`` rebuilds each statement from Core constructs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal

import psycopg
import sqlalchemy as sa
from sqlalchemy.dialects.sqlite.base import SQLiteCompiler

from tenants.catalog.migrations import MIGRATIONS
from tenants.catalog.objects import RECORD_COLUMNS
from tenants.catalog.sqlite import connect as sqlite_connect
from tenants.objects.record import ObjectRecord, record_from_tuple

Backend = Literal["sqlite", "postgresql"]

# The statements the driver was chosen on (catalog step 8), in SQLite's qmark form.
# Planning has read member totals since step 9, but the workload stays as measured.

ACTION_AT = "CASE WHEN o.max_ts <= ? THEN 'reuse' WHEN o.min_ts > ? THEN 'skip' ELSE 'rewrite' END"
LIVE_MEMBERS = (
    "FROM membership m JOIN objects o INDEXED BY objects_plan ON o.id = m.object_id "
    "WHERE m.table_id = ? AND m.removed_ts IS NULL"
)

OBJECT_COLUMNS = (
    "id, object_key, kind, fingerprint, row_count, byte_size, min_ts, max_ts, "
    "min_pk, max_pk, sorted, checksum, created_ts"
).split(", ")
CLOCK_CAS = "UPDATE clock SET last_ts = ? WHERE id = 1 AND last_ts < ?"
INSERT_OBJECT = (  # tenants.objects.record.insert_object
    f"INSERT INTO objects ({', '.join(OBJECT_COLUMNS)}) VALUES ({', '.join('?' * 13)})"
)
MEMBER_COLUMNS = ("table_id", "object_id", "added_ts")
INSERT_MEMBER = "INSERT INTO {table} (table_id, object_id, added_ts) VALUES (?, ?, ?)"
INSTALL_FROM_PINS = (  # engine.restore.install, reused objects join from the job's pins
    "INSERT INTO {table} (table_id, object_id, added_ts) SELECT ?, object_id, ? "
    "FROM job_pins WHERE job_id = ? AND table_id = ? AND action = 'reuse'"
)
PLAN_COUNTS = (  # engine.restore.plan._classify; params (S, S, table, table)
    f"SELECT {ACTION_AT} AS action, COUNT(*), SUM(o.byte_size), "
    "SUM(CASE WHEN o.fingerprint IN (SELECT fingerprint FROM schema_versions "
    f"WHERE table_id = ?) THEN 0 ELSE 1 END) {LIVE_MEMBERS} GROUP BY action"
)
READ_RECORDS = f"SELECT {RECORD_COLUMNS} {LIVE_MEMBERS}"  # tenants.objects.record.live_objects


def postgres_sql(sql: str) -> str:
    """The PostgreSQL text of a qmark statement: no SQLite index hints, ``%s`` params."""
    return re.sub(r"\s+INDEXED BY \w+", "", sql).replace("?", "%s")


def named_sql(sql: str, backend: Backend) -> sa.TextClause:
    """A ``text()`` of a qmark statement: ``?`` becomes ``:p0``, ``:p1`` ..."""
    if backend == "postgresql":
        sql = re.sub(r"\s+INDEXED BY \w+", "", sql)
    count = iter(range(sql.count("?")))
    return sa.text(re.sub(r"\?", lambda _: f":p{next(count)}", sql))


def named(params: Sequence[Any]) -> dict[str, Any]:
    return {f"p{i}": value for i, value in enumerate(params)}


def membership_ddl(name: str) -> list[str]:
    """The ``membership`` table's DDL as the migrations leave it, renamed to ``name``."""
    kept: dict[str, str] = {}
    for _, statements in MIGRATIONS:
        for statement in statements:
            if re.match(r"\s*(CREATE TABLE|ALTER TABLE) membership\b", statement):
                kept[statement] = statement
            elif index := re.match(r"\s*CREATE (?:UNIQUE )?INDEX (\w+) ON membership\b", statement):
                kept[index[1]] = statement
            elif dropped := re.match(r"\s*DROP INDEX (\w+)", statement):
                kept.pop(dropped[1], None)
    return [re.sub(r"\bmembership", name, s) for s in kept.values()]


# ---------------------------------------------------------------------------
# The libraries. Each runs the same five operations.


class SqliteRaw:
    """Today: the stdlib driver on the catalog's own connection settings."""

    library = "sqlite3"

    def __init__(self, path: str) -> None:
        self.conn = sqlite_connect(path)

    @contextmanager
    def _tx(self, begin: str) -> Iterator[None]:
        self.conn.execute(begin)
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT" if begin != "BEGIN" else "ROLLBACK")

    def write_txn(self, ts: int, row: tuple[Any, ...]) -> None:
        with self._tx("BEGIN IMMEDIATE"):
            if self.conn.execute(CLOCK_CAS, (ts, ts)).rowcount != 1:
                raise RuntimeError("clock compare-and-set lost")
            self.conn.execute(INSERT_OBJECT, row)

    def bulk_insert(self, table: str, rows: list[tuple[str, str, int]]) -> None:
        with self._tx("BEGIN IMMEDIATE"):
            self.conn.executemany(INSERT_MEMBER.format(table=table), rows)

    def insert_select(self, table: str, params: tuple[Any, ...]) -> int:
        with self._tx("BEGIN IMMEDIATE"):
            return int(self.conn.execute(INSTALL_FROM_PINS.format(table=table), params).rowcount)

    def plan_counts(self, table_id: str, at_ts: int) -> list[tuple[Any, ...]]:
        with self._tx("BEGIN"):
            return self.conn.execute(PLAN_COUNTS, (at_ts, at_ts, table_id, table_id)).fetchall()

    def read_records(self, table_id: str) -> list[ObjectRecord]:
        with self._tx("BEGIN"):
            return [record_from_tuple(r) for r in self.conn.execute(READ_RECORDS, (table_id,))]

    def run_ddl(self, statements: Sequence[str]) -> None:
        with self._tx("BEGIN IMMEDIATE"):
            for statement in statements:
                self.conn.execute(statement)

    def count(self, table: str) -> int:
        return int(self.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])

    def close(self) -> None:
        self.conn.close()


class PsycopgRaw:
    """psycopg 3, autocommit connection, explicit transaction blocks."""

    library = "psycopg"

    def __init__(self, dsn: str) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.cas, self.insert = postgres_sql(CLOCK_CAS), postgres_sql(INSERT_OBJECT)
        self.plan, self.read = postgres_sql(PLAN_COUNTS), postgres_sql(READ_RECORDS)

    def write_txn(self, ts: int, row: tuple[Any, ...]) -> None:
        with self.conn.transaction():
            if self.conn.execute(self.cas, (ts, ts)).rowcount != 1:
                raise RuntimeError("clock compare-and-set lost")
            self.conn.execute(self.insert, row)

    def bulk_insert(self, table: str, rows: list[tuple[str, str, int]]) -> None:
        with self.conn.transaction(), self.conn.cursor() as cursor:
            cursor.executemany(postgres_sql(INSERT_MEMBER.format(table=table)), rows)

    def copy_insert(self, table: str, rows: list[tuple[str, str, int]]) -> None:
        with self.conn.transaction(), self.conn.cursor() as cursor:
            with cursor.copy(f"COPY {table} ({', '.join(MEMBER_COLUMNS)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)

    def insert_select(self, table: str, params: tuple[Any, ...]) -> int:
        with self.conn.transaction():
            sql = postgres_sql(INSTALL_FROM_PINS.format(table=table))
            return int(self.conn.execute(sql, params).rowcount)

    def plan_counts(self, table_id: str, at_ts: int) -> list[tuple[Any, ...]]:
        with self.conn.transaction():
            return self.conn.execute(self.plan, (at_ts, at_ts, table_id, table_id)).fetchall()

    def read_records(self, table_id: str) -> list[ObjectRecord]:
        with self.conn.transaction():
            return [record_from_tuple(r) for r in self.conn.execute(self.read, (table_id,))]

    def run_ddl(self, statements: Sequence[str]) -> None:
        with self.conn.transaction():
            for statement in statements:
                self.conn.execute(statement)

    def count(self, table: str) -> int:
        row = self.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()
        return int(row[0]) if row else 0

    def set_synchronous_commit(self, value: str) -> None:
        self.conn.execute(f"SET synchronous_commit = {value}")

    def close(self) -> None:
        self.conn.close()


class _HintingSQLiteCompiler(SQLiteCompiler):
    """Renders ``with_hint(t, "INDEXED BY ix", "sqlite")``, which stock SQLAlchemy drops."""

    def get_from_hint_text(self, table: Any, text: str | None) -> str | None:
        return text


def sqlalchemy_engine(target: str, *, hints: bool = True) -> sa.Engine:
    """An engine on ``target``: a ``postgresql://`` DSN (driven by psycopg 3), or a SQLite path.

    On SQLite, connections come from today's ``connect`` (``isolation_level=None``)
    and each transaction begins with ``BEGIN IMMEDIATE``, or ``BEGIN`` on a
    connection marked ``read_only``, as today's ``transaction``/``snapshot`` do.
    """
    if target.startswith("postgresql://"):
        return sa.create_engine(sa.make_url(target).set(drivername="postgresql+psycopg"))
    engine = sa.create_engine("sqlite://", creator=lambda: sqlite_connect(target))

    @sa.event.listens_for(engine, "begin")
    def begin(conn: sa.Connection) -> None:
        read_only = conn.get_execution_options().get("read_only", False)
        conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")

    if hints:
        engine.dialect.statement_compiler = _HintingSQLiteCompiler
    return engine


class SqlalchemyText:
    """SQLAlchemy Core executing today's statements as ``text()``."""

    library = "sqlalchemy_text"

    def __init__(self, engine: sa.Engine, backend: Backend) -> None:
        self.backend = backend
        self.conn = engine.connect()
        self.reader = engine.connect().execution_options(read_only=True)
        self.cas, self.insert = named_sql(CLOCK_CAS, backend), named_sql(INSERT_OBJECT, backend)
        self.plan, self.read = named_sql(PLAN_COUNTS, backend), named_sql(READ_RECORDS, backend)

    def write_txn(self, ts: int, row: tuple[Any, ...]) -> None:
        with self.conn.begin():
            if self.conn.execute(self.cas, {"p0": ts, "p1": ts}).rowcount != 1:
                raise RuntimeError("clock compare-and-set lost")
            self.conn.execute(self.insert, named(row))

    def set_synchronous_commit(self, value: str) -> None:
        with self.conn.begin():
            self.conn.exec_driver_sql(f"SET synchronous_commit = {value}")

    def bulk_insert(self, table: str, rows: list[tuple[str, str, int]]) -> None:
        statement = named_sql(INSERT_MEMBER.format(table=table), self.backend)
        with self.conn.begin():
            self.conn.execute(statement, [{"p0": t, "p1": o, "p2": a} for t, o, a in rows])

    def insert_select(self, table: str, params: tuple[Any, ...]) -> int:
        statement = named_sql(INSTALL_FROM_PINS.format(table=table), self.backend)
        with self.conn.begin():
            return int(self.conn.execute(statement, named(params)).rowcount)

    def plan_counts(self, table_id: str, at_ts: int) -> list[tuple[Any, ...]]:
        with self.reader.begin():
            params = named((at_ts, at_ts, table_id, table_id))
            return [tuple(r) for r in self.reader.execute(self.plan, params)]

    def read_records(self, table_id: str) -> list[ObjectRecord]:
        with self.reader.begin():
            return [record_from_tuple(r) for r in self.reader.execute(self.read, {"p0": table_id})]

    def close(self) -> None:
        self.conn.close()
        self.reader.close()


METADATA = sa.MetaData()
CLOCK = sa.Table(
    "clock",
    METADATA,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("last_ts", sa.BigInteger),
)
OBJECTS = sa.Table(
    "objects",
    METADATA,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("object_key", sa.Text),
    sa.Column("kind", sa.String(8)),
    sa.Column("fingerprint", sa.String(64)),
    *(sa.Column(c, sa.BigInteger) for c in ("row_count", "byte_size", "min_ts", "max_ts")),
    sa.Column("min_pk", sa.Text),
    sa.Column("max_pk", sa.Text),
    sa.Column("sorted", sa.Integer),
    sa.Column("checksum", sa.String(64)),
    sa.Column("created_ts", sa.BigInteger),
)
SCHEMA_VERSIONS = sa.Table(
    "schema_versions",
    METADATA,
    sa.Column("table_id", sa.String(32)),
    sa.Column("fingerprint", sa.String(64)),
)
JOB_PINS = sa.Table(
    "job_pins",
    METADATA,
    *(sa.Column(c, sa.String(32)) for c in ("job_id", "table_id", "object_id")),
    sa.Column("action", sa.String(8)),
)


def membership_table(name: str) -> sa.Table:
    return sa.Table(
        name,
        sa.MetaData(),
        sa.Column("table_id", sa.String(32), primary_key=True),
        sa.Column("object_id", sa.String(32), primary_key=True),
        sa.Column("added_ts", sa.BigInteger),
        sa.Column("removed_ts", sa.BigInteger),
    )


MEMBERSHIP = membership_table("membership")


class SqlalchemyCore:
    """SQLAlchemy Core constructs, built per call as a Core catalog layer would."""

    library = "sqlalchemy_core"

    def __init__(self, engine: sa.Engine, library: str = "sqlalchemy_core") -> None:
        self.library = library
        self.conn = engine.connect()
        self.reader = engine.connect().execution_options(read_only=True)

    def write_txn(self, ts: int, row: tuple[Any, ...]) -> None:
        with self.conn.begin():
            cas = sa.update(CLOCK).where(CLOCK.c.id == 1, CLOCK.c.last_ts < ts).values(last_ts=ts)
            if self.conn.execute(cas).rowcount != 1:
                raise RuntimeError("clock compare-and-set lost")
            self.conn.execute(sa.insert(OBJECTS), dict(zip(OBJECT_COLUMNS, row, strict=True)))

    def set_synchronous_commit(self, value: str) -> None:
        with self.conn.begin():
            self.conn.exec_driver_sql(f"SET synchronous_commit = {value}")

    def bulk_insert(self, table: str, rows: list[tuple[str, str, int]]) -> None:
        target = membership_table(table)
        with self.conn.begin():
            self.conn.execute(
                sa.insert(target),
                [{"table_id": t, "object_id": o, "added_ts": a} for t, o, a in rows],
            )

    def insert_select(self, table: str, params: tuple[Any, ...]) -> int:
        new_table, ts, job, source = params
        pins = (
            sa.select(sa.literal(new_table), JOB_PINS.c.object_id, sa.literal(ts))
            .where(JOB_PINS.c.job_id == job, JOB_PINS.c.table_id == source)
            .where(JOB_PINS.c.action == "reuse")
        )
        statement = sa.insert(membership_table(table)).from_select(list(MEMBER_COLUMNS), pins)
        with self.conn.begin():
            return int(self.conn.execute(statement).rowcount)

    def _live_members(self, table_id: str) -> tuple[sa.Join, Any, Any, sa.ColumnElement[bool]]:
        m, o = MEMBERSHIP.alias("m"), OBJECTS.alias("o")
        where = sa.and_(m.c.table_id == table_id, m.c.removed_ts.is_(None))
        return m.join(o, o.c.id == m.c.object_id), m, o, where

    def plan_counts(self, table_id: str, at_ts: int) -> list[tuple[Any, ...]]:
        joined, _, o, where = self._live_members(table_id)
        action = sa.case(
            (o.c.max_ts <= at_ts, "reuse"), (o.c.min_ts > at_ts, "skip"), else_="rewrite"
        ).label("action")
        known = sa.select(SCHEMA_VERSIONS.c.fingerprint).where(
            SCHEMA_VERSIONS.c.table_id == table_id
        )
        statement = (
            sa.select(
                action,
                sa.func.count(),
                sa.func.sum(o.c.byte_size),
                sa.func.sum(sa.case((o.c.fingerprint.in_(known), 0), else_=1)),
            )
            .select_from(joined)
            .where(where)
            .group_by(action)
            .with_hint(o, "INDEXED BY objects_plan", "sqlite")
        )
        with self.reader.begin():
            return [tuple(r) for r in self.reader.execute(statement)]

    def read_records(self, table_id: str) -> list[ObjectRecord]:
        joined, _, o, where = self._live_members(table_id)
        statement = (
            sa.select(*(o.c[c] for c in OBJECT_COLUMNS))
            .select_from(joined)
            .where(where)
            .with_hint(o, "INDEXED BY objects_plan", "sqlite")
        )
        with self.reader.begin():
            return [record_from_tuple(r) for r in self.reader.execute(statement)]

    def close(self) -> None:
        self.conn.close()
        self.reader.close()


Client = SqliteRaw | PsycopgRaw | SqlalchemyText | SqlalchemyCore
