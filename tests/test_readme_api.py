"""README.md's "Python API" runs as written, on the public API alone (docs/api.md).

The block is taken from the README and run by a fresh interpreter in an empty
REWIND_HOME, as a user pasting it after `make venv` would; what it prints is
what its comments say. Its imports are the two roots and pyarrow: an example
that needs an internal module is an export missing from the public API.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers.paths import ROOT

HEADING = "## Python API\n"
PUBLIC = re.compile(r"^(from (tenants|engine) import [\w, ]+|import pyarrow as pa)$")


def api_block() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index(HEADING) :]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, "no ```python block under the Python API heading"
    return match.group(1)


def test_the_readme_python_example_imports_only_the_public_api() -> None:
    imports = [
        line.strip()
        for line in api_block().splitlines()
        if line.strip().startswith(("import ", "from "))
    ]
    assert imports, "the example imports nothing"
    assert [line for line in imports if not PUBLIC.match(line)] == []


def test_the_readme_python_example_runs_as_written(tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("REWIND_CATALOG", "REWIND_WAREHOUSE", "REWIND_HOME", "PYTHONPATH")
    }
    done = subprocess.run(
        [sys.executable, "-c", api_block()],
        cwd=tmp_path,
        env=env | {"REWIND_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    said = [re.search(r"# (\d+)", line) for line in api_block().splitlines() if "print(" in line]
    assert done.stdout.split() == [m.group(1) for m in said if m is not None]


def test_the_readme_the_package_and_rewind_h_say_what_rewind_is_in_one_sentence() -> None:
    import tomllib

    from engine.cli.app import ABOUT

    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"Rewind is {ABOUT}." in readme
    summary = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["description"]
    assert summary == ABOUT[0].upper() + ABOUT[1:]
    shown = subprocess.run(
        [sys.executable, "-m", "engine.cli.app", "-h"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    assert f"Rewind is {ABOUT}." in " ".join(shown.stdout.replace("│", " ").split())
