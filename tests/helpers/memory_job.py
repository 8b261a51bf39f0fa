"""Run one streamed operation in a fresh process and report its memory (JSON on stdout).

``tests/test_memory.py`` runs this as a subprocess so the peak it measures is
the operation's own, not the test runner's: ``baseline_kib`` is the RSS after
imports and setup, ``peak_kib`` the peak RSS while the work ran.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

if TYPE_CHECKING:
    from tenants.objects.record import ObjectKind


class RecordJson(TypedDict):
    """An ``ObjectRecord`` as tests/test_memory.py sends it (``asdict``)."""

    id: str
    key: str
    kind: ObjectKind
    fingerprint: str
    rows: int
    bytes: int
    min_ts: int
    max_ts: int
    min_pk: str
    max_pk: str
    sorted: bool
    checksum: str
    created_ts: int
    cut_ts: int | None


def status_kib(field: str) -> int:
    """A ``/proc/self/status`` figure in KiB (VmRSS now, VmHWM: the peak)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def start_measuring() -> int:
    """Reset the peak to the RSS now and return it.

    Not ``getrusage``: its ``ru_maxrss`` survives ``execve``, so a child forked
    from a large test runner would report the runner's size. VmHWM belongs to
    this process's own memory map, and writing 5 to ``clear_refs`` resets it.
    """
    Path("/proc/self/clear_refs").write_text("5")
    return status_kib("VmRSS")


def main() -> None:
    job = json.loads(sys.argv[1])
    # Each operation imports only what its command would: a compaction's budget
    # counts the whole process, so its baseline must be the CLI's, not more.
    if job["what"] == "compact":
        compact(job)
        return
    if job["what"] == "load":
        load(job)
        return
    if job["what"] == "engine":
        engine(job)
        return
    if job["what"] == "diff":
        diff(job)
        return
    if job["what"] == "gc_collect":
        gc_collect(job)
        return
    from engine.executors.task import run_task
    from engine.pipeline import RewriteTask
    from tenants.config import S3Settings
    from tenants.objects.record import ObjectRecord
    from tenants.objectstore import open_object_store

    store = open_object_store(job["warehouse"], S3Settings.from_env())
    if job["what"] != "rewrite":
        raise SystemExit(f"unknown operation {job['what']!r}")

    def task(record: RecordJson, out: str) -> RewriteTask:
        return RewriteTask("task", "job", ObjectRecord(**record), ("id",), job["as_of"], out, "tbl")

    # A small object first, so the baseline has the code and the allocator's
    # arenas warm: what is measured is what the object's size costs.
    run_task(store, task(job["warm"], "warm"))
    baseline = start_measuring()
    result = run_task(store, task(job["record"], "out"))
    peak = status_kib("VmHWM")
    print(json.dumps({"baseline_kib": baseline, "peak_kib": peak, "rows": result.output.rows}))


def compact(job: dict[str, object]) -> None:
    """A full compaction of one table within ``memory`` bytes, in a process like
    ``rewind compact``'s: nothing warmed first, since the budget bounds the
    process's whole peak, its allocator's first arenas included."""
    from tenants.store import TableStore  # first: it configures the allocator

    store = TableStore.open(str(job["catalog"]), str(job["warehouse"]))
    memory = int(job["memory"])  # type: ignore[call-overload]
    baseline = start_measuring()
    [result] = store.compact("acme", "db.t", full=True, memory=memory)
    peak = status_kib("VmHWM")
    import pyarrow as pa  # loaded by now (tenants.store), after the allocator's setting

    arrow = pa.default_memory_pool().max_memory() // 1024
    print(
        json.dumps(
            {
                "baseline_kib": baseline,
                "peak_kib": peak,
                "rows": result.rows,
                "arrow_max_kib": arrow,
            }
        )
    )


