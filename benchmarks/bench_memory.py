"""Speed and peak memory of single large-object work, each run in a fresh process.

A *case* is one kind of work (``--cases``). Each case builds its own input,
then runs a set of *variants* (Rewind's code and bare baselines), every run in
a fresh child process (``python -m benchmarks.bench_memory --child <what>
<json>``), so one run's Arrow memory pool and page-cache habits cannot leak
into the next and each peak RSS is that run's alone. The child times only
the work (imports and setup happen before the clock starts) and reports:

- ``peak``: the child's ``VmHWM`` (peak resident set) from /proc/self/status,
  reset with ``/proc/self/clear_refs`` right before the work;
- ``ru_maxrss``: ``getrusage(RUSAGE_SELF).ru_maxrss`` after the work. On Linux
  an exec'd child inherits its parent's high-water mark in this counter
  (``exec`` folds the old address space's peak into it), so with moto's server
  in the parent it can be the parent's size, not the child's: kept for
  reference, ``peak`` is the figure;
- ``baseline``: ``VmRSS`` right before the work (interpreter, numpy, pyarrow,
  plus polars or Rewind for the variants that import them), so ``growth`` =
  peak - baseline is what the work itself added.

The parent also samples the child's RSS every 0.2 s (a cross-check) and, on
moto, its own RSS, which holds moto's in-process server.

Case ``rewrite`` (restore's rewrite of one straddling object):

1. One data object of ``--sizes`` MB (full: 2,000 MB; ``--quick``: 100 MB) is
   generated with a streaming ``pq.ParquetWriter`` in bounded memory, laid out
   as Rewind stores a mixed-commit object: ``id`` int64 (the primary key), ``a``
   int64, ``b`` float64, ``c`` string of 20-40 chars, ``d`` string (16 values),
   ``__ts`` int64 non-null from a pool of 10,000 commit timestamps; rows sorted
   by (id, __ts), 1-4 versions per id; zstd, row groups of 128 Ki rows. It is
   put at ``tenants/<tenant>/<table>/data/<object>.parquet`` (``file://``: a
   hard link of the generated file; moto: boto3 ``upload_file``, multipart),
   and described by an ``ObjectRecord`` (sha256 checksum, rows, ts and pk
   ranges). ``as_of`` is the median commit: about half the rows are kept.
2. Variants:

   - ``rewind``: ``engine.executors.task.run_task(store, task)`` on
     ``tenants.objectstore.open_object_store(uri, S3Settings(...))``;
   - ``bare_stream``: pyarrow ``ParquetFile.iter_batches(64 Ki rows)`` →
     filter ``__ts <= as_of`` → ``ParquetWriter`` (zstd, 128 Ki-row groups,
     batches buffered to whole row groups); no sort, no hashing;
   - ``bare_sort``: ``pq.read_table`` whole → filter → sort (id, __ts) →
     ``pq.write_table`` whole: the old rewrite minus checksum, stats and hash;
   - ``polars``: ``pl.scan_parquet(...).filter(...).sink_parquet(...)``
     (streaming engine, zstd, 128 Ki-row groups);
   - ``polars_hashed``: polars with Rewind's duties, the cheapest way found:
     the input's sha256 checked (``file://``: hashed in a thread alongside;
     moto: one streamed GET through Rewind's store to a spool file, hashed on
     the way, as ``tenants.objects.reader`` does), then one polars query with
     two sinks run together by ``pl.collect_all``: ``sink_parquet`` into a
     Python file object that hashes the bytes (sha256) and passes them to
     Rewind's ``ObjectStore.open_output`` (temp file + rename; S3 multipart),
     and ``sink_batches`` handing the same rows, in order, to a callback that
     gathers rows, ts range, first/last key and the content hash
     (``tenants.objects.row_hash.RowHasher``, after casting polars' ``large_string``
     to the table's ``string``). Its content hash must equal ``rewind``'s;
   - ``polars_hashed_2pass``: the same duties in two passes: polars sinks the
     kept rows to a local temp file, then a thread streams its bytes into
     Rewind's store output (sha256 on the way) while pyarrow reads it back
     for the row duties (steps ``polars_s``, ``hash_publish_s``).

   On moto the baselines read their input with **one GET into a local temp
   file** (boto3 ``get_object`` streamed in 8 MiB chunks; the download is in
   the timed work and reported as a step) and write their output straight to
   S3 (pyarrow ``S3FileSystem.open_output_stream``, a multipart upload;
   polars: ``s3://`` with ``storage_options``). Reason: moto answers every
   ranged GET by reading the whole object from its spool file and slicing it,
   so a reader that fetches row group by row group pays O(object size) per
   request, which real S3 does not. ``bare_sort`` reads with one GET into
   memory, as ``S3ObjectStore.get`` does. ``bare_stream_ranged`` and
   ``polars_ranged`` (moto only, objects up to ``--ranged-max-mb``) read with
   ranged GETs straight from moto to show that cost.

Every output's row count (Parquet footer) is checked against the generated
object's kept rows; ``polars_hashed``'s sha256 is checked against the bytes
(``file://``) and its content hash against ``rewind``'s (also ``_2pass``). Figures: best wall time over ``--reps`` runs, the largest
peak; MB/s = input object bytes (10^6) ÷ seconds; RSS in MiB.

Case ``compaction`` (a full compaction of a table of many overlapping objects):

1. A Rewind store (SQLite catalog, the case's warehouse) with tenant ``bench``
   and table ``db.t`` (``id`` int64 key, ``a`` int64, ``c`` string of 20-40
   chars, ``d`` string of 16 values) receives commits through
   ``TableStore.write`` until its live objects hold ``--sizes`` MB (full:
   10,000; ``--quick``: 300): upsert commits of ``--commit-mb`` (200, or a
   tenth of the size when smaller) whose ids are drawn from the whole key
   space (about as many ids as rows in all: every object overlaps every
   other, about a third of the versions are superseded), and every 8th
   commit deletes a quarter of a commit's worth of random ids (tombstones).
   No snapshot, no PITR: a full compaction keeps the newest version of each
   id not deleted since, a count the generator tracks and every ``rewind*``
   run is checked against. The catalog is copied after generation and put
   back before each run, so every run compacts the same table; each run's
   new objects are deleted afterwards.
2. Variants:

   - ``rewind``: ``TableStore.compact(..., full=True)`` with the default
     memory budget (``tenants.compaction.default_memory()``);
     ``rewind_512m``: the same with ``memory=512 MiB``;
   - ``bare_copy``: every live object's row groups read with
     ``ParquetFile.iter_batches`` (``__ts`` appended to commit objects'
     batches, as Rewind's reader does) and written with ``ParquetWriter``
     (zstd, 128 Ki-row groups) into outputs of 64 MiB (Rewind's target), one
     series per kind; no merge, no sort, no checksums. On moto each object
     is first fetched by one GET into a temp file (a step), outputs are
     pyarrow S3 multipart uploads;
   - ``polars`` (``file://`` only): ``pl.concat`` of every data object's
     ``scan_parquet`` with ``__ts`` as a literal of its commit,
     ``.sort(["id", "__ts"]).sink_parquet(...)``: polars' merge sort, which
     keeps every version (no MVCC) and does not read tombstones.

   Figures are as for ``rewrite``; MB/s = the live objects' bytes ÷ s; "out
   MB" is the table's live objects after the run (``written_bytes`` adds the
   runs merge passes wrote and swapped out again; GC would remove them), and
   on ``file://`` their footers' row counts are checked too. A
   compaction run takes minutes at full size, so ``--compaction-reps``
   defaults to 1. ``--moto-max-mb`` runs larger sizes at that size on moto.

Safety and profiling: a child whose RSS passes ``--rss-limit-mib`` (14 GiB)
is killed and reported as failed; ``--profile DIR`` runs each child's work
under cProfile (main thread only) into ``DIR/<case>.<variant>-<label>.prof``.

Adding a case: write ``case_<name>(ctx, backend, size) -> dict``, child work
factories ``what -> (args -> work())`` in ``CHILD_WORK``, and register it in
``CASES``.

``.venv/bin/python -m benchmarks.bench_memory [--quick] [--sizes 100 500]
[--backends file,moto] [--cases rewrite,compaction] [--variants rewind,bare_stream]
[--reps 2] [--compaction-reps 1] [--commit-mb 200] [--moto-max-mb MB]
[--profile DIR] [--name NAME]``
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import io
import json
import logging
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

# Light imports only at module level: children import this module, and what it
# imports is counted in their baseline RSS. Rewind, polars, boto3 and
# benchmarks.common (which imports tenants.store) are imported where needed.
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from benchmarks import memory_load_query  # the load and query cases (light imports too)

NAME = "bench_memory"
MB = 1_000_000
MiB = 1024 * 1024
ROOT = Path(__file__).resolve().parents[1]
RESULT_MARK = "BENCH_MEMORY_RESULT "

# Rewind's layout (tenants/objects/codec.py ROW_GROUP_ROWS, tenants/schema.py TS).
ROW_GROUP_ROWS = 128 * 1024
READ_BATCH_ROWS = 64 * 1024
TS = "__ts"
PRIMARY_KEY = ("id",)
COMMITS = 10_000
EPOCH_2024_US = 1_704_067_200_000_000
IDS_PER_CHUNK = 400_000  # at most ~1M rows a generated chunk (1-4 versions an id)
VERSIONS_MEAN = 2.5
BYTES_PER_ROW_GUESS = 43.0  # zstd Parquet bytes of a generated row (measured)
ALPHABET = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789", dtype=np.uint8)
DOWNLOAD_CHUNK = 8 * MiB
UPLOAD_PART = 64 * MiB
DISK_FACTOR = 3.5  # input + output + moto's spool + a download
CHECK_CHUNK = 1024 * 1024  # tenants.objects.reader.CHUNK_BYTES

REWRITE_VARIANTS = (
    "rewind",
    "bare_stream",
    "bare_sort",
    "polars",
    "polars_hashed",
    "polars_hashed_2pass",
)
RANGED_VARIANTS = ("bare_stream_ranged", "polars_ranged")  # moto only, small objects
RATIOS = (
    ("rewind", "bare_stream"),
    ("rewind", "bare_sort"),
    ("polars", "bare_stream"),
    ("polars_hashed", "bare_stream"),
    ("polars_hashed", "rewind"),
    ("polars_hashed_2pass", "bare_stream"),
    ("polars_hashed_2pass", "rewind"),
)
TENANT_ID, TABLE_ID, OBJECT_ID = "tmem", "tbl-memory", "obj-memory"
OUT_TENANT_ID, OUT_TABLE_ID = "tmem-out", "tbl-memory-out"
BASELINE_PREFIX = "bench-memory-out"


def commit_ts(index: np.ndarray | int) -> Any:
    """The ts of commit ``index`` (one commit a second from 2024-01-01, µs)."""
    return EPOCH_2024_US + (np.asarray(index, dtype=np.int64) + 1) * 1_000_000


# memory -------------------------------------------------------------------------


def _status(pid: int | str = "self") -> dict[str, int]:
    """VmRSS / VmHWM of a process in bytes (empty when it is gone)."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    out[line.split(":")[0]] = int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return out


