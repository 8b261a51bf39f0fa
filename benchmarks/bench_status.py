"""``rewind status`` against the number of tenants, on SQLite and PostgreSQL (issue 38).

Per catalog backend and size N in ``--sizes`` (tenants): a fresh catalog
holding N active tenants written set-based (tests/helpers/status_world.py:
each with a table of data and tombstones, two snapshots, a PITR window, a 1h
objective, two finished backups, a finished drill; a failed backup for every
100th, a stale one for every 1,000th; and, at the largest size, again with
``--history`` days of daily backups a tenant more in the journal: 30 by
default, 340,000 runs at 10^4), then ``status(store)`` (the API: the
catalog statements and the Python that joins them by tenant) ``--repeats``
times after one warm-up. Reported: seconds (best and median), this process's
CPU seconds (on SQLite the SQL's too; the figure neighbours do not move), the statements
sent to the catalog (counted at the catalog's ``Tx``), and what the CLI adds
on top: laying the report out as the table (100 columns, as off a terminal)
and as JSON. Goal: under 1 s at 10^4 tenants on both catalogs, with the same
statements at every size.

``python -m benchmarks.bench_status [--quick]`` (quick: 10^2 and 10^3, SQLite).
JSON: ``benchmarks/results/bench_status[_quick].json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks.common import (
    CATALOG_BACKENDS,
    finish_run,
    load_average,
    open_store,
    parse_sizes,
)
from engine.cli import status_render
from engine.operations.status import StatusReport, status
from tenants.store import TableStore
from tests.helpers.status_world import add_tenants

NAME = "bench_status"
FULL_SIZES = (100, 1_000, 10_000)
QUICK_SIZES = (100, 1_000)
REPEATS = 5
HISTORY_DAYS = 30
GOAL_S = 1.0
STATEMENT_METHODS = ("execute", "executemany", "insert_many", "all", "tuples", "scalar", "batches")
console = Console()


@contextmanager
def counting(store: TableStore) -> Iterator[list[int]]:
    """Count the statements the store's catalog runs inside the block."""
    seen = [0]
    tx_class = store.catalog.dialect.tx_class()
    saved = {name: getattr(tx_class, name) for name in STATEMENT_METHODS}

    def counted(method: Callable[..., Any]) -> Callable[..., Any]:
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            seen[0] += 1
            return method(self, *args, **kwargs)

        return call

    for name, method in saved.items():
        setattr(tx_class, name, counted(method))
    try:
        yield seen
    finally:
        for name, method in saved.items():
            setattr(tx_class, name, method)


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - started


def _render_table(report: StatusReport) -> str:
    """What ``rewind status`` prints off a terminal: the grid laid out in 100 columns."""
    return status_render.status_table(report).render(100).plain + "\n"


def measure(catalog: str, size: int, repeats: int, history: int = 0) -> dict[str, Any]:
    with open_store("file", catalog) as store:  # type: ignore[arg-type]
        _, setup_s = _timed(lambda: add_tenants(store, size, history=history))
        status(store)  # warm: the driver's statement cache, the pages
        seconds, cpu = [], []
        report: StatusReport | None = None
        for _ in range(repeats):
            with counting(store) as seen:
                cpu_at = time.process_time()
                report, took = _timed(lambda: status(store))
                cpu.append(time.process_time() - cpu_at)
            seconds.append(took)
        assert report is not None and len(report.tenants) == size
        text, table_s = _timed(lambda: _render_table(report))
        _, json_s = _timed(lambda: json.dumps(status_render.status_json(report)))
    return {
        "catalog": catalog,
        "tenants": size,
        "history_days": history,
        "runs": size * (2 + history) + size // 100 + size // 1000 + size,
        "setup_s": setup_s,
        "statements": seen[0],
        "status_s_best": min(seconds),
        "status_s_median": statistics.median(seconds),
        "status_s_all": seconds,
        # This process's CPU (on SQLite the SQL runs in it; PostgreSQL's server is
        # not counted): what the call costs whatever the neighbours take.
        "status_cpu_s_median": statistics.median(cpu),
        "render_table_s": table_s,
        "render_json_s": json_s,
        "table_lines": len(text.splitlines()),
        "missed": sum(t.verdict == "missed" for t in report.tenants),
    }


def print_report(payload: dict[str, Any]) -> None:
    table = Table(title=f"{NAME}: status(store) against tenants")
    for header in (
        "catalog",
        "tenants",
        "runs",
        "statements",
        "best s",
        "median s",
        "cpu s",
        "table s",
        "json s",
    ):
        table.add_column(header, justify="right")
    for case in payload["cases"]:
        table.add_row(
            case["catalog"],
            f"{case['tenants']:,}",
            f"{case['runs']:,}",
            str(case["statements"]),
            f"{case['status_s_best']:.3f}",
            f"{case['status_s_median']:.3f}",
            f"{case['status_cpu_s_median']:.3f}",
            f"{case['render_table_s']:.2f}",
            f"{case['render_json_s']:.2f}",
        )
    console.print(table)
    for catalog in payload["catalogs"]:
        cases = [c for c in payload["cases"] if c["catalog"] == catalog and not c["history_days"]]
        statements = {c["statements"] for c in cases}
        largest = max(cases, key=lambda c: c["tenants"])
        console.print(
            f"{catalog}: statements {'constant' if len(statements) == 1 else statements}; "
            f"{largest['tenants']:,} tenants in {largest['status_s_median']:.3f} s "
            f"(goal < {GOAL_S} s: {'met' if largest['status_s_median'] < GOAL_S else 'missed'})"
        )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_status", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="10^2 and 10^3 tenants, SQLite")
    parser.add_argument("--sizes", nargs="+", metavar="N", help="e.g. 1e2 1e3 1e4")
    parser.add_argument("--catalogs", default=None, help="sqlite,postgresql (default: both)")
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument(
        "--history",
        type=int,
        default=None,
        metavar="DAYS",
        help="also the largest size with DAYS more daily backups a tenant in the journal "
        f"(default {HISTORY_DAYS}; quick: 0, none)",
    )
    parser.add_argument("--name", help="results file name (default bench_status[_quick])")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    sizes = (
        parse_sizes(args.sizes) if args.sizes else list(QUICK_SIZES if args.quick else FULL_SIZES)
    )
    catalogs = (
        args.catalogs.split(",")
        if args.catalogs
        else (["sqlite"] if args.quick else list(CATALOG_BACKENDS))
    )
    name = args.name or (f"{NAME}_quick" if args.quick else NAME)
    started = time.perf_counter()
    payload: dict[str, Any] = {
        "quick": bool(args.quick),
        "sizes": sizes,
        "catalogs": catalogs,
        "repeats": args.repeats,
        "goal_s_at_largest": GOAL_S,
        "load_average_at_start": load_average(),
        "cases": [],
    }
    history = args.history if args.history is not None else (0 if args.quick else HISTORY_DAYS)
    payload["history_days"] = history
    for catalog in catalogs:
        for size in sizes:
            console.print(f"{catalog}: {size:,} tenants ...")
            payload["cases"].append(measure(catalog, size, args.repeats))
        if history:
            console.print(f"{catalog}: {max(sizes):,} tenants, {history} days of backups ...")
            payload["cases"].append(measure(catalog, max(sizes), args.repeats, history))
    return finish_run(payload, name=name, started=started, console=console, report=print_report)


if __name__ == "__main__":
    main()
