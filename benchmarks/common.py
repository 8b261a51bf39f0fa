"""Shared benchmark plumbing: timing, stores to measure, data, JSON results.

Every benchmark opens its stores through :func:`open_store`, so a case runs on
a fresh moto bucket (a real HTTP S3 endpoint on 127.0.0.1, started once per
process) or a fresh ``file://`` warehouse, each with its own SQLite catalog
in a temporary directory. One Spark session serves the whole process
(:func:`spark_session` records how long starting it took).
"""

from __future__ import annotations

import atexit
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tenants.objectstore.embedded import EmbeddedS3, start_embedded_s3
from tenants.schema import TableSchema
from tenants.store import TableStore

Backend = Literal["moto", "file"]
BACKENDS: tuple[Backend, ...] = ("moto", "file")
CatalogBackend = Literal["sqlite", "postgresql"]
CATALOG_BACKENDS: tuple[CatalogBackend, ...] = ("sqlite", "postgresql")
PG_ADMIN = os.environ.get("REWIND_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = Path(__file__).resolve().parent / "results"
MB = 1_000_000

T = TypeVar("T")


# timing -------------------------------------------------------------------


@dataclass
class Timing:
    """Wall-clock seconds of a first call and of the warm calls after it."""

    first_s: float
    warm_s: list[float] = field(default_factory=list)

    @property
    def steady_s(self) -> float:
        """Best warm run (the first run when there are none).

        The minimum, as ``timeit`` advises: on a shared machine the other runs
        measure the neighbours as much as the code.
        """
        return min(self.warm_s) if self.warm_s else self.first_s

    @property
    def median_s(self) -> float:
        return statistics.median(self.warm_s) if self.warm_s else self.first_s

    def to_json(self) -> dict[str, Any]:
        return {
            "first_s": self.first_s,
            "warm_s": self.warm_s,
            "steady_s": self.steady_s,
            "median_s": self.median_s,
        }


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    """Run ``fn`` once: (its result, elapsed wall-clock seconds)."""
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def repeat(fn: Callable[[], T], warm: int) -> tuple[T, Timing]:
    """Run ``fn`` once cold and ``warm`` more times; the last result and the timing."""
    result, first = timed(fn)
    warm_s = []
    for _ in range(warm):
        result, seconds = timed(fn)
        warm_s.append(seconds)
    return result, Timing(first, warm_s)


def rate(amount: float, seconds: float) -> float:
    return amount / seconds if seconds > 0 else float("inf")


# stores ------------------------------------------------------------------

_moto: EmbeddedS3 | None = None


def moto_server() -> EmbeddedS3:
    """The process's moto S3 server, started on first use; AWS env points at it."""
    global _moto
    if _moto is None:
        _moto = start_embedded_s3()
        _moto.export_env()
        atexit.register(_moto.stop)
    return _moto


@contextmanager
def open_store(backend: Backend, catalog: CatalogBackend = "sqlite") -> Iterator[TableStore]:
    """A TableStore on a fresh warehouse (moto bucket or temp dir) and a fresh catalog.

    ``catalog`` is a SQLite file in the temp dir or a fresh schema of this
    run's PostgreSQL database (:func:`new_catalog_uri`). On exit the catalog is
    closed, the temp dir removed and, for moto, the bucket's objects deleted
    (moto keeps them in this process's memory).
    """
    workdir = Path(tempfile.mkdtemp(prefix="rewind-bench-"))
    catalog_uri = new_catalog_uri(catalog, workdir)
    if backend == "moto":
        server = moto_server()
        bucket = f"rewind-bench-{uuid.uuid4().hex[:12]}"
        server.create_bucket(bucket)
        store = TableStore.open(catalog_uri, f"s3://{bucket}/warehouse", s3=server.settings)
    elif backend == "file":
        store = TableStore.open(catalog_uri, f"file://{workdir / 'warehouse'}")
    else:
        raise ValueError(f"unknown backend {backend!r}; use one of {BACKENDS}")
    try:
        yield store
    finally:
        store.close()
        if backend == "moto":
            store.objects.delete_many(info.key for info in store.objects.list(""))
        shutil.rmtree(workdir, ignore_errors=True)


_pg_database: str | None = None


def new_catalog_uri(catalog: CatalogBackend, workdir: Path) -> str:
    """A fresh, empty catalog: a SQLite file in ``workdir``, or a new schema in this
    run's PostgreSQL database ``rewind_bench_<random>`` (C collation, created on
    first use at ``REWIND_BENCH_PG`` and dropped when the process exits)."""
    if catalog == "sqlite":
        return f"sqlite:///{workdir / f'catalog-{uuid.uuid4().hex[:8]}.db'}"
    if catalog != "postgresql":
        raise ValueError(f"unknown catalog backend {catalog!r}; use one of {CATALOG_BACKENDS}")
    import psycopg

    global _pg_database
    base = PG_ADMIN.rsplit("/", 1)[0]
    if _pg_database is None:
        name = f"rewind_bench_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(
                f"CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8' "
                "LC_COLLATE 'C' LC_CTYPE 'C'"
            )
        _pg_database = name

        def drop() -> None:
            with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
                admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

        atexit.register(drop)
    schema = f"c_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{base}/{_pg_database}", autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return f"{base}/{_pg_database}?options=-csearch_path%3D{schema}"


# Spark -----------------------------------------------------------------------

_spark_start_s: float | None = None


