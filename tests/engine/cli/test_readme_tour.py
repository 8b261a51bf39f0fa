"""README.md's "A five-minute tour" runs as written.

The tour's code block is taken from the README and run by bash, line by line
and stopping at the first failure (``set -euo pipefail``), in a copy of what a
fresh clone has at its root (``examples/``), after its set-up: ``.venv/bin/
activate`` here puts a ``rewind`` on PATH that runs this checkout's CLI
(``python -m engine.cli.app`` with this checkout on PYTHONPATH). The
``REWIND_HOME`` the tour exports holds the catalog and a ``file://``
warehouse. If the README and the CLI drift apart, this test fails. Then the
Python block under "Other engines" runs against the tour's tenant.

The demo (``make demo``) leaves its story where the README says,
``.rewind-demo/``, for the commands the README names.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers.paths import ROOT

HEADING = "## A five-minute tour"
ENGINES_HEADING = "## Other engines"


def tour_block(readme: str) -> str:
    """The first ``sh`` code block under the tour's heading."""
    section = readme[readme.index(HEADING) :]
    match = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert match is not None, "no ```sh block under the tour's heading"
    return match.group(1)


def fresh_clone(at: Path) -> Path:
    """What the tour needs of a clone: ``examples/`` and, after the set-up, a
    ``.venv/bin/activate`` that puts ``rewind`` on PATH."""
    clone = at / "clone"
    shutil.copytree(ROOT / "examples", clone / "examples")
    bin_dir = clone / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    rewind = bin_dir / "rewind"
    rewind.write_text(
        "#!/bin/sh\n"
        f"PYTHONPATH={shlex.quote(str(ROOT))} exec {shlex.quote(sys.executable)} "
        '-m engine.cli.app "$@"\n'
    )
    rewind.chmod(0o755)
    python = bin_dir / "python"  # the venv's python, as `. .venv/bin/activate` gives it
    python.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    python.chmod(0o755)
    (bin_dir / "activate").write_text(f'PATH={shlex.quote(str(bin_dir))}:"$PATH"\nexport PATH\n')
    return clone


def rows_of(path: Path) -> list[dict[str, object]]:
    with path.open() as f:
        return [{k: int(v) if k != "item" else v for k, v in r.items()} for r in csv.DictReader(f)]


