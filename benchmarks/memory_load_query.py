"""bench_memory's ``load`` and ``query`` cases (registered by bench_memory at import).

``load``: a CSV of ``--sizes`` MB (full: 5,000; quick: 200), ids shuffled so
every chunk spans the whole key range, loaded by ``rewind load``'s path
(``tenants.load_files.read_batches`` + ``TableStore.load``) against a bare
pyarrow streaming CSV → Parquet conversion of the same file.

``query``: a table of ``--sizes`` million rows (full: 100, i.e. 10^8; quick: 2)
loaded in key order plus a few small commits that update and delete keys
across the range; then ``query --limit 10`` in-process (``stream_visible``,
the work the CLI does) and as a whole ``rewind query --limit 10 --json``
process (interpreter start and imports included), against a bare pyarrow read
of the first rows of one object. For ``query`` the size is rows, not bytes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

MB = 1_000_000
SCHEMA_COLUMNS = (("id", "int64"), ("v", "string"))


def _table_schema() -> Any:
    from tenants.schema import Column, TableSchema

    return TableSchema((Column("id", "int64", nullable=False), Column("v", "string")), ("id",))


def _open_store(args: dict[str, Any]) -> Any:
    from tenants.config import S3Settings
    from tenants.store import TableStore

    s3 = args.get("s3") or {}
    settings = (
        S3Settings(
            endpoint_url=s3["endpoint_url"],
            region=s3["region"],
            access_key_id=s3["access_key_id"],
            secret_access_key=s3["secret_access_key"],
        )
        if s3
        else None
    )
    return TableStore.open(args["catalog"], args["uri"], s3=settings)


# children -----------------------------------------------------------------------------------


def child_load_rewind(args: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    from tenants.load_files import read_batches

    store = _open_store(args)
    target = _table_schema().arrow()

    def work() -> dict[str, Any]:
        result = store.load("bench", f"db.{args['table']}", read_batches(Path(args["csv"]), target))
        return {"output_rows": result.upserted, "output_bytes": 0}

    return work


def child_load_bare(args: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

    def work() -> dict[str, Any]:
        out = Path(args["tmpdir"]) / "bare-load.parquet"
        reader = pa_csv.open_csv(
            args["csv"],
            read_options=pa_csv.ReadOptions(block_size=1 << 20),
            convert_options=pa_csv.ConvertOptions(
                column_types={"id": pa.int64(), "v": pa.string()}
            ),
        )
        rows = 0
        with pq.ParquetWriter(out, reader.schema, compression="zstd") as writer:
            for batch in reader:
                writer.write_batch(batch)
                rows += batch.num_rows
        size = out.stat().st_size
        out.unlink()
        return {"output_rows": rows, "output_bytes": size}

    return work


def child_query_rewind(args: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    from tenants.reads.visible import stream_visible

    store = _open_store(args)

    def work() -> dict[str, Any]:
        plan = store.plan_read("bench", "db.t")
        rows = sum(t.num_rows for t in stream_visible(store.objects, plan, limit=11))
        return {"output_rows": rows, "output_bytes": 0, "objects": len(plan.objects)}

    return work


def child_query_cli(args: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    rewind = str(Path(sys.executable).parent / "rewind")
    command = [
        rewind, "--catalog", args["catalog"], "--warehouse", args["uri"],
        "--json", "query", "bench", "db.t", "--limit", "10",
    ]  # fmt: skip

    env = dict(os.environ)
    s3 = args.get("s3") or {}
    if s3:  # the command's own AWS chain: the environment
        env |= {
            "AWS_ENDPOINT_URL": s3["endpoint_url"],
            "AWS_REGION": s3["region"],
            "AWS_ACCESS_KEY_ID": s3["access_key_id"],
            "AWS_SECRET_ACCESS_KEY": s3["secret_access_key"],
        }

    def work() -> dict[str, Any]:
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
        if done.returncode:
            raise RuntimeError(done.stderr[-2000:])
        return {"output_rows": done.stdout.count('"id"'), "output_bytes": 0}

    return work


def child_query_bare(args: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    """The first 10 rows of the first object, by pyarrow (no catalog, no MVCC)."""
    import pyarrow.parquet as pq

    store = _open_store(args)
    first = min((o for _, o in store.objects_of("bench")), key=lambda o: (o.min_pk, o.id))

    def work() -> dict[str, Any]:
        with store.objects.open_input(first.key) as source:
            parquet = pq.ParquetFile(source)
            batch = next(parquet.iter_batches(batch_size=1024))
        return {"output_rows": min(10, batch.num_rows), "output_bytes": 0}

    return work


CHILD_WORK = {
    "load.rewind": child_load_rewind,
    "load.bare_csv": child_load_bare,
    "query.rewind_limit10": child_query_rewind,
    "query.cli_limit10": child_query_cli,
    "query.bare_first_rows": child_query_bare,
}


# cases --------------------------------------------------------------------------------------


def _catalog_store(bm: Any, wh: Any, workdir: Path) -> tuple[str, Any]:
    from tenants.store import TableStore

    catalog = f"sqlite:///{workdir / f'catalog-{time.time_ns()}.db'}"
    settings = None
    if wh.s3:
        from tenants.config import S3Settings

        settings = S3Settings(
            endpoint_url=wh.s3["endpoint_url"],
            region=wh.s3["region"],
            access_key_id=wh.s3["access_key_id"],
            secret_access_key=wh.s3["secret_access_key"],
        )
    store = TableStore.open(catalog, wh.uri, s3=settings)
    store.create_tenant("bench")
    return catalog, store


def case_load(ctx: Any, backend: str, size: int) -> dict[str, Any]:
    import pyarrow.csv as pa_csv

    from benchmarks import bench_memory as bm

    with ExitStack() as stack:
        wh = stack.enter_context(bm.open_warehouse(backend, ctx.workdir))
        csv = ctx.workdir / f"load-{backend}.csv"
        stack.callback(csv.unlink, True)
        ctx.console.print(f"  {backend} {size / MB:g} MB CSV: generating ...")
        rng = np.random.default_rng(ctx.args.seed)
        width = 180
        rows = max(1000, size // (width + 10))
        ids = rng.permutation(rows)
        started = time.perf_counter()
        with pa_csv.CSVWriter(csv, pa.schema([("id", pa.int64()), ("v", pa.string())])) as out:
            for start in range(0, rows, 200_000):
                chunk = ids[start : start + 200_000]
                letters = rng.integers(97, 123, size=len(chunk) * width, dtype=np.uint8)
                offsets = np.arange(0, (len(chunk) + 1) * width, width, dtype=np.int32)
                values = pa.StringArray.from_buffers(
                    len(chunk), pa.py_buffer(offsets), pa.py_buffer(letters)
                )
                out.write_table(pa.table({"id": chunk, "v": values}))
        generated = time.perf_counter() - started
        names = ["rewind", "bare_csv"]
        catalog, store = _catalog_store(bm, wh, ctx.workdir)
        for index in range(ctx.args.reps or 1):
            store.create_table("bench", f"db.t{index}", _table_schema())
        child = {**wh.child_args(), "catalog": catalog, "csv": str(csv), "table": "t0",
                 "tmpdir": str(ctx.workdir)}  # fmt: skip
        figures: dict[str, list[dict[str, Any]]] = {}
        for rep in range(ctx.args.reps or 1):
            child["table"] = f"t{rep}"
            for name in names:
                run = ctx.run_child(f"load.{name}", child, name)
                figures.setdefault(name, []).append(run)
        input_bytes = csv.stat().st_size
        variants = {n: bm._aggregate(r, input_bytes) for n, r in figures.items()}
        return {
            "backend": backend,
            "size_mb": size / MB,
            "input_bytes": input_bytes,
            "input": {"bytes": input_bytes, "rows": rows, "generate_s": generated},
            "variants": variants,
            "ratios": bm._ratios(variants, [("rewind", "bare_csv")]),
            "failed": {},
            "skipped": {},
        }


def case_query(ctx: Any, backend: str, size: int) -> dict[str, Any]:
    from benchmarks import bench_memory as bm
    from tenants.loads import load

    rows = int(size)  # for query, --sizes counts million rows: size = rows
    with ExitStack() as stack:
        wh = stack.enter_context(bm.open_warehouse(backend, ctx.workdir))
        catalog, store = _catalog_store(bm, wh, ctx.workdir)
        store.create_table("bench", "db.t", _table_schema())
        ctx.console.print(f"  {backend} {rows:,} rows: loading ...")
        started = time.perf_counter()
        step = 1_000_000

        def batches() -> Any:
            for start in range(0, rows, step):
                ids = np.arange(start, min(rows, start + step), dtype=np.int64)
                yield pa.table({"id": ids, "v": pa.array(np.char.mod("v%d", ids % 1000))})

        load(store.catalog, store.objects, "bench", "db", "t", batches())
        rng = np.random.default_rng(ctx.args.seed)
        for _ in range(5):  # small commits across the key range: MVCC has work to do
            ids = np.unique(rng.integers(0, rows, size=1000))
            store.write("bench", "db.t", upserts=pa.table({"id": ids, "v": ["new"] * len(ids)}),
                        deletes=pa.table({"id": np.unique(rng.integers(0, rows, size=100))}))  # fmt: skip
        built = time.perf_counter() - started
        objects = store.objects_of("bench")
        stored = sum(o.bytes for _, o in objects)
        ctx.console.print(
            f"  {len(objects)} objects, {stored / MB:,.0f} MB, built in {built:.0f} s"
        )
        child = {**wh.child_args(), "catalog": catalog}
        figures = {}
        for name in ("rewind_limit10", "cli_limit10", "bare_first_rows"):
            runs = [ctx.run_child(f"query.{name}", child, name) for _ in range(ctx.args.reps or 1)]
            figures[name] = bm._aggregate(runs, stored)
        return {
            "backend": backend,
            "size_mb": stored / MB,
            "input_bytes": stored,
            "rows": rows,
            "objects": len(objects),
            "build_s": built,
            "variants": figures,
            "ratios": bm._ratios(
                figures,
                [("rewind_limit10", "bare_first_rows"), ("cli_limit10", "bare_first_rows")],
            ),
            "failed": {},
            "skipped": {},
        }
