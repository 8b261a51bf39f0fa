"""Instant restore (issue 33): how soon the tenant is usable, and what the rewrite after costs.

A tenant of one table ``db.t`` (``id`` int64 key, ``name``, 160 random bytes
of ``payload``, ``amount``: 176 stored bytes a row, which zstd cannot shrink)
whose bytes **all straddle** snapshot S: rows written in commits of 128 MB of
consecutive keys, S taken, then one small commit updating and deleting keys
spread over the whole key range (``key 0`` among the updated), then a full
compaction (64 MiB objects), so every object holds rows from before and after
S and a rewrite-first restore must rewrite all of them. Built on ``file://``;
the ``moto`` tenant of the same size is a mirror of it (the warehouse's
objects uploaded to a fresh moto bucket, the catalog copied with
``tenants.catalog.engine.copy.copy_catalog``, which keeps the catalog id the
warehouse marker names): the same bytes, without paying moto's ~15 MB/s twice
(write, then compaction) for 10 GB. Restores run with the local executor,
``verify="objects"``. In one run, side by side:

1. **Time to a usable tenant.** From the call of the restore until a query in
   *another process* returns the first rows of the restored table: a reader
   (``benchmarks/instant_reader.py``) opened on the same catalog and
   warehouse before the restore starts, warm (it has read the source's first
   rows once), as a serving process is. For an
   instant restore (``restore_tenant(..., instant=True, wait=False)``) the
   reader is told from ``on_installed``; for a physical (rewrite first) and a
   logical restore, when the call returns. The read is what ``rewind query
   --limit 10`` runs; the first row must be key 0 as of S (``-v0``: it was
   updated after S) and, afterwards, a count of every key must equal the
   rows at S (once per case: at 10 GB on moto a count takes minutes). Sizes
   ``--sizes-mb`` (default 1,000 and 10,000 MB, both warehouses) and
   ``--middle-mb`` (default 3,000, ``file://`` only). Instant restores
   ``--instant-repeats`` times (3; each but the last kept abandoned with
   ``cancel_restore``, which leaves the tenant reading through its cuts).
   The physical restore runs only up to ``--full-max-mb`` (default 3,000 MB)
   and the logical one up to ``--logical-max-mb`` (default 1,000 MB; it
   costs ~5x the physical one): above, their time is extrapolated from a
   line through the measured sizes (one size: proportional), and the JSON
   says so (``extrapolation``). Per instant case, two more figures: a cold
   ``rewind --json query --limit 10`` process (what an interpreter start
   adds) and the floor under the query, pyarrow alone reading the first rows
   of the first object.
2. **Reads during the rewrite**, at ``--scan-mb`` (default 1,000): the first
   10 rows and a full streamed scan (``read_arrow``, every column) of the
   instant restore's table while all its objects are cut members, then the
   same after ``resume_restore`` swapped them for their rewritten copies.
   Best of ``--scan-repeats`` (2), in the reader process.
3. **The background rewrite**: the rewrite step of that ``resume_restore``
   (straddling bytes ÷ ``seconds["rewrite"]``) against the physical restore's
   rewrite step at the same size, and the whole instant job (install +
   resume) against the whole physical restore. ``--pair-repeats`` (default
   2 on ``file://``, 1 on moto) adds pairs of an instant job with
   ``wait=True`` and a physical restore, alternating; best of each kept.
4. **Another tenant's writes during the rewrite** (``file://`` only: moto's
   server runs in this process, so its threads serving the rewrite would take
   the writer's GIL, which no real S3 does): a commit of ``--write-rows``
   rows to another tenant, timed ``--writes`` times idle, then continuously
   while another process runs the rewrite (``resume_restore`` of a pending
   instant job), at nice 0 and at nice 10.

``python -m benchmarks.bench_instant_restore [--quick]``; ``--quick`` uses 64
and 256 MB, no middle size, and scans at 64 MB. The JSON goes to
``benchmarks/results/bench_instant_restore[_quick].json`` and the picture of
part 1 to ``<name>_usable.png`` beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from rich.console import Console
from rich.table import Table

from benchmarks.common import (
    MB,
    RESULTS_DIR,
    ROOT,
    Backend,
    finish_run,
    load_average,
    moto_server,
    new_catalog_uri,
    open_store,
    timed,
)
from benchmarks.plots import draw_beside
from engine.gc.run import run_gc
from engine.pipeline import Method
from engine.restore.job import RestoreOutcome, cancel_restore, restore_tenant, resume_restore
from engine.restore.plan import plan_restore
from tenants.catalog import open_catalog
from tenants.catalog.engine.copy import copy_catalog
from tenants.schema import TableSchema
from tenants.store import TableStore

NAME = "bench_instant_restore"
TENANT = "src"
DATABASE, TABLE = "db", "t"
SNAPSHOT = "s"
SCHEMA = TableSchema.of(
    [("id", "int64"), ("name", "string"), ("payload", "binary"), ("amount", "double")], ["id"]
)
PAYLOAD = 160
STORED_BYTES_PER_ROW = 176  # measured: zstd cannot shrink the random payload
COMMIT_BYTES = 128 * MB  # rows per commit before S: bounded memory while building
LATE_PER_OBJECT = 16  # keys updated after S per compacted object (64 MiB)
OBJECT_BYTES = 64 * 1024 * 1024  # DEFAULT_TARGET_BYTES of a compaction
FIRST_ROWS = 10
FIRST_REPEATS = 5  # part 2: first rows read this many times, the best kept
GOALS = {
    "usable_s": 0.2,  # instant: seconds to the first rows in another process
    "reads_ratio": 1.3,  # scans of cut members ÷ scans after the swap
    "whole_job_ratio": 1.1,  # whole instant job ÷ physical restore
    "writes_ratio": 1.2,  # another tenant's median write during the rewrite ÷ idle
}
console = Console() if sys.stdout.isatty() else Console(width=170)


# the straddling tenant ------------------------------------------------------------------------


def rows(keys: np.ndarray, rng: np.random.Generator, version: int = 0) -> pa.Table:
    """Rows of :data:`SCHEMA` for ``keys``; ``version`` goes into ``name``
    (``user-<id>-v<version>``), so a read shows which version it returned."""
    n = len(keys)
    key_array = pa.array(keys, pa.int64())
    offsets = np.arange(0, (n + 1) * PAYLOAD, PAYLOAD, dtype=np.int32)
    payload = pa.Array.from_buffers(
        pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(rng.bytes(n * PAYLOAD))]
    )
    name = pc.binary_join_element_wise("user-", pc.cast(key_array, pa.string()), f"-v{version}", "")
    amount = pa.array(np.round(rng.normal(100.0, 40.0, n), 2), pa.float64())
    return pa.table({"id": key_array, "name": name, "payload": payload, "amount": amount})


def build(store: TableStore, size: int, seed: int) -> dict[str, Any]:
    """The module doc's tenant of about ``size`` stored bytes, every byte straddling S.

    Raises:
        RuntimeError: the plan would reuse an object (it must rewrite every object
            holding rows at S; the deletes' own object, after S, it skips).
    """
    rng = np.random.default_rng(seed)
    store.create_tenant(TENANT)
    store.create_table(TENANT, f"{DATABASE}.{TABLE}", SCHEMA)
    n = max(1_000, size // STORED_BYTES_PER_ROW)
    per_commit = max(1, COMMIT_BYTES // STORED_BYTES_PER_ROW)
    started = time.perf_counter()
    for start in range(0, n, per_commit):
        keys = np.arange(start, min(n, start + per_commit), dtype=np.int64)
        store.write(TENANT, f"{DATABASE}.{TABLE}", upserts=rows(keys, rng))
    write_s = time.perf_counter() - started
    store.create_snapshot(TENANT, SNAPSHOT)
    # After S: every key range gets updates (key 0 first) and deletes, so every
    # compacted object holds versions from both sides of S.
    stride = max(2, n // max(1, (size // OBJECT_BYTES + 1) * LATE_PER_OBJECT))
    updated = np.arange(0, n, stride, dtype=np.int64)
    deleted = np.arange(stride // 2, n, 2 * stride, dtype=np.int64)
    store.write(
        TENANT,
        f"{DATABASE}.{TABLE}",
        upserts=rows(updated, rng, version=1),
        deletes=pa.table({"id": pa.array(deleted, pa.int64())}),
    )
    _, compact_s = timed(lambda: store.compact(TENANT, full=True))
    # As a nightly GC would: the objects compacted away go (S needs none of them).
    gc, gc_s = timed(
        lambda: run_gc(store, dry_run=False, grace_us=0, allow_short_grace=True, compact=False)
    )
    objects = [o for _, o in store.objects_of(TENANT)]
    totals = plan_restore(store.catalog, TENANT, SNAPSHOT, to="probe").totals()
    if totals["reuse"][0]:  # what S needs is all rewritten; the commit after S is skipped
        raise RuntimeError(
            f"tenant {TENANT} of {size / MB:,.0f} MB: the plan at {SNAPSHOT} is {totals}, "
            f"reusing objects that should all straddle S"
        )
    return {
        "size_asked": size,
        "rows_at_s": n,
        "rows_now": n - len(deleted),
        "updated_after_s": len(updated),
        "deleted_after_s": len(deleted),
        "objects": len(objects),
        "bytes": sum(o.bytes for o in objects),
        "straddle_objects": totals["rewrite"][0],
        "straddle_bytes": totals["rewrite"][1],
        "skipped": {"objects": totals["skip"][0], "bytes": totals["skip"][1]},
        "write_s": write_s,
        "compact_s": compact_s,
        "gc_s": gc_s,
        "build_s": time.perf_counter() - started,
    }


@contextmanager
def moto_mirror(source: TableStore) -> Iterator[tuple[TableStore, dict[str, Any]]]:
    """A store on a fresh moto bucket holding what ``source`` (a ``file://``
    store, quiet meanwhile) holds: every file of its warehouse uploaded under
    the same key, marker included, and its catalog copied into a fresh SQLite
    catalog (same catalog id, so the copy owns the uploaded warehouse).
    Cleaned up as :func:`benchmarks.common.open_store` cleans its stores."""
    import boto3
    from boto3.s3.transfer import TransferConfig

    server = moto_server()
    workdir = Path(tempfile.mkdtemp(prefix="rewind-bench-mirror-"))
    bucket = f"rewind-bench-{uuid.uuid4().hex[:12]}"
    server.create_bucket(bucket)
    root = Path(source.objects.warehouse.prefix)
    files = [Path(d) / f for d, _, names in os.walk(root) for f in names]
    client = boto3.client("s3", **server.settings.to_boto3())
    whole = TransferConfig(multipart_threshold=1 << 40)  # one PUT an object, as Rewind's

    def upload(path: Path) -> int:
        client.upload_file(str(path), bucket, f"warehouse/{path.relative_to(root)}", Config=whole)
        return path.stat().st_size

    started = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        uploaded = sum(pool.map(upload, files))
    upload_s = time.perf_counter() - started
    catalog_uri = new_catalog_uri("sqlite", workdir)
    copy = open_catalog(catalog_uri)
    try:
        copy_catalog(source.catalog, copy)
    finally:
        copy.close()
    store = TableStore.open(catalog_uri, f"s3://{bucket}/warehouse", s3=server.settings)
    figures = {
        "files": len(files),
        "bytes": uploaded,
        "upload_s": upload_s,
        "mirror_s": time.perf_counter() - started,
    }
    try:
        yield store, figures
    finally:
        store.close()
        store.objects.delete_many(info.key for info in store.objects.list(""))
        shutil.rmtree(workdir, ignore_errors=True)


# the other process ----------------------------------------------------------------------------


@dataclass
class Reader:
    """The reader process of ``benchmarks/instant_reader.py`` on one store."""

    process: subprocess.Popen[str]
    where: str
    pending: int = 0

    @classmethod
    def start(cls, store: TableStore) -> Reader:
        process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.instant_reader", store.catalog.uri,
             store.objects.warehouse.uri],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
        )  # fmt: skip
        reader = cls(process, store.objects.warehouse.uri)
        reader._line()  # {"ready": ...}: imports done, store open
        return reader

    def send(self, op: str, tenant: str, **extra: Any) -> None:
        """Ask without waiting (from ``on_installed``: the restore goes on meanwhile)."""
        stdin = self._pipe(self.process.stdin)
        stdin.write(
            json.dumps({"op": op, "tenant": tenant, "table": f"{DATABASE}.{TABLE}"} | extra) + "\n"
        )
        stdin.flush()
        self.pending += 1

    def reply(self) -> dict[str, Any]:
        self.pending -= 1
        answer = self._line()
        if "error" in answer:
            raise RuntimeError(f"the reader of {self.where} failed: {answer['error']}")
        return answer

    def ask(self, op: str, tenant: str, **extra: Any) -> dict[str, Any]:
        self.send(op, tenant, **extra)
        return self.reply()

    def _line(self) -> dict[str, Any]:
        line = self._pipe(self.process.stdout).readline()
        if not line:
            raise RuntimeError(f"the reader of {self.where} exited ({self.process.wait()})")
        return dict(json.loads(line))

    def _pipe(self, pipe: IO[str] | None) -> IO[str]:
        assert pipe is not None, "the reader runs with pipes"
        return pipe

    def stop(self) -> None:
        self._pipe(self.process.stdin).close()
        self.process.wait(timeout=60)


@contextmanager
def reader_of(store: TableStore) -> Iterator[Reader]:
    reader = Reader.start(store)
    try:
        yield reader
    finally:
        reader.stop()


def cold_query(store: TableStore, tenant: str) -> dict[str, Any]:
    """``rewind --json query TENANT db.t --limit 10`` as a whole new process."""
    rewind = str(Path(sys.executable).parent / "rewind")
    command = [rewind, "--catalog", store.catalog.uri, "--warehouse", store.objects.warehouse.uri,
               "--json", "query", tenant, f"{DATABASE}.{TABLE}", "--limit", str(FIRST_ROWS)]  # fmt: skip
    done, seconds = timed(
        lambda: subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    )
    if done.returncode:
        raise RuntimeError(f"rewind query {tenant} failed: {done.stderr[-2000:]}")
    shown = json.loads(done.stdout)
    return {"seconds": seconds, "rows": len(shown), "first_name": shown[0]["name"]}


# 1. time to usable -------------------------------------------------------------------------


def check_first(answer: dict[str, Any], tenant: str, built: dict[str, Any]) -> None:
    """The reader saw the table as of S: key 0 first, in its version before S."""
    want = min(FIRST_ROWS, built["rows_at_s"])
    if (answer["rows"], answer["first_id"], answer["first_name"]) != (want, 0, "user-0-v0"):
        raise RuntimeError(f"the first rows of {tenant} are not those at S: {answer}")


def check_count(reader: Reader, tenant: str, built: dict[str, Any]) -> dict[str, Any]:
    counted = reader.ask("count", tenant)
    if counted["rows"] != built["rows_at_s"]:
        raise RuntimeError(
            f"{tenant} holds {counted['rows']:,} rows, not the {built['rows_at_s']:,} at S"
        )
    return {"rows": counted["rows"], "seconds": counted["seconds"]}


def usable_instant(
    store: TableStore, reader: Reader, built: dict[str, Any], target: str
) -> tuple[dict[str, Any], RestoreOutcome]:
    """An instant restore, the reader told from ``on_installed``; its figures and outcome."""
    marks: dict[str, float] = {}

    def installed(_: Any) -> None:
        marks["installed"] = time.monotonic()
        reader.send("first", target, limit=FIRST_ROWS)

    began = time.monotonic()
    outcome = restore_tenant(
        store, TENANT, SNAPSHOT, to=target, executor="local", instant=True, wait=False,
        on_installed=installed,
    )  # fmt: skip
    returned = time.monotonic()
    if "installed" not in marks or not outcome.rewrite_pending:
        raise RuntimeError(f"instant restore to {target}: on_installed not called ({outcome})")
    first = reader.reply()
    check_first(first, target, built)
    return {
        "usable_s": first["done"] - began,
        "installed_s": marks["installed"] - began,
        "returned_s": returned - began,
        "handoff_s": first["started"] - marks["installed"],
        "query_s": first["seconds"],
        "steps": dict(outcome.seconds),
        "cut_objects_read": first["cut_objects"],
        "objects_read": first["objects"],
        "first_name": first["first_name"],
    }, outcome


def usable_after(
    store: TableStore, reader: Reader, built: dict[str, Any], target: str, method: Method
) -> tuple[dict[str, Any], RestoreOutcome]:
    """A restore that installs last (physical: rewrite first; logical); the reader
    is told when the call returns."""
    began = time.monotonic()
    outcome = restore_tenant(store, TENANT, SNAPSHOT, to=target, executor="local", method=method)
    returned = time.monotonic()
    first = reader.ask("first", target, limit=FIRST_ROWS)
    check_first(first, target, built)
    return {
        "usable_s": first["done"] - began,
        "seconds": returned - began,
        "query_s": first["seconds"],
        "steps": dict(outcome.seconds),
        "bytes_written": outcome.bytes_written,
        "rewritten_objects": outcome.rewritten,
    }, outcome


# 2. reads during the rewrite ----------------------------------------------------------------


def scans(reader: Reader, tenant: str, built: dict[str, Any], repeats: int) -> dict[str, Any]:
    """First rows (best of :data:`FIRST_REPEATS`) and a full streamed scan of
    ``tenant`` (best of ``repeats``)."""
    firsts, fulls = [], []
    for _ in range(FIRST_REPEATS):  # milliseconds each: more runs, a steadier best
        first = reader.ask("first", tenant, limit=FIRST_ROWS)
        check_first(first, tenant, built)
        firsts.append(first["seconds"])
    for _ in range(repeats):
        full = reader.ask("scan", tenant)
        if full["rows"] != built["rows_at_s"]:
            raise RuntimeError(f"a scan of {tenant} read {full['rows']:,} rows: {full}")
        fulls.append(full["seconds"])
    return {
        "cut_objects": first["cut_objects"],
        "objects": first["objects"],
        "first_rows_s": firsts,
        "first_rows_best_s": min(firsts),
        "scan_s": fulls,
        "scan_best_s": min(fulls),
        "scan_rows": full["rows"],
        "scan_mb_per_s": built["bytes"] / MB / min(fulls),
    }


# 4. another tenant's writes during the rewrite ----------------------------------------------

OTHER = "other"

RESUME_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from tenants.store import TableStore
    from engine.restore.job import resume_restore
    store = TableStore.open(sys.argv[1], sys.argv[2])
    began = time.monotonic()
    outcome = resume_restore(store, sys.argv[3])
    ended = time.monotonic()
    print(json.dumps({"began": began, "ended": ended, "seconds": ended - began,
                      "steps": outcome.seconds, "rewritten": outcome.rewritten}))
    """
)


