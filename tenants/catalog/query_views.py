"""The SQL Rewind speaks to an engine other than its catalog: DuckDB's sandbox and views.

``rewind query --sql`` (tenants.reads.interop.duckdb_sql) runs a user's query on a
DuckDB connection that can read nothing but the views Rewind registers on
it: each ``db.table`` the query names, over the table's rows at one time.
The settings and statements live here so that every statement Rewind writes
sits in one package. DuckDB takes no parameters for identifiers, so the
names are quoted: they are validated table and database names
(tenants.names) before they get here, and a quote inside one would be
doubled anyway.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

# What a sandboxed connection may not do, set when it opens and then locked,
# so that no statement run on it (``SET``, ``RESET``, ``PRAGMA``) can undo it.
# External access off shuts every file, URL and Python-variable scan
# (read_parquet, COPY ... TO, ATTACH, glob, a replacement scan of a name);
# Arrow streams handed over by ``from_arrow`` are not files and stay readable.
# The extension settings keep a query from loading code DuckDB would fetch.
SANDBOX = {
    "enable_external_access": False,
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    "allow_community_extensions": False,
    "allow_unsigned_extensions": False,
    "lock_configuration": True,
}


def sandboxed_connection(duck: ModuleType) -> Any:
    """A new in-memory DuckDB connection that reads no file and whose settings
    no statement can change (:data:`SANDBOX`)."""
    return duck.connect(":memory:", config=dict(SANDBOX))


def relation_name(database: str, table: str) -> str:
    """The hidden DuckDB name of the stream of ``database.table``.

    One name per table, whatever its name holds: the hex of each name's UTF-8
    bytes, joined by ``:``, which hex never holds, so the name decodes back to
    the pair (injective). Hex digits are lowercase, so no two names differ only
    in case either, which DuckDB would not tell apart. The ``:`` also keeps it
    from ever being a Rewind name (tenants.names), so a user's ``main.x`` is
    never a hidden relation.
    """
    return f"rewind:{database.encode().hex()}:{table.encode().hex()}"


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def create_table_view(connection: Any, database: str, table: str, relation: str) -> None:
    """Make ``database.table`` in DuckDB a view of the registered ``relation``."""
    connection.execute(f"CREATE SCHEMA IF NOT EXISTS {_quoted(database)}")
    connection.execute(
        f"CREATE OR REPLACE VIEW {_quoted(database)}.{_quoted(table)} "
        f"AS SELECT * FROM {_quoted(relation)}"
    )
