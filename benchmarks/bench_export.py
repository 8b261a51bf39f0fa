"""Export of a table at a snapshot: zero copy, against a full rewrite and DuckDB's COPY.

The table (``db.events``: ``id`` int64 key, ``name`` string, ``payload`` 160
random bytes, ``amount`` double; ~176 stored bytes a row) is written in ten
commits of interleaved keys and fully compacted into ~20 objects of equal
size, each holding rows of every commit. Before snapshot S, one commit updates and one deletes keys inside one
object's range: that object (~5% of the bytes) is no longer wholly visible at
S; every other is. After S more commits land (they are not in the export).
Full size 1 GB of objects at S (``--mb``; ``--quick``: 20 MB), on moto S3
(exports go to another bucket of the same endpoint) and on ``file://``.

Four ways to get the table at S out, each timed once, each checked to hold
the table's rows at S:

1. ``export_tables(format="iceberg")``: the wholly visible objects copied
   inside the object store (S3 CopyObject, a file copy), the rest rewritten;
   one Iceberg commit (a SQLite catalog).
2. the same with ``zero_copy=False``: every row rewritten.
3. ``export_tables(format="parquet")``: plain Parquet of the visible rows.
4. DuckDB: ``COPY (SELECT * FROM rel) TO 'x.parquet'`` over ``to_duckdb`` (the
   Arrow stream of the rows at S), to a local file.

Bytes are counted where they move: the export's destination object store is
wrapped, so every byte Rewind's process writes through it (``put``, streamed
outputs) is counted apart from what it copies server-side (``copy_from``);
Iceberg metadata (written by pyiceberg's own FileIO) is counted from the
listing; the key columns read to decide which objects are wholly visible are
reported too. On moto the "server" is a thread of this process: a server-side
copy there still costs this machine's CPU and memory bandwidth, so its time
is an upper bound of what S3 itself would take, not a measure of it; the
bytes it does not send through Rewind's code are the point.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from rich.console import Console
from rich.table import Table

import engine.export.api as export_api
import engine.export.iceberg as export_iceberg
from benchmarks.common import (
    BACKENDS,
    MB,
    Backend,
    finish_run,
    load_average,
    moto_server,
    open_store,
    timed,
)
from engine.export import ExportResult, export_tables
from tenants.objectstore import ObjectOutput, ObjectStore
from tenants.reads.wholly_visible import wholly_visible
from tenants.schema import TableSchema
from tenants.store import TableStore

NAME = "bench_export"
TENANT, DATABASE, TABLE = "acme", "db", "events"
SNAPSHOT = "s"
SCHEMA = TableSchema.of(
    [("id", "int64"), ("name", "string"), ("payload", "binary"), ("amount", "double")], ["id"]
)
PAYLOAD = 160
STORED_BYTES_PER_ROW = 176  # measured: zstd cannot shrink the random payload
OBJECTS = 20
COMMITS = 10

console = Console() if sys.stdout.isatty() else Console(width=170)


def rows(keys: np.ndarray, rng: np.random.Generator, version: int = 0) -> pa.Table:
    n = len(keys)
    payload = rng.integers(0, 256, size=(n, PAYLOAD), dtype=np.uint8).tobytes()
    offsets = np.arange(0, (n + 1) * PAYLOAD, PAYLOAD, dtype=np.int32)
    return pa.table(
        {
            "id": pa.array(keys, pa.int64()),
            "name": pa.array([f"user-{k}-v{version}" for k in keys.tolist()], pa.string()),
            "payload": pa.Array.from_buffers(
                pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(payload)]
            ),
            "amount": pa.array(rng.normal(100.0, 40.0, n), pa.float64()),
        }
    )


def build(store: TableStore, total_bytes: int, *, seed: int) -> dict[str, Any]:
    """The table of the module doc; returns what it holds at S."""
    rng = np.random.default_rng(seed)
    n = max(OBJECTS * 100, total_bytes // STORED_BYTES_PER_ROW)
    store.create_tenant(TENANT)
    store.create_table(TENANT, f"{DATABASE}.{TABLE}", SCHEMA)
    # Keys interleaved across commits, so every compacted object merges all ten
    # (a key read decides that it holds one version per key).
    for part in np.array_split(rng.permutation(n).astype(np.int64), COMMITS):
        store.write(TENANT, f"{DATABASE}.{TABLE}", upserts=rows(np.sort(part), rng))
    stored = sum(o.bytes for _, o in store.objects_of(TENANT))
    store.compact(TENANT, full=True, target_bytes=max(1, stored // OBJECTS))
    # Inside the middle object's range, before S: an update and a delete.
    middle = n // 2
    touched = np.arange(middle, middle + 50, dtype=np.int64)
    store.write(TENANT, f"{DATABASE}.{TABLE}", upserts=rows(touched, rng, version=1))
    store.write(
        TENANT, f"{DATABASE}.{TABLE}", deletes=pa.table({"id": pa.array([middle + 60], pa.int64())})
    )
    store.create_snapshot(TENANT, SNAPSHOT)
    for start in (0, n // 4, 3 * n // 4):  # after S: not in the export
        store.write(
            TENANT,
            f"{DATABASE}.{TABLE}",
            upserts=rows(np.arange(start, start + 100, dtype=np.int64), rng, 2),
        )
    plan = store.plan_read(TENANT, f"{DATABASE}.{TABLE}", SNAPSHOT)
    split = wholly_visible(store.objects, plan)
    return {
        "rows_at_s": store.read(TENANT, f"{DATABASE}.{TABLE}", as_of=SNAPSHOT).num_rows,
        "objects_at_s": len(plan.objects),
        "bytes_at_s": sum(o.bytes for o in plan.objects),
        "wholly_visible_objects": len(split.whole),
        "wholly_visible_bytes": split.whole_bytes,
    }


class Counting:
    """The export's destination object store, counting the bytes Rewind's process
    writes through it apart from those it copies server-side."""

    def __init__(self, inner: ObjectStore, tally: dict[str, int]) -> None:
        self._inner = inner
        self._tally = tally
        self.warehouse = inner.warehouse

    def put(self, key: str, data: bytes) -> None:
        self._tally["written"] += len(data)
        self._inner.put(key, data)

    def open_output(self, key: str) -> ObjectOutput:
        return _CountingOutput(self._inner.open_output(key), self._tally)

    def copy_from(self, source: ObjectStore, source_key: str, dest_key: str) -> bool:
        done = self._inner.copy_from(source, source_key, dest_key)
        if done:
            self._tally["copied"] += self._inner.head(dest_key).size
        return done

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _CountingOutput:
    def __init__(self, inner: ObjectOutput, tally: dict[str, int]) -> None:
        self._inner = inner
        self._tally = tally

    def write(self, data: bytes | memoryview) -> int:
        self._tally["written"] += memoryview(data).nbytes
        return self._inner.write(data)

    def commit(self) -> None:
        self._inner.commit()

    def abort(self) -> None:
        self._inner.abort()


@contextmanager
def counted() -> Iterator[dict[str, int]]:
    """Count the bytes of every export destination opened inside."""
    tally = {"written": 0, "copied": 0}
    originals = (export_api.open_target, export_iceberg.open_target)

    def wrapped(*args: Any) -> ObjectStore:
        return Counting(originals[0](*args), tally)  # type: ignore[return-value]

    export_api.open_target = wrapped  # type: ignore[assignment]
    export_iceberg.open_target = wrapped  # type: ignore[assignment]
    try:
        yield tally
    finally:
        export_api.open_target, export_iceberg.open_target = originals


def _export_case(
    name: str, run: Callable[[], ExportResult], table_bytes: int, rows_at_s: int
) -> dict[str, Any]:
    with counted() as tally:
        result, seconds = timed(run)
    if result.rows != rows_at_s:
        raise RuntimeError(f"{name}: exported {result.rows} rows, the table has {rows_at_s} at S")
    table = result.tables[0]
    through = tally["written"]
    return {
        "case": name,
        "seconds": seconds,
        "mb_per_s": table_bytes / MB / seconds,
        "rows": result.rows,
        "files": table.files,
        "reused_files": table.reused_files,
        "rewritten_files": table.rewritten_files,
        "bytes_written_by_rewind": through,
        "bytes_copied_server_side": tally["copied"],
        "metadata_bytes": result.metadata_bytes,
        "key_bytes_read": table.checked_bytes,
        "written_over_table": through / table_bytes,
        "written_and_metadata_over_table": (through + result.metadata_bytes) / table_bytes,
    }


def _duckdb_case(store: TableStore, out: Path, table_bytes: int, rows_at_s: int) -> dict[str, Any]:
    import duckdb

    from tenants.reads.interop import to_duckdb

    connection = duckdb.connect()
    path = out / "events.parquet"

    def copy() -> None:
        to_duckdb(
            store,
            TENANT,
            f"{DATABASE}.{TABLE}",
            as_of=SNAPSHOT,
            connection=connection,
            name="rel",
        )
        connection.execute(f"COPY (SELECT * FROM rel) TO '{path}' (FORMAT parquet)")

    _, seconds = timed(copy)
    connection.close()
    written = path.stat().st_size
    if pq.read_metadata(path).num_rows != rows_at_s:
        raise RuntimeError("duckdb: the COPY holds another number of rows than the table at S")
    return {
        "case": "duckdb_copy",
        "seconds": seconds,
        "mb_per_s": table_bytes / MB / seconds,
        "rows": rows_at_s,
        "files": 1,
        "reused_files": 0,
        "rewritten_files": 1,
        "bytes_written_by_rewind": written,
        "bytes_copied_server_side": 0,
        "metadata_bytes": 0,
        "key_bytes_read": 0,
        "written_over_table": written / table_bytes,
        "written_and_metadata_over_table": written / table_bytes,
    }


def import_pyiceberg() -> float:
    """Import what an Iceberg export uses, once, before any case is timed (its
    first import takes seconds, which would land on whichever case ran first)."""

    def load() -> None:
        import pyiceberg.catalog.sql  # noqa: F401
        import pyiceberg.io.pyarrow  # noqa: F401
        import pyiceberg.manifest  # noqa: F401
        import pyiceberg.table  # noqa: F401

    return timed(load)[1]


def run_backend(backend: Backend, total_bytes: int, *, seed: int) -> dict[str, Any]:
    out = Path(tempfile.mkdtemp(prefix="rewind-bench-export-"))
    try:
        with open_store(backend) as store:
            built, build_s = timed(lambda: build(store, total_bytes, seed=seed))
            if backend == "moto":
                bucket = f"rewind-bench-lake-{uuid.uuid4().hex[:12]}"
                moto_server().create_bucket(bucket)
                lake = f"s3://{bucket}/lake"
            else:
                lake = f"file://{out / 'lake'}"
            catalog = f"sqlite:///{out / 'iceberg.db'}"
            table_bytes, rows_at_s = built["bytes_at_s"], built["rows_at_s"]

            def iceberg(namespace: str, zero_copy: bool) -> Callable[[], ExportResult]:
                return lambda: export_tables(
                    store,
                    TENANT,
                    f"{DATABASE}.{TABLE}",
                    SNAPSHOT,
                    lake,
                    format="iceberg",
                    iceberg_catalog=catalog,
                    namespace=namespace,
                    zero_copy=zero_copy,
                )

            def parquet() -> ExportResult:
                return export_tables(
                    store, TENANT, f"{DATABASE}.{TABLE}", SNAPSHOT, f"{lake}/parquet"
                )

            cases = [
                _export_case("iceberg_zero_copy", iceberg("zero", True), table_bytes, rows_at_s),
                _export_case("iceberg_rewrite_all", iceberg("full", False), table_bytes, rows_at_s),
                _export_case("parquet", parquet, table_bytes, rows_at_s),
                _duckdb_case(store, out, table_bytes, rows_at_s),
            ]
    finally:
        shutil.rmtree(out, ignore_errors=True)
    by = {c["case"]: c for c in cases}
    zero, full = by["iceberg_zero_copy"], by["iceberg_rewrite_all"]
    return {
        "backend": backend,
        "build_seconds": build_s,
        "table": built,
        "cases": cases,
        "ratios": {
            "zero_copy_written_over_table": zero["written_over_table"],
            "zero_copy_written_and_metadata_over_table": zero["written_and_metadata_over_table"],
            "rewrite_all_written_over_zero_copy_written": full["bytes_written_by_rewind"]
            / max(1, zero["bytes_written_by_rewind"]),
            "rewrite_all_time_over_zero_copy_time": full["seconds"] / zero["seconds"],
            "parquet_time_over_zero_copy_time": by["parquet"]["seconds"] / zero["seconds"],
            "duckdb_time_over_zero_copy_time": by["duckdb_copy"]["seconds"] / zero["seconds"],
        },
    }


def report(payload: dict[str, Any]) -> None:
    for run in payload["runs"]:
        t = run["table"]
        table = Table(
            title=f"{run['backend']}: db.events at S, {t['bytes_at_s'] / MB:.0f} MB in "
            f"{t['objects_at_s']} objects, {t['rows_at_s']:,} rows; "
            f"{t['wholly_visible_objects']} objects ({t['wholly_visible_bytes'] / t['bytes_at_s']:.0%} "
            "of the bytes) wholly visible"
        )
        for column in (
            "case", "s", "MB/s", "files (reused+rewritten)", "written by Rewind", "% of table",
            "copied server-side", "metadata", "keys read",
        ):  # fmt: skip
            table.add_column(column, justify="right" if column != "case" else "left")
        for c in run["cases"]:
            table.add_row(
                c["case"],
                f"{c['seconds']:.1f}",
                f"{c['mb_per_s']:.0f}",
                f"{c['files']} ({c['reused_files']}+{c['rewritten_files']})",
                f"{c['bytes_written_by_rewind'] / MB:.1f} MB",
                f"{c['written_over_table']:.1%}",
                f"{c['bytes_copied_server_side'] / MB:.1f} MB",
                f"{c['metadata_bytes'] / 1000:.0f} kB",
                f"{c['key_bytes_read'] / MB:.2f} MB",
            )
        console.print(table)
        r = run["ratios"]
        console.print(
            f"zero copy writes {r['zero_copy_written_over_table']:.1%} of the table "
            f"({r['zero_copy_written_and_metadata_over_table']:.1%} with Iceberg metadata); "
            f"a full rewrite writes {r['rewrite_all_written_over_zero_copy_written']:.1f}x as much "
            f"and takes {r['rewrite_all_time_over_zero_copy_time']:.1f}x the time; parquet "
            f"{r['parquet_time_over_zero_copy_time']:.1f}x, DuckDB's COPY "
            f"{r['duckdb_time_over_zero_copy_time']:.1f}x"
        )


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="bench_export", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 MB instead of 1,000 MB")
    parser.add_argument("--mb", type=float, help="MB of objects at S (default 1000; --quick 20)")
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--seed", type=int, default=18)
    parser.add_argument("--name", help="result file name (default from the options)")
    args = parser.parse_args(argv)
    mb = args.mb if args.mb is not None else (20 if args.quick else 1000)
    started = time.perf_counter()
    payload: dict[str, Any] = {
        "mb": mb,
        "quick": args.quick,
        "load_average_at_start": load_average(),
        "pyiceberg_import_seconds": import_pyiceberg(),
        "runs": [run_backend(b, int(mb * MB), seed=args.seed) for b in args.backends],
    }
    name = args.name or (
        f"{NAME}_quick"
        if args.quick and args.mb is None
        else NAME
        if args.mb is None
        else f"{NAME}_{mb:g}mb"
    )
    return finish_run(payload, name=name, started=started, console=console, report=report)


if __name__ == "__main__":
    main()
