"""The Iceberg catalog an export commits to, opened through pyiceberg.

pyiceberg is optional (``pip install 'rewind[iceberg]'``): it is imported
here, when an Iceberg export starts, never at import. A catalog is named by
a URI (``sqlite:///path.db`` or ``postgresql://...``: pyiceberg's SQL catalog;
``http(s)://...``: a REST catalog) or by a name pyiceberg's own
configuration defines (``~/.pyiceberg.yaml``, ``PYICEBERG_CATALOG__<NAME>__*``),
which reaches any catalog pyiceberg supports (Glue, Hive, ...).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any

from tenants.config import S3Settings
from tenants.errors import InvalidArgument, MissingDependency
from tenants.redaction import redact

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

INSTALL_HINT = "pip install 'rewind[iceberg]'"
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
    spec: str, *, s3: S3Settings | None, warehouse: str, name: str = DEFAULT_NAME
) -> Catalog:
    """The catalog ``spec`` names (see the module doc), reachable: it lists its
    namespaces before anything is written.

    Args:
        spec: a catalog URI, or the name of a catalog in pyiceberg's configuration.
        s3: how the catalog's FileIO reaches S3 (the export's own settings), so
            its metadata lands where Rewind writes the data files.
        warehouse: the catalog's default location for tables it places itself.
        name: the catalog's name for a URI.

    Raises:
        MissingDependency: pyiceberg (or a driver it needs) is not installed.
        InvalidArgument: the catalog cannot be opened or reached.
    """
    catalog_module = pyiceberg("pyiceberg.catalog")
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
