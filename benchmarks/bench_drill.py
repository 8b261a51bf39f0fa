"""Restore drills (issue 38): what `rewind backup drill` costs, for a tiny and a larger tenant.

A drill restores a backup into a scratch deployment (a temporary SQLite
catalog and a ``file://`` warehouse by default), checks it against its
manifest and removes the scratch area (engine/backup/drill.py). Measured on a
moto S3 warehouse with the backups in a second moto bucket:

1. **tour**: the README tour's tenant up to its restore (``shop.orders``: five
   orders loaded twice, snapshot ``mon``, compacted, two deleted), backed up
   physical and logical at ``mon``; ``--repeats`` drills of each (default 5).
2. **larger**: ``bench_restore``'s generated tenant (default 10 tables, 300
   objects, 100 MB; ``--quick``: 4 tables, 80 objects, 10 MB), backed up at its
   snapshot; ``--repeats-large`` drills of each kind (default 2), and one
   physical drill with ``--scratch`` on a third moto bucket.

Beside each drill: the backup's creation and ``backup verify`` (which re-reads
every file, loading nothing), so a drill's cost reads against what a backup
already costs. Each drill's steps are timed by wrapping the drill module's
calls for its duration: the tamper check (``findings``), the restore into the
scratch deployment (``restore_from``: bytes checked as they are copied or
loaded), the physical read-back (``_check_physical``) and the clean-up.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
from rich.console import Console
from rich.table import Table

import engine.backup.drill as drill_module
from benchmarks.bench_restore import SNAPSHOT, TENANT, TenantSpec, build_tenant
from benchmarks.common import ROOT, finish_run, load_average, moto_server, open_store, timed
from engine.backup.api import create_backup, verify_backup
from engine.backup.drill import DrillResult, drill_backup
from tenants.schema import TableSchema
from tenants.store import TableStore

NAME = "bench_drill"
KINDS = ("physical", "logical")
STEPS = {
    "tamper_check": "findings",
    "restore": "restore_from",
    "read_back": "_check_physical",
    "clean_up": "_clean",
}

console = Console() if sys.stdout.isatty() else Console(width=170)


def tour_tenant(store: TableStore) -> str:
    """The README tour's ``acme`` just before its restore: returns the snapshot."""
    schema = TableSchema.of([("id", "int64"), ("item", "string"), ("qty", "int32")], ["id"])
    orders = pacsv.read_csv(
        ROOT / "examples" / "orders.csv",
        convert_options=pacsv.ConvertOptions(column_types=schema.arrow()),
    )
    store.create_tenant("acme")
    store.create_table("acme", "shop.orders", schema)
    store.write("acme", "shop.orders", upserts=orders)
    store.create_snapshot("acme", "mon")
    store.write("acme", "shop.orders", upserts=orders)
    store.compact("acme", "shop.orders")
    store.write("acme", "shop.orders", deletes=pa.table({"id": pa.array([2, 4], pa.int64())}))
    return "mon"


