"""Shared fixtures: one moto S3 server and one local Spark session per run.

Every storage test gets a fresh bucket on the real moto HTTP server and a real
SQLite catalog file under ``tmp_path``, so tests can run in parallel without
seeing each other. PostgreSQL catalogs live in one throwaway database per run
(``pg_catalog_uri``), one fresh schema per catalog (``new_pg_catalog_uri``).
"""

from __future__ import annotations

import os

# Before any tenants module is imported: tiny row groups and batches, so every
# object of the tests spans several and every streaming path crosses their
# boundaries; and every streamed write checks its rows' order. Subprocesses
# (CLI runs, Spark workers) inherit them.
os.environ.setdefault("REWIND_ROW_GROUP_ROWS", "40")
os.environ.setdefault("REWIND_BATCH_ROWS", "16")
os.environ.setdefault("REWIND_CHECK_ORDER", "1")
# The CLI lowers its process's priority for an instant restore's background rewrite
# (engine.cli.background); in-process CLI tests would lower the test workers'.
os.environ.setdefault("REWIND_BACKGROUND_NICE", "0")
# Human output is laid out for a pipe (100 columns) unless COLUMNS says
# otherwise; pytest-xdist sets COLUMNS=80 in its workers, which would make the
# same test see other line breaks there. A test that wants a width sets it.
os.environ.pop("COLUMNS", None)
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tenants.catalog.base import wall_clock_us
from tenants.objectstore import ObjectStore, open_object_store
from tenants.objectstore.embedded import EmbeddedS3, start_embedded_s3
from tenants.store import TableStore

# new_catalog_uri is function-scoped but a factory: each example calls it for a
# fresh catalog, so sharing the fixture across a @given test's examples is safe.
HEALTH_CHECKS_OFF = [
    HealthCheck.too_slow,
    HealthCheck.data_too_large,
    HealthCheck.function_scoped_fixture,
]
settings.register_profile(
    "ci",
    max_examples=12,
    deadline=None,
    suppress_health_check=HEALTH_CHECKS_OFF,
    print_blob=True,
)
settings.register_profile(
    "deep",
    max_examples=200,
    deadline=None,
    suppress_health_check=HEALTH_CHECKS_OFF,
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def s3_server() -> Iterator[EmbeddedS3]:
    server = start_embedded_s3()
    server.export_env()
    yield server
    server.stop()


PG_ADMIN = os.environ.get("REWIND_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
BACKENDS = ("sqlite", "postgresql")


@pytest.fixture(scope="session")
def pg_catalog_uri() -> Iterator[str]:
    """A throwaway database ``rewind_test_<random>`` on the test server, dropped at the end.

    A server that does not answer fails the run (``.ci/run`` starts one): a
    PostgreSQL test skipped in silence would hide a broken backend.
    """
    import psycopg

    name = f"rewind_test_{uuid.uuid4().hex[:12]}"
    try:
        admin = psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as e:
        pytest.fail(f"PostgreSQL at {PG_ADMIN} does not answer ({e}); start it (.ci/run does)")
    with admin:
        # C collation: text sorts by bytes, as on SQLite (tenant and table lists).
        admin.execute(
            f"CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'"
        )
    yield PG_ADMIN.rsplit("/", 1)[0] + f"/{name}"  # the admin URI, naming the new database
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="session")
def new_pg_catalog_uri(pg_catalog_uri: str) -> Callable[[], str]:
    """Make a fresh, empty PostgreSQL catalog (a new schema in the run's database).

    Session-scoped, as the maker holds nothing of a test: a module's fixture
    (the CLI fuzz's world) makes its catalog with it too."""
    import psycopg

    def make() -> str:
        schema = f"c_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(pg_catalog_uri, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        return f"{pg_catalog_uri}?options=-csearch_path%3D{schema}"

    return make


def chosen_backends() -> tuple[str, ...]:
    """The catalog backends this run covers: both unless ``REWIND_TEST_BACKENDS``
    names fewer (``sqlite`` for a quick local loop; CI runs both)."""
    chosen = os.environ.get("REWIND_TEST_BACKENDS", ",".join(BACKENDS))
    names = tuple(n.strip() for n in chosen.split(",") if n.strip())
    unknown = sorted(set(names) - set(BACKENDS))
    if unknown or not names:
        raise pytest.UsageError(
            f"REWIND_TEST_BACKENDS={chosen!r}: give a comma-separated subset of {BACKENDS}"
        )
    return names


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run the tests of a module marked ``one_catalog`` on SQLite alone.

    Such a module's subject is not the catalog: how the CLI words its output
    and refuses bad input, how an export is laid out. The catalog calls it
    makes are the same on both backends, and the catalog, model and fault
    tests prove them on both; running it twice would only double its time.
    ``make test-deep`` (``HYPOTHESIS_PROFILE=deep``) and an explicit
    ``REWIND_TEST_BACKENDS`` run every test on every backend they name.
    """
    if os.environ.get("HYPOTHESIS_PROFILE") == "deep" or "REWIND_TEST_BACKENDS" in os.environ:
        return
    if "new_catalog_uri" not in metafunc.fixturenames:
        return
    if metafunc.definition.get_closest_marker("one_catalog") is None:
        return
    pinned = any(
        "new_catalog_uri" in mark.args[0]
        for mark in metafunc.definition.iter_markers("parametrize")
    )
    if not pinned:  # as a mark, which pytest's own hooks (run after this one) honour
        metafunc.definition.add_marker(
            pytest.mark.parametrize("new_catalog_uri", ["sqlite"], indirect=True)
        )


@pytest.fixture(params=chosen_backends())
def new_catalog_uri(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], str]:
    """Make a fresh catalog URI on each backend in turn (the test runs once per backend).

    Every fixture that opens a catalog (``default_catalog_uri``, so ``store``,
    ``uris`` and ``rewind``) depends on this one, so every test that touches a
    catalog runs on both backends. A test about one backend (SQLite's file
    lock, its query plans) pins it with
    ``@pytest.mark.parametrize("new_catalog_uri", ["sqlite"], indirect=True)``.
    """
    if request.param == "postgresql":
        make_pg: Callable[[], str] = request.getfixturevalue("new_pg_catalog_uri")
        return make_pg
    counter = iter(range(1_000_000))
    return lambda: f"sqlite:///{tmp_path / f'catalog{next(counter)}.db'}"


@pytest.fixture
def bucket(s3_server: EmbeddedS3) -> str:
    name = f"rewind-test-{uuid.uuid4().hex[:12]}"
    s3_server.create_bucket(name)
    return name


class ManualClock:
    """A controllable clock in µs; follows the wall clock unless set."""

    def __init__(self) -> None:
        self.fixed: int | None = None

    def __call__(self) -> int:
        return self.fixed if self.fixed is not None else wall_clock_us()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def default_catalog_uri(new_catalog_uri: Callable[[], str]) -> str:
    """One fresh catalog on the test's backend (the ``store`` and ``uris`` fixtures')."""
    return new_catalog_uri()


@pytest.fixture
def store(
    s3_server: EmbeddedS3, bucket: str, default_catalog_uri: str, clock: ManualClock
) -> Iterator[TableStore]:
    """A TableStore on a fresh moto bucket and a fresh catalog of the test's backend."""
    table_store = TableStore.open(
        default_catalog_uri,
        f"s3://{bucket}/warehouse",
        s3=s3_server.settings,
        clock=clock,
    )
    yield table_store
    table_store.close()


