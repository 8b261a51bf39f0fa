"""The Spark reader's public entry: a table at a snapshot or time, as a DataFrame.

:func:`read_as_of` opens the store (or takes the caller's) and hands the plan
to the distributed MVCC scan, :mod:`tenants.spark.scan`, whose functions are
also importable from here. The store depends on the scan, never on this
module (``TableStore.read(reader="spark")`` uses the scan directly), so the
dependency runs one way: this module → ``tenants.store`` → ``tenants.spark.scan``.
"""

from __future__ import annotations

from typing import Any

from tenants.names import qualified_table
from tenants.spark.scan import read_function, read_spark, spark_dataframe
from tenants.store import TableStore
from tenants.times import AsOf

__all__ = ["read_as_of", "read_function", "read_spark", "spark_dataframe"]


def read_as_of(
    spark: Any,
    tenant: str,
    table: str,
    as_of: AsOf | None = None,
    *,
    store: TableStore | None = None,
) -> Any:
    """The visible rows of ``table`` (``"db.table"``) at ``as_of``, as a Spark
    DataFrame of the table's columns as of then.

    The MVCC rules run in the executors: each task reads its objects and keeps
    events at or before the time; a window per primary key keeps the newest
    (the data version wins a tie with a tombstone). Nothing is collected to the
    driver. The DataFrame is lazy and its objects are not pinned: evaluate it
    within GC's grace period for replaced objects (1 h by default, `rewind gc --grace DURATION`),
    or restore the table first.

    Args:
        spark: the session to run on (its master decides where; on a cluster
            Rewind's code is shipped with the first job).
        tenant: tenant name (or ``name@id``).
        table: ``database.table``.
        as_of: the time (:data:`tenants.times.AsOf`): a snapshot name (searched
            through the tenant's lineage), an ISO-8601 instant, a ts in µs or a
            time before now (``-1h``); None: now.
        store: the table store; default ``TableStore.open()`` from
            ``REWIND_CATALOG``, ``REWIND_WAREHOUSE`` and the AWS variables.

    Raises:
        InvalidArgument: a malformed time.
        InvalidName: ``table`` is not ``database.table``.
        NotFound, UnprotectedTime: as for any read.
    """
    qualified_table(table)  # before the store opens
    owned = store is None
    store = store or TableStore.open()
    try:
        plan = store.plan_read(tenant, table, as_of)
        return spark_dataframe(store.objects, plan, spark)
    finally:
        if owned:
            store.close()
