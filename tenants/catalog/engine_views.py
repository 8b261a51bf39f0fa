"""The SQL Rewind speaks to an engine other than its catalog: DuckDB views.

``rewind query --sql`` (tenants.interop.duckdb_sql) shows each ``db.table`` a
query names as a DuckDB view over the table's rows at one time. The two
statements live here so that every statement Rewind writes sits in one
package. DuckDB takes no parameters for identifiers, so the names are quoted:
they are validated table and database names (tenants.names) before they get
here, and a quote inside one would be doubled anyway.
"""

from __future__ import annotations

from typing import Any


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def create_table_view(connection: Any, database: str, table: str, relation: str) -> None:
    """Make ``database.table`` in DuckDB a view of the registered ``relation``."""
    connection.execute(f"CREATE SCHEMA IF NOT EXISTS {_quoted(database)}")
    connection.execute(
        f"CREATE OR REPLACE VIEW {_quoted(database)}.{_quoted(table)} "
        f"AS SELECT * FROM {_quoted(relation)}"
    )