def spark_session() -> tuple[Any, float]:
    """The one Spark session of this process and how long creating it took.

    The start time is measured on the first call (JVM launch, session build)
    and remembered, so later benchmarks in the same run report the same figure.
    """
    global _spark_start_s
    from tenants.spark.session import get_spark

    # Spark's Python workers take S3 credentials from the environment the JVM
    # starts with (docs/cluster.md): the moto server exports them first, or a
    # benchmark that starts Spark before its first store reads nothing
    # (bench_logical's executors met ACCESS_DENIED).
    moto_server()
    session, seconds = timed(get_spark)
    if _spark_start_s is None:
        _spark_start_s = seconds
    return session, _spark_start_s


# data ----------------------------------------------------------------------

CATEGORIES = pa.array([f"category-{i:02d}" for i in range(16)])
EPOCH_2024_US = 1_704_067_200_000_000
YEAR_US = 365 * 24 * 3600 * 1_000_000

EVENTS_SCHEMA = TableSchema.of(
    [
        ("id", "int64"),
        ("name", "string"),
        ("category", "string"),
        ("amount", "double"),
        ("score", "float"),
        ("created_at", "timestamp[us, tz=UTC]"),
    ],
    ["id"],
)


def make_rows(keys: np.ndarray, rng: np.random.Generator, version: int = 0) -> pa.Table:
    """Rows of :data:`EVENTS_SCHEMA` for ``keys``: six columns, ~45 raw bytes a row.

    ``version`` goes into ``name`` so an update visibly changes a row.
    """
    n = len(keys)
    key_array = pa.array(keys, pa.int64())
    name = pc.binary_join_element_wise("user-", pc.cast(key_array, pa.string()), f"-v{version}", "")
    category = CATEGORIES.take(pa.array(rng.integers(0, len(CATEGORIES), n)))
    amount = pa.array(np.round(rng.normal(100.0, 40.0, n), 2), pa.float64())
    score = pa.array(rng.random(n, dtype=np.float32), pa.float32())
    created = pa.array(EPOCH_2024_US + rng.integers(0, YEAR_US, n), pa.int64()).cast(
        pa.timestamp("us", tz="UTC")
    )
    return pa.table(
        [key_array, name, category, amount, score, created],
        names=["id", "name", "category", "amount", "score", "created_at"],
    )


def key_table(keys: np.ndarray) -> pa.Table:
    """A delete batch: just the primary key column."""
    return pa.table({"id": pa.array(keys, pa.int64())})


def split(keys: np.ndarray, parts: int) -> list[np.ndarray]:
    return [p for p in np.array_split(keys, parts) if len(p)]


# results -------------------------------------------------------------------


def _version(module: str) -> str | None:
    try:
        return str(__import__(module).__version__)
    except Exception:
        return None


def _java_version() -> str | None:
    try:
        out = subprocess.run(
            ["java", "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = (out.stderr or out.stdout).splitlines()
    return lines[0].strip() if lines else None


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
            cwd=Path(__file__).resolve().parent,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def machine_info() -> dict[str, Any]:
    """What the figures depend on: cores, platform and library versions."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": sys.version.split()[0],
        "pyarrow": _version("pyarrow"),
        "pyspark": _version("pyspark"),
        "moto": _version("moto"),
        "numpy": _version("numpy"),
        "java": _java_version(),
        "git_commit": _git_commit(),
        # Other processes on the machine skew the figures; the load shows when.
        "load_average_1_5_15": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def write_result(name: str, payload: dict[str, Any]) -> Path:
    """Write ``benchmarks/results/<name>.json`` with machine info and a UTC timestamp."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    document = {
        "benchmark": name,
        "timestamp": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        **payload,
    }
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(portable(document), indent=2, default=str) + "\n")
    return path


def portable(value: Any) -> Any:
    """``value`` with every path on this machine made relative to the code tree
    measured (``tenants/__init__.py``, ``.venv/bin/python``), or named as a
    temporary path: committed results name no developer's machine."""
    if isinstance(value, dict):
        return {k: portable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [portable(v) for v in value]
    if isinstance(value, Path):
        value = str(value)
    if not isinstance(value, str) or not value.startswith("/"):
        return value
    path = Path(value)
    for root in (ROOT, Path(sys.prefix).parent):
        if path == root:
            return "."
        if path.is_relative_to(root):
            return str(path.relative_to(root))
    return "(a path outside the code tree)"


def fmt_rate(value: float, unit: str = "") -> str:
    """Human figure: 1.23M, 340k, 2.2k, 12."""
    if value >= 1e6:
        return f"{value / 1e6:.2f}M{unit}"
    if value >= 1e5:
        return f"{value / 1e3:.0f}k{unit}"
    if value >= 1e3:
        return f"{value / 1e3:.1f}k{unit}"
    return f"{value:.0f}{unit}"


def parse_sizes(values: Sequence[str]) -> list[int]:
    """``["1e5", "100000"]`` → ``[100000, 100000]``."""
    return [int(float(v)) for v in values]


def load_average() -> list[float] | None:
    """The 1/5/15-minute load averages: how busy the neighbours were."""
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def finish_run(
    payload: dict[str, Any],
    *,
    name: str,
    started: float,
    console: Any,
    report: Callable[[dict[str, Any]], None],
) -> dict[str, Any]:
    """Time and CPU totals, the printed report, the JSON file and the closing line."""
    payload["total_seconds"] = time.perf_counter() - started
    # Far below total_seconds when neighbours hold the CPUs (Spark's JVM not counted).
    payload["driver_cpu_seconds"] = time.process_time()
    report(payload)
    payload["load_average_at_end"] = load_average()
    path = write_result(name, payload)
    console.print(
        f"total {payload['total_seconds']:.0f} s (driver CPU "
        f"{payload['driver_cpu_seconds']:.0f} s); load average at start "
        f"{payload.get('load_average_at_start')}, at end {payload['load_average_at_end']}; wrote {path}"
    )
    return payload
