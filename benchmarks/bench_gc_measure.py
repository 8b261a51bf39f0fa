"""GC's measuring step: does a pass's cost follow what changed, or the warehouse?

Issue 37. Every ``rewind gc`` pass (compaction on, the default) asks of every
live table how many rows full compaction would drop. Before, it read every
live object of every table to answer, on every pass. Now a pass keeps each
table's measurement in the catalog and reads a table again only when its
members or the protected times that decide for it changed
(engine/gc/reclaim.py).

For 10, 100 and 1,000 tables (10 per tenant) on a ``file://`` warehouse and a
SQLite catalog (``--catalog postgresql`` for the other), each table written
in three commits that overwrite the same 20 keys (three objects, 40 of 60
rows reclaimable), this runs

    run_gc(store, dry_run=False, threshold=1.0)

(threshold 1: nothing is compacted, so the warehouse stays as it was) three
times: the first pass, a second over the unchanged warehouse, and a third
after one more commit to one table. For each it reports the pass's seconds,
of which the compaction step (measuring, here), and the objects it read (every
``get``, ``stream`` and ``open_input`` of a Parquet key, counted by a wrapper
around the object store) and the tables they belong to.

Run it on the code before the change by putting that code first on the path
(``git archive <commit> tenants engine | tar -x -C /tmp/before``, then
``PYTHONPATH=/tmp/before:. python -m benchmarks.bench_gc_measure --name
bench_gc_measure_before``); the result's ``code`` says which it measured.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from rich.console import Console
from rich.table import Table

from benchmarks.common import finish_run, load_average, open_store
from engine.gc import reclaim
from engine.gc.run import run_gc
from tenants.objectstore import ObjectStore
from tenants.schema import TableSchema
from tenants.store import TableStore

NAME = "bench_gc_measure"
FULL_TABLES = (10, 100, 1_000)
QUICK_TABLES = (10, 100)
TABLES_PER_TENANT = 10
COMMITS = 3
KEYS = 20
SCHEMA = TableSchema.of([("id", "int64"), ("v", "string")], ["id"])

console = Console() if sys.stdout.isatty() else Console(width=150)


class CountingStore:
    """The real object store; counts the Parquet objects read back, by key."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.warehouse = inner.warehouse
        self.opened: list[str] = []

    def _saw(self, key: str) -> None:
        if key.endswith(".parquet"):
            self.opened.append(key)

    def get(self, key: str) -> bytes:
        self._saw(key)
        return self.inner.get(key)

    def stream(self, key: str, chunk_bytes: int) -> Iterator[bytes]:
        self._saw(key)
        return self.inner.stream(key, chunk_bytes)

    def open_input(self, key: str) -> Any:
        self._saw(key)
        return self.inner.open_input(key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def build(store: TableStore, tables: int) -> None:
    """``tables`` tables, ``TABLES_PER_TENANT`` per tenant, ``COMMITS`` commits each."""
    for t in range(tables):
        tenant = f"t{t // TABLES_PER_TENANT:04d}"
        if t % TABLES_PER_TENANT == 0:
            store.create_tenant(tenant)
        name = f"db.items{t % TABLES_PER_TENANT}"
        store.create_table(tenant, name, SCHEMA)
        for c in range(COMMITS):
            batch = pa.table(
                {
                    "id": pa.array(range(KEYS), pa.int64()),
                    "v": pa.array([f"c{c}-{i}" for i in range(KEYS)], pa.string()),
                }
            )
            store.write(tenant, name, upserts=batch)


def one_pass(store: TableStore, counting: CountingStore) -> dict[str, Any]:
    counting.opened.clear()
    started = time.perf_counter()
    report = run_gc(TableStore(store.catalog, counting), dry_run=False, threshold=1.0)  # type: ignore[arg-type]
    seconds = time.perf_counter() - started
    assert not report.compacted
    return {
        "seconds": seconds,
        "compact_step_seconds": report.seconds.get("compact"),
        "objects_read": len(set(counting.opened)),
        "object_opens": len(counting.opened),
        "tables_read": len({key.split("/")[2] for key in counting.opened}),
        "tables_reported": len(report.reclaimable),
        "reclaimable_rows": sum(r.reclaimable_rows for r in report.reclaimable),
    }


def run_size(tables: int, catalog: str) -> dict[str, Any]:
    with open_store("file", catalog) as store:  # type: ignore[arg-type]
        started = time.perf_counter()
        build(store, tables)
        setup = time.perf_counter() - started
        counting = CountingStore(store.objects)
        first = one_pass(store, counting)
        second = one_pass(store, counting)
        store.write(
            "t0000",
            "db.items0",
            upserts=pa.table({"id": pa.array([0], pa.int64()), "v": ["again"]}),
        )
        after_write = one_pass(store, counting)
    return {
        "tables": tables,
        "objects": tables * COMMITS,
        "setup_seconds": setup,
        "first": first,
        "second": second,
        "after_one_write": after_write,
    }


def report(payload: dict[str, Any]) -> None:
    table = Table(title=f"GC pass, {payload['code']} ({payload['catalog']} catalog, file://)")
    for column in ("tables", "objects", "pass", "seconds", "of which compact", "objects read"):
        table.add_column(column, justify="right")
    for run in payload["runs"]:
        for label in ("first", "second", "after_one_write"):
            p = run[label]
            table.add_row(
                str(run["tables"]),
                str(run["objects"]),
                label.replace("_", " "),
                f"{p['seconds']:.3f}",
                f"{p['compact_step_seconds']:.3f}",
                str(p["objects_read"]),
            )
    console.print(table)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 and 100 tables")
    parser.add_argument("--tables", nargs="*", type=int, help="table counts to run")
    parser.add_argument("--catalog", default="sqlite", choices=("sqlite", "postgresql"))
    parser.add_argument("--name", help="result file name (default bench_gc_measure[_quick])")
    args = parser.parse_args(argv)
    sizes = args.tables or (QUICK_TABLES if args.quick else FULL_TABLES)
    name = args.name or (f"{NAME}_quick" if args.quick else NAME)
    started = time.perf_counter()
    keeps = "fresh" in inspect.signature(reclaim.scan).parameters
    payload: dict[str, Any] = {
        "code": "kept measurements" if keeps else "before: every pass reads every table",
        "code_path": reclaim.__file__,
        "catalog": args.catalog,
        "load_average_at_start": load_average(),
        "runs": [],
    }
    for tables in sizes:
        payload["runs"].append(run_size(tables, args.catalog))
        console.print(f"{tables} tables done")
    return finish_run(payload, name=name, started=started, console=console, report=report)


if __name__ == "__main__":
    main()