def one_write(store: TableStore, count: int, rng: np.random.Generator, base: int) -> float:
    keys = np.arange(base, base + count, dtype=np.int64)
    _, seconds = timed(lambda: store.write(OTHER, f"{DATABASE}.{TABLE}", upserts=rows(keys, rng)))
    return seconds


def latency(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "n": len(ordered),
        "median_s": statistics.median(ordered),
        "p95_s": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
        "max_s": ordered[-1],
    }


def writes_during_rewrite(
    store: TableStore, write_rows: int, idle_writes: int, seed: int, nices: Sequence[int]
) -> list[dict[str, Any]]:
    """Idle write latency of another tenant, then during an instant job's rewrite
    run by another process (one pending job per ``nices`` value)."""
    rng = np.random.default_rng(seed)
    store.create_tenant(OTHER)
    store.create_table(OTHER, f"{DATABASE}.{TABLE}", SCHEMA)
    base = 0
    cases = []
    for nice in nices:
        target = f"writes-nice{nice}"
        pending = restore_tenant(
            store, TENANT, SNAPSHOT, to=target, executor="local", instant=True, wait=False
        )
        one_write(store, write_rows, rng, base)  # warm
        base += write_rows
        idle = []
        for _ in range(idle_writes):
            idle.append(one_write(store, write_rows, rng, base))
            base += write_rows
        process = subprocess.Popen(
            ["nice", "-n", str(nice), sys.executable, "-c", RESUME_SCRIPT, store.catalog.uri,
             store.objects.warehouse.uri, pending.job_id],
            stdout=subprocess.PIPE, text=True, cwd=ROOT,
        )  # fmt: skip
        timed_writes: list[tuple[float, float]] = []
        while process.poll() is None:
            began = time.monotonic()
            timed_writes.append((began, one_write(store, write_rows, rng, base)))
            base += write_rows
        out, _ = process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"the rewrite of {target} (job {pending.job_id}) failed")
        rewrite = json.loads(out.strip().splitlines()[-1])
        during = [s for began, s in timed_writes if rewrite["began"] <= began <= rewrite["ended"]]
        idle_l = latency(idle)
        during_l = latency(during) if during else None
        cases.append(
            {
                "rewrite_nice": nice,
                "write_rows": write_rows,
                "idle": idle_l,
                "during_rewrite": during_l,
                "rewrite": rewrite,
                "median_ratio": during_l["median_s"] / idle_l["median_s"] if during_l else None,
                "p95_ratio": during_l["p95_s"] / idle_l["p95_s"] if during_l else None,
            }
        )
    return cases


