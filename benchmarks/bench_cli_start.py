"""How long a short ``rewind`` command takes from start to exit, before and after
the CLI stopped importing what it does not use.

Every ``rewind`` command used to import pyarrow, numpy, the PostgreSQL driver
and the whole engine before doing anything; a cron job that ticks snapshots
for thousands of tenants pays a command's start once per tenant. Each command
below runs as a fresh process (``python -m engine.cli.app ...``, the
``rewind`` script) on a SQLite catalog and a ``file://`` warehouse holding a
few tenants, and is timed from spawn to exit, ``--runs`` times (median and
best), after one run that warms the OS's file cache and writes the bytecode
caches (an installed ``rewind`` has them: pip compiles them at install).

With ``--before DIR`` (a checkout of the code before the change: ``git
worktree add --detach /tmp/cli-before layout``) every command also runs from
that tree, interleaved run by run with this one so that machine noise hits
both, and the table shows after ÷ before. The bare interpreter and the
import of typer and rich alone (the floor under any typer command) are
rows of their own; ``--json --version`` is the version through typer, as
``--version`` was before its fast path (engine/cli/entry.py).

``--uncached`` runs copies of the trees' packages with
``PYTHONDONTWRITEBYTECODE=1``, so every start compiles every Rewind module it
imports (as where no bytecode cache may be written); installed libraries
keep their caches.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks.common import ROOT, finish_run, load_average

NAME = "bench_cli_start"
RUNS = 5
QUICK_RUNS = 3
TENANTS = ("acme", "globex", "initech")
SNAPSHOTS = ("mon", "tue")
TYPER_AND_RICH = "import typer, rich.console, rich.table, rich.text"

# (label, argv after the interpreter, goal in seconds or None)
CASES: tuple[tuple[str, tuple[str, ...], float | None], ...] = (
    ("bare interpreter", ("-c", "pass"), None),
    ("import typer + rich", ("-c", TYPER_AND_RICH), None),
    ("rewind --version", ("-m", "engine.cli.app", "--version"), 0.1),
    ("rewind --json --version", ("-m", "engine.cli.app", "--json", "--version"), None),
    ("rewind --help", ("-m", "engine.cli.app", "--help"), None),
    ("rewind tenant list", ("-m", "engine.cli.app", "tenant", "list"), 0.3),
    (
        f"rewind snapshot list {TENANTS[0]}",
        ("-m", "engine.cli.app", "snapshot", "list", TENANTS[0]),
        None,
    ),
)

console = Console() if sys.stdout.isatty() else Console(width=150)


def _env(tree: Path, home: Path, *, cached: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "REWIND_"))}
    env |= {"PYTHONPATH": str(tree), "REWIND_HOME": str(home)}
    if cached:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run(argv: Sequence[str], env: dict[str, str], cwd: Path) -> float:
    """Seconds from spawn to exit of ``python ARGV``; a failure stops the benchmark."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *argv], env=env, cwd=cwd, capture_output=True, text=True, timeout=300
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-2000:]}")
    return seconds