def _reset_peak() -> bool:
    """Reset this process's VmHWM to its current RSS (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


@contextmanager
def _sample_rss(
    pid: int, interval_s: float = 0.2, kill_above_mib: float | None = None
) -> Iterator[dict[str, float]]:
    """Peak sampled RSS (MiB) of process ``pid`` and of this process while the body
    runs; ``pid`` is killed (and ``killed_at_mib`` set) if its RSS passes the limit."""
    peaks = {"child_sampled_peak_mib": 0.0, "parent_peak_mib": 0.0}
    stop = threading.Event()

    def sample() -> None:
        while True:
            rss = _status(pid).get("VmRSS", 0) / MiB
            peaks["child_sampled_peak_mib"] = max(peaks["child_sampled_peak_mib"], rss)
            if kill_above_mib is not None and rss > kill_above_mib:
                peaks["killed_at_mib"] = rss
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass
            peaks["parent_peak_mib"] = max(
                peaks["parent_peak_mib"], _status().get("VmRSS", 0) / MiB
            )
            if stop.wait(interval_s):
                return

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield peaks
    finally:
        stop.set()
        thread.join()


# warehouses -----------------------------------------------------------------------


@dataclass
class BenchStore:
    """Where a case's objects live: a ``file://`` directory or a moto bucket."""

    backend: str
    uri: str
    root: Path | None = None  # file://
    bucket: str = ""  # moto
    prefix: str = ""
    s3: dict[str, str] = field(default_factory=dict)  # endpoint_url, region, keys

    def full_key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def child_args(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "uri": self.uri,
            "root": str(self.root) if self.root else None,
            "bucket": self.bucket,
            "prefix": self.prefix,
            "s3": self.s3,
        }

    def _client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.s3["endpoint_url"],
            region_name=self.s3["region"],
            aws_access_key_id=self.s3["access_key_id"],
            aws_secret_access_key=self.s3["secret_access_key"],
        )

    def place(self, local: Path, key: str) -> float:
        """Put the local file ``local`` at ``key``; seconds it took."""
        started = time.perf_counter()
        if self.backend == "file":
            assert self.root is not None
            target = self.root / key
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(local, target)
            except OSError:
                shutil.copyfile(local, target)
        else:
            from boto3.s3.transfer import TransferConfig

            config = TransferConfig(multipart_chunksize=UPLOAD_PART, max_concurrency=4)
            self._client().upload_file(str(local), self.bucket, self.full_key(key), Config=config)
        return time.perf_counter() - started

    def footer(self, key: str) -> tuple[int, int]:
        """(bytes, rows) of the Parquet object at ``key``."""
        if self.backend == "file":
            assert self.root is not None
            path = self.root / key
            return path.stat().st_size, pq.read_metadata(path).num_rows
        from pyarrow.fs import S3FileSystem

        fs = S3FileSystem(**_pyarrow_s3(self.s3))
        with fs.open_input_file(f"{self.bucket}/{self.full_key(key)}") as src:
            return src.size(), pq.read_metadata(src).num_rows

    def delete_prefix(self, prefix: str) -> None:
        """Remove every object under ``prefix`` (and, on moto, unfinished uploads)."""
        if self.backend == "file":
            assert self.root is not None
            shutil.rmtree(self.root / prefix, ignore_errors=True)
            return
        client = self._client()
        full = self.full_key(prefix)
        for page in client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=full
        ):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                client.delete_objects(Bucket=self.bucket, Delete={"Objects": keys, "Quiet": True})
        uploads = client.list_multipart_uploads(Bucket=self.bucket, Prefix=full)
        for upload in uploads.get("Uploads", []):
            client.abort_multipart_upload(
                Bucket=self.bucket, Key=upload["Key"], UploadId=upload["UploadId"]
            )


@contextmanager
def open_warehouse(backend: str, workdir: Path) -> Iterator[BenchStore]:
    """A fresh warehouse: a directory under ``workdir``, or a new bucket on the
    process's moto server (benchmarks.common.moto_server). Emptied on exit."""
    if backend == "file":
        root = workdir / f"warehouse-{backend}"
        root.mkdir(parents=True)
        try:
            yield BenchStore(backend, f"file://{root}", root=root)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        return
    if backend != "moto":
        raise ValueError(f"unknown backend {backend!r}; use file or moto")
    import uuid

    from benchmarks.common import moto_server

    server = moto_server()
    bucket = f"rewind-bench-mem-{uuid.uuid4().hex[:10]}"
    server.create_bucket(bucket)
    settings = server.settings
    wh = BenchStore(
        backend,
        f"s3://{bucket}/warehouse",
        bucket=bucket,
        prefix="warehouse",
        s3={
            "endpoint_url": str(settings.endpoint_url),
            "region": settings.region,
            "access_key_id": str(settings.access_key_id),
            "secret_access_key": str(settings.secret_access_key),
        },
    )
    try:
        yield wh
    finally:
        try:
            wh.delete_prefix("")
            wh._client().delete_bucket(Bucket=bucket)
        except Exception as e:  # cleanup must not hide the run's own error
            print(f"warning: could not empty moto bucket {bucket}: {e}", file=sys.stderr)


def _pyarrow_s3(s3: dict[str, str]) -> dict[str, Any]:
    from urllib.parse import urlparse

    parsed = urlparse(s3["endpoint_url"])
    return {
        "endpoint_override": parsed.netloc,
        "scheme": parsed.scheme,
        "region": s3["region"],
        "access_key": s3["access_key_id"],
        "secret_key": s3["secret_access_key"],
    }


def _polars_s3(s3: dict[str, str]) -> dict[str, str]:
    return {
        "aws_endpoint_url": s3["endpoint_url"],
        "aws_region": s3["region"],
        "aws_access_key_id": s3["access_key_id"],
        "aws_secret_access_key": s3["secret_access_key"],
        "aws_allow_http": "true",
    }


# the generated object ---------------------------------------------------------------


def object_schema() -> tuple[pa.Schema, str]:
    """A data object's Arrow schema (columns + non-null ``__ts``) and its fingerprint."""
    from tenants.schema import TableSchema

    schema = TableSchema.of(
        [("id", "int64"), ("a", "int64"), ("b", "double"), ("c", "string"), ("d", "string")],
        list(PRIMARY_KEY),
    )
    return schema.data_arrow(), schema.fingerprint


def _chunk(rng: np.random.Generator, first_id: int, count: int, schema: pa.Schema) -> pa.Table:
    """Rows of ``count`` ids from ``first_id``, 1-4 versions each, in (id, ts) order."""
    versions = rng.integers(1, 5, count)
    ids = np.repeat(np.arange(first_id, first_id + count, dtype=np.int64), versions)
    n = len(ids)
    # Distinct, increasing commits within an id: sorted draws plus the rank in the id.
    draws = rng.integers(0, COMMITS - 4, n)
    draws = draws[np.lexsort((draws, ids))]
    starts = np.repeat(np.cumsum(versions) - versions, versions)
    ts = commit_ts(draws + (np.arange(n) - starts))
    lengths = rng.integers(20, 41, n)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    chars = ALPHABET[rng.integers(0, len(ALPHABET), int(offsets[-1]), dtype=np.uint8)]
    c = pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(chars))
    d = pa.array([f"status-{i:02d}" for i in range(16)]).take(pa.array(rng.integers(0, 16, n)))
    return pa.Table.from_arrays(
        [
            pa.array(ids),
            pa.array(rng.integers(0, 1_000_000_000, n, dtype=np.int64)),
            pa.array(rng.normal(100.0, 40.0, n)),
            c,
            d,
            pa.array(ts),
        ],
        schema=schema,
    )


