"""Rewind's table store: tenants of tables on S3, written in commits, read at any
protected time (snapshots and PITR windows), compacted without losing history.

The public API is what this package exports (``__all__``, listed in
docs/api.md): ``from tenants import TableStore, TableSchema``. Every other
module is internal and may move. Exports load on first use, so importing
``tenants`` costs no pyarrow, pyspark or boto3 until a name is used.

A time is named one way everywhere (:data:`AsOf`): a snapshot name, an
ISO-8601 instant, a ts in µs, or a time relative to the catalog's clock
(``now``, ``-1h``, ``PT15M``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING, Any

from tenants import allocator as _allocator  # first: before anything loads pyarrow

del _allocator

# The one place the version is written; pyproject.toml reads it from here, and a
# Spark worker compares it with the driver's (tenants.spark.probe).
__version__ = "0.1.0"

_EXPORTS = {
    "TableStore": "tenants.store",
    "TableSchema": "tenants.schema",
    "S3Settings": "tenants.config",
    "AsOf": "tenants.times",
    "read_as_of": "tenants.spark_reader",
    "get_spark": "tenants.spark.session",
    "to_duckdb": "tenants.reads.interop",
    "to_polars": "tenants.reads.interop",
    "duckdb_sql": "tenants.reads.interop",
    "diff_table": "tenants.changes.diff",
    "StepEvent": "tenants.observe.events",
    "EventFormatter": "tenants.observe.events",
    "RewindError": "tenants.errors",
    "TransientError": "tenants.errors",
    "InvalidArgument": "tenants.errors",
    "InvalidName": "tenants.errors",
    "NotFound": "tenants.errors",
    "AlreadyExists": "tenants.errors",
    "UnprotectedTime": "tenants.errors",
    "SchemaMismatch": "tenants.errors",
    "KeyViolation": "tenants.errors",
    "ConcurrentModification": "tenants.errors",
    "RestoreInProgress": "tenants.errors",
    "TableBeingRestored": "tenants.errors",
    "TenantDropped": "tenants.errors",
    "NotConfirmed": "tenants.errors",
    "MissingDependency": "tenants.errors",
    "StorageError": "tenants.errors",
    "ObjectMissing": "tenants.errors",
    "CorruptObject": "tenants.errors",
    "CatalogBusy": "tenants.errors",
    "CatalogUnavailable": "tenants.errors",
    "CatalogMoved": "tenants.errors",
    "CatalogVersionError": "tenants.errors",
    "ForeignWarehouse": "tenants.errors",
    "WarehouseOwned": "tenants.errors",
    "ClusterMisconfigured": "tenants.errors",
    "TaskFailed": "tenants.errors",
    "CopyMismatch": "tenants.errors",
    "Locked": "tenants.errors",
    "RevertConflict": "tenants.errors",
}

__all__ = ["__version__", *_EXPORTS]


def lazy_exports(
    package: str, exports: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` for PEP 562 lazy exports: each
    name of ``exports`` (name -> module) is imported from its module on first
    use and kept in the package's namespace, so later lookups skip this. Used by
    this package, ``engine`` and ``engine.export``; internal (not in ``__all__``)."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return __getattr__, __dir__


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:  # what a type checker and an IDE see; at run time, __getattr__
    from tenants.changes.diff import diff_table as diff_table
    from tenants.config import S3Settings as S3Settings
    from tenants.errors import AlreadyExists as AlreadyExists
    from tenants.errors import CatalogBusy as CatalogBusy
    from tenants.errors import CatalogMoved as CatalogMoved
    from tenants.errors import CatalogUnavailable as CatalogUnavailable
    from tenants.errors import CatalogVersionError as CatalogVersionError
    from tenants.errors import ClusterMisconfigured as ClusterMisconfigured
    from tenants.errors import ConcurrentModification as ConcurrentModification
    from tenants.errors import CopyMismatch as CopyMismatch
    from tenants.errors import CorruptObject as CorruptObject
    from tenants.errors import ForeignWarehouse as ForeignWarehouse
    from tenants.errors import InvalidArgument as InvalidArgument
    from tenants.errors import InvalidName as InvalidName
    from tenants.errors import KeyViolation as KeyViolation
    from tenants.errors import Locked as Locked
    from tenants.errors import MissingDependency as MissingDependency
    from tenants.errors import NotConfirmed as NotConfirmed
    from tenants.errors import NotFound as NotFound
    from tenants.errors import ObjectMissing as ObjectMissing
    from tenants.errors import RestoreInProgress as RestoreInProgress
    from tenants.errors import RevertConflict as RevertConflict
    from tenants.errors import RewindError as RewindError
    from tenants.errors import SchemaMismatch as SchemaMismatch
    from tenants.errors import StorageError as StorageError
    from tenants.errors import TableBeingRestored as TableBeingRestored
    from tenants.errors import TaskFailed as TaskFailed
    from tenants.errors import TenantDropped as TenantDropped
    from tenants.errors import TransientError as TransientError
    from tenants.errors import UnprotectedTime as UnprotectedTime
    from tenants.errors import WarehouseOwned as WarehouseOwned
    from tenants.observe.events import EventFormatter as EventFormatter
    from tenants.observe.events import StepEvent as StepEvent
    from tenants.reads.interop import duckdb_sql as duckdb_sql
    from tenants.reads.interop import to_duckdb as to_duckdb
    from tenants.reads.interop import to_polars as to_polars
    from tenants.schema import TableSchema as TableSchema
    from tenants.spark.session import get_spark as get_spark
    from tenants.spark_reader import read_as_of as read_as_of
    from tenants.store import TableStore as TableStore
    from tenants.times import AsOf as AsOf