def test_the_readme_tour_runs_as_written(tmp_path: Path) -> None:
    block = tour_block((ROOT / "README.md").read_text())
    clone = fresh_clone(tmp_path)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("REWIND_CATALOG", "REWIND_WAREHOUSE", "REWIND_HOME", "PYTHONPATH")
    }
    done = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + block],
        cwd=clone,
        env=env | {"COLUMNS": "200"},
        stdin=subprocess.DEVNULL,  # as a pasted block: nobody answers a question
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
    out = done.stdout

    # What the tour says happens, in its output.
    assert out.count("deleted 2 keys from acme/shop.orders") == 3
    assert "3 rows changed from" in out and "(1 inserted, 0 updated, 2 deleted)" in out
    assert "reverted: put back 2 rows, deleted 0 rows in commit ts" in out
    assert "dry run: nothing was changed" in out
    assert re.search(r"restore job \w+ done \(physical\): tenant acme@\w+ at mon", out)
    assert re.search(r"restore job \w+ done \(physical\): shop\.orders of tenant acme@\w+", out)
    assert "`rewind table undrop acme shop.orders_mon` brings it back" in out
    for item in ("apple", "pear", "plum", "fig", "kiwi"):
        assert out.count(item) >= 2, item  # in both queries after a restore

    # And the rows restored are the orders loaded, in the table and its copy.
    def query(table: str) -> object:
        shown = subprocess.run(
            [clone / ".venv/bin/rewind", "--json", "query", "acme", table],
            env=env | {"REWIND_HOME": str(clone / ".rewind")},
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        return json.loads(shown.stdout)

    loaded = rows_of(clone / "examples" / "orders.csv")
    later = rows_of(clone / "examples" / "later.csv")
    assert query("shop.orders") == loaded + later  # reverted, the later order kept
    assert query("shop.orders_mon") == loaded

    # The README's DuckDB example reads the tour's tenant at its snapshot.
    engines = (ROOT / "README.md").read_text()
    engines = engines[engines.index(ENGINES_HEADING) :]
    match = re.search(r"```python\n(.*?)```", engines, re.DOTALL)
    assert match is not None, "no ```python block under the engines heading"
    example = subprocess.run(
        [sys.executable, "-c", match.group(1)],
        cwd=clone,
        env=env | {"REWIND_HOME": str(clone / ".rewind"), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert example.returncode == 0, example.stderr[-3000:]
    total = sum(int(str(r["qty"])) for r in loaded)
    assert example.stdout.strip() == f"[({len(loaded)}, {total})]"

    # The README's export example: an Iceberg table that pyiceberg alone reads
    # (no PYTHONPATH: Rewind cannot be imported there), and plain Parquet.
    match = re.search(r"```sh\n(.*?)```", engines, re.DOTALL)
    assert match is not None, "no ```sh block under the engines heading"
    exported = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n. .venv/bin/activate\n" + match.group(1)],
        cwd=clone,
        env=env | {"REWIND_HOME": str(clone / ".rewind"), "COLUMNS": "200"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert exported.returncode == 0, exported.stdout[-3000:] + exported.stderr[-3000:]
    assert f"mon {len(loaded)}" in exported.stdout.splitlines()
    pointer = json.loads((clone / ".rewind" / "parquet" / "rewind-export.json").read_text())
    assert pointer["snapshot"] == "mon" and pointer["tables"]["shop.orders"]["rows"] == len(loaded)


def test_every_shell_block_of_the_readme_pastes_into_zsh() -> None:
    """zsh takes ``#`` after a command as arguments unless ``interactive_comments``
    is set: no command line of a README shell block carries a trailing comment."""
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", readme, re.DOTALL)
    assert blocks
    trailing = [
        line
        for block in blocks
        for line in block.splitlines()
        if not line.lstrip().startswith("#") and re.search(r"\s#\s", line)
    ]
    assert trailing == []


def test_the_tours_sample_files_match_its_table() -> None:
    """``orders.csv`` has the tour's columns; ``oops.csv`` only the key, of rows
    that are there."""
    orders = rows_of(ROOT / "examples" / "orders.csv")
    assert list(orders[0]) == ["id", "item", "qty"]
    with (ROOT / "examples" / "oops.csv").open() as f:
        oops = list(csv.DictReader(f))
    assert oops and all(list(r) == ["id"] for r in oops)
    assert {int(r["id"]) for r in oops} < {r["id"] for r in orders}
    block = tour_block((ROOT / "README.md").read_text())
    assert "--column id:int64 --column item:string --column qty:int32 --key id" in block


def test_the_demo_leaves_its_story_in_rewind_demo(tmp_path: Path) -> None:
    """``make demo`` (``python -m engine.demo`` at the clone's root) keeps its
    catalog and, copied from its in-memory S3, its warehouse in ``.rewind-demo/``,
    where the commands the README names find its tenant, snapshots and restores."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("REWIND_CATALOG", "REWIND_WAREHOUSE", "REWIND_HOME", "REWIND_DEMO_HOME")
    } | {"PYTHONPATH": str(ROOT)}
    for _ in range(2):  # a second run starts the directory afresh
        demo = subprocess.run(
            [sys.executable, "-m", "engine.demo"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    home = tmp_path / ".rewind-demo"
    assert f"export REWIND_HOME={home}" in demo.stdout

    def rewind(*args: str) -> object:
        done = subprocess.run(
            [sys.executable, "-m", "engine.cli.app", "--json", *args],
            env=env | {"REWIND_HOME": str(home)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return json.loads(done.stdout)

    history = rewind("history", "acme")
    assert isinstance(history, dict)
    assert [t["state"] for t in history["lineage"]] == ["active", "dropped"]  # a restore in place
    assert {j["scope"] for j in history["jobs"]} == {"tenant", "table"}
    snapshots = rewind("snapshot", "list", "acme")
    assert isinstance(snapshots, list) and "after_load" in [s["name"] for s in snapshots]
    rows = rewind("query", "acme", "sales.orders", "--as-of", "after_load", "--limit", "5")
    assert isinstance(rows, list) and len(rows) == 5
    clone = rewind("restore-tenant", "acme", "--snapshot", "after_load", "--to", "acme_then")
    assert isinstance(clone, dict) and clone["state"] == "done"
