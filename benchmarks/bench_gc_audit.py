"""``rewind gc --deep`` as a whole pass, this tree against an earlier commit, alternated.

bench_gc_deep measures the orphan sweep; this measures what a user waits for:
``run_gc(deep=True)`` (dry run, no compaction), the listing merge and the
garbage audit together, on one warehouse built once (``--dir`` keeps it: a
10^6-object build takes most of an hour on a busy 2-core machine). Each round
runs the pass in a fresh process for the code at ``--before`` (a git worktree
made for the run) and for this tree, alternately, so both see the same
neighbours; the JSON keeps every run and its load average.

    python -m benchmarks.bench_gc_audit --objects 1e6 --dir DIR --before REV

The warehouse is bench_gc_deep's: file://, SQLite, 4 tables, 1% orphans, built
by the code at ``--before`` (older code refuses a newer catalog); this tree
runs on a migrated copy of the catalog, as after an upgrade. Code from before
write intents (issue 37) has no ``deep=``: every pass of it lists the warehouse.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, finish_run, load_average, parse_sizes

NAME = "bench_gc_audit"
CHILD = """
import inspect, json, resource, sys, time
from engine.gc.run import run_gc
from tenants.store import TableStore
store = TableStore.open(sys.argv[1], sys.argv[2])
# code before write intents has no deep=: its every pass lists the whole warehouse
deep = {"deep": True} if "deep" in inspect.signature(run_gc).parameters else {}
start = time.perf_counter()
report = run_gc(store, dry_run=True, grace_us=0, allow_short_grace=True, compact=False,
                orphan_grace_us=0, **deep)
print(json.dumps({"seconds": time.perf_counter() - start, "phases": report.seconds,
                  "orphans": len(report.orphans.orphans),
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


BUILD = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("bench_gc_deep", sys.argv[3])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
from tenants.store import TableStore
store = TableStore.open(sys.argv[1], sys.argv[2])
module.build(store, "file", int(sys.argv[4]))
store.close()
"""


def _build(directory: Path, n: int, before: Path) -> tuple[str, str, str]:
    """The warehouse and its catalog, written by the code at ``--before`` (a catalog
    of a newer schema is refused by older code); this tree's copy of the catalog is
    migrated once here, so neither timed pass pays for a migration. (catalog of
    the code before, catalog of this tree, warehouse)."""
    import shutil

    from tenants.store import TableStore

    old, new = directory / "catalog.db", directory / "catalog-after.db"
    warehouse = f"file://{directory / 'wh'}"
    if not (directory / "built").exists():
        directory.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-c",
                BUILD,
                f"sqlite:///{old}",
                warehouse,
                str(ROOT / "benchmarks" / "bench_gc_deep.py"),
                str(n),
            ],
            env={**os.environ, "PYTHONPATH": f"{before}{os.pathsep}{ROOT}"},
            cwd=before,  # `python -c` puts the working directory first on sys.path
            check=True,
        )
        (directory / "built").write_text(str(n))
    shutil.copyfile(old, new)
    TableStore.open(f"sqlite:///{new}", warehouse).close()  # migrate outside the timing
    return f"sqlite:///{old}", f"sqlite:///{new}", warehouse


def _run(code: Path, catalog: str, warehouse: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(code)}
    load = load_average()
    out = subprocess.run(
        [sys.executable, "-c", CHILD, catalog, warehouse],
        env=env,
        cwd=code,  # `python -c` puts the working directory first on sys.path
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1]) | {"load_average": load}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    from rich.console import Console

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_gc_audit", description=__doc__
    )
    parser.add_argument("--objects", default="1e6")
    parser.add_argument("--dir", help="keep the built warehouse here (default: a temp dir)")
    parser.add_argument("--before", required=True, help="the commit to compare with")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    console = Console(width=120)
    (n,) = parse_sizes([args.objects])
    started = time.perf_counter()
    directory = Path(args.dir or tempfile.mkdtemp(prefix="rewind-gc-audit-"))
    before = Path(tempfile.mkdtemp(prefix="rewind-before-")) / "tree"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(before), args.before],
        check=True,
        capture_output=True,
    )
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    try:
        catalogs = dict(
            zip(("before", "after", "warehouse"), _build(directory, n, before), strict=True)
        )
        for _ in range(args.rounds):
            for label, code in (("before", before), ("after", ROOT)):
                result = _run(code, catalogs[label], catalogs["warehouse"])
                console.print(f"{label}: {result['seconds']:.1f} s {result['phases']}")
                runs[label].append(result)
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)],
            check=False,
            capture_output=True,
        )
    best = {k: min(r["seconds"] for r in v) for k, v in runs.items()}
    payload = {
        "objects": n,
        "before_commit": args.before,
        "runs": runs,
        "best_seconds": best,
        "speedup": best["before"] / best["after"],
    }

    def report(p: dict[str, Any]) -> None:
        console.print(
            f"gc --deep pass at {n:,} objects: before {best['before']:.1f} s, after "
            f"{best['after']:.1f} s ({p['speedup']:.2f}x)"
        )

    return finish_run(payload, name=NAME, started=started, console=console, report=report)


if __name__ == "__main__":
    main()