@pytest.fixture
def uris(default_catalog_uri: str, bucket: str) -> tuple[str, str]:
    """A fresh catalog (a SQLite file or a PostgreSQL schema) and warehouse, as the
    CLI's ``--catalog``/``--warehouse``."""
    return default_catalog_uri, f"s3://{bucket}/wh"


@pytest.fixture
def rewind(uris: tuple[str, str]) -> Callable[..., Any]:
    """Run ``rewind --catalog … --warehouse … ARGS`` in-process (typer's CliRunner)."""
    from typer.testing import CliRunner

    from engine.cli.app import app

    catalog, warehouse = uris
    runner = CliRunner()

    def run(*args: str | Path) -> Any:
        return runner.invoke(app, ["--catalog", catalog, "--warehouse", warehouse, *map(str, args)])

    return run


@pytest.fixture(scope="session")
def spark(s3_server: EmbeddedS3) -> Iterator[Any]:
    """The one local Spark session of this test run.

    It starts after the S3 server has exported its credentials: Spark's Python
    workers take them from the environment the JVM was started with, never
    from the pickled store (docs/cluster.md).
    """
    from tenants.spark.session import get_spark

    session = get_spark(master="local[2]", for_tests=True)
    yield session
    session.stop()


@pytest.fixture(params=["file", "s3"])
def object_store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    """A fresh object store: a ``file://`` directory, then a bucket on the moto server."""
    if request.param == "file":
        return open_object_store(f"file://{tmp_path / 'warehouse'}")
    s3: EmbeddedS3 = request.getfixturevalue("s3_server")
    bucket: str = request.getfixturevalue("bucket")
    return open_object_store(f"s3://{bucket}/warehouse", s3.settings)