@contextmanager
def step_timer() -> Iterator[dict[str, float]]:
    """Seconds spent in each of the drill module's steps while it lasts."""
    spent = dict.fromkeys(STEPS, 0.0)
    originals = {step: getattr(drill_module, name) for step, name in STEPS.items()}

    def timed_step(step: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                spent[step] += time.perf_counter() - started

        return wrapper

    for step, name in STEPS.items():
        setattr(drill_module, name, timed_step(step, originals[step]))
    try:
        yield spent
    finally:
        for step, name in STEPS.items():
            setattr(drill_module, name, originals[step])


def new_destination(prefix: str) -> str:
    bucket = f"{prefix}-{uuid.uuid4().hex[:12]}"
    moto_server().create_bucket(bucket)
    return f"s3://{bucket}/backups"


def drills(
    store: TableStore, uri: str, backup_id: str, repeats: int, scratch: str | None = None
) -> dict[str, Any]:
    """``repeats`` drills of one backup: each one's seconds and steps, and the medians."""
    runs: list[dict[str, Any]] = []
    result: DrillResult | None = None
    for _ in range(repeats):
        with step_timer() as spent:
            result, seconds = timed(lambda: drill_backup(store, uri, backup_id, scratch=scratch))
        runs.append({"seconds": seconds, "steps": dict(spent)})
    assert result is not None
    return {
        "scratch": "s3 (moto)" if scratch else "file:// (temporary directory)",
        "objects": result.objects,
        "bytes": result.bytes,
        "tables": result.tables,
        "rows": result.rows,
        "runs": runs,
        "median_s": statistics.median(r["seconds"] for r in runs),
        "min_s": min(r["seconds"] for r in runs),
        "median_steps_s": {
            step: statistics.median(r["steps"][step] for r in runs) for step in STEPS
        },
    }


def kind_case(
    store: TableStore,
    tenant: str,
    at: str,
    kind: str,
    repeats: int,
    *,
    s3_scratch: bool = False,
) -> dict[str, Any]:
    """One backup of ``kind``, its creation and verify timed, then its drills."""
    uri = new_destination("rewind-drill-bench")
    backup, backup_s = timed(lambda: create_backup(store, tenant, at, uri, kind=kind))
    _, verify_s = timed(lambda: verify_backup(uri, backup.backup_id))
    case: dict[str, Any] = {
        "kind": kind,
        "backup_seconds": backup_s,
        "verify_seconds": verify_s,
        "drill": drills(store, uri, backup.backup_id, repeats),
    }
    if s3_scratch:
        scratch = new_destination("rewind-drill-scratch").removesuffix("/backups")
        case["drill_s3_scratch"] = drills(store, uri, backup.backup_id, 1, f"{scratch}/drills")
    case["drill_over_verify"] = case["drill"]["median_s"] / verify_s if verify_s else None
    return case


def run(args: argparse.Namespace) -> dict[str, Any]:
    spec = (
        TenantSpec(tables=4, objects=80, total_bytes=10_000_000)
        if args.quick
        else TenantSpec(tables=args.tables, objects=args.objects, total_bytes=args.mb * 1_000_000)
    )
    payload: dict[str, Any] = {
        "load_average_at_start": load_average(),
        "args": vars(args),
        "warehouse": "moto",
        "destination": "moto",
    }
    with open_store("moto") as store:
        at = tour_tenant(store)
        payload["tour"] = [kind_case(store, "acme", at, kind, args.repeats) for kind in KINDS]
    with open_store("moto") as store:
        built = build_tenant(store, spec, seed=38)
        payload["larger_spec"] = {
            "tables": spec.tables,
            "objects": spec.objects,
            "total_bytes": spec.total_bytes,
            "bytes_at_s": built.get("bytes_at_s"),
        }
        payload["larger"] = [
            kind_case(
                store, TENANT, SNAPSHOT, kind, args.repeats_large, s3_scratch=kind == "physical"
            )
            for kind in KINDS
        ]
    return payload


def report(payload: dict[str, Any]) -> None:
    table = Table(title="restore drills on moto (seconds; medians)")
    for column in (
        "tenant",
        "kind",
        "objects",
        "MB",
        "rows",
        "backup",
        "verify",
        "drill",
        "drill ÷ verify",
        "tamper",
        "restore",
        "read back",
        "clean up",
    ):
        table.add_column(column, justify="right" if column not in ("tenant", "kind") else "left")
    for label, cases in (("tour", payload["tour"]), ("larger", payload["larger"])):
        for case in cases:
            for key in ("drill", "drill_s3_scratch"):
                if key not in case:
                    continue
                d = case[key]
                steps = d["median_steps_s"]
                table.add_row(
                    label,
                    case["kind"] + (" (s3 scratch)" if key != "drill" else ""),
                    str(d["objects"]),
                    f"{d['bytes'] / 1e6:.2f}",
                    str(d["rows"]),
                    f"{case['backup_seconds']:.2f}",
                    f"{case['verify_seconds']:.2f}",
                    f"{d['median_s']:.2f}",
                    f"{d['median_s'] / case['verify_seconds']:.1f}x",
                    f"{steps['tamper_check']:.2f}",
                    f"{steps['restore']:.2f}",
                    f"{steps['read_back']:.2f}",
                    f"{steps['clean_up']:.2f}",
                )
    console.print(table)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 10 MB larger tenant")
    parser.add_argument("--repeats", type=int, default=5, help="drills of the tour's backups")
    parser.add_argument("--repeats-large", type=int, default=2, help="drills of the larger")
    parser.add_argument("--tables", type=int, default=10)
    parser.add_argument("--objects", type=int, default=300)
    parser.add_argument("--mb", type=int, default=100)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    payload = run(args)
    finish_run(
        payload,
        name=NAME + ("_quick" if args.quick else ""),
        started=started,
        console=console,
        report=report,
    )


if __name__ == "__main__":
    main()
