"""The core install is lean: moto is an extra (issue 17, part 8).

moto is a test server, not something a deployment runs, so it is the
``local-s3`` extra; ``dev`` includes it. Without it the CLI and the library
work, and starting a local S3 server says which extra to install.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tenants.errors import MissingDependency
from tenants.objectstore.embedded import start_embedded_s3
from tests.helpers.paths import ROOT

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _names(requirements: list[str]) -> set[str]:
    return {r.split(";")[0].split("[")[0].split(">")[0].split("<")[0].strip() for r in requirements}


def test_moto_is_an_extra_not_a_core_dependency():
    assert "moto" not in _names(PROJECT["dependencies"])
    extras = PROJECT["optional-dependencies"]
    assert "moto" in _names(extras["local-s3"])
    assert "rewind-tables[local-s3]" in extras["dev"]
    # The S3 backend and its server only, not moto[server]'s every AWS service.
    assert not any(r.startswith("moto[server") for r in extras["local-s3"])


def test_a_local_s3_server_without_moto_names_the_extra(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "moto.server", None)  # import fails as if not installed
    with pytest.raises(MissingDependency, match=r"pip install 'rewind-tables\[local-s3\]'"):
        start_embedded_s3()


def test_the_cli_and_the_library_run_without_moto(tmp_path: Path):
    """A process in which ``import moto`` fails still imports every module of the
    CLI and the store, and runs a command end to end on a file:// warehouse."""
    script = (
        "import sys\n"
        "sys.modules['moto'] = None\n"
        "sys.modules['moto.server'] = None\n"
        "import engine.cli.app, engine.restore.job, engine.backup.api, engine.gc.run, tenants.store\n"
        "from engine.cli.app import main\n"
        "main(['tenant', 'create', 'acme'])\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "REWIND_"))}
    env |= {"PYTHONPATH": str(ROOT), "REWIND_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "created tenant acme" in done.stdout
