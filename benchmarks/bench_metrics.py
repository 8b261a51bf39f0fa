"""Scrape time of ``rewind metrics`` against the number of tenants (issue 38).

Per catalog (SQLite, PostgreSQL) and size N in ``--sizes`` (tenants): a fresh
catalog seeded in set-based statements (tests/helpers/metrics_seed.py) with N
tenants, each with a snapshot, a table and its member totals, an objective and
(every other one) a PITR window; 10^4 runs (backups, one in ten a GC pass, one
in seventeen failed) and 10^3 restore jobs with a rewritten task each, spread
over the tenants. Measured: one scrape, exactly what ``rewind metrics`` and each
``GET /metrics`` do (``exposition(registry_for(catalog))``: one read
transaction, the collector's statements, the text format), 1 cold and
``--warm`` warm; the statements a scrape sends (constant in N); the exposition's
size and samples. A scrape's rows grow with the tenants (8 gauges a tenant),
its statements do not.

``python -m benchmarks.bench_metrics [--quick]`` (quick: 10^2 and 10^3 tenants,
10^3 runs). JSON: ``benchmarks/results/bench_metrics[_quick].json``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks.common import (
    CATALOG_BACKENDS,
    finish_run,
    load_average,
    machine_info,
    new_catalog_uri,
    parse_sizes,
    repeat,
    timed,
)
from engine.operations.metrics import CatalogCollector, exposition, registry_for
from tenants.catalog import open_catalog
from tests.helpers.metrics_seed import seed

NAME = "bench_metrics"
FULL_SIZES = (100, 1_000, 10_000)
QUICK_SIZES = (100, 1_000)
STATEMENT_METHODS = ("execute", "executemany", "insert_many", "all", "tuples", "scalar", "batches")


def _statements(catalog: Any) -> int:
    """Statements one scrape sends (the Tx methods counted, as the tests count them)."""
    tx_class = catalog.dialect.tx_class()
    seen = [0]
    saved = {name: getattr(tx_class, name) for name in STATEMENT_METHODS}

    def counting(method: Any) -> Any:
        def counted(self: Any, *args: Any, **kw: Any) -> Any:
            seen[0] += 1
            return method(self, *args, **kw)

        return counted

    try:
        for name, method in saved.items():
            setattr(tx_class, name, counting(method))
        exposition(registry_for(catalog))
    finally:
        for name, method in saved.items():
            setattr(tx_class, name, method)
    return seen[0]


def one(catalog_backend: str, tenants: int, runs: int, restores: int, warm: int) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="rewind-bench-metrics-"))
    catalog = open_catalog(new_catalog_uri(catalog_backend, workdir))  # type: ignore[arg-type]
    try:
        _, seed_s = timed(lambda: seed(catalog, tenants, runs, restores))
        registry = registry_for(catalog)
        text, timing = repeat(lambda: exposition(registry), warm)
        cpu = []
        for _ in range(warm):
            before = time.process_time()
            exposition(registry)
            cpu.append(time.process_time() - before)
        collector = CatalogCollector(catalog)
        _, collect = repeat(lambda: list(collector.collect()), warm)
        samples = sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))
        return {
            "catalog": catalog_backend,
            "tenants": tenants,
            "runs": runs,
            "restore_jobs": restores,
            "seed_s": seed_s,
            "scrape": timing.to_json(),
            # This process's CPU per scrape (best): steadier than wall time on a shared
            # machine; PostgreSQL's own work is not in it.
            "scrape_cpu_s": min(cpu) if cpu else None,
            # The statements and the families alone, without the text format.
            "collect": collect.to_json(),
            "statements": _statements(catalog),
            "exposition_bytes": len(text),
            "samples": samples,
        }
    finally:
        catalog.close()
        shutil.rmtree(workdir, ignore_errors=True)


def report(payload: dict[str, Any]) -> None:
    console = Console()
    table = Table(title=f"rewind metrics: one scrape ({payload['cases'][0]['runs']:,} runs)")
    for column in (
        "catalog",
        "tenants",
        "scrape best s",
        "median s",
        "CPU s",
        "of it SQL s",
        "statements",
    ):
        table.add_column(column, justify="right")
    table.add_column("text, samples", justify="right")
    for case in payload["cases"]:
        table.add_row(
            case["catalog"],
            f"{case['tenants']:,}",
            f"{case['scrape']['steady_s']:.3f}",
            f"{case['scrape']['median_s']:.3f}",
            f"{case['scrape_cpu_s']:.3f}",
            f"{case['collect']['steady_s']:.3f}",
            str(case["statements"]),
            f"{case['exposition_bytes'] / 1e6:.2f} MB, {case['samples']:,}",
        )
    console.print(table)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{NAME}", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sizes", nargs="+", help="tenants, e.g. 100 1e3 1e4")
    parser.add_argument("--runs", type=int, help="runs journaled (default 10^4, quick 10^3)")
    parser.add_argument("--warm", type=int, default=5, help="warm scrapes after the first")
    parser.add_argument("--catalogs", nargs="+", default=list(CATALOG_BACKENDS))
    args = parser.parse_args(argv)
    sizes = (
        parse_sizes(args.sizes) if args.sizes else list(QUICK_SIZES if args.quick else FULL_SIZES)
    )
    runs = args.runs if args.runs is not None else (1_000 if args.quick else 10_000)
    restores = runs // 10
    started = time.perf_counter()
    payload: dict[str, Any] = {
        "benchmark": NAME,
        "quick": args.quick,
        "machine": machine_info(),
        "load_average_at_start": load_average(),
        "cases": [],
    }
    for catalog_backend in args.catalogs:
        for tenants in sizes:
            case = one(catalog_backend, tenants, runs, restores, args.warm)
            payload["cases"].append(case)
            print(
                f"{catalog_backend} {tenants} tenants: scrape {case['scrape']['steady_s']:.3f} s "
                f"best, {case['scrape']['median_s']:.3f} s median, {case['statements']} statements",
                flush=True,
            )
    name = f"{NAME}_quick" if args.quick else NAME
    return finish_run(payload, name=name, started=started, console=Console(), report=report)


if __name__ == "__main__":
    main()
