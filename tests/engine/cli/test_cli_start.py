"""A short command loads only what it uses, so ``rewind`` starts fast.

A cron job that ticks snapshots for thousands of tenants pays the CLI's start
once per tenant: ``rewind --version`` and ``rewind tenant list`` on a
``file://`` warehouse and a SQLite catalog import none of the heavy libraries
(pyarrow, numpy, pyspark, boto3, the PostgreSQL driver...), which the commands
that read or write data import when they run (benchmarks/bench_cli_start.py
measures the time). A command line imports the module of the command it runs
and no other command's (engine.cli.lazy_commands), ``--help`` none; one test
imports them all, to check that none imports a heavy library at its top.

Each test runs the real CLI in a subprocess (``python -X importtime -m
engine.cli.app``) and reads the modules it imported from the ``-X importtime``
lines on stderr.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tenants import __version__
from tests.helpers.paths import ROOT

HEAVY = frozenset(
    {
        "pyarrow",
        "numpy",
        "pyspark",
        "py4j",
        "boto3",
        "botocore",
        "duckdb",
        "polars",
        "pyiceberg",
        "moto",
        "psycopg",
    }
)
"""Libraries a short command must not import (a SQLite catalog needs no psycopg)."""


def _rewind(home: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``rewind ARGS`` in a fresh interpreter; its result and the top-level
    names of every module it imported."""
    done, modules = _python(home, "-m", "engine.cli.app", *args)
    return done, {m.split(".")[0] for m in modules}


def _python(home: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``python ARGS`` in a fresh interpreter; its result and the name of
    every module it imported."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "REWIND_"))}
    env |= {"PYTHONPATH": str(ROOT), "REWIND_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        cwd=home.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "engine" in imported, done.stderr[-2000:]  # the lines were read
    return done, imported


def _command_modules(modules: set[str]) -> set[str]:
    """The ``engine.cli.*_cmds`` modules among ``modules``, by their short names."""
    return {
        m.rsplit(".", 1)[1] for m in modules if m.startswith("engine.cli.") and m.endswith("_cmds")
    }


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A deployment with two tenants: a SQLite catalog and a ``file://`` warehouse."""
    home = tmp_path / "home"
    for name in ("acme", "globex"):
        done, _ = _rewind(home, "tenant", "create", name)
        assert done.returncode == 0, done.stderr[-2000:]
    return home


def test_version_imports_no_heavy_library(tmp_path: Path):
    """``python -m engine.cli.app --version`` answers as the console script does
    (engine.cli.entry), before typer loads."""
    done, imported = _rewind(tmp_path / "home", "--version")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == f"rewind {__version__}\n"
    assert not imported & HEAVY, sorted(imported & HEAVY)
    assert not imported & {"typer", "rich", "click"}
    assert not (tmp_path / "home").exists()  # nothing was opened, let alone created


def test_tenant_list_on_a_file_warehouse_imports_no_heavy_library(home: Path):
    done, imported = _rewind(home, "tenant", "list")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "acme@" in done.stdout and "globex@" in done.stdout
    assert not imported & HEAVY, sorted(imported & HEAVY)


def test_a_command_imports_its_own_module_and_no_other_commands(home: Path):
    done, modules = _python(home, "-m", "engine.cli.app", "tenant", "list")
    assert done.returncode == 0, done.stderr[-2000:]
    assert _command_modules(modules) == {"tenant_cmds"}
    # `table undrop` lives with restore-table; the `table` group imports both.
    done, modules = _python(home, "-m", "engine.cli.app", "table", "list", "acme")
    assert done.returncode == 0, done.stderr[-2000:]
    assert _command_modules(modules) == {"table_cmds", "table_restore_cmds", "restore_cmds"}


def test_snapshot_list_imports_no_heavy_library(home: Path):
    done, imported = _rewind(home, "snapshot", "list", "acme")
    assert done.returncode == 0, done.stderr[-2000:]
    assert not imported & HEAVY, sorted(imported & HEAVY)


def test_help_lists_every_command_and_imports_no_command_module(tmp_path: Path):
    """``--help`` lists the commands from engine.cli.command_index."""
    done, modules = _python(tmp_path / "home", "-m", "engine.cli.app", "--help")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "restore-tenant" in done.stdout and "spark" in done.stdout
    assert not _command_modules(modules)
    assert not {m.split(".")[0] for m in modules} & HEAVY


def test_every_command_module_imports_no_heavy_library(tmp_path: Path):
    """Building the whole command tree imports every command's module: none may
    import a heavy library at its top (it imports one inside the function that
    uses it)."""
    script = (
        "from typer.main import get_command; from engine.cli.app import app; "
        "print(len(dict(get_command(app).commands)))"
    )
    done, modules = _python(tmp_path / "home", "-c", script)
    assert done.returncode == 0, done.stderr[-2000:]
    every = {p.stem for p in (ROOT / "engine" / "cli").glob("*_cmds.py")}
    assert _command_modules(modules) == every
    assert not {m.split(".")[0] for m in modules} & HEAVY, sorted(
        {m.split(".")[0] for m in modules} & HEAVY
    )


def test_the_console_scripts_version_loads_neither_typer_nor_the_app(tmp_path: Path):
    """The installed ``rewind`` (engine.cli.entry:main) answers a bare ``--version``
    before importing the typer app, which builds all of its commands first."""
    script = "import sys; from engine.cli.entry import main; sys.argv[1:] = ['--version']; main()"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "REWIND_"))}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", script],
        cwd=tmp_path,
        env=env | {"PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == f"rewind {__version__}\n"
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "engine.cli.entry" in imported
    assert not {m for m in imported if m.split(".")[0] in {"typer", "rich", "click"}}
    assert "engine.cli.app" not in imported
    assert not {m.split(".")[0] for m in imported} & HEAVY