def load(job: dict[str, object]) -> None:
    """``rewind load``'s path: a CSV streamed into one commit."""
    from tenants.load_files import read_batches
    from tenants.store import TableStore

    store = TableStore.open(str(job["catalog"]), str(job["warehouse"]))
    target = store.plan_read("acme", "db.t").table.schema.arrow()
    store.load("acme", "db.warm", read_batches(Path(str(job["warm"])), target))
    baseline = start_measuring()
    result = store.load("acme", "db.t", read_batches(Path(str(job["csv"])), target))
    peak = status_kib("VmHWM")
    print(json.dumps({"baseline_kib": baseline, "peak_kib": peak, "rows": result.upserted}))


def engine(job: dict[str, object]) -> None:
    """A whole table at a snapshot through one engine (tenants.reads.interop): an Arrow
    reader drained batch by batch, a DuckDB aggregate, or a polars LazyFrame
    aggregated by its streaming engine. A small table goes through the same
    engine first, so the baseline has its code and arenas warm."""
    from tenants.store import TableStore  # first: it configures the allocator

    store = TableStore.open(str(job["catalog"]), str(job["warehouse"]))
    how = str(job["engine"])

    def run(table: str) -> int:
        if how == "arrow":
            reader = store.read_arrow("acme", f"db.{table}", as_of="s")
            return sum(batch.num_rows for batch in reader)
        if how == "duckdb":
            from tenants.reads.interop import to_duckdb

            relation = to_duckdb(store, "acme", f"db.{table}", as_of="s")
            [(rows, _)] = relation.aggregate("count(*), sum(octet_length(p))").fetchall()
            return int(rows)
        if how == "polars":
            import polars as pl

            from tenants.reads.interop import to_polars

            lazy = to_polars(store, "acme", f"db.{table}", as_of="s")
            assert isinstance(lazy, pl.LazyFrame)
            frame = lazy.select(pl.len(), pl.col("p").bin.size().sum()).collect(engine="streaming")
            return int(frame.item(0, 0))
        raise SystemExit(f"unknown engine {how!r}")

    run("warm")
    baseline = start_measuring()
    rows = run("t")
    peak = status_kib("VmHWM")
    print(json.dumps({"baseline_kib": baseline, "peak_kib": peak, "rows": rows}))


def diff(job: dict[str, object]) -> None:
    """``rewind diff`` drained, then ``rewind revert`` of the commit it shows, of a
    small and a big table, each's growth measured from the RSS before it (a tiny
    table diffed and reverted first warms the code and arenas)."""
    from tenants.store import TableStore  # first: it configures the allocator

    store = TableStore.open(str(job["catalog"]), str(job["warehouse"]))
    commits = {str(k): int(v) for k, v in job["commits"].items()}  # type: ignore[attr-defined]
    store.diff("acme", "db.warm", "before").read_all()
    store.revert("acme", "db.warm", commits["db.warm"])
    report: dict[str, int] = {}
    for name in ("small", "big"):
        table = f"db.{name}"
        baseline = start_measuring()
        rows = 0
        for batch in store.diff("acme", table, "before"):
            rows += batch.num_rows
        report[f"{name}_diff_kib"] = status_kib("VmHWM") - baseline
        report[f"{name}_rows"] = rows
        baseline = start_measuring()
        store.revert("acme", table, commits[table])
        report[f"{name}_revert_kib"] = status_kib("VmHWM") - baseline
    print(json.dumps(report))


def gc_collect(job: dict[str, object]) -> None:
    """GC's object collection (decide, delete, forget) of every garbage object in
    the catalog; a collection with nothing to do first warms the code and the
    catalog connection, so what is measured is what the garbage costs."""
    from engine.gc.collect import collect
    from tenants.store import TableStore  # first: it configures the allocator

    store = TableStore.open(str(job["catalog"]), str(job["warehouse"]))
    collect(store.catalog, store.objects, grace_us=3_600_000_000 * 24 * 365, dry_run=False)
    baseline = start_measuring()
    report = collect(store.catalog, store.objects, grace_us=0, dry_run=False)
    peak = status_kib("VmHWM")
    print(json.dumps({"baseline_kib": baseline, "peak_kib": peak, "rows": report.deleted_objects}))


if __name__ == "__main__":
    main()