def generate_object(path: Path, target_bytes: int, seed: int) -> dict[str, Any]:
    """Write one mixed-commit data object of about ``target_bytes`` at ``path``.

    Streaming: chunks of ~1M rows are written as whole 128 Ki-row groups (the
    remainder carried to the next chunk), so memory stays at a few chunks.
    """
    schema, fingerprint = object_schema()
    rng = np.random.default_rng(seed)
    as_of = int(commit_ts(COMMITS // 2 - 1))
    started = time.perf_counter()
    rows = kept = 0
    min_ts, max_ts = None, None
    next_id, last_id = 0, 0
    pending: list[pa.Table] = []
    pending_rows = 0
    with pa.OSFile(str(path), "wb") as sink:
        with pq.ParquetWriter(sink, schema, compression="zstd") as writer:

            def flush(final: bool) -> None:
                nonlocal pending, pending_rows
                table = pa.concat_tables(pending)
                whole = (
                    table.num_rows if final else table.num_rows // ROW_GROUP_ROWS * ROW_GROUP_ROWS
                )
                if whole:
                    writer.write_table(table.slice(0, whole), row_group_size=ROW_GROUP_ROWS)
                rest = table.slice(whole)
                pending, pending_rows = ([rest] if rest.num_rows else []), rest.num_rows

            while sink.tell() < target_bytes:
                # Once bytes are on disk, size the next chunk to what is left.
                per_row = BYTES_PER_ROW_GUESS
                if sink.tell() and rows > pending_rows:
                    per_row = sink.tell() / (rows - pending_rows)
                left = target_bytes - sink.tell() - pending_rows * per_row
                count = int(min(IDS_PER_CHUNK, max(1_000, left / per_row / VERSIONS_MEAN)))
                chunk = _chunk(rng, next_id, count, schema)
                next_id += count
                ts = chunk.column(TS).to_numpy()
                rows += chunk.num_rows
                kept += int(np.count_nonzero(ts <= as_of))
                low, high = int(ts.min()), int(ts.max())
                min_ts = low if min_ts is None else min(min_ts, low)
                max_ts = high if max_ts is None else max(max_ts, high)
                last_id = int(chunk.column("id")[chunk.num_rows - 1].as_py())
                pending.append(chunk)
                pending_rows += chunk.num_rows
                if pending_rows >= ROW_GROUP_ROWS:
                    flush(final=False)
            if pending:
                flush(final=True)
    generate_s = time.perf_counter() - started
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(16 * MiB):
            digest.update(block)
    size = path.stat().st_size
    meta = pq.read_metadata(path)
    return {
        "bytes": size,
        "rows": rows,
        "kept_rows": kept,
        "kept_fraction": kept / rows,
        "row_groups": meta.num_row_groups,
        "bytes_per_row": size / rows,
        "ids": next_id,
        "min_ts": min_ts,
        "max_ts": max_ts,
        "min_pk": json.dumps([0]),
        "max_pk": json.dumps([last_id]),
        "as_of": as_of,
        "sha256": digest.hexdigest(),
        "fingerprint": fingerprint,
        "arrow_bytes_estimate": _arrow_bytes(path),
        "generate_s": generate_s,
        "hash_s": time.perf_counter() - started - generate_s,
    }


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(16 * MiB):
            digest.update(block)
    return digest.hexdigest()


def _arrow_bytes(path: Path) -> int:
    """Decoded Arrow size of the whole object, extrapolated from its first row group."""
    f = pq.ParquetFile(path)
    first = f.read_row_group(0)
    return int(first.nbytes * f.metadata.num_rows / max(1, first.num_rows))


def object_record(meta: dict[str, Any]) -> dict[str, Any]:
    """The ``tenants.objects.record.ObjectRecord`` fields of the generated object."""
    return {
        "id": OBJECT_ID,
        "key": f"tenants/{TENANT_ID}/{TABLE_ID}/data/{OBJECT_ID}.parquet",  # objects.object_key
        "kind": "data",
        "fingerprint": meta["fingerprint"],
        "rows": meta["rows"],
        "bytes": meta["bytes"],
        "min_ts": meta["min_ts"],
        "max_ts": meta["max_ts"],
        "min_pk": meta["min_pk"],
        "max_pk": meta["max_pk"],
        "sorted": True,
        "checksum": meta["sha256"],
        "created_ts": 0,
    }


# child processes: the measured work ---------------------------------------------------

WorkFactory = Callable[[dict[str, Any]], Callable[[], dict[str, Any]]]


def _download(args: dict[str, Any], key: str) -> tuple[Callable[[], str], Callable[[], None]]:
    """(fetch: one streamed GET of ``key`` to a temp file → its path, remove it)."""
    import boto3

    s3 = args["s3"]
    client = boto3.client(
        "s3",
        endpoint_url=s3["endpoint_url"],
        region_name=s3["region"],
        aws_access_key_id=s3["access_key_id"],
        aws_secret_access_key=s3["secret_access_key"],
    )
    path = Path(args["tmpdir"]) / f"download-{os.getpid()}.parquet"

    def fetch() -> str:
        body = client.get_object(Bucket=args["bucket"], Key=f"{args['prefix']}/{key}")["Body"]
        with open(path, "wb") as out:
            for block in body.iter_chunks(DOWNLOAD_CHUNK):
                out.write(block)
        return str(path)

    return fetch, lambda: path.unlink(missing_ok=True)


def _s3fs(args: dict[str, Any]) -> Any:
    from pyarrow.fs import S3FileSystem

    return S3FileSystem(**_pyarrow_s3(args["s3"]))


def _local(args: dict[str, Any], key: str) -> str:
    return str(Path(args["root"]) / key)


def _s3_path(args: dict[str, Any], key: str) -> str:
    return f"{args['bucket']}/{args['prefix']}/{key}"


def _s3_settings(args: dict[str, Any]) -> Any:
    """Rewind's ``S3Settings`` for a moto warehouse (None on ``file://``)."""
    if args["backend"] != "moto":
        return None
    from tenants.config import S3Settings

    s3 = args["s3"]
    return S3Settings(
        endpoint_url=s3["endpoint_url"],
        region=s3["region"],
        access_key_id=s3["access_key_id"],
        secret_access_key=s3["secret_access_key"],
    )


def _rewind_object_store(args: dict[str, Any]) -> Any:
    from tenants.objectstore import open_object_store

    return open_object_store(args["uri"], _s3_settings(args))


def child_rewind(args: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    import engine
    import tenants
    from engine.executors.task import run_task
    from engine.pipeline import RewriteTask
    from tenants.objects.record import ObjectRecord

    store = _rewind_object_store(args)
    task = RewriteTask(
        task_id="bench-memory-task",
        job_id="bench-memory-job",
        input=ObjectRecord(**args["record"]),
        primary_key=PRIMARY_KEY,
        as_of=args["as_of"],
        out_tenant_id=OUT_TENANT_ID,
        out_table_id=OUT_TABLE_ID,
    )

    def work() -> dict[str, Any]:
        result = run_task(store, task)
        return {
            "output_key": result.output.key,
            "output_bytes": result.output.bytes,
            "output_rows": result.output.rows,
            "content_hash": result.content_hash,
        }

    work.info = {  # type: ignore[attr-defined]
        "tenants_file": tenants.__file__,
        "engine_file": engine.__file__,
    }
    return work


def _stream_filter(source: Any, sink: Any, as_of: int, pre_buffer: bool = False) -> int:
    """iter_batches → filter → ParquetWriter in whole 128 Ki-row groups; rows written."""
    parquet = pq.ParquetFile(source, pre_buffer=pre_buffer)
    written = 0
    pending: list[pa.RecordBatch] = []
    pending_rows = 0
    with pq.ParquetWriter(sink, parquet.schema_arrow, compression="zstd") as writer:

        def flush(final: bool) -> None:
            nonlocal pending, pending_rows, written
            table = pa.Table.from_batches(pending, parquet.schema_arrow)
            whole = table.num_rows if final else table.num_rows // ROW_GROUP_ROWS * ROW_GROUP_ROWS
            if whole:
                writer.write_table(table.slice(0, whole), row_group_size=ROW_GROUP_ROWS)
                written += whole
            rest = table.slice(whole)
            pending = rest.to_batches() if rest.num_rows else []
            pending_rows = rest.num_rows

        for batch in parquet.iter_batches(batch_size=READ_BATCH_ROWS):
            kept = batch.filter(pc.less_equal(batch.column(TS), as_of))
            if kept.num_rows:
                pending.append(kept)
                pending_rows += kept.num_rows
            if pending_rows >= ROW_GROUP_ROWS:
                flush(final=False)
        if pending:
            flush(final=True)
    return written


def child_bare_stream(args: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    as_of, in_key, out_key = args["as_of"], args["record"]["key"], args["out_key"]
    steps: dict[str, float] = {}
    if args["backend"] == "file":

        def work() -> dict[str, Any]:
            out = Path(_local(args, out_key))
            out.parent.mkdir(parents=True, exist_ok=True)
            return {"rows_written": _stream_filter(_local(args, in_key), str(out), as_of)}

        return work
    fs = _s3fs(args)
    fetch, remove = _download(args, in_key)

    def work_s3() -> dict[str, Any]:
        started = time.perf_counter()
        local = fetch()
        steps["download_s"] = time.perf_counter() - started
        try:
            with fs.open_output_stream(_s3_path(args, out_key)) as sink:
                rows = _stream_filter(local, sink, as_of)
        finally:
            remove()
        steps["filter_write_s"] = time.perf_counter() - started - steps["download_s"]
        return {"rows_written": rows, "steps": steps}

    return work_s3


def child_bare_stream_ranged(args: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    fs = _s3fs(args)
    as_of, in_key, out_key = args["as_of"], args["record"]["key"], args["out_key"]

    def work() -> dict[str, Any]:
        with fs.open_input_file(_s3_path(args, in_key)) as src:
            with fs.open_output_stream(_s3_path(args, out_key)) as sink:
                # pre_buffer: one coalesced ranged GET per row group, not one per column.
                return {"rows_written": _stream_filter(src, sink, as_of, pre_buffer=True)}

    return work


def child_bare_sort(args: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    as_of, in_key, out_key = args["as_of"], args["record"]["key"], args["out_key"]
    moto = args["backend"] == "moto"
    fs = _s3fs(args) if moto else None

    def work() -> dict[str, Any]:
        if fs is not None:
            with fs.open_input_file(_s3_path(args, in_key)) as src:
                data = src.read()  # one GET, as S3ObjectStore.get
            rows = pq.read_table(pa.BufferReader(data))
            del data
        else:
            rows = pq.read_table(_local(args, in_key))
        kept = rows.filter(pc.less_equal(rows.column(TS), as_of))
        del rows
        kept = kept.sort_by([(k, "ascending") for k in PRIMARY_KEY] + [(TS, "ascending")])
        if fs is not None:
            with fs.open_output_stream(_s3_path(args, out_key)) as sink:
                pq.write_table(kept, sink, compression="zstd", row_group_size=ROW_GROUP_ROWS)
        else:
            out = Path(_local(args, out_key))
            out.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(kept, str(out), compression="zstd", row_group_size=ROW_GROUP_ROWS)
        return {"rows_written": kept.num_rows}

    return work


def _polars_factory(ranged: bool) -> WorkFactory:
    def factory(args: dict[str, Any]) -> Callable[[], dict[str, Any]]:
        import polars as pl

        as_of, in_key, out_key = args["as_of"], args["record"]["key"], args["out_key"]
        steps: dict[str, float] = {}
        info = {"polars": pl.__version__, "threads": pl.thread_pool_size()}

        def run(source: str, source_options: dict[str, str] | None) -> None:
            sink_options: dict[str, Any] | None = None
            if args["backend"] == "moto":
                target = f"s3://{_s3_path(args, out_key)}"
                sink_options = _polars_s3(args["s3"])
            else:
                target = _local(args, out_key)
                Path(target).parent.mkdir(parents=True, exist_ok=True)
            pl.scan_parquet(source, storage_options=source_options).filter(
                pl.col(TS) <= as_of
            ).sink_parquet(
                target,
                compression="zstd",
                row_group_size=ROW_GROUP_ROWS,
                storage_options=sink_options,
            )

        if args["backend"] == "file":

            def work() -> dict[str, Any]:
                run(_local(args, in_key), None)
                return {}

        elif ranged:

            def work() -> dict[str, Any]:
                run(f"s3://{_s3_path(args, in_key)}", _polars_s3(args["s3"]))
                return {}

        else:
            fetch, remove = _download(args, in_key)

            def work() -> dict[str, Any]:
                started = time.perf_counter()
                local = fetch()
                steps["download_s"] = time.perf_counter() - started
                try:
                    run(local, None)
                finally:
                    remove()
                steps["filter_write_s"] = time.perf_counter() - started - steps["download_s"]
                return {"steps": steps}

        work.info = info  # type: ignore[attr-defined]
        return work

    return factory


class _HashingFile(io.RawIOBase):
    """The file object polars writes the output to: every byte is counted, fed to
    sha256 and passed on to a Rewind ``ObjectOutput`` (a temp file renamed on
    commit, an S3 multipart upload), as ``tenants.objects.writer`` does."""

    def __init__(self, output: Any) -> None:
        super().__init__()
        self.output = output
        self.sha = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self.sha.update(view)
        self.output.write(view)
        self.size += view.nbytes
        return view.nbytes

    def tell(self) -> int:
        return self.size


class _RowDuties:
    """What Rewind's writer gathers as rows pass: row count, ts range, first and
    last key, and the canonical content hash (tenants.objects.row_hash.RowHasher)."""

    def __init__(self, schema: pa.Schema) -> None:
        from tenants.objects.row_hash import RowHasher

        self.schema = schema
        self.hasher = RowHasher(schema)
        self.rows = 0
        self.min_ts: int | None = None
        self.max_ts: int | None = None
        self.first: str | None = None
        self.last: pa.Table | None = None

    def update(self, table: pa.Table) -> None:
        from tenants.objects.writer import key_json

        if not table.num_rows:
            return
        table = table.cast(self.schema)  # polars hands large_string: Rewind's types
        if self.first is None:
            self.first = key_json(table, 0, PRIMARY_KEY)
        self.last = table.slice(table.num_rows - 1, 1)
        bounds = pc.min_max(table.column(TS))
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        self.min_ts = low if self.min_ts is None else min(self.min_ts, low)
        self.max_ts = high if self.max_ts is None else max(self.max_ts, high)
        self.hasher.update(table)
        self.rows += table.num_rows

    def finish(self) -> dict[str, Any]:
        from tenants.objects.writer import key_json

        assert self.last is not None
        return {
            "rows": self.rows,
            "min_ts": self.min_ts,
            "max_ts": self.max_ts,
            "min_pk": self.first,
            "max_pk": key_json(self.last, 0, PRIMARY_KEY),
            "content_hash": self.hasher.hexdigest(),
        }


def _hash_file(path: str, expected: str, size: int) -> Callable[[], None]:
    """Hash ``path`` in a thread (hashlib and reads release the GIL); the returned
    call waits and raises if it does not match the record's checksum."""
    error: list[BaseException] = []

    def run() -> None:
        try:
            sha, seen = hashlib.sha256(), 0
            with open(path, "rb") as f:
                while block := f.read(CHECK_CHUNK):
                    sha.update(block)
                    seen += len(block)
            if seen != size or sha.hexdigest() != expected:
                raise RuntimeError(f"{path} does not match its recorded checksum")
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            error.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def verdict() -> None:
        thread.join()
        if error:
            raise error[0]

    return verdict


@contextmanager
def _checked_input(
    args: dict[str, Any], store: Any, steps: dict[str, float]
) -> Iterator[tuple[str, Callable[[], None]]]:
    """(a local path of the input object, a call raising unless its sha256 matches
    the record), as Rewind's reader checks it: ``file://`` in place with a
    hashing thread alongside; moto by one streamed GET through Rewind's store
    into a spool file, hashed on the way (``download_s``), removed after."""
    record = args["record"]
    if args["backend"] == "file":
        source = _local(args, record["key"])
        yield source, _hash_file(source, record["checksum"], record["bytes"])
        return
    started = time.perf_counter()
    spool = Path(args["tmpdir"]) / f"spool-{os.getpid()}.parquet"
    try:
        sha, seen = hashlib.sha256(), 0
        with open(spool, "wb") as out:
            for chunk in store.stream(record["key"], CHECK_CHUNK):
                sha.update(chunk)
                out.write(chunk)
                seen += len(chunk)
        if seen != record["bytes"] or sha.hexdigest() != record["checksum"]:
            raise RuntimeError(f"{record['key']} does not match its recorded checksum")
        steps["download_s"] = time.perf_counter() - started
        yield str(spool), lambda: None
    finally:
        spool.unlink(missing_ok=True)


def child_polars_hashed(args: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    """polars reads, filters and encodes; Rewind's duties ride along (see the doc)."""
    import polars as pl

    store = _rewind_object_store(args)
    as_of, out_key = args["as_of"], args["out_key"]
    schema, _ = object_schema()
    steps: dict[str, float] = {}

    def work() -> dict[str, Any]:
        started = time.perf_counter()
        with _checked_input(args, store, steps) as (source, check):
            duties = _RowDuties(schema)
            sink = _HashingFile(store.open_output(out_key))
            try:
                query = pl.scan_parquet(source).filter(pl.col(TS) <= as_of)
                # One query, two sinks: the Parquet bytes to the store output, and
                # the same rows, in order, to the duties (polars runs the scan once).
                pl.collect_all(
                    [
                        query.sink_parquet(
                            cast(IO[bytes], sink),
                            compression="zstd",
                            row_group_size=ROW_GROUP_ROWS,
                            lazy=True,
                        ),
                        query.sink_batches(
                            lambda df: duties.update(df.to_arrow()),
                            chunk_size=READ_BATCH_ROWS,
                            lazy=True,
                        ),
                    ]
                )
                check()
                if duties.rows == 0:
                    raise RuntimeError("no row at or before the cut")
                sink.output.commit()
            except BaseException:
                sink.output.abort()
                raise
        steps["polars_s"] = time.perf_counter() - started - steps.get("download_s", 0.0)
        return {
            "output_key": out_key,
            "output_sha256": sink.sha.hexdigest(),
            "output_bytes_written": sink.size,
            **duties.finish(),
            "steps": steps,
        }

    work.info = {"polars": pl.__version__, "threads": pl.thread_pool_size()}  # type: ignore[attr-defined]
    return work


def child_polars_hashed_2pass(args: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    """polars filters into a local temp file; then, at once, a thread streams its
    bytes into Rewind's store output (sha256 on the way) while pyarrow reads it
    back for the row duties."""
    import polars as pl

    store = _rewind_object_store(args)
    as_of, out_key = args["as_of"], args["out_key"]
    schema, _ = object_schema()
    steps: dict[str, float] = {}
    temp = Path(args["tmpdir"]) / f"polars-out-{os.getpid()}.parquet"

    def publish(sink: _HashingFile, error: list[BaseException]) -> None:
        try:
            with open(temp, "rb") as f:
                while block := f.read(CHECK_CHUNK):
                    sink.write(block)
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            error.append(e)

    def work() -> dict[str, Any]:
        started = time.perf_counter()
        try:
            with _checked_input(args, store, steps) as (source, check):
                pl.scan_parquet(source).filter(pl.col(TS) <= as_of).sink_parquet(
                    str(temp), compression="zstd", row_group_size=ROW_GROUP_ROWS
                )
                check()
            steps["polars_s"] = time.perf_counter() - started - steps.get("download_s", 0.0)
            mark = time.perf_counter()
            duties = _RowDuties(schema)
            sink = _HashingFile(store.open_output(out_key))
            error: list[BaseException] = []
            thread = threading.Thread(target=publish, args=(sink, error), daemon=True)
            thread.start()
            try:
                parquet = pq.ParquetFile(str(temp))
                for batch in parquet.iter_batches(batch_size=READ_BATCH_ROWS):
                    duties.update(pa.Table.from_batches([batch]))
                parquet.close()
                thread.join()
                if error:
                    raise error[0]
                if duties.rows == 0:
                    raise RuntimeError("no row at or before the cut")
                sink.output.commit()
            except BaseException:
                thread.join()
                sink.output.abort()
                raise
            steps["hash_publish_s"] = time.perf_counter() - mark
        finally:
            temp.unlink(missing_ok=True)
        return {
            "output_key": out_key,
            "output_sha256": sink.sha.hexdigest(),
            "output_bytes_written": sink.size,
            **duties.finish(),
            "steps": steps,
        }

    work.info = {"polars": pl.__version__, "threads": pl.thread_pool_size()}  # type: ignore[attr-defined]
    return work


CHILD_WORK: dict[str, WorkFactory] = {
    "rewrite.rewind": child_rewind,
    "rewrite.bare_stream": child_bare_stream,
    "rewrite.bare_stream_ranged": child_bare_stream_ranged,
    "rewrite.bare_sort": child_bare_sort,
    "rewrite.polars": _polars_factory(ranged=False),
    "rewrite.polars_ranged": _polars_factory(ranged=True),
    "rewrite.polars_hashed": child_polars_hashed,
    "rewrite.polars_hashed_2pass": child_polars_hashed_2pass,
}


def child_main(what: str, raw: str) -> None:
    """In the child: set up, reset the peak, run the work once, print one JSON line."""
    args = json.loads(raw)
    work = CHILD_WORK[what](args)
    gc.collect()
    baseline = _status().get("VmRSS", 0)
    reset = _reset_peak()
    profiler = None
    if args.get("_profile"):
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    started = time.perf_counter()
    out = work()
    seconds = time.perf_counter() - started
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args["_profile"])
    status = _status()
    out |= {
        "seconds": seconds,
        "baseline_rss_bytes": baseline,
        "peak_rss_bytes": status.get("VmHWM", 0),
        "peak_reset": reset,
        "ru_maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "rss_after_bytes": status.get("VmRSS", 0),
        "pid": os.getpid(),
        "info": getattr(work, "info", {}),
    }
    sys.stdout.write(RESULT_MARK + json.dumps(out) + "\n")
    sys.stdout.flush()


# the parent: running children -------------------------------------------------------------


class ChildFailed(RuntimeError):
    pass


def run_child(
    what: str,
    args: dict[str, Any],
    timeout_s: float,
    rss_limit_mib: float | None = None,
    profile: str | None = None,
) -> dict[str, Any]:
    """Run ``what`` in a fresh interpreter on this tree (cwd and PYTHONPATH = ROOT);
    kill it if its RSS passes ``rss_limit_mib``; ``profile``: cProfile its work there."""
    if profile:
        args = {**args, "_profile": profile}
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, "-m", "benchmarks.bench_memory", "--child", what, json.dumps(args)]
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        with _sample_rss(proc.pid, kill_above_mib=rss_limit_mib) as sampled:
            try:
                out, err = proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                raise ChildFailed(f"timed out after {timeout_s:.0f} s") from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    process_s = time.perf_counter() - started
    result_load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    lines = [ln for ln in out.splitlines() if ln.startswith(RESULT_MARK)]
    if proc.returncode != 0 or not lines:
        tail = " | ".join(err.strip().splitlines()[-6:])
        why = "killed (out of memory?)" if proc.returncode == -9 else f"exit {proc.returncode}"
        if "killed_at_mib" in sampled:
            why = (
                f"killed by the benchmark: RSS {sampled['killed_at_mib']:,.0f} MiB passed "
                f"--rss-limit-mib {rss_limit_mib:,.0f}"
            )
        raise ChildFailed(f"{why}: {tail}")
    result = json.loads(lines[-1][len(RESULT_MARK) :])
    result["process_s"] = process_s
    result["load_1m_before"], result["load_1m_after"] = load_before, result_load
    result |= sampled
    return result


def _aggregate(runs: list[dict[str, Any]], input_bytes: int) -> dict[str, Any]:
    """Best time, largest peaks, MB/s and MiB figures over the runs of one variant."""
    best = min(runs, key=lambda r: r["seconds"])
    peak = max(r["peak_rss_bytes"] for r in runs)
    growth = max(r["peak_rss_bytes"] - r["baseline_rss_bytes"] for r in runs)
    return {
        "seconds": best["seconds"],
        "mb_per_s": input_bytes / MB / best["seconds"],
        "peak_rss_mib": peak / MiB,
        "growth_mib": growth / MiB,
        "baseline_rss_mib": max(r["baseline_rss_bytes"] for r in runs) / MiB,
        "ru_maxrss_mib": max(r["ru_maxrss_bytes"] for r in runs) / MiB,
        "child_sampled_peak_mib": max(r["child_sampled_peak_mib"] for r in runs),
        "parent_peak_mib": max(r["parent_peak_mib"] for r in runs),
        "output_bytes": best["output_bytes"],
        "output_rows": best["output_rows"],
        "steps": best.get("steps", {}),
        "info": best.get("info", {}),
        "runs": runs,
    }


# case: rewrite ------------------------------------------------------------------------------


@dataclass
class Context:
    args: argparse.Namespace
    workdir: Path
    console: Any

    def run_child(self, what: str, child_args: dict[str, Any], label: str) -> dict[str, Any]:
        """``run_child`` with the command line's timeout, RSS limit and profiling."""
        profile = None
        if self.args.profile:
            Path(self.args.profile).mkdir(parents=True, exist_ok=True)
            profile = str(Path(self.args.profile).resolve() / f"{what}-{label}.prof")
        return run_child(
            what, child_args, self.args.child_timeout, self.args.rss_limit_mib, profile
        )


def rewrite_variants(ctx: Context, backend: str, size: int) -> tuple[list[str], dict[str, str]]:
    """The variants to run and, for the others, why not."""
    known = [*REWRITE_VARIANTS, *RANGED_VARIANTS]
    chosen = [v for v in ctx.args.variants or known if v in known]
    run, skipped = [], {}
    polars_ok, polars_why = _polars_available()
    for name in chosen:
        if name in RANGED_VARIANTS and backend != "moto":
            continue  # only meaningful against moto's ranged GETs
        if name in RANGED_VARIANTS and size > ctx.args.ranged_max_mb * MB:
            skipped[name] = (
                f"object larger than --ranged-max-mb {ctx.args.ranged_max_mb:g}: moto reads the "
                "whole object for every ranged GET"
            )
            continue
        if name.startswith("polars") and not polars_ok:
            skipped[name] = polars_why
            continue
        run.append(name)
    return run, skipped


def _polars_available() -> tuple[bool, str]:
    try:
        import polars  # noqa: F401
    except ImportError as e:
        return False, f"polars is not installed: {e}"
    return True, ""


def case_rewrite(ctx: Context, backend: str, size: int) -> dict[str, Any]:
    """Generate one straddling object of ``size`` bytes, rewrite it with each variant."""
    console, args = ctx.console, ctx.args
    variants, skipped = rewrite_variants(ctx, backend, size)
    with ExitStack() as stack:
        wh = stack.enter_context(open_warehouse(backend, ctx.workdir))
        local = ctx.workdir / f"generated-{backend}-{size}.parquet"
        stack.callback(local.unlink, True)
        console.print(f"  {backend} {size / MB:g} MB: generating ...")
        meta = generate_object(local, size, args.seed)
        record = object_record(meta)
        meta["place_s"] = wh.place(local, record["key"])
        local.unlink()
        console.print(
            f"  {meta['bytes'] / MB:,.1f} MB, {meta['rows']:,} rows ({meta['bytes_per_row']:.1f} "
            f"B/row, ~{meta['arrow_bytes_estimate'] / MiB:,.0f} MiB as Arrow), "
            f"{meta['row_groups']} row groups; generated in {meta['generate_s']:.0f} s, "
            f"placed in {meta['place_s']:.0f} s; kept rows {meta['kept_fraction']:.1%}"
        )
        child_args = {
            **wh.child_args(),
            "record": record,
            "as_of": meta["as_of"],
            "tmpdir": str(ctx.workdir),
        }
        runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
        failed: dict[str, str] = {}
        for rep in range(args.reps):
            for name in variants:
                if name in failed:
                    continue
                out_key = f"{BASELINE_PREFIX}/{name}-{rep}.parquet"
                try:
                    result = ctx.run_child(
                        f"rewrite.{name}", {**child_args, "out_key": out_key}, backend
                    )
                    key = result.get("output_key", out_key)
                    result["output_bytes"], result["output_rows"] = wh.footer(key)
                    if result["output_rows"] != meta["kept_rows"]:
                        raise ChildFailed(
                            f"wrote {result['output_rows']:,} rows, expected {meta['kept_rows']:,}"
                        )
                    if "output_sha256" in result and wh.root is not None:
                        if _file_sha256(wh.root / key) != result["output_sha256"]:
                            raise ChildFailed("the output's sha256 is not the bytes' sha256")
                except (ChildFailed, OSError, pa.ArrowException) as e:
                    failed[name] = str(e)
                    console.print(f"    {name} rep {rep}: [red]failed[/]: {e}")
                    continue
                finally:
                    wh.delete_prefix(BASELINE_PREFIX)
                    wh.delete_prefix(f"tenants/{OUT_TENANT_ID}")
                runs[name].append(result)
                console.print(
                    f"    {name} rep {rep}: {result['seconds']:.2f} s, peak "
                    f"{result['peak_rss_bytes'] / MiB:,.0f} MiB (baseline "
                    f"{result['baseline_rss_bytes'] / MiB:,.0f}), process {result['process_s']:.1f} s"
                )
    figures = {name: _aggregate(r, meta["bytes"]) for name, r in runs.items() if r}
    # The content hash (tenants.objects.row_hash) of the kept rows: every variant that
    # computes one must agree with Rewind's.
    hashes = {
        name: sorted({run["content_hash"] for run in r})
        for name, r in runs.items()
        if r and all("content_hash" in run for run in r)
    }
    return {
        "backend": backend,
        "size_mb": size / MB,
        "input_bytes": meta["bytes"],
        "content_hashes": hashes,
        "content_hashes_agree": len({h for v in hashes.values() for h in v}) <= 1,
        "object": meta,
        "as_of": meta["as_of"],
        "variants": figures,
        "failed": failed,
        "skipped": skipped,
        "ratios": _ratios(figures),
    }


def _ratios(
    figures: dict[str, dict[str, Any]], pairs: Sequence[tuple[str, str]] = RATIOS
) -> dict[str, dict[str, float]]:
    out = {}
    for a, b in pairs:
        if a in figures and b in figures:
            out[f"{a}/{b}"] = {
                "seconds": figures[a]["seconds"] / figures[b]["seconds"],
                "peak_rss": figures[a]["peak_rss_mib"] / figures[b]["peak_rss_mib"],
                "growth": figures[a]["growth_mib"] / max(1e-9, figures[b]["growth_mib"]),
            }
    return out


# case: compaction ------------------------------------------------------------------------------

COMPACTION_VARIANTS = ("rewind", "rewind_512m", "bare_copy", "polars")
COMPACTION_RATIOS = (
    ("rewind", "bare_copy"),
    ("rewind_512m", "bare_copy"),
    ("polars", "bare_copy"),
)
COMPACT_TENANT, COMPACT_DB, COMPACT_TABLE = "bench", "db", "t"
COMMIT_MB = 200.0  # an upsert commit's stored size (quick: size / QUICK_COMMITS)
QUICK_COMMITS = 10
DELETE_EVERY = 8  # every 8th commit holds deletes only (tombstones)
DELETE_FRACTION = 0.25  # a delete commit's keys, as a share of an upsert commit's rows
KEYSPACE_FACTOR = 1.0  # ids drawn from (estimated total rows x this): ~1/3 superseded
TARGET_BYTES = 64 * MiB  # tenants.compaction.DEFAULT_TARGET_BYTES: outputs of this size
STATUS_VALUES = [f"status-{i:02d}" for i in range(16)]


def compaction_schema() -> Any:
    from tenants.schema import Column, TableSchema

    return TableSchema(
        (
            Column("id", "int64", nullable=False),
            Column("a", "int64"),
            Column("c", "string"),
            Column("d", "string"),
        ),
        ("id",),
    )


def _commit_rows(rng: np.random.Generator, ids: np.ndarray) -> pa.Table:
    """One upsert batch for the sorted, distinct ``ids``."""
    n = len(ids)
    lengths = rng.integers(20, 41, n)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    chars = ALPHABET[rng.integers(0, len(ALPHABET), int(offsets[-1]), dtype=np.uint8)]
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "a": pa.array(rng.integers(0, 1_000_000_000, n, dtype=np.int64)),
            "c": pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(chars)),
            "d": pa.array(STATUS_VALUES).take(pa.array(rng.integers(0, 16, n))),
        }
    )


def _draw_ids(rng: np.random.Generator, keyspace: int, count: int) -> np.ndarray:
    """About ``count`` distinct ids from the whole key space, sorted."""
    return np.unique(rng.integers(0, keyspace, count, dtype=np.int64))


def _bytes_per_row(rng: np.random.Generator, commits: int) -> float:
    """Stored bytes per upsert row, from a sample encoded as Rewind encodes objects,
    its ids as dense as one commit's out of ``commits``."""
    from tenants.objects.writer import parquet_options

    n = 200_000
    sample = _commit_rows(rng, _draw_ids(rng, n * max(1, commits), n))
    sink = pa.BufferOutputStream()
    pq.write_table(sample, sink, row_group_size=ROW_GROUP_ROWS, **parquet_options())  # type: ignore[arg-type]
    return sink.getvalue().size / sample.num_rows


def generate_table(
    store: Any, size: int, commit_bytes: int, seed: int, console: Any
) -> dict[str, Any]:
    """Commits to ``bench``/``db.t`` until its live objects hold ``size`` bytes.

    Upsert commits of about ``commit_bytes`` draw their ids from the whole key
    space (every object overlaps every other; ids recur across commits); every
    ``DELETE_EVERY``-th commit deletes random ids instead. The newest event of
    each id is tracked, so the rows a full compaction keeps (no snapshot, no
    PITR: only the newest version of ids not deleted since) are known.
    """
    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    store.create_tenant(COMPACT_TENANT)
    store.create_table(COMPACT_TENANT, f"{COMPACT_DB}.{COMPACT_TABLE}", compaction_schema())
    commits_guess = max(2, round(size / commit_bytes))
    per_row = _bytes_per_row(rng, commits_guess)
    keyspace = max(10_000, int(size / per_row * KEYSPACE_FACTOR))
    # Newest event per id: 2 x commit index (+1 for a delete); -1: never written.
    dtype = np.int16 if commits_guess * 4 < np.iinfo(np.int16).max // 2 else np.int32
    newest: Any = np.full(keyspace, -1, dtype=dtype)
    stored = index = deletes = 0
    rows_up = rows_del = 0
    while stored < size:
        if index % DELETE_EVERY == DELETE_EVERY - 1:
            ids = _draw_ids(
                rng, keyspace, max(1_000, int(commit_bytes / per_row * DELETE_FRACTION))
            )
            store.write(
                COMPACT_TENANT, f"{COMPACT_DB}.{COMPACT_TABLE}", deletes=pa.table({"id": ids})
            )
            newest[ids] = 2 * index + 1
            rows_del += len(ids)
            deletes += 1
        else:
            left = (size - stored) / per_row
            count = int(min(commit_bytes / per_row, max(1_000, left * 1.02)))
            ids = _draw_ids(rng, keyspace, count)
            rows = _commit_rows(rng, ids)
            store.write(COMPACT_TENANT, f"{COMPACT_DB}.{COMPACT_TABLE}", upserts=rows)
            del rows
            newest[ids] = 2 * index
            rows_up += len(ids)
        index += 1
        records = [r for _, r in store.objects_of(COMPACT_TENANT)]
        stored = sum(r.bytes for r in records)
        data = [r for r in records if r.kind == "data"]
        per_row = sum(r.bytes for r in data) / max(1, sum(r.rows for r in data))
        if index % 10 == 0:
            console.print(
                f"    {index} commits, {stored / MB:,.0f} MB, {time.perf_counter() - started:.0f} s"
            )
    expected = int(np.count_nonzero((newest >= 0) & (newest % 2 == 0)))
    touched = int(np.count_nonzero(newest >= 0))
    del newest
    records = [r for _, r in store.objects_of(COMPACT_TENANT)]
    return {
        "commits": index,
        "delete_commits": deletes,
        "objects": len(records),
        "data_objects": sum(r.kind == "data" for r in records),
        "tombstone_objects": sum(r.kind != "data" for r in records),
        "bytes": sum(r.bytes for r in records),
        "data_bytes": sum(r.bytes for r in records if r.kind == "data"),
        "rows": sum(r.rows for r in records),
        "data_rows": rows_up,
        "tombstone_rows": rows_del,
        "keyspace": keyspace,
        "ids_written": touched,
        "expected_kept_rows": expected,
        "bytes_per_row": per_row,
        "generate_s": time.perf_counter() - started,
        "records": [
            {"key": r.key, "kind": r.kind, "min_ts": r.min_ts, "bytes": r.bytes, "rows": r.rows}
            for r in records
        ],
    }


def _sqlite_copy(source: Path, target: Path) -> None:
    """A consistent copy of a SQLite catalog (WAL folded in), replacing ``target``."""
    import sqlite3

    for suffix in ("", "-wal", "-shm"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    src, dst = sqlite3.connect(source), sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()


class _MergeLog(logging.Handler):
    """Counts tenants.compaction's log lines: swaps, and runs merged in passes."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.swaps = self.runs = self.warnings = 0

    def emit(self, record: logging.LogRecord) -> None:
        text = str(record.msg)
        self.swaps += "compacted %d objects" in text
        self.runs += "merged a run" in text
        self.warnings += record.levelno >= logging.WARNING


def child_compact_rewind(args: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    import tenants
    from tenants import compaction
    from tenants.store import TableStore

    store = TableStore.open(args["catalog_uri"], args["uri"], s3=_s3_settings(args))
    memory = args["memory"]
    budget = memory or compaction.default_memory()
    merges = _MergeLog()
    logger = logging.getLogger("tenants.compaction")
    logger.addHandler(merges)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    records = [r for _, r in store.objects_of(COMPACT_TENANT)]
    groups = len({(r.kind, r.fingerprint) for r in records})
    shape = compaction.MergeShape.within(budget, records, groups)

    def work() -> dict[str, Any]:
        (result,) = store.compact(
            COMPACT_TENANT, f"{COMPACT_DB}.{COMPACT_TABLE}", full=True, memory=memory
        )
        store.close()
        return {
            "inputs": result.inputs,
            "outputs": result.outputs,
            "rows_kept": result.rows,
            "bytes_in": result.bytes_in,
            "output_bytes_written": result.bytes_out,
            "warnings": merges.warnings,
            # Swaps: one per merge (each pass's runs, then the last merge).
            "steps": {"merge_swaps": merges.swaps, "pass_runs": merges.runs},
        }

    work.info = {  # type: ignore[attr-defined]
        "tenants_file": tenants.__file__,
        "memory_budget_mib": budget / MiB,
        "first_merge_shape": {
            "fan_in": shape.fan_in,
            "batch_bytes": shape.batch_bytes,
            "buffer_bytes": shape.buffer_bytes,
        },
    }
    return work


def _s3_client(args: dict[str, Any]) -> Any:
    import boto3

    s3 = args["s3"]
    return boto3.client(
        "s3",
        endpoint_url=s3["endpoint_url"],
        region_name=s3["region"],
        aws_access_key_id=s3["access_key_id"],
        aws_secret_access_key=s3["secret_access_key"],
    )


def _get_to_file(client: Any, args: dict[str, Any], key: str, path: Path) -> None:
    """One streamed GET of the warehouse object ``key`` into ``path``."""
    body = client.get_object(Bucket=args["bucket"], Key=f"{args['prefix']}/{key}")["Body"]
    with open(path, "wb") as out:
        for block in body.iter_chunks(DOWNLOAD_CHUNK):
            out.write(block)


class _RollingWriter:
    """Row groups of ``ROW_GROUP_ROWS`` rows (zstd) into outputs of about
    ``TARGET_BYTES`` each, as local files or S3 multipart uploads."""

    def __init__(self, args: dict[str, Any], name: str, fs: Any) -> None:
        self.args, self.name, self.fs = args, name, fs
        self.sink: Any = None
        self.writer: pq.ParquetWriter | None = None
        self.pending: list[pa.RecordBatch] = []
        self.pending_rows = 0
        self.rows = self.bytes = self.outputs = 0

    def _open(self, schema: pa.Schema) -> None:
        key = f"{BASELINE_PREFIX}/{self.name}-{self.outputs:05d}.parquet"
        if self.fs is not None:
            self.sink = self.fs.open_output_stream(_s3_path(self.args, key))
        else:
            path = Path(_local(self.args, key))
            path.parent.mkdir(parents=True, exist_ok=True)
            self.sink = pa.OSFile(str(path), "wb")
        self.writer = pq.ParquetWriter(self.sink, schema, compression="zstd")
        self.outputs += 1

    def _close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.bytes += self.sink.tell()
            self.sink.close()
            self.writer = self.sink = None

    def _flush(self, final: bool) -> None:
        table = pa.Table.from_batches(self.pending)
        whole = table.num_rows if final else table.num_rows // ROW_GROUP_ROWS * ROW_GROUP_ROWS
        for start in range(0, whole, ROW_GROUP_ROWS):
            group = table.slice(start, min(ROW_GROUP_ROWS, whole - start))
            if self.writer is None:
                self._open(table.schema)
            assert self.writer is not None
            self.writer.write_table(group, row_group_size=ROW_GROUP_ROWS)
            self.rows += group.num_rows
            if self.sink.tell() >= TARGET_BYTES:
                self._close()
        rest = table.slice(whole)
        self.pending = rest.to_batches() if rest.num_rows else []
        self.pending_rows = rest.num_rows

    def write(self, batch: pa.RecordBatch) -> None:
        self.pending.append(batch)
        self.pending_rows += batch.num_rows
        if self.pending_rows >= ROW_GROUP_ROWS:
            self._flush(final=False)

    def close(self) -> None:
        if self.pending_rows:
            self._flush(final=True)
        self._close()


def child_compact_bare(args: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    """Every live object's row groups, read and written again: no merge, no sort."""
    moto = args["backend"] == "moto"
    fs = _s3fs(args) if moto else None
    client = _s3_client(args) if moto else None
    spool = Path(args["tmpdir"]) / f"download-{os.getpid()}.parquet"
    steps: dict[str, float] = {}

    def work() -> dict[str, Any]:
        writers: dict[str, _RollingWriter] = {}
        download = 0.0
        for record in args["records"]:
            if client is not None:
                started = time.perf_counter()
                _get_to_file(client, args, record["key"], spool)
                download += time.perf_counter() - started
                source = str(spool)
            else:
                source = _local(args, record["key"])
            writer = writers.setdefault(
                record["kind"], _RollingWriter(args, f"bare-{record['kind']}", fs)
            )
            parquet = pq.ParquetFile(source)
            add_ts = TS not in parquet.schema_arrow.names  # a commit object: rows inherit its ts
            for batch in parquet.iter_batches(batch_size=READ_BATCH_ROWS):
                if add_ts:
                    ts = pa.repeat(pa.scalar(record["min_ts"], pa.int64()), batch.num_rows)
                    batch = batch.append_column(pa.field(TS, pa.int64(), False), ts)
                writer.write(batch)
            parquet.close()
        for writer in writers.values():
            writer.close()
        spool.unlink(missing_ok=True)
        if client is not None:
            steps["download_s"] = download
        return {
            "rows_kept": sum(w.rows for w in writers.values()),
            "outputs": sum(w.outputs for w in writers.values()),
            "output_bytes_written": sum(w.bytes for w in writers.values()),
            "steps": steps,
        }

    return work


def child_compact_polars(args: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    """polars' merge sort of the data objects: concat, sort by (id, __ts), sink.
    No MVCC: every version is kept (and tombstone objects are not read)."""
    import polars as pl

    data = [r for r in args["records"] if r["kind"] == "data"]
    out = Path(_local(args, f"{BASELINE_PREFIX}/polars.parquet"))

    def work() -> dict[str, Any]:
        out.parent.mkdir(parents=True, exist_ok=True)
        frames = [
            pl.scan_parquet(_local(args, r["key"])).with_columns(
                pl.lit(r["min_ts"], dtype=pl.Int64).alias(TS)
            )
            for r in data
        ]
        pl.concat(frames).sort(["id", TS]).sink_parquet(
            str(out), compression="zstd", row_group_size=ROW_GROUP_ROWS
        )
        return {"rows_kept": sum(r["rows"] for r in data), "outputs": 1}

    work.info = {"polars": pl.__version__, "threads": pl.thread_pool_size()}  # type: ignore[attr-defined]
    return work


def _live_objects(catalog_uri: str, uri: str, settings: Any) -> list[tuple[str, int]]:
    """(key, bytes) of the table's live objects, from the catalog."""
    from tenants.store import TableStore

    store = TableStore.open(catalog_uri, uri, s3=settings)
    try:
        return [(r.key, r.bytes) for _, r in store.objects_of(COMPACT_TENANT)]
    finally:
        store.close()


def compaction_variants(ctx: Context, backend: str, size: int) -> tuple[list[str], dict[str, str]]:
    chosen = [v for v in ctx.args.variants or COMPACTION_VARIANTS if v in COMPACTION_VARIANTS]
    run, skipped = [], {}
    polars_ok, polars_why = _polars_available()
    for name in chosen:
        if name == "polars" and backend != "file":
            skipped[name] = (
                "file:// only: on moto its one output object would be assembled in memory by "
                "moto's multipart completion, and its reads would be ranged GETs moto answers "
                "by reading whole objects"
            )
            continue
        if name == "polars" and not polars_ok:
            skipped[name] = polars_why
            continue
        run.append(name)
    return run, skipped


COMPACTION_MEMORY = {"rewind": None, "rewind_512m": 512 * MiB}
CHILD_WORK |= {
    "compaction.rewind": child_compact_rewind,
    "compaction.bare_copy": child_compact_bare,
    "compaction.polars": child_compact_polars,
}


def case_compaction(ctx: Context, backend: str, size: int) -> dict[str, Any]:
    """Build a table of many overlapping commits, fully compact it with each variant."""
    from tenants.objectstore import open_object_store
    from tenants.store import TableStore

    console, args = ctx.console, ctx.args
    variants, skipped = compaction_variants(ctx, backend, size)
    commit_bytes = int(
        args.commit_mb * MB if args.commit_mb else min(COMMIT_MB * MB, size / QUICK_COMMITS)
    )
    with ExitStack() as stack:
        wh = stack.enter_context(open_warehouse(backend, ctx.workdir))
        settings = _s3_settings(wh.child_args())
        catalog_dir = ctx.workdir / f"catalog-{backend}-{size}"
        catalog_dir.mkdir()
        stack.callback(shutil.rmtree, catalog_dir, True)
        catalog = catalog_dir / "catalog.db"
        pristine = catalog_dir / "pristine.db"
        catalog_uri = f"sqlite:///{catalog}"
        console.print(
            f"  {backend} {size / MB:g} MB: generating commits of ~{commit_bytes / MB:g} MB ..."
        )
        store = TableStore.open(catalog_uri, wh.uri, s3=settings)
        try:
            meta = generate_table(store, size, commit_bytes, args.seed, console)
        finally:
            store.close()
        _sqlite_copy(catalog, pristine)
        objects = open_object_store(wh.uri, settings)
        before = {info.key for info in objects.list("")}
        console.print(
            f"  {meta['bytes'] / MB:,.1f} MB in {meta['objects']} objects ({meta['commits']} "
            f"commits, {meta['delete_commits']} of deletes), {meta['rows']:,} rows "
            f"({meta['bytes_per_row']:.1f} B/row); full compaction keeps "
            f"{meta['expected_kept_rows']:,} of {meta['data_rows']:,} versions; generated in "
            f"{meta['generate_s']:.0f} s"
        )
        child_args = {
            **wh.child_args(),
            "catalog_uri": catalog_uri,
            "records": meta["records"],
            "tmpdir": str(ctx.workdir),
        }
        reps = args.compaction_reps or args.reps
        runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
        unverified: dict[str, list[dict[str, Any]]] = {}  # runs whose check failed
        failed: dict[str, str] = {}
        for rep in range(reps):
            for name in variants:
                if name in failed:
                    continue
                what = "rewind" if name in COMPACTION_MEMORY else name
                try:
                    _sqlite_copy(pristine, catalog)  # every run compacts the same table
                    result = ctx.run_child(
                        f"compaction.{what}",
                        {**child_args, "memory": COMPACTION_MEMORY.get(name)},
                        f"{name}-{backend}",
                    )
                    new = [i for i in objects.list("") if i.key not in before]
                    # Merge passes leave the runs they wrote behind (GC removes
                    # them): the outputs are the table's live objects now.
                    if name in COMPACTION_MEMORY:
                        outputs = _live_objects(catalog_uri, wh.uri, settings)
                    else:
                        outputs = [(i.key, i.size) for i in new]
                    result["output_bytes"] = sum(size for _, size in outputs)
                    result["output_objects"] = len(outputs)
                    result["written_bytes"] = sum(i.size for i in new)
                    result["written_objects"] = len(new)
                    result["output_rows"] = result["rows_kept"]
                    if wh.root is not None:  # moto: footers would be ranged GETs of whole objects
                        footer_rows = sum(
                            pq.read_metadata(wh.root / key).num_rows for key, _ in outputs
                        )
                        if footer_rows != result["rows_kept"]:
                            unverified.setdefault(name, []).append(result)
                            raise ChildFailed(
                                f"reported {result['rows_kept']:,} rows, its outputs hold "
                                f"{footer_rows:,}"
                            )
                    expected = {
                        "bare_copy": meta["rows"],
                        "polars": meta["data_rows"],
                    }.get(name, meta["expected_kept_rows"])
                    if result["rows_kept"] != expected:
                        unverified.setdefault(name, []).append(result)
                        raise ChildFailed(
                            f"kept {result['rows_kept']:,} rows, expected {expected:,}"
                        )
                except (ChildFailed, OSError, pa.ArrowException) as e:
                    failed[name] = str(e)
                    console.print(f"    {name} rep {rep}: [red]failed[/]: {e}")
                    continue
                finally:
                    leftovers = [i.key for i in objects.list("") if i.key not in before]
                    objects.delete_many(leftovers)
                    wh.delete_prefix(BASELINE_PREFIX)
                runs[name].append(result)
                console.print(
                    f"    {name} rep {rep}: {result['seconds']:.1f} s, peak "
                    f"{result['peak_rss_bytes'] / MiB:,.0f} MiB (baseline "
                    f"{result['baseline_rss_bytes'] / MiB:,.0f}), {result['output_objects']} "
                    f"outputs, {result['output_bytes'] / MB:,.0f} MB ({result['written_bytes'] / MB:,.0f} "
                    f"MB written), {result.get('steps') or ''} process {result['process_s']:.1f} s"
                )
    meta.pop("records")
    figures = {name: _aggregate(r, meta["bytes"]) for name, r in runs.items() if r}
    return {
        "backend": backend,
        "size_mb": size / MB,
        "input_bytes": meta["bytes"],
        "table": meta,
        "variants": figures,
        "failed": failed,
        "unverified_runs": unverified,
        "skipped": skipped,
        "ratios": _ratios(figures, COMPACTION_RATIOS),
    }


CaseFn = Callable[[Context, str, int], dict[str, Any]]
CHILD_WORK |= memory_load_query.CHILD_WORK
CASES: dict[str, CaseFn] = {
    "rewrite": case_rewrite,
    "compaction": case_compaction,
    "load": memory_load_query.case_load,
    "query": memory_load_query.case_query,
}
# Default object / table MB (10^6): (full run, --quick); and disk needed per input byte.
# query: millions of rows, not MB.
CASE_SIZES_MB: dict[str, tuple[float, float]] = {
    "rewrite": (2000.0, 100.0),
    "compaction": (10000.0, 300.0),
    "load": (5000.0, 200.0),
    "query": (100.0, 2.0),
}
CASE_DISK_FACTOR = {"rewrite": DISK_FACTOR, "compaction": 3.2, "load": 2.0, "query": 0.0}
REFERENCE = {
    "rewrite": "bare_stream",
    "compaction": "bare_copy",
    "load": "bare_csv",
    "query": "bare_first_rows",
}


# report -------------------------------------------------------------------------------------


def print_report(payload: dict[str, Any], console: Any) -> None:
    from rich.table import Table

    for case_name, case in payload["cases"].items():
        ref_name = REFERENCE.get(case_name, "bare_stream")
        reps = payload.get("case_reps", {}).get(case_name, payload["reps"])
        t = Table(title=f"{case_name}: best of {reps} (MB/s = input MB ÷ s; RSS MiB)")
        for c in (
            "warehouse", "input MB", "variant", "s", "MB/s", "peak RSS", "growth", "baseline",
            "out MB", "rows kept", f"÷ {ref_name} s", f"÷ {ref_name} peak", "steps",
        ):  # fmt: skip
            t.add_column(c, justify="right")
        for result in case["results"]:
            figures = result["variants"]
            ref = figures.get(ref_name)
            for name, f in figures.items():
                steps = ", ".join(
                    f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}"
                    for k, v in f["steps"].items()
                )
                t.add_row(
                    result["backend"],
                    f"{result['input_bytes'] / MB:,.0f}",
                    name,
                    f"{f['seconds']:.2f}",
                    f"{f['mb_per_s']:.1f}",
                    f"{f['peak_rss_mib']:,.0f}",
                    f"{f['growth_mib']:,.0f}",
                    f"{f['baseline_rss_mib']:,.0f}",
                    f"{f['output_bytes'] / MB:,.0f}",
                    f"{f['output_rows']:,}",
                    f"{f['seconds'] / ref['seconds']:.2f}x" if ref else "—",
                    f"{f['peak_rss_mib'] / ref['peak_rss_mib']:.2f}x" if ref else "—",
                    steps,
                )
        console.print(t)
        for result in case["results"]:
            where = f"  {result['backend']} {result['size_mb']:g} MB"
            for name, why in result["failed"].items():
                console.print(f"{where} {name} FAILED: {why}")
            for name, why in result["skipped"].items():
                console.print(f"{where} {name} skipped: {why}")
            line = "; ".join(
                f"{k} {v['seconds']:.2f}x time, {v['peak_rss']:.2f}x peak"
                for k, v in result["ratios"].items()
            )
            console.print(f"{where}: {line}")
            if "content_hashes_agree" in result:
                console.print(f"{where}: content hashes agree: {result['content_hashes_agree']}")
        for skip in case["skipped"]:
            console.print(f"  skipped {skip['backend']} {skip['size_mb']:g} MB: {skip['reason']}")


# main ---------------------------------------------------------------------------------------


def _uncommitted() -> list[str] | None:
    """``git status --porcelain`` lines of the tree the children import (None: no git)."""
    try:
        out = subprocess.run(
            ["git", "status", "--porcelain"], capture_output=True, text=True, timeout=30,
            cwd=ROOT, check=True,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.splitlines()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_memory",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true",
                        help="small inputs (rewrite 100 MB, compaction 300 MB), one run each")  # fmt: skip
    parser.add_argument("--sizes", nargs="+", type=float,
                        help="input MB (10^6) for every case, e.g. 500 2000 (default: rewrite "
                        "2000, compaction 10000; quick 100 and 300)")  # fmt: skip
    parser.add_argument("--moto-max-mb", type=float,
                        help="run sizes above this on moto at this size instead")  # fmt: skip
    parser.add_argument("--backends", default="file,moto", help="comma-separated: file,moto")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated: {list(CASES)}")
    parser.add_argument("--variants", help="comma-separated subset (default: all)")
    parser.add_argument("--reps", type=int, help="runs per variant, best kept (2; quick 1)")
    parser.add_argument("--compaction-reps", type=int,
                        help="runs per compaction variant (default 1: each is minutes long)")  # fmt: skip
    parser.add_argument("--commit-mb", type=float,
                        help=f"compaction: MB per upsert commit (default {COMMIT_MB:g}, or "
                        f"size / {QUICK_COMMITS} when smaller)")  # fmt: skip
    parser.add_argument("--rss-limit-mib", type=float, default=14 * 1024.0,
                        help="kill a child whose RSS passes this (a run that would exhaust RAM)")  # fmt: skip
    parser.add_argument("--profile", metavar="DIR",
                        help="cProfile each child's work into DIR/<case>.<variant>-<backend>.prof")  # fmt: skip
    parser.add_argument("--ranged-max-mb", type=float, default=256.0,
                        help="largest object for the moto ranged-GET variants")  # fmt: skip
    parser.add_argument("--child-timeout", type=float, default=1800.0, help="seconds per run")
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--name", help="result file name (default bench_memory[_quick|_custom])")
    parser.add_argument("--child", nargs=2, metavar=("WHAT", "JSON"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.variants = args.variants.split(",") if args.variants else None
    if args.reps is None:
        args.reps = 1 if args.quick else 2
    if args.compaction_reps is None:
        args.compaction_reps = 1
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.child:
        child_main(*args.child)
        return {}
    from rich.console import Console

    from benchmarks.common import RESULTS_DIR, finish_run, load_average
    from benchmarks.plots import draw_beside

    console = Console() if sys.stdout.isatty() else Console(width=200)
    backends = [b for b in args.backends.split(",") if b]
    cases = [c for c in args.cases.split(",") if c]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        raise SystemExit(f"unknown case(s) {unknown}; known: {list(CASES)}")

    def sizes_of(case: str) -> list[int]:
        if args.sizes:
            return [int(size * MB) for size in args.sizes]
        return [int(CASE_SIZES_MB[case][1 if args.quick else 0] * MB)]

    name = args.name or (
        f"{NAME}_custom" if args.sizes else f"{NAME}_quick" if args.quick else NAME
    )
    workdir = Path(tempfile.mkdtemp(prefix="rewind-bench-memory-"))
    free = shutil.disk_usage(workdir).free
    load_start = load_average()
    started = time.perf_counter()
    console.print(
        f"[bold]{NAME}[/]: cases {cases}, sizes "
        f"{ {c: [s / MB for s in sizes_of(c)] for c in cases} } MB, backends {backends}, reps "
        f"{args.reps} (compaction {args.compaction_reps}); {free / 1e9:.0f} GB free; load "
        f"average {load_start}"
    )
    payload: dict[str, Any] = {
        "quick": bool(args.quick),
        "load_average_at_start": load_start,
        "sizes_mb": {c: [s / MB for s in sizes_of(c)] for c in cases},
        "moto_max_mb": args.moto_max_mb,
        "backends": backends,
        "reps": args.reps,
        "case_reps": {"compaction": args.compaction_reps},
        "child_python": sys.executable,
        "code_root": str(ROOT),
        # git_commit (machine info) says nothing of uncommitted edits: list them.
        "uncommitted_changes": _uncommitted(),
        "cases": {},
    }
    try:
        for case_name in cases:
            results, skipped = [], []
            for size in sizes_of(case_name):
                for backend in backends:
                    run_size = size
                    if backend == "moto" and args.moto_max_mb and size > args.moto_max_mb * MB:
                        run_size = int(args.moto_max_mb * MB)
                    need = run_size * CASE_DISK_FACTOR[case_name]
                    free = shutil.disk_usage(workdir).free
                    if need > free:
                        reason = (
                            f"needs about {need / 1e9:.1f} GB of disk (input, outputs, moto's "
                            f"spool, downloads), {free / 1e9:.1f} GB free"
                        )
                        console.print(
                            f"[yellow]{case_name} {backend} {run_size / MB:g} MB skipped[/]: "
                            f"{reason}"
                        )
                        skipped.append(
                            {"backend": backend, "size_mb": run_size / MB, "reason": reason}
                        )
                        continue
                    console.print(f"[bold]{case_name}[/] on {backend}, {run_size / MB:g} MB")
                    case_started = time.perf_counter()
                    result = CASES[case_name](Context(args, workdir, console), backend, run_size)
                    result["case_seconds"] = time.perf_counter() - case_started
                    if run_size != size:
                        result["size_note"] = (
                            f"run at {run_size / MB:g} MB instead of {size / MB:g} MB "
                            "(--moto-max-mb)"
                        )
                    results.append(result)
            payload["cases"][case_name] = {"results": results, "skipped": skipped}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result = finish_run(
        payload,
        name=name,
        started=started,
        console=console,
        report=lambda p: print_report(p, console),
    )
    draw_beside(RESULTS_DIR / f"{name}.json", say=console.print)
    return result


if __name__ == "__main__":
    main()
