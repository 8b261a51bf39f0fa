"""Metadata-only restore at scale: 10^3..10^6 objects, both catalogs, against two peers.

One run measures, for each catalog backend (SQLite, PostgreSQL), each object
count N (full: 10^3, 10^4, 10^5, 10^6; ``--quick``: 10^3, 10^4) and each layout
(all N objects in one table; N objects over 100 tables):

1. **Restore, verify none.** The objects are registered straight into the
   catalog by ``benchmarks.bench_restore.register_objects`` (nothing straddles
   the snapshot S, so the restore is metadata only), then
   ``restore_tenant(store, tenant, "s", to=..., executor="local",
   verify="none", method="physical")`` runs as a clone (``to="cK"``) and in
   place (``to=None``), best of 3 (fewer when one run takes long), with the
   outcome's per-step seconds (``plan``, ``rewrite``, ``verify``, ``install``;
   ``journal_and_other`` is the rest of the wall time: ``start_job`` and the
   job's state changes).
2. **The same with verify "objects"**, which lists each table prefix of a
   ``file://`` warehouse and checks every object's size, so the N keys exist
   there: an empty file per object, registered with byte size 0 (its real
   size). Up to ``--verify-max`` objects (10^5) always; above it only when
   creating the files takes under ``--files-budget`` seconds (180: measured
   in the case, which stops creating files at the budget; the JSON says what
   was decided and why).
3. **Catalog growth per restore**: rows added to each catalog table
   (``COUNT(*)`` before and after each restore) and bytes: SQLite's file size
   and used pages after ``PRAGMA wal_checkpoint(TRUNCATE)``; PostgreSQL's
   ``pg_total_relation_size`` summed over the catalog schema's tables (and
   ``pg_database_size``).
4. **Read planning at S**: ``tenants.reads.visible.plan_read`` of table ``t000`` at the
   snapshot, in the source tenant (its own membership rows) and in the first
   restored clone (what it inherits by reference), best of 5.
5. **Peers**, when importable: delta-rs (``deltalake``) ``DeltaTable.restore(0)``
   of a local table whose version 0 adds N data files and whose version 1
   removes them all and adds one (the log is written directly, as the Delta
   protocol defines it; the data files are empty files), with the default
   existence check of the re-added files and with ``ignore_missing_files=True``;
   and pyiceberg ``manage_snapshots().rollback_to_snapshot(s1).commit()`` on a
   SQLite SQL-catalog table whose snapshot s1 appended N data files (manifest
   entries written by ``fast_append``; no data file exists, a rollback reads
   none) and s2 one more. Only the restore/rollback call is timed, best of 3;
   between runs an untimed restore/rollback returns the table to its later
   state. A peer whose set-up is predicted to exceed ``--peer-budget`` seconds
   at some N stops there (``"skipped"``).

PostgreSQL is ``REWIND_BENCH_PG`` (default postgres@127.0.0.1:5432), a schema
per case in a throwaway database (``benchmarks.common.new_catalog_uri``),
``VACUUM ANALYZE``d after registering (autovacuum's steady state) and dropped
after the case. Scratch data lives under the temp dir and is removed.

``python -m benchmarks.bench_restore_scale [--quick] [--out PATH]``; the plot
(full run, or ``--plot PATH``) is ``benchmarks/results/bench_restore_scale.png``.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks.bench_restore import DATABASE, SNAPSHOT, register_objects
from benchmarks.common import (
    CATALOG_BACKENDS,
    PG_ADMIN,
    RESULTS_DIR,
    CatalogBackend,
    finish_run,
    load_average,
    open_store,
    parse_sizes,
    timed,
)
from engine.restore.job import restore_tenant
from tenants.reads.visible import plan_read
from tenants.store import TableStore

NAME = "bench_restore_scale"
TENANT = "acme"
FULL_SIZES = (1_000, 10_000, 100_000, 1_000_000)
QUICK_SIZES = (1_000, 10_000)
LAYOUTS = (1, 100)  # tables the N objects are spread over
OBJECT_BYTES = 0  # the registered size of each object: its files are empty
READ_PLAN_REPEATS = 5
GOAL_RESTORE_S = 0.1  # verify none, 10^6 objects, both backends
GOAL_VERIFY_S = 10.0  # verify objects, 10^6 objects, file://
PLOT = RESULTS_DIR / f"{NAME}.png"
BEFORE = RESULTS_DIR / f"{NAME}_before.json"

console = Console() if sys.stdout.isatty() else Console(width=200)


# catalog growth ------------------------------------------------------------------


class CatalogProbe:
    """Bytes and per-table row counts of a store's catalog, from a connection of its own.

    SQLite: the WAL is checkpointed (TRUNCATE) first, so the file holds every
    page; ``file_bytes`` is the file, ``used_bytes`` its pages less the free
    list (a file never shrinks; freed pages are reused). PostgreSQL:
    ``schema_bytes`` sums ``pg_total_relation_size`` (heap, indexes, TOAST) over
    the catalog schema's tables; ``database_bytes`` is ``pg_database_size``.
    """

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.backend: CatalogBackend = "sqlite" if uri.startswith("sqlite:") else "postgresql"
        if self.backend == "sqlite":
            from tenants.catalog.sqlite import sqlite_path

            self.path = sqlite_path(uri)
            self._conn: Any = sqlite3.connect(self.path, isolation_level=None)
            names = self._conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            ).fetchall()
        else:
            import psycopg

            self._conn = psycopg.connect(uri, autocommit=True)
            self.schema = self._conn.execute("SELECT current_schema()").fetchone()[0]
            names = self._conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
            ).fetchall()
        self.tables = sorted(n for (n,) in names)

    def measure(self) -> dict[str, Any]:
        rows = {
            t: int(self._conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0])
            for t in self.tables
        }
        if self.backend == "sqlite":
            busy = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            page = self._conn.execute("PRAGMA page_size").fetchone()[0]
            pages = self._conn.execute("PRAGMA page_count").fetchone()[0]
            free = self._conn.execute("PRAGMA freelist_count").fetchone()[0]
            size = {
                "file_bytes": os.path.getsize(self.path),
                "used_bytes": (pages - free) * page,
                "checkpoint_busy": bool(busy),
            }
        else:
            schema_bytes = self._conn.execute(
                "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = current_schema() AND c.relkind = 'r'"
            ).fetchone()[0]
            database_bytes = self._conn.execute(
                "SELECT pg_database_size(current_database())"
            ).fetchone()[0]
            size = {"schema_bytes": int(schema_bytes), "database_bytes": int(database_bytes)}
        return {"rows": rows, **size}

    def vacuum_analyze(self) -> float:
        """PostgreSQL only: what autovacuum would have done after a bulk load."""
        if self.backend != "postgresql":
            return 0.0
        _, seconds = timed(lambda: self._conn.execute("VACUUM ANALYZE"))
        return seconds

    def close(self) -> None:
        self._conn.close()

    def drop_schema(self) -> None:
        """PostgreSQL: drop the case's schema (the database goes at exit anyway)."""
        if self.backend == "postgresql":
            import psycopg

            with psycopg.connect(self.uri, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA "{self.schema}" CASCADE')


def growth(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What a restore added: rows per catalog table (non-zero only) and bytes."""
    rows = {
        t: after["rows"][t] - before["rows"].get(t, 0)
        for t in after["rows"]
        if after["rows"][t] != before["rows"].get(t, 0)
    }
    out: dict[str, Any] = {"rows": rows, "rows_total": sum(rows.values())}
    for key in ("file_bytes", "used_bytes", "schema_bytes", "database_bytes"):
        if key in after:
            out[key] = after[key] - before[key]
    return out


# the N objects' files ------------------------------------------------------------


def create_object_files(store: TableStore, budget_s: float | None = None) -> dict[str, Any]:
    """An empty file at every registered object's key in the ``file://`` warehouse;
    with ``budget_s``, stop once that many seconds have passed (``completed`` False)."""
    root = Path(store.objects.root)  # type: ignore[attr-defined]
    started = time.perf_counter()
    with store.catalog.snapshot() as tx:
        rows = tx.tuples("SELECT object_key, byte_size FROM objects")
    made: set[str] = set()
    flags = os.O_CREAT | os.O_WRONLY | os.O_TRUNC
    created = 0
    for key, size in rows:
        if int(size) != OBJECT_BYTES:
            raise RuntimeError(f"object {key} is registered with {size} bytes, not {OBJECT_BYTES}")
        directory = key.rsplit("/", 1)[0]
        if directory not in made:
            (root / directory).mkdir(parents=True, exist_ok=True)
            made.add(directory)
        os.close(os.open(root / key, flags, 0o644))
        created += 1
        if budget_s is not None and created % 10_000 == 0:
            if time.perf_counter() - started > budget_s:
                break
    seconds = time.perf_counter() - started
    return {
        "files": created,
        "objects": len(rows),
        "completed": created == len(rows),
        "budget_s": budget_s,
        "directories": len(made),
        "seconds": seconds,
        "us_per_file": seconds / max(1, created) * 1e6,
    }


# Rewind ------------------------------------------------------------------------


def restore_runs(
    store: TableStore,
    probe: CatalogProbe,
    count: int,
    *,
    mode: str,
    verify: str,
    prefix: str,
    repeats: int,
    budget_s: float,
) -> dict[str, Any]:
    """Best of ``repeats`` restores (fewer once they have taken ``budget_s``)."""
    runs: list[dict[str, Any]] = []
    spent = 0.0
    for rep in range(repeats):
        to = None if mode == "in_place" else f"{prefix}{rep}"
        before = probe.measure()
        gc.collect()
        outcome, seconds = timed(
            lambda t=to: restore_tenant(
                store,
                TENANT,
                SNAPSHOT,
                to=t,
                executor="local",
                verify=verify,
                method="physical",
            )
        )
        after = probe.measure()
        totals = outcome.plan.totals()
        if totals["reuse"][0] != count or outcome.rewritten != 0:
            raise RuntimeError(
                f"restore of {count} objects: plan {totals}, {outcome.rewritten} rewritten"
            )
        if verify == "objects" and outcome.objects_verified != count:
            raise RuntimeError(f"verify objects checked {outcome.objects_verified} of {count}")
        steps = dict(outcome.seconds)
        steps["journal_and_other"] = seconds - sum(steps.values())
        runs.append(
            {
                "to": to,
                "seconds": seconds,
                "steps": steps,
                "objects_verified": outcome.objects_verified,
                "prefixes_listed": outcome.prefixes_listed,
                "catalog_added": growth(before, after),
            }
        )
        spent += seconds
        if spent > budget_s and rep + 1 < repeats:
            break
    best = min(runs, key=lambda r: r["seconds"])
    return {
        "mode": mode,
        "verify": verify,
        "repeats": len(runs),
        "runs": runs,
        "best_s": best["seconds"],
        "best_steps": best["steps"],
        "catalog_rows_added": [r["catalog_added"]["rows_total"] for r in runs],
        "catalog_added_best_run": best["catalog_added"],
    }


def read_planning(store: TableStore, count: int, layout: int, restored: str) -> dict[str, Any]:
    """``plan_read`` of ``t000`` at S: the source's own rows vs the clone's inherited level."""
    expected = len(range(0, count, layout))  # register_objects deals objects round-robin
    out: dict[str, Any] = {"table": f"{DATABASE}.t000", "objects": expected}
    for side, tenant in (("source", TENANT), ("restored", restored)):
        times = []
        for _ in range(READ_PLAN_REPEATS):
            plan, seconds = timed(
                lambda t=tenant: plan_read(store.catalog, t, DATABASE, "t000", SNAPSHOT)
            )
            times.append(seconds)
            if len(plan.objects) != expected:
                raise RuntimeError(
                    f"plan_read of {tenant}: {len(plan.objects)} objects, expected {expected}"
                )
            del plan
        out[side] = {"seconds": times, "best_s": min(times)}
    out["restored_over_source"] = out["restored"]["best_s"] / out["source"]["best_s"]
    return out


def rewind_case(
    catalog: CatalogBackend,
    layout: int,
    count: int,
    *,
    repeats: int,
    verify: bool,
    budget_s: float,
    files_budget_s: float | None = None,
) -> dict[str, Any]:
    """Register ``count`` objects over ``layout`` tables and measure every restore
    variant; with ``verify``, create the objects' files first (within
    ``files_budget_s`` if given: verify "objects" runs only if they all got made)."""
    case: dict[str, Any] = {"catalog": catalog, "tables": layout, "objects": count}
    probe: CatalogProbe | None = None
    try:
        with open_store("file", catalog) as store:
            _, case["register_s"] = timed(
                lambda: register_objects(
                    store, TENANT, count, tables=layout, object_bytes=OBJECT_BYTES
                )
            )
            probe = CatalogProbe(store.catalog.uri)
            case["vacuum_analyze_s"] = probe.vacuum_analyze()
            if verify:
                console.print("    creating the objects' files ...")
                case["files"] = create_object_files(store, files_budget_s)
                verify = case["files"]["completed"]
                if not verify:
                    console.print(
                        f"    made {case['files']['files']:,} files in "
                        f"{case['files']['seconds']:.0f} s: over budget, no verify objects"
                    )
            case["catalog_after_register"] = probe.measure()
            variants = []

            def run(mode: str, level: str, prefix: str) -> None:
                console.print(f"    {mode}, verify {level} ...")
                variants.append(
                    restore_runs(
                        store,
                        probe,
                        count,
                        mode=mode,
                        verify=level,
                        prefix=prefix,
                        repeats=repeats,
                        budget_s=budget_s,
                    )
                )

            # Clones first: an in-place restore replaces the source tenant.
            run("clone", "none", "c")
            console.print("    plan_read at S ...")
            case["read_planning"] = read_planning(store, count, layout, "c0")
            if verify:
                run("clone", "objects", "v")
            run("in_place", "none", "")
            if verify:
                run("in_place", "objects", "")
            case["restores"] = variants
            case["catalog_at_end"] = probe.measure()
    except Exception as e:  # an in-flight change of the restore code: record, go on
        case["error"] = f"{type(e).__name__}: {e}"
        case["traceback"] = traceback.format_exc()
        console.print(f"[red]    failed: {case['error']}[/]")
    finally:
        if probe is not None:
            try:
                probe.close()
                probe.drop_schema()
            except Exception as e:
                case["cleanup_error"] = repr(e)
    return case


def verify_decision(
    count: int, verify_max: int, files_budget_s: float, earlier: list[dict[str, Any]]
) -> tuple[bool, float | None, str]:
    """(try verify "objects", the file-creation budget, why) at ``count``: always up
    to ``verify_max``; above it, create the files within ``files_budget_s`` (measured,
    not predicted), unless an earlier case of this size already ran out of it."""
    if count <= verify_max:
        return True, None, f"{count:,} <= --verify-max {verify_max:,}"
    for case in earlier:
        files = case.get("files")
        if case["objects"] == count and files and not files["completed"]:
            return (
                False,
                None,
                (
                    f"an earlier case made {files['files']:,} of {count:,} files in "
                    f"{files['seconds']:.0f} s, over the {files_budget_s:.0f} s budget"
                ),
            )
    return (
        True,
        files_budget_s,
        (
            f"{count:,} > --verify-max {verify_max:,}: verify objects if creating the files "
            f"takes under {files_budget_s:.0f} s"
        ),
    )


# peers -------------------------------------------------------------------------


def peer_versions() -> dict[str, str]:
    out = {}
    for module in ("deltalake", "pyiceberg"):
        try:
            out[module] = str(__import__(module).__version__)
        except ImportError:
            out[module] = "not installed"
    return out


def _empty_files(directory: Path, names: Sequence[str]) -> float:
    started = time.perf_counter()
    flags = os.O_CREAT | os.O_WRONLY | os.O_TRUNC
    for name in names:
        os.close(os.open(directory / name, flags, 0o644))
    return time.perf_counter() - started


def delta_case(count: int, repeats: int, workdir: Path) -> dict[str, Any]:
    """delta-rs restore to version 0 (N files) from version 1 (none of them, one other)."""
    from deltalake import DeltaTable

    root = workdir / "delta"
    log = root / "_delta_log"
    log.mkdir(parents=True)
    started = time.perf_counter()
    now = int(time.time() * 1000)
    schema = {
        "type": "struct",
        "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}],
    }
    names = [f"part-{i:07d}.parquet" for i in range(count)]
    with open(log / f"{0:020d}.json", "w") as f:
        f.write(json.dumps({"commitInfo": {"timestamp": now, "operation": "WRITE"}}) + "\n")
        f.write(json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}) + "\n")
        meta = {
            "id": str(uuid.uuid4()),
            "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps(schema),
            "partitionColumns": [],
            "configuration": {},
            "createdTime": now,
        }
        f.write(json.dumps({"metaData": meta}) + "\n")
        for name in names:
            f.write(
                f'{{"add":{{"path":"{name}","partitionValues":{{}},"size":0,'
                f'"modificationTime":{now},"dataChange":true}}}}\n'
            )
    with open(log / f"{1:020d}.json", "w") as f:
        f.write(json.dumps({"commitInfo": {"timestamp": now + 1, "operation": "WRITE"}}) + "\n")
        for name in names:
            f.write(
                f'{{"remove":{{"path":"{name}","deletionTimestamp":{now + 1},'
                f'"dataChange":true}}}}\n'
            )
        f.write(
            f'{{"add":{{"path":"after.parquet","partitionValues":{{}},"size":0,'
            f'"modificationTime":{now + 1},"dataChange":true}}}}\n'
        )
    log_s = time.perf_counter() - started
    files_s = _empty_files(root, [*names, "after.parquet"])
    table, load_s = timed(lambda: DeltaTable(str(root)))
    _, checkpoint_s = timed(table.create_checkpoint)
    build_s = time.perf_counter() - started
    if table.version() != 1:
        raise RuntimeError(f"delta table at version {table.version()}, expected 1")
    variants = {}
    for variant, ignore in (("restore", False), ("restore_ignore_missing_files", True)):
        times = []
        metrics: dict[str, Any] = {}
        for _ in range(repeats):
            metrics, seconds = timed(lambda i=ignore: table.restore(0, ignore_missing_files=i))
            times.append(seconds)
            if metrics.get("numRestoredFile") != count:
                raise RuntimeError(f"delta restore: {metrics}")
            table.restore(1)  # untimed: back to the later state
        variants[variant] = {"seconds": times, "best_s": min(times), "metrics": metrics}
    return {
        "objects": count,
        "build_s": build_s,
        "build": {
            "log_s": log_s,
            "files_s": files_s,
            "load_s": load_s,
            "checkpoint_s": checkpoint_s,
        },
        "final_version": table.version(),
        **variants,
        "best_s": variants["restore"]["best_s"],
    }


def iceberg_case(count: int, repeats: int, workdir: Path) -> dict[str, Any]:
    """pyiceberg rollback to snapshot s1 (N data files appended) from s2 (one more)."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.schema import Schema
    from pyiceberg.typedef import Record
    from pyiceberg.types import LongType, NestedField

    root = workdir / "iceberg"
    root.mkdir(parents=True)
    started = time.perf_counter()
    catalog = SqlCatalog("bench", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/wh")
    catalog.create_namespace("db")
    table = catalog.create_table(
        "db.t", schema=Schema(NestedField(1, "id", LongType(), required=False))
    )
    version = table.metadata.format_version

    def data_file(i: int) -> DataFile:
        return DataFile.from_args(
            _table_format_version=version,
            content=DataFileContent.DATA,
            file_path=f"{root}/wh/db/t/data/part-{i:07d}.parquet",
            file_format=FileFormat.PARQUET,
            partition=Record(),
            record_count=1,
            file_size_in_bytes=1,
        )

    def append(indexes: range) -> int:
        with table.transaction() as tx, tx.update_snapshot().fast_append() as fast:
            for i in indexes:
                fast.append_data_file(data_file(i))
        snapshot = table.current_snapshot()
        assert snapshot is not None
        return snapshot.snapshot_id

    s1, append_s = timed(lambda: append(range(count)))
    s2 = append(range(count, count + 1))
    build_s = time.perf_counter() - started
    times = []
    for _ in range(repeats):
        _, seconds = timed(lambda: table.manage_snapshots().rollback_to_snapshot(s1).commit())
        times.append(seconds)
        current = table.current_snapshot()
        if current is None or current.snapshot_id != s1:
            raise RuntimeError("iceberg rollback did not make s1 current")
        table.manage_snapshots().set_current_snapshot(s2).commit()  # untimed: back to s2
    snapshot = table.snapshot_by_id(s1)
    total_files = snapshot.summary["total-data-files"] if snapshot and snapshot.summary else None
    return {
        "objects": count,
        "build_s": build_s,
        "build": {"append_s": append_s},
        "format_version": int(version),
        "s1_total_data_files": total_files,
        "rollback_to_snapshot": {"seconds": times, "best_s": min(times)},
        "best_s": min(times),
    }


PEERS: dict[str, tuple[str, Callable[[int, int, Path], dict[str, Any]]]] = {
    "delta": ("deltalake", delta_case),
    "iceberg": ("pyiceberg", iceberg_case),
}


def peer_sweep(peer: str, sizes: Sequence[int], repeats: int, budget_s: float) -> dict[str, Any]:
    module, case_fn = PEERS[peer]
    try:
        __import__(module)
    except ImportError as e:
        return {"status": "not installed", "error": str(e), "sizes": []}
    rows: list[dict[str, Any]] = []
    for count in sizes:
        built = [r for r in rows if "build_s" in r]
        if built:
            last = built[-1]
            predicted = last["build_s"] * count / last["objects"] * 1.2
            if predicted > budget_s:
                rows.append(
                    {
                        "objects": count,
                        "skipped": f"set-up predicted {predicted:.0f} s from {last['build_s']:.1f} s "
                        f"at {last['objects']:,} (budget {budget_s:.0f} s)",
                    }
                )
                continue
        if any("skipped" in r or "error" in r for r in rows):
            rows.append({"objects": count, "skipped": "a smaller size was skipped or failed"})
            continue
        console.print(f"  {peer}: {count:,} data files ...")
        workdir = Path(tempfile.mkdtemp(prefix=f"rewind-bench-{peer}-"))
        try:
            row, seconds = timed(lambda c=count, w=workdir: case_fn(c, repeats, w))
            row["case_seconds"] = seconds
        except Exception as e:
            row = {
                "objects": count,
                "error": f"{type(e).__name__}: {e}",
                "traceback": traceback.format_exc(),
            }
            console.print(f"[red]    failed: {row['error']}[/]")
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        rows.append(row)
    return {"status": "measured", "sizes": rows}


# report ------------------------------------------------------------------------


def _s(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:.4f}" if value < 0.1 else f"{value:.3f}" if value < 10 else f"{value:.1f}"


def _variant(case: dict[str, Any], mode: str, verify: str) -> dict[str, Any] | None:
    for v in case.get("restores", []):
        if v["mode"] == mode and v["verify"] == verify:
            return v
    return None


def summary_rows(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (catalog, layout, N): the best seconds of each restore, growth, reads."""
    rows = []
    for case in payload["rewind"]:
        row: dict[str, Any] = {
            "catalog": case["catalog"],
            "tables": case["tables"],
            "objects": case["objects"],
        }
        if "error" in case:
            row["error"] = case["error"]
            rows.append(row)
            continue
        row["register_s"] = case["register_s"]
        for mode in ("clone", "in_place"):
            for level in ("none", "objects"):
                v = _variant(case, mode, level)
                row[f"{mode}_{level}_s"] = v["best_s"] if v else None
                if v:
                    row[f"{mode}_{level}_steps"] = v["best_steps"]
        clone = _variant(case, "clone", "none")
        if clone:
            added = clone["catalog_added_best_run"]
            row["catalog_rows_added_per_restore"] = added["rows_total"]
            row["catalog_rows_added_by_table"] = added["rows"]
            row["catalog_bytes_added_per_restore"] = added.get(
                "used_bytes", added.get("schema_bytes")
            )
        reads = case.get("read_planning")
        if reads:
            row["plan_read_source_s"] = reads["source"]["best_s"]
            row["plan_read_restored_s"] = reads["restored"]["best_s"]
        if "files" in case:
            row["files_s"] = case["files"]["seconds"]
        rows.append(row)
    return rows


def goals(payload: dict[str, Any]) -> dict[str, Any]:
    """The README's goals, checked against this run's figures."""
    rows = [r for r in payload["summary"] if "error" not in r]
    top = max((r["objects"] for r in rows), default=0)
    out: dict[str, Any] = {"largest_objects": top}
    at_top = [r for r in rows if r["objects"] == top]
    worst = max((max(r["clone_none_s"], r["in_place_none_s"]) for r in at_top), default=None)
    out["restore_verify_none_at_largest"] = {
        "goal_s": GOAL_RESTORE_S,
        "goal_objects": 1_000_000,
        "worst_s": worst,
        "met": worst is not None and top >= 1_000_000 and worst < GOAL_RESTORE_S,
    }
    verified = [r for r in rows if r.get("clone_objects_s") is not None]
    vtop = max((r["objects"] for r in verified), default=0)
    vworst = max(
        (
            max(r["clone_objects_s"], r["in_place_objects_s"] or 0)
            for r in verified
            if r["objects"] == vtop
        ),
        default=None,
    )
    out["restore_verify_objects_at_largest"] = {
        "goal_s": GOAL_VERIFY_S,
        "goal_objects": 1_000_000,
        "objects": vtop,
        "worst_s": vworst,
        "met": vworst is not None and vtop >= 1_000_000 and vworst < GOAL_VERIFY_S,
    }
    peers: dict[str, dict[int, float]] = {}
    for name, sweep in payload["peers"].items():
        for r in sweep.get("sizes", []):
            if "best_s" in r:
                key = f"{name}.restore" if name == "delta" else f"{name}.rollback"
                peers.setdefault(key, {})[r["objects"]] = r["best_s"]
                if name == "delta":
                    peers.setdefault("delta.restore_ignore_missing_files", {})[r["objects"]] = r[
                        "restore_ignore_missing_files"
                    ]["best_s"]
    beaten: dict[str, Any] = {}
    for name, times in peers.items():
        losses = []
        for r in rows:
            peer_s = times.get(r["objects"])
            if peer_s is None:
                continue
            ours = max(r["clone_none_s"], r["in_place_none_s"])
            if ours >= peer_s:
                losses.append(
                    f"{r['catalog']}, {r['tables']} table(s), {r['objects']:,}: "
                    f"{ours:.4f} s vs {peer_s:.4f} s"
                )
        beaten[name] = {"faster_at_every_n": not losses, "slower_cases": losses}
    out["faster_than_peers"] = beaten
    growth_by: dict[str, dict[int, int]] = {}
    for case in payload["rewind"]:
        for v in case.get("restores", []):
            key = f"{case['catalog']}/{case['tables']} table(s)/{v['mode']}/verify {v['verify']}"
            growth_by.setdefault(key, {})[case["objects"]] = max(v["catalog_rows_added"])
    out["catalog_rows_per_restore"] = {
        k: {"by_objects": v, "independent_of_n": len(set(v.values())) == 1}
        for k, v in growth_by.items()
    }
    out["catalog_growth_independent_of_n"] = all(
        v["independent_of_n"] for v in out["catalog_rows_per_restore"].values()
    )
    return out


def print_report(payload: dict[str, Any]) -> None:
    t = Table(title="Metadata-only restore (best s); catalog rows added per clone restore")
    for c in (
        "catalog",
        "tables",
        "objects",
        "register s",
        "clone none",
        "in place none",
        "clone objects",
        "in place objects",
        "rows/restore",
        "bytes/restore",
        "plan_read src",
        "plan_read restored",
    ):
        t.add_column(c, justify="right")
    for r in payload["summary"]:
        if "error" in r:
            t.add_row(
                r["catalog"], str(r["tables"]), f"{r['objects']:,}", f"[red]{r['error'][:60]}[/]"
            )
            continue
        t.add_row(
            r["catalog"],
            str(r["tables"]),
            f"{r['objects']:,}",
            f"{r['register_s']:.1f}",
            _s(r["clone_none_s"]),
            _s(r["in_place_none_s"]),
            _s(r.get("clone_objects_s")),
            _s(r.get("in_place_objects_s")),
            str(r.get("catalog_rows_added_per_restore", "")),
            f"{r.get('catalog_bytes_added_per_restore', 0):,}",
            _s(r.get("plan_read_source_s")),
            _s(r.get("plan_read_restored_s")),
        )
    console.print(t)

    t = Table(
        title="Steps of the best restore, verify none (s): plan / rewrite / verify / install / journal+other"
    )
    for c in ("catalog", "tables", "objects", "clone", "in place"):
        t.add_column(c, justify="right")
    order = ("plan", "rewrite", "verify", "install", "journal_and_other")
    for r in payload["summary"]:
        if "error" in r:
            continue
        clone, in_place = (r.get(k) or {} for k in ("clone_none_steps", "in_place_none_steps"))
        t.add_row(
            r["catalog"], str(r["tables"]), f"{r['objects']:,}",
            " / ".join(_s(clone.get(k)) for k in order),
            " / ".join(_s(in_place.get(k)) for k in order),
        )  # fmt: skip
    console.print(t)

    t = Table(title="Peers (best s of the restore/rollback call)")
    for c in (
        "objects",
        "delta restore",
        "delta restore, ignore_missing_files",
        "delta set-up s",
        "iceberg rollback",
        "iceberg set-up s",
    ):
        t.add_column(c, justify="right")
    delta = {r["objects"]: r for r in payload["peers"].get("delta", {}).get("sizes", [])}
    ice = {r["objects"]: r for r in payload["peers"].get("iceberg", {}).get("sizes", [])}
    for n in sorted(set(delta) | set(ice)):
        d, i = delta.get(n, {}), ice.get(n, {})
        t.add_row(
            f"{n:,}",
            _s(d.get("best_s")) or d.get("skipped", d.get("error", ""))[:40],
            _s(d.get("restore_ignore_missing_files", {}).get("best_s")),
            _s(d.get("build_s")),
            _s(i.get("best_s")) or i.get("skipped", i.get("error", ""))[:40],
            _s(i.get("build_s")),
        )
    console.print(t)
    console.print(f"  peers: {payload['peer_versions']}")
    g = payload["goals"]
    for key in ("restore_verify_none_at_largest", "restore_verify_objects_at_largest"):
        console.print(f"  goal {key}: {g[key]}")
    for peer, verdict in g["faster_than_peers"].items():
        console.print(
            f"  goal faster than {peer} at every N: {verdict['faster_at_every_n']}"
            + (
                f" (slower: {'; '.join(verdict['slower_cases'])})"
                if verdict["slower_cases"]
                else ""
            )
        )
    console.print(
        f"  goal catalog rows per restore independent of N: {g['catalog_growth_independent_of_n']}"
    )


# plot --------------------------------------------------------------------------


def plot(
    payload: dict[str, Any],
    path: Path,
    before: dict[str, Any] | None,
    overlays: Sequence[dict[str, Any]] = (),
) -> str:
    """Restore seconds vs objects, log-log, one panel per layout; ``before`` (an
    older commit's run) dotted, ``overlays`` (later runs, e.g. of one size on a
    newer working tree) as stars."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib not installed: no plot"
    layouts = sorted({c["tables"] for c in payload["rewind"]})
    fig, axes = plt.subplots(
        1, len(layouts), figsize=(6.5 * len(layouts), 6.2), sharey=True, squeeze=False
    )
    styles = {"sqlite": "tab:blue", "postgresql": "tab:orange"}
    for ax, layout in zip(axes[0], layouts, strict=True):
        for catalog in CATALOG_BACKENDS:
            for mode, marker, dash in (("clone", "o", "-"), ("in_place", "s", "--")):
                pts = sorted(
                    (r["objects"], r[f"{mode}_none_s"])
                    for r in payload["summary"]
                    if r["catalog"] == catalog and r["tables"] == layout and r.get(f"{mode}_none_s")
                )
                if pts:
                    ax.plot(*zip(*pts, strict=True), dash, marker=marker, color=styles[catalog],
                            label=f"Rewind {catalog}, {mode.replace('_', ' ')}")  # fmt: skip
            if before:
                pts = sorted(
                    (r["objects"], r["clone_none_s"])
                    for r in before.get("summary", [])
                    if r["catalog"] == catalog and r["tables"] == layout and r.get("clone_none_s")
                )
                if pts:
                    ax.plot(*zip(*pts, strict=True), ":", marker=".", color=styles[catalog], alpha=0.6,
                            label=f"Rewind {catalog}, clone, before ({before['machine'].get('git_commit')})")  # fmt: skip
            for later in overlays:
                for mode, marker in (("clone", "*"), ("in_place", "P")):
                    pts = sorted(
                        (r["objects"], r[f"{mode}_none_s"])
                        for r in later.get("summary", [])
                        if r["catalog"] == catalog
                        and r["tables"] == layout
                        and r.get(f"{mode}_none_s")
                    )
                    if pts:
                        ax.plot(*zip(*pts, strict=True), linestyle="none", marker=marker, markersize=11,
                                color=styles[catalog], markeredgecolor="black",
                                label=f"Rewind {catalog}, {mode.replace('_', ' ')}, later tree "
                                f"({later['timestamp'][11:16]} UTC run)")  # fmt: skip
        for name, key, color, dash in (
            ("delta", "best_s", "tab:green", "-"),
            ("delta", "restore_ignore_missing_files", "tab:green", "--"),
            ("iceberg", "best_s", "tab:red", "-"),
        ):
            pts = []
            for r in payload["peers"].get(name, {}).get("sizes", []):
                value = r.get(key)
                value = value.get("best_s") if isinstance(value, dict) else value
                if value:
                    pts.append((r["objects"], value))
            if pts:
                label = {
                    ("delta", "best_s"): "delta-rs restore (checks files exist)",
                    (
                        "delta",
                        "restore_ignore_missing_files",
                    ): "delta-rs restore, ignore_missing_files",
                    ("iceberg", "best_s"): "pyiceberg rollback_to_snapshot",
                }[(name, key)]
                ax.plot(*zip(*sorted(pts), strict=True), dash, marker="^", color=color, label=label)
        ax.axhline(GOAL_RESTORE_S, color="grey", linewidth=0.8, linestyle="-.", label="goal 0.1 s")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("objects (data files)")
        ax.set_title(f"N objects in {layout} table{'s' if layout > 1 else ''} (peers: one table)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("seconds (best), verify none")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=4, frameon=False)
    run = f", run of {payload['timestamp'][:16]} UTC" if "timestamp" in payload else ""
    fig.suptitle(f"Metadata-only restore vs N objects ({payload['code']}{run})", fontsize=10)
    fig.tight_layout(rect=(0, 0.2, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return str(path)


# main --------------------------------------------------------------------------


def _uncommitted() -> list[str]:
    """Modified files under tenants/ and engine/: the run measures the working tree."""
    try:
        out = subprocess.run(
            ["git", "status", "--porcelain", "--", "tenants", "engine"],
            capture_output=True, text=True, timeout=30, check=False,
            cwd=Path(__file__).resolve().parent.parent,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def _tree_fingerprint() -> str | None:
    """sha256 (12 hex) of ``git diff HEAD`` under tenants/ and engine/ plus their
    untracked files: which working tree a run measured, when it is not a commit."""
    root = Path(__file__).resolve().parent.parent
    try:
        diff = subprocess.run(
            ["git", "diff", "HEAD", "--", "tenants", "engine"],
            capture_output=True, timeout=60, check=False, cwd=root,
        ).stdout  # fmt: skip
        untracked = subprocess.run(
            ["git", "ls-files", "--others", "--exclude-standard", "--", "tenants", "engine"],
            capture_output=True, text=True, timeout=60, check=False, cwd=root,
        ).stdout.split()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    digest = hashlib.sha256(diff)
    for name in sorted(untracked):
        digest.update(name.encode() + b"\0" + (root / name).read_bytes())
    return digest.hexdigest()[:12]


def _head() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, timeout=30, check=False,
            cwd=Path(__file__).resolve().parent.parent,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "?"
    return out.stdout.strip() or "?"


def _postgres_version() -> str | None:
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            return str(row[0]) if row else None
    except Exception as e:
        return f"unavailable: {e}"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_restore_scale",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="10^3 and 10^4 objects only")
    parser.add_argument("--sizes", nargs="+", help="object counts, e.g. 1e3 1e5")
    parser.add_argument("--catalogs", default=",".join(CATALOG_BACKENDS))
    parser.add_argument(
        "--layouts", default=",".join(str(n) for n in LAYOUTS), help="tables per tenant"
    )
    parser.add_argument("--repeats", type=int, default=3, help="restores per variant (best of)")
    parser.add_argument(
        "--budget", type=float, default=60.0,
        help="seconds of restores per variant after which no more repeats run",
    )  # fmt: skip
    parser.add_argument("--verify-max", type=float, default=1e5, help="verify objects up to here")
    parser.add_argument(
        "--files-budget", type=float, default=180.0,
        help="above --verify-max, verify only if creating the files takes under this",
    )  # fmt: skip
    parser.add_argument("--peers", default="delta,iceberg", help="'' for none")
    parser.add_argument(
        "--peer-budget", type=float, default=300.0, help="seconds of set-up per size"
    )
    parser.add_argument("--out", help="result JSON path (default benchmarks/results/<name>.json)")
    parser.add_argument("--name", help="result name (default bench_restore_scale[_quick|_custom])")
    parser.add_argument("--plot", help=f"PNG path (default: the full run writes {PLOT.name})")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument(
        "--overlay", action="append", default=[], metavar="JSON",
        help="a later run's result JSON whose verify-none restores the plot adds as stars",
    )  # fmt: skip
    parser.add_argument(
        "--replot", action="store_true",
        help="run nothing: redraw the plot from the result JSON (--out or the default)",
    )  # fmt: skip
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    overlays = [json.loads(Path(p).read_text()) for p in args.overlay]
    if args.replot:
        source = Path(args.out) if args.out else RESULTS_DIR / f"{args.name or NAME}.json"
        payload = json.loads(source.read_text())
        before = json.loads(BEFORE.read_text()) if BEFORE.exists() else None
        drawn = plot(payload, Path(args.plot) if args.plot else PLOT, before, overlays)
        console.print(f"plot of {source}: {drawn}")
        return payload
    sizes = (
        parse_sizes(args.sizes) if args.sizes else list(QUICK_SIZES if args.quick else FULL_SIZES)
    )
    catalogs: list[CatalogBackend] = [c for c in args.catalogs.split(",") if c]  # type: ignore[misc]
    layouts = [int(n) for n in args.layouts.split(",") if n]
    peers = [p for p in args.peers.split(",") if p]
    out = Path(args.out).resolve() if args.out else None
    name = args.name or (
        out.stem
        if out
        else f"{NAME}_custom"
        if args.sizes
        else f"{NAME}_quick"
        if args.quick
        else NAME
    )
    verify_max = int(args.verify_max)
    load_start = load_average()
    started = time.perf_counter()
    console.print(
        f"[bold]{NAME}[/]: sizes {sizes}, catalogs {catalogs}, layouts {layouts}; load {load_start}"
    )

    cases: list[dict[str, Any]] = []
    decisions: list[dict[str, Any]] = []
    for count in sizes:
        for catalog in catalogs:
            for layout in layouts:
                verify, files_budget, why = verify_decision(
                    count, verify_max, args.files_budget, cases
                )
                decisions.append(
                    {
                        "catalog": catalog,
                        "tables": layout,
                        "objects": count,
                        "verify_objects": verify,
                        "why": why,
                    }
                )
                console.print(
                    f"{catalog}, {count:,} objects in {layout} table(s); verify objects: {verify} ({why})"
                )
                case, seconds = timed(
                    lambda c=catalog, n=count, t=layout, v=verify, f=files_budget: rewind_case(
                        c,
                        t,
                        n,
                        repeats=args.repeats,
                        verify=v,
                        budget_s=args.budget,
                        files_budget_s=f,
                    )
                )
                case["case_seconds"] = seconds
                files = case.get("files")
                if files and files_budget is not None:
                    why += f": made {files['files']:,} files in {files['seconds']:.0f} s, " + (
                        "verified" if files["completed"] else "over budget, not verified"
                    )
                    decisions[-1]["verify_objects"] = files["completed"]
                    decisions[-1]["why"] = why
                case["verify_objects_decision"] = why
                cases.append(case)
                console.print(f"  done in {seconds:.0f} s")

    peer_results = {}
    for peer in peers:
        console.print(f"peer {peer} ...")
        peer_results[peer], seconds = timed(
            lambda p=peer: peer_sweep(p, sizes, args.repeats, args.peer_budget)
        )
        peer_results[peer]["sweep_seconds"] = seconds

    uncommitted = _uncommitted()
    payload: dict[str, Any] = {
        "quick": bool(args.quick),
        "sizes": sizes,
        "catalogs": catalogs,
        "layouts": layouts,
        "repeats": args.repeats,
        "object_bytes": OBJECT_BYTES,
        "load_average_at_start": load_start,
        "uncommitted_changes": uncommitted,
        "code": f"commit {_head()}" + (" + uncommitted changes" if uncommitted else ""),
        "tree_fingerprint": _tree_fingerprint(),
        "postgresql_server": _postgres_version() if "postgresql" in catalogs else None,
        "peer_versions": peer_versions(),
        "extra": {
            "matplotlib": _matplotlib_version(),
            "note": "deltalake, pyiceberg[sql-sqlite] and matplotlib were installed into the "
            "venv for this benchmark (pyproject extra 'peers'; matplotlib for the plot only)",
        },
        "verify_objects_decisions": decisions,
        "rewind": cases,
        "peers": peer_results,
    }
    payload["summary"] = summary_rows(payload)
    payload["goals"] = goals(payload)
    plot_path = Path(args.plot) if args.plot else (None if args.quick or args.sizes else PLOT)
    if plot_path and not args.no_plot:
        before = json.loads(BEFORE.read_text()) if BEFORE.exists() else None
        payload["plot"] = plot(payload, plot_path, before, overlays)
    result = finish_run(payload, name=name, started=started, console=console, report=print_report)
    written = RESULTS_DIR / f"{name}.json"
    if out and out != written.resolve():
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(written, out)
        console.print(f"moved to {out}")
    return result


def _matplotlib_version() -> str:
    try:
        import matplotlib

        return str(matplotlib.__version__)
    except ImportError:
        return "not installed"


if __name__ == "__main__":
    main()
