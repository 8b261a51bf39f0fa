"""Run every ``benchmarks/bench_*.py`` module's ``main()`` in one process.

One process means one moto server and one Spark session for all of them.
``--quick`` is passed on to each benchmark (smaller sizes).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import time
from collections.abc import Sequence

import benchmarks


def bench_modules() -> list[str]:
    return sorted(
        f"benchmarks.{m.name}"
        for m in pkgutil.iter_modules(benchmarks.__path__)
        if m.name.startswith("bench_")
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run_all", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (about 2 minutes)")
    parser.add_argument("--only", nargs="+", metavar="MODULE", help="e.g. bench_write_read")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    for module_name in bench_modules():
        if args.only and module_name.rsplit(".", 1)[-1] not in args.only:
            continue
        module = importlib.import_module(module_name)
        module.main(["--quick"] if args.quick else [])
    print(f"all benchmarks finished in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
