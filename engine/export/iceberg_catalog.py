"""The Iceberg catalog an export commits to, opened through pyiceberg.

pyiceberg is optional (``pip install 'rewind-tables[iceberg]'``): it is imported
here, when an Iceberg export starts, never at import. A catalog is named by
a URI (``sqlite:///path.db`` or ``postgresql://...``: pyiceberg's SQL catalog;
``http(s)://...``: a REST catalog) or by a name pyiceberg's own
configuration defines (``~/.pyiceberg.yaml``, ``PYICEBERG_CATALOG__<NAME>__*``),
which reaches any catalog pyiceberg supports (Glue, Hive, ...).
"""

from __future__ import annotations

import importlib
import os
import re
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlparse

from tenants.config import S3Settings
from tenants.errors import InvalidArgument, MissingDependency
from tenants.redaction import redact

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

INSTALL_HINT = "pip install 'rewind-tables[iceberg]'"
DEFAULT_NAME = "default"
"""The catalog's name for a URI: pyiceberg's default (``load_catalog()``), so a
reader that opens the same URI without naming one sees the same tables (the
SQL catalog keeps each name's tables apart)."""


def pyiceberg(module: str = "pyiceberg") -> ModuleType:
    """Import (a module of) pyiceberg, or say how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingDependency(f"an Iceberg export needs pyiceberg: {INSTALL_HINT}") from e


def open_iceberg_catalog(
    spec: str,
    *,
    s3: S3Settings | None,
    warehouse: str,
    name: str = DEFAULT_NAME,
    own: str | None = None,
) -> Catalog:
    """The catalog ``spec`` names (see the module doc), reachable: it lists its
    namespaces before anything is written. A URI the export would lose, or one
    naming Rewind's own catalog database, is refused first (:func:`check_catalog_uri`).

    Args:
        spec: a catalog URI, or the name of a catalog in pyiceberg's configuration.
        s3: how the catalog's FileIO reaches S3 (the export's own settings), so
            its metadata lands where Rewind writes the data files.
        warehouse: the catalog's default location for tables it places itself.
        name: the catalog's name for a URI.
        own: the URI of Rewind's own catalog, which may not be the Iceberg catalog.

    Raises:
        MissingDependency: pyiceberg (or a driver it needs) is not installed.
        InvalidArgument: the catalog cannot be opened or reached; it would
            vanish with the process; it is Rewind's own catalog database.
    """
    catalog_module = pyiceberg("pyiceberg.catalog")
    check_catalog_uri(spec, own)
    properties: dict[str, Any] = {} if s3 is None else s3.to_pyiceberg()
    if "://" in spec:
        properties |= {"uri": sql_uri(spec), "warehouse": warehouse}
        if spec.startswith(("sqlite:", "postgresql:", "postgres:")):
            properties["type"] = "sql"
        label = name
    else:
        label = spec
    where = redact(spec)
    try:
        catalog = catalog_module.load_catalog(label, **properties)
    except ImportError as e:
        raise MissingDependency(
            f"the Iceberg catalog {where} needs a package that is not installed ({e}): "
            f"{INSTALL_HINT}"
        ) from e
    except Exception as e:  # noqa: BLE001 - pyiceberg raises ValueError, SQLAlchemy its own
        raise InvalidArgument(
            f"cannot open the Iceberg catalog {where}: {redact(_first_line(e))}"
        ) from e
    try:
        catalog.list_namespaces()
    except Exception as e:  # noqa: BLE001 - a driver's or a server's error
        close_catalog(catalog)
        raise InvalidArgument(
            f"cannot reach the Iceberg catalog {where}: {redact(_first_line(e))}"
        ) from e
    return catalog


def check_catalog_uri(spec: str, own: str | None) -> None:
    """Refuse, before pyiceberg creates its tables anywhere, an Iceberg catalog URI
    that would lose the export or damage Rewind's catalog.

    An in-memory SQLite catalog (``sqlite://``, ``sqlite:///``, ``:memory:``,
    ``file::memory:``, ``mode=memory``) "succeeds" and vanishes with the
    process, leaving files that then block a real export to the same place.
    Rewind's own catalog database (the same SQLite file, through any path or
    symlink; the same PostgreSQL host, port, database and schema) would get
    pyiceberg's tables, which ``rewind catalog copy`` then refuses.

    Raises:
        InvalidArgument: one line naming the catalog and what to use instead.
    """
    scheme, sep, _ = spec.partition("://")
    if not sep:
        return  # a name from pyiceberg's configuration: pyiceberg resolves it
    where = redact(spec)
    kind = scheme.lower().split("+", 1)[0]
    if kind == "sqlite":
        path = _sqlite_file(spec)
        if path is None:
            raise InvalidArgument(
                f"the Iceberg catalog {where} would vanish with the process, and the export "
                "with it: name a file (sqlite:///path/iceberg.db) or a server"
            )
        same = own is not None and own.startswith("sqlite:") and _same_file(path, own)
    elif kind in ("postgresql", "postgres"):
        same = own is not None and own.startswith(("postgresql:", "postgres:"))
        same = same and _pg_identity(spec) == _pg_identity(own or "")
    else:
        return
    if same:
        raise InvalidArgument(
            f"the Iceberg catalog {where} is Rewind's own catalog ({redact(own or '')}): "
            "pyiceberg would add its tables to it, and a later catalog copy would refuse it "
            "then; use another database (on PostgreSQL, another schema will do)"
        )


def _sqlite_file(uri: str) -> Path | None:
    """The file a SQLAlchemy SQLite URI names; None for an in-memory database."""
    rest = uri.partition("://")[2]
    database, _, query = rest.partition("/")[2].partition("?")
    database = unquote(database)
    if parse_qs(query).get("mode") == ["memory"] or database in ("", ":memory:"):
        return None
    if database.startswith("file:"):  # an SQLite URI filename (uri=true)
        database = urlparse(database).path
        if database in ("", ":memory:") or database.startswith(":memory:"):
            return None
    return Path(database)


def _same_file(path: Path, own: str) -> bool:
    """Whether ``path`` is the file of the SQLite catalog URI ``own``."""
    mine = _sqlite_file(own)
    if mine is None:
        return False
    if path.resolve() == mine.resolve():
        return True
    return path.exists() and mine.exists() and os.path.samefile(path, mine)


def _pg_identity(uri: str) -> tuple[str, str, str, str | None]:
    """(host, port, database, schema) of a PostgreSQL URI, normalised: a loopback
    address or a local socket is one host, the port defaults to 5432, and the
    schema is the ``search_path`` its ``options`` set (None: the default)."""
    import psycopg

    rest = uri.partition("://")[2]
    try:
        params = psycopg.conninfo.conninfo_to_dict("postgresql://" + rest)
    except psycopg.ProgrammingError:
        return ("", "", uri, None)  # unparseable: the catalog refuses it when opened
    host = str(params.get("host") or "localhost").lower()
    if host in _LOOPBACK or host.startswith("/"):
        host = "localhost"
    database = str(params.get("dbname") or params.get("user") or "")
    found = _SEARCH_PATH.search(str(params.get("options") or ""))
    schema = found.group(1).strip("\"'").lower() if found else None
    return host, str(params.get("port") or "5432"), database, schema


_LOOPBACK = ("localhost", "127.0.0.1", "::1", "[::1]")
_SEARCH_PATH = re.compile(r"-c\s*search_path\s*=\s*(\S+)", re.IGNORECASE)


def sql_uri(uri: str) -> str:
    """A PostgreSQL URI as SQLAlchemy takes it with psycopg 3, Rewind's own driver
    (``postgresql://`` alone would ask SQLAlchemy for psycopg2)."""
    for prefix in ("postgresql://", "postgres://"):
        if uri.startswith(prefix):
            return "postgresql+psycopg://" + uri[len(prefix) :]
    return uri


def close_catalog(catalog: Catalog) -> None:
    """Release the catalog's connections (a SQL catalog's pool)."""
    close = getattr(catalog, "close", None)
    if callable(close):
        close()


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0][:300]
