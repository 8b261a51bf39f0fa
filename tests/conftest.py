"""Shared fixtures: one moto S3 server and one local Spark session per run.

Every storage test gets a fresh bucket on the real moto HTTP server and a real
SQLite catalog file under ``tmp_path``, so tests can run in parallel without
seeing each other.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tenants.catalog.base import wall_clock_us
from tenants.embedded_s3 import EmbeddedS3, start_embedded_s3
from tenants.store import TableStore

settings.register_profile(
    "ci",
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile(
    "deep",
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def s3_server() -> Iterator[EmbeddedS3]:
    server = start_embedded_s3()
    server.export_env()
    yield server
    server.stop()


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
def store(
    s3_server: EmbeddedS3, bucket: str, tmp_path: Path, clock: ManualClock
) -> Iterator[TableStore]:
    """A TableStore on a fresh moto bucket and a fresh SQLite catalog file."""
    table_store = TableStore.open(
        f"sqlite:///{tmp_path / 'catalog.db'}",
        f"s3://{bucket}/warehouse",
        s3=s3_server.settings,
        clock=clock,
    )
    yield table_store
    table_store.close()


@pytest.fixture
def uris(bucket: str, tmp_path: Path) -> tuple[str, str]:
    """A fresh catalog file and warehouse, as the CLI's ``--catalog``/``--warehouse``."""
    return f"sqlite:///{tmp_path / 'c.db'}", f"s3://{bucket}/wh"


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
def spark() -> Iterator[Any]:
    """The one local Spark session of this test run."""
    from tenants.spark_session import get_spark

    session = get_spark(master="local[2]", for_tests=True)
    yield session
    session.stop()
