"""Model-based test of ``rewind export``: random histories against ``tests/helpers/oracle.py``.

The histories are those of ``test_model_restore`` (writes, updates as delete
+ upsert, deletes of present and absent keys, partial and full compactions
with small targets, snapshots created and dropped, a column added and maybe
dropped). Every standing snapshot, then now, is exported in time order:

- as Parquet to one ``file://`` destination (each export replacing the last),
  read back after each export by DuckDB and polars, and by Spark's JVM
  Parquet reader for the last one;
- as Iceberg, into one Iceberg table per Rewind table (on S3, another
  bucket), so that afterwards each Iceberg snapshot, read by pyiceberg's own
  scan, must be the oracle's rows at its Rewind snapshot: exports of several
  snapshots are the Iceberg table's time travel, schema changes included.

Objects wholly visible at a snapshot are copied, not rewritten: the
compactions of these histories make some (``event`` counts them).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
from hypothesis import event, given

from engine.export import export_tables
from engine.export.parquet import POINTER
from tenants.objectstore.embedded import EmbeddedS3
from tests.engine.export.test_export import open_iceberg
from tests.engine.restore.test_model_restore import (
    DB,
    PRIMARY_KEYS,
    TENANT,
    Model,
    Op,
    histories,
    model,
)
from tests.helpers.oracle import Row

# Not the catalog's behaviour: on SQLite alone (conftest.py, one_catalog).
pytestmark = pytest.mark.one_catalog

TABLES = ("items", "orders")


def ordered(table: str, rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: tuple(r[k] for k in PRIMARY_KEYS[table]))


def check_parquet(m: Model, out: Path, at_ts: int, spark: Any | None) -> None:
    pointer = json.loads((out / POINTER).read_text())
    for table in TABLES:
        expected = m.expected(table, at_ts)
        folder = out / pointer["tables"][f"{DB}.{table}"]["path"]
        pk = ", ".join(PRIMARY_KEYS[table])
        rows = duckdb.sql(f"SELECT * FROM read_parquet('{folder}/*.parquet') ORDER BY {pk}")
        assert rows.columns == m.schema_at(table, at_ts).names, table
        assert rows.fetchall() == [tuple(r.values()) for r in expected], (table, at_ts)
        assert pl.read_parquet(f"{folder}/*.parquet").to_dicts() == expected, (table, at_ts)
        if spark is not None:
            read = spark.read.parquet(f"file://{folder}")
            assert read.columns == m.schema_at(table, at_ts).names, table
            got = [r.asDict() for r in read.collect()]
            assert ordered(table, got) == expected, (table, at_ts, "spark")


def check_iceberg(
    m: Model, catalog_uri: str, s3: EmbeddedS3, points: list[tuple[str | int, int]]
) -> int:
    """Each Iceberg table's snapshots are the points' exports, in order, each
    reading as the oracle at its time; returns the files copied, not rewritten."""
    catalog = open_iceberg(catalog_uri, s3)
    reused = 0
    try:
        for table in TABLES:
            iceberg = catalog.load_table(f"{DB}.{table}")
            snapshots = iceberg.snapshots()
            assert len(snapshots) == len(points), table
            for snapshot, (point, at_ts) in zip(snapshots, points, strict=True):
                summary = snapshot.summary
                assert summary.get("rewind.ts") == str(at_ts)
                assert summary.get("rewind.snapshot") == (point if isinstance(point, str) else None)
                reused += int(summary.get("rewind.reused-files") or 0)
                rows = iceberg.scan(snapshot_id=snapshot.snapshot_id).to_arrow()
                names = m.schema_at(table, at_ts).names
                assert rows.column_names == names, (table, at_ts)
                assert ordered(table, rows.to_pylist()) == m.expected(table, at_ts), (table, at_ts)
    finally:
        catalog.close()
    return reused


@given(history=histories())
def test_exports_at_every_protected_time_read_back_as_the_oracle_in_every_engine(
    s3_server: EmbeddedS3,
    new_catalog_uri: Callable[[], str],
    tmp_path_factory: Any,
    spark: Any,
    history: list[Op],
) -> None:
    catalog_uri = new_catalog_uri()
    iceberg_catalog = (
        new_catalog_uri()  # a fresh schema of the run's PostgreSQL database
        if catalog_uri.startswith("postgresql")
        else f"sqlite:///{tmp_path_factory.mktemp('iceberg') / 'catalog.db'}"
    )
    out = tmp_path_factory.mktemp("parquet") / "out"
    lake = f"rewind-lake-{uuid.uuid4().hex[:12]}"
    s3_server.create_bucket(lake)
    with model(s3_server, catalog_uri) as m:
        for op in history:
            m.apply(op)
        points: list[tuple[str | int, int]] = sorted(m.snapshots.items(), key=lambda p: p[1])
        now = m.store.now()
        points.append((now, now))
        for index, (point, at_ts) in enumerate(points):
            export_tables(m.store, TENANT, f"{DB}.*", point, f"file://{out}")
            check_parquet(m, out, at_ts, spark if index == len(points) - 1 else None)
            export_tables(
                m.store,
                TENANT,
                f"{DB}.*",
                point,
                f"s3://{lake}/warehouse",
                format="iceberg",
                iceberg_catalog=iceberg_catalog,
            )
        reused = check_iceberg(m, iceberg_catalog, s3_server, points)
    event(f"points exported: {len(points)}")
    event(f"objects copied as they are: {min(reused, 10)}{'+' if reused >= 10 else ''}")