# one size on one warehouse ------------------------------------------------------------------


@dataclass
class Plan:
    """What to measure at one size on one warehouse."""

    backend: Backend
    size: int
    full: bool  # physical restores too
    logical: bool  # and a logical one
    scan: bool  # parts 2 and 3 (and 4 on file://)
    instant_repeats: int
    scan_repeats: int
    pair_repeats: int
    write_rows: int = 1_000
    writes: int = 40
    seed: int = 5
    notes: list[str] = field(default_factory=list)


def measure(store: TableStore, built: dict[str, Any], plan: Plan) -> dict[str, Any]:
    """Parts 1-4 (as ``plan`` says) on a store holding the built tenant."""
    tag = f"{plan.backend}-{plan.size // MB}"
    case: dict[str, Any] = {"backend": plan.backend, "size_asked": plan.size, "tenant": built}
    with reader_of(store) as reader:
        # A serving process has served queries before: its first read's lazy
        # set-up (0.3-0.7 s in the first run) is not the restore's.
        reader.ask("first", TENANT, limit=FIRST_ROWS)
        console.print(f"  {tag}: instant restores x{plan.instant_repeats} ...")
        runs, kept = [], None
        for rep in range(plan.instant_repeats):
            target = f"instant-{rep}"
            figures, outcome = usable_instant(store, reader, built, target)
            if rep == 0:  # once: at 10 GB on moto a count takes minutes
                figures["count"] = check_count(reader, target, built)
            runs.append(figures)
            if plan.scan and rep == plan.instant_repeats - 1:
                kept = (target, outcome, figures)
            else:
                cancel_restore(store, outcome.job_id)  # abandon the rewrite: cheap
        cold = cold_query(store, "instant-0")
        bare = reader.ask("bare", "instant-0", limit=FIRST_ROWS)
        best = min(runs, key=lambda r: r["usable_s"])
        case["instant"] = {
            "runs": runs,
            "usable_best_s": best["usable_s"],
            "usable_median_s": statistics.median(r["usable_s"] for r in runs),
            "installed_best_s": min(r["installed_s"] for r in runs),
            "query_best_s": min(r["query_s"] for r in runs),
            "cold_cli_query": cold,
            "bare_first_rows": {k: bare[k] for k in ("seconds", "rows", "object_bytes")},
        }
        pairs: dict[str, list[dict[str, Any]]] = {"physical": [], "instant_wait": []}
        if kept is not None:
            target, outcome, installed = kept
            console.print(f"  {tag}: reads of cut members, then the rewrite (resume) ...")
            case["reads_cut"] = scans(reader, target, built, plan.scan_repeats)
            resumed, resume_s = timed(lambda: resume_restore(store, outcome.job_id))
            case["reads_after"] = scans(reader, target, built, plan.scan_repeats)
            if case["reads_after"]["cut_objects"]:
                raise RuntimeError(f"{target} still reads cut members after its swap")
            case["instant_job"] = {
                "install_s": installed["returned_s"],
                "resume_s": resume_s,
                "whole_s": installed["returned_s"] + resume_s,
                "resume_steps": dict(resumed.seconds),
                "rewritten_objects": resumed.rewritten,
                "bytes_written": resumed.bytes_written,
            }
        # One unfinished job per source tenant: these run once the kept job is done.
        if plan.full:
            methods: tuple[Method, ...] = ("physical", "logical") if plan.logical else ("physical",)
            for method in methods:
                console.print(f"  {tag}: {method} restore ...")
                figures, _ = usable_after(store, reader, built, method, method)
                figures["count"] = check_count(reader, method, built)
                case[method] = figures
            pairs["physical"].append(case["physical"])
            for rep in range(1, plan.pair_repeats if kept is not None else 1):
                console.print(f"  {tag}: pair {rep + 1}: instant job (wait) and physical ...")
                began = time.perf_counter()
                whole = restore_tenant(
                    store, TENANT, SNAPSHOT, to=f"instant-wait-{rep}", executor="local",
                    instant=True,
                )  # fmt: skip
                seconds = time.perf_counter() - began
                pairs["instant_wait"].append({"whole_s": seconds, "steps": dict(whole.seconds)})
                physical, _ = usable_after(store, reader, built, f"physical-{rep}", "physical")
                pairs["physical"].append(physical)
            case["physical_runs"] = pairs["physical"]
            if kept is not None:
                case["instant_wait_runs"] = pairs["instant_wait"]
                case["rewrite"] = rewrite_figures(case, built, pairs)
    if plan.scan and plan.backend == "file":
        console.print(f"  {tag}: another tenant's writes, idle and during a rewrite ...")
        case["writes"] = writes_during_rewrite(
            store, plan.write_rows, plan.writes, plan.seed, (0, 10)
        )
    return case