def _copy_packages(tree: Path, into: Path) -> Path:
    """``tree``'s ``tenants`` and ``engine`` without any bytecode cache."""
    for package in ("tenants", "engine"):
        shutil.copytree(
            tree / package, into / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    return into


def _deployment(home: Path, cwd: Path) -> None:
    """A SQLite catalog and a ``file://`` warehouse under ``home``: a few tenants,
    two snapshots of the first."""
    env = _env(ROOT, home, cached=True)
    for tenant in TENANTS:
        _run(("-m", "engine.cli.app", "tenant", "create", tenant), env, cwd)
    for snapshot in SNAPSHOTS:
        _run(("-m", "engine.cli.app", "snapshot", "create", TENANTS[0], snapshot), env, cwd)


def _summary(seconds: list[float]) -> dict[str, Any]:
    return {"runs_s": seconds, "median_s": statistics.median(seconds), "best_s": min(seconds)}


def run(before: Path | None, runs: int, *, cached: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench_cli_start_") as tmp:
        work = Path(tmp)
        home = work / "home"
        _deployment(home, work)
        trees = {"after": ROOT} | ({"before": before} if before is not None else {})
        if not cached:
            trees = {
                side: _copy_packages(tree, work / f"tree-{side}") for side, tree in trees.items()
            }
        envs = {side: _env(tree, home, cached=cached) for side, tree in trees.items()}
        for _, argv, _ in CASES:  # warm the file cache and write bytecode caches
            for env in envs.values():
                _run(argv, env, work)
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(runs):  # interleaved: each run times every case on every side
            for label, argv, _ in CASES:
                for side, env in envs.items():
                    times.setdefault((label, side), []).append(_run(argv, env, work))
    cases = []
    for label, argv, goal in CASES:
        case: dict[str, Any] = {"case": label, "argv": list(argv), "goal_s": goal}
        for side in trees:
            case[side] = _summary(times[(label, side)])
        if "before" in case:
            case["after_over_before"] = case["after"]["median_s"] / case["before"]["median_s"]
        cases.append(case)
    return {"cases": cases}


def print_report(payload: dict[str, Any]) -> None:
    with_before = payload["before_tree"] is not None
    table = Table(
        title=f"{NAME}: seconds from spawn to exit, median of {payload['runs']} "
        f"({'bytecode cached' if payload['cached'] else 'no bytecode cache'})"
    )
    table.add_column("command")
    if with_before:
        table.add_column("before", justify="right")
    table.add_column("after", justify="right")
    if with_before:
        table.add_column("after ÷ before", justify="right")
    table.add_column("best (before / after)", justify="right")
    table.add_column("goal", justify="right")
    for case in payload["cases"]:
        after = case["after"]
        row = [case["case"]]
        if with_before:
            row.append(f"{case['before']['median_s']:.3f}")
        row.append(f"{after['median_s']:.3f}")
        if with_before:
            row.append(f"{case['after_over_before']:.2f}x")
        best = f"{after['best_s']:.3f}"
        if with_before:
            best = f"{case['before']['best_s']:.3f} / {best}"
        row.append(best)
        goal = case["goal_s"]
        row.append(
            ""
            if goal is None
            else f"< {goal:g} s {'met' if after['median_s'] < goal else 'NOT met'}"
        )
        table.add_row(*row)
    console.print(table)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_cli_start",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_RUNS} runs (default {RUNS})")
    parser.add_argument("--runs", type=int, help="timed runs per command and tree")
    parser.add_argument(
        "--before",
        type=Path,
        metavar="DIR",
        help="a checkout of the code before the change, run side by side with this one",
    )
    parser.add_argument(
        "--uncached",
        action="store_true",
        help="no bytecode cache for Rewind's modules: each start compiles them",
    )
    parser.add_argument("--name", help="result file name (default bench_cli_start[_quick])")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    runs = args.runs or (QUICK_RUNS if args.quick else RUNS)
    before = args.before.resolve() if args.before else None
    if before is not None and not (before / "engine" / "cli" / "app.py").is_file():
        raise SystemExit(f"--before {before}: no engine/cli/app.py there")
    name = args.name or (
        f"{NAME}_uncached" if args.uncached else f"{NAME}_quick" if args.quick else NAME
    )
    load_at_start = load_average()
    started = time.perf_counter()
    console.print(
        f"[bold]{NAME}[/]: {len(CASES)} commands x {runs} runs{' x 2 trees' if before else ''} ..."
    )
    payload = {
        "quick": bool(args.quick),
        "runs": runs,
        "cached": not args.uncached,
        "before_tree": str(before) if before else None,
        "load_average_at_start": load_at_start,
        **run(before, runs, cached=not args.uncached),
    }
    return finish_run(payload, name=name, started=started, console=console, report=print_report)


if __name__ == "__main__":
    main()