def rewrite_figures(
    case: dict[str, Any], built: dict[str, Any], pairs: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    """Part 3: the instant job's rewrite against the physical restore's, best of each."""
    job = case["instant_job"]
    straddle = built["straddle_bytes"]
    instant_rewrite = min(
        [job["resume_steps"]["rewrite"], *(p["steps"]["rewrite"] for p in pairs["instant_wait"])]
    )
    physical_rewrite = min(p["steps"]["rewrite"] for p in pairs["physical"])
    whole = [job["whole_s"], *(p["whole_s"] for p in pairs["instant_wait"])]
    physical = [p["seconds"] for p in pairs["physical"]]
    return {
        "straddle_bytes": straddle,
        "instant_rewrite_s": instant_rewrite,
        "instant_rewrite_mb_per_s": straddle / MB / instant_rewrite,
        "physical_rewrite_s": physical_rewrite,
        "physical_rewrite_mb_per_s": straddle / MB / physical_rewrite,
        "rewrite_ratio": instant_rewrite / physical_rewrite,
        "instant_whole_s": whole,
        "physical_whole_s": physical,
        "whole_ratio": min(whole) / min(physical),
    }


# extrapolation and goals --------------------------------------------------------------------


def extrapolate(cases: Sequence[dict[str, Any]], backend: str, method: str) -> dict[str, Any]:
    """``method``'s seconds to usable per straddling GB on ``backend``: a line
    through the measured sizes (the best run at each; one size: through zero),
    and its value at the sizes not measured."""
    mine = [c for c in cases if c["backend"] == backend]
    points = [
        (c["tenant"]["straddle_bytes"] / 1e9, best_usable(c, method)) for c in mine if method in c
    ]
    if not points:
        return {}
    if len(points) == 1:
        slope, intercept = points[0][1] / points[0][0], 0.0
    else:
        xs, ys = zip(*points, strict=True)
        slope, intercept = (float(v) for v in np.polyfit(xs, ys, 1))
    predicted = [
        {"straddle_bytes": c["tenant"]["straddle_bytes"],
         "usable_s": intercept + slope * c["tenant"]["straddle_bytes"] / 1e9}
        for c in mine if method not in c
    ]  # fmt: skip
    return {
        "measured_points": len(points),
        "seconds_per_gb": slope,
        "intercept_s": intercept,
        "extrapolated": predicted,
    }


def best_usable(case: dict[str, Any], method: str) -> float:
    """The fastest of ``method``'s runs in ``case`` (one, or the part 3 pairs' too)."""
    return min(r["usable_s"] for r in case.get(f"{method}_runs") or [case[method]])


def goals(payload: dict[str, Any]) -> dict[str, Any]:
    cases = payload["cases"]
    usable = {f"{c['backend']} {c['tenant']['straddle_bytes'] / 1e9:.2f} GB": c["instant"]["usable_best_s"]
              for c in cases}  # fmt: skip
    out: dict[str, Any] = {
        "usable": {
            "goal_s": GOALS["usable_s"],
            "best_s": usable,
            "met": all(v < GOALS["usable_s"] for v in usable.values()),
        }
    }
    reads = {
        f"{c['backend']} {key}": c["reads_cut"][f"{key}_best_s"] / c["reads_after"][f"{key}_best_s"]
        for c in cases if "reads_cut" in c for key in ("scan", "first_rows")
    }  # fmt: skip
    if reads:
        out["reads"] = {"goal_ratio": GOALS["reads_ratio"], "ratios": reads,
                        "met": all(v <= GOALS["reads_ratio"] for v in reads.values())}  # fmt: skip
    whole = {c["backend"]: c["rewrite"]["whole_ratio"] for c in cases if "rewrite" in c}
    if whole:
        out["whole_job"] = {"goal_ratio": GOALS["whole_job_ratio"], "ratios": whole,
                            "met": all(v <= GOALS["whole_job_ratio"] for v in whole.values())}  # fmt: skip
    writes = {
        f"nice {w['rewrite_nice']}": w["median_ratio"] for c in cases for w in c.get("writes", [])
    }
    if writes:
        out["writes"] = {"goal_ratio": GOALS["writes_ratio"], "median_ratios": writes,
                         "met": all(v is not None and v <= GOALS["writes_ratio"] for v in writes.values())}  # fmt: skip
    return out


# report -------------------------------------------------------------------------------------


def _gb(n: float) -> str:
    return f"{n / 1e9:,.2f}"


def print_report(payload: dict[str, Any]) -> None:
    cases = payload["cases"]
    t = Table(title="1. Seconds from the restore call to the first rows in another process")
    for c in ("backend", "straddling GB", "objects", "instant best (median)", "installed",
              "query", "bare pyarrow", "cold CLI query", "physical", "logical", "count check s"):  # fmt: skip
        t.add_column(c, justify="right")
    for c in cases:
        i = c["instant"]
        est = {m: {round(p["straddle_bytes"]): p["usable_s"] for p in payload["extrapolation"][c["backend"]].get(m, {}).get("extrapolated", [])}
               for m in ("physical", "logical")}  # fmt: skip

        def other(method: str, case: dict[str, Any] = c, guess: dict[str, Any] = est) -> str:
            if method in case:
                return f"{case[method]['usable_s']:.2f}"
            value = guess[method].get(round(case["tenant"]["straddle_bytes"]))
            return f"~{value:.0f} (extrapolated)" if value is not None else "-"

        t.add_row(
            c["backend"], _gb(c["tenant"]["straddle_bytes"]), str(c["tenant"]["objects"]),
            f"{i['usable_best_s']:.3f} ({i['usable_median_s']:.3f})", f"{i['installed_best_s']:.3f}",
            f"{i['query_best_s']:.3f}", f"{i['bare_first_rows']['seconds']:.3f}",
            f"{i['cold_cli_query']['seconds']:.2f}",
            other("physical"), other("logical"),
            f"{i['runs'][0]['count']['seconds']:.1f}",
        )  # fmt: skip
    console.print(t)
    for backend, methods in payload["extrapolation"].items():
        for method, fit in methods.items():
            if fit:
                console.print(f"  {backend} {method}: {fit['seconds_per_gb']:.1f} s per straddling GB "
                              f"(+{fit['intercept_s']:.1f} s; {fit['measured_points']} size(s) measured)")  # fmt: skip
    for c in cases:
        if "reads_cut" in c:
            cut, after = c["reads_cut"], c["reads_after"]
            console.print(
                f"2. {c['backend']} {_gb(c['tenant']['straddle_bytes'])} GB: full scan {cut['scan_best_s']:.2f} s "
                f"with {cut['cut_objects']} cut members vs {after['scan_best_s']:.2f} s after the swap "
                f"({cut['scan_best_s'] / after['scan_best_s']:.2f}x); first {FIRST_ROWS} rows "
                f"{cut['first_rows_best_s']:.3f} vs {after['first_rows_best_s']:.3f} s "
                f"({cut['first_rows_best_s'] / after['first_rows_best_s']:.2f}x)"
            )
        if "rewrite" in c:
            r = c["rewrite"]
            console.print(
                f"3. {c['backend']}: rewrite step {r['instant_rewrite_mb_per_s']:.1f} MB/s (instant, resumed) vs "
                f"{r['physical_rewrite_mb_per_s']:.1f} MB/s (physical) = {r['rewrite_ratio']:.2f}x time; whole "
                f"instant job {min(r['instant_whole_s']):.1f} s vs physical {min(r['physical_whole_s']):.1f} s "
                f"= {r['whole_ratio']:.2f}x"
            )
        for w in c.get("writes", []):
            during = w["during_rewrite"] or {}
            console.print(
                f"4. writes of {w['write_rows']:,} rows to another tenant, rewrite at nice "
                f"{w['rewrite_nice']}: median {w['idle']['median_s'] * 1e3:.1f} ms idle, "
                f"{during.get('median_s', float('nan')) * 1e3:.1f} ms during ({during.get('n', 0)} writes) = "
                f"{w['median_ratio'] or float('nan'):.2f}x; p95 {w['p95_ratio'] or float('nan'):.2f}x"
            )
    for name, goal in payload["goals"].items():
        console.print(f"  goal {name}: {'met' if goal['met'] else 'NOT met'}")


# main ---------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_instant_restore",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="64 and 256 MB, about 3 minutes")
    parser.add_argument(
        "--sizes-mb", type=float, nargs="+", help="both warehouses (default 1000 10000)"
    )
    parser.add_argument("--middle-mb", type=float, help="file:// only (default 3000; 0: none)")
    parser.add_argument("--full-max-mb", type=float,
                        help="physical restores up to this size (default 3000)")  # fmt: skip
    parser.add_argument("--logical-max-mb", type=float,
                        help="logical restores up to this size (default 1000)")  # fmt: skip
    parser.add_argument("--scan-mb", type=float, help="parts 2-4 at this size (default 1000)")
    parser.add_argument("--backends", nargs="+", choices=("moto", "file"), default=["file", "moto"])
    parser.add_argument("--instant-repeats", type=int, default=3)
    parser.add_argument("--scan-repeats", type=int, default=2)
    parser.add_argument("--pair-repeats", type=int, help="part 3 (default 2 on file://, 1 on moto)")
    parser.add_argument("--write-rows", type=int, default=1_000)
    parser.add_argument("--writes", type=int, default=40, help="idle writes timed (part 4)")
    parser.add_argument("--seed", type=int, default=33)
    parser.add_argument("--name", help="result name (default bench_instant_restore[_quick])")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    quick = bool(args.quick)
    sizes = [int(s * MB) for s in (args.sizes_mb or ([64, 256] if quick else [1_000, 10_000]))]
    middle = args.middle_mb if args.middle_mb is not None else (0 if quick else 3_000)
    full_max = int((args.full_max_mb or (256 if quick else 3_000)) * MB)
    logical_max = int((args.logical_max_mb or (256 if quick else 1_000)) * MB)
    scan = int((args.scan_mb or (64 if quick else 1_000)) * MB)
    file_sizes = sorted({*sizes, *([int(middle * MB)] if middle else [])})
    load_start = load_average()
    started = time.perf_counter()
    console.print(
        f"[bold]{NAME}[/]: sizes {[s // MB for s in file_sizes]} MB; load average {load_start}"
    )
    payload: dict[str, Any] = {
        "quick": quick,
        "load_average_at_start": load_start,
        "sizes_mb": [s / MB for s in sizes],
        "middle_mb": middle,
        "full_max_mb": full_max / MB,
        "logical_max_mb": logical_max / MB,
        "scan_mb": scan / MB,
        "backends": args.backends,
        "schema": {
            "columns": [c.name for c in SCHEMA.columns],
            "stored_bytes_per_row": STORED_BYTES_PER_ROW,
        },
        "moto_tenants": "mirrors of the file:// tenants (objects uploaded, catalog copied)",
        "goals": GOALS,
        "cases": [],
        "builds": [],
    }
    cases: list[dict[str, Any]] = payload["cases"]

    def plan_for(backend: Backend, size: int) -> Plan:
        return Plan(
            backend=backend, size=size, full=size <= full_max, logical=size <= logical_max,
            scan=size == scan,
            instant_repeats=args.instant_repeats, scan_repeats=args.scan_repeats,
            pair_repeats=args.pair_repeats or (2 if backend == "file" else 1),
            write_rows=args.write_rows, writes=args.writes, seed=args.seed,
        )  # fmt: skip

    for size in file_sizes:
        with open_store("file") as store:
            console.print(f"building a {size / MB:,.0f} MB straddling tenant on file:// ...")
            built = build(store, size, args.seed)
            console.print(f"  {built['bytes'] / MB:,.0f} MB in {built['objects']} objects, "
                          f"built in {built['build_s']:.0f} s")  # fmt: skip
            payload["builds"].append({"backend": "file", **built})
            with mirror_if(store, "moto" in args.backends and size in sizes) as mirrored:
                if mirrored is not None:
                    payload["builds"].append({"backend": "moto", **built, "mirror": mirrored[1]})
                if "file" in args.backends:
                    cases.append(measure(store, built, plan_for("file", size)))
                if mirrored is not None:
                    cases.append(measure(mirrored[0], built, plan_for("moto", size)))
    payload["extrapolation"] = {
        backend: {m: extrapolate(cases, backend, m) for m in ("physical", "logical")}
        for backend in args.backends
    }
    payload["goals"] = goals(payload)
    name = args.name or (f"{NAME}_quick" if quick else NAME)
    result = finish_run(payload, name=name, started=started, console=console, report=print_report)
    draw_beside(RESULTS_DIR / f"{name}.json", say=console.print)
    return result


@contextmanager
def mirror_if(
    store: TableStore, wanted: bool
) -> Iterator[tuple[TableStore, dict[str, Any]] | None]:
    """:func:`moto_mirror` of ``store`` when ``wanted``; made before anything is
    restored on ``store``, so the mirror holds the built tenant alone."""
    if not wanted:
        yield None
        return
    console.print("  mirroring it to moto ...")
    with moto_mirror(store) as mirrored:
        console.print(
            f"  uploaded {mirrored[1]['bytes'] / MB:,.0f} MB in {mirrored[1]['mirror_s']:.0f} s"
        )
        yield mirrored


if __name__ == "__main__":
    main()
