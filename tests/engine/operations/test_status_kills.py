"""``rewind status`` on backups run by real processes that hang, die or fail.

A ``rewind backup create`` runs in its own process (tests/helpers/backup_process.py)
with a destination whose puts sleep, so it stays in its journaled run while this
process stops it (SIGSTOP: alive, but renewing nothing, so its lease runs out)
or kills it (SIGKILL: no handler, no ``finally``, the run left ``running``); or
with a destination that refuses the first put, so the run fails. Status reads
only the catalog, as a cron job on another host would. Leases last 1 s here
(``REWIND_JOB_LEASE_SECONDS``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from tests.helpers.cli import items_tenant, ok
from tests.helpers.paths import HELPERS, ROOT

SCRIPT = HELPERS / "backup_process.py"
EXIT_ATTENTION = 3
Rewind = Callable[..., Result]


def report(rewind: Rewind) -> tuple[int, dict[str, Any]]:
    """``rewind status --json``: its exit code and its one object."""
    result = rewind("status", "--json")
    assert result.exit_code in (0, EXIT_ATTENTION), result.output
    return result.exit_code, json.loads(result.stdout)


def backup_jobs(rewind: Rewind) -> tuple[int, list[tuple[str, str]]]:
    code, found = report(rewind)
    (acme,) = found["tenants"]
    return code, [(j["kind"], j["state"]) for j in acme["jobs"]]


def wait_for(rewind: Rewind, jobs: list[tuple[str, str]], proc: Any, timeout: float = 60) -> int:
    """Poll status until acme's jobs are ``jobs``; its exit code then."""
    deadline = time.monotonic() + timeout
    seen: Any = None
    while time.monotonic() < deadline:
        code, seen = backup_jobs(rewind)
        if seen == jobs:
            return code
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the backup process ended: {proc.communicate()}")
        time.sleep(0.1)
    raise AssertionError(f"status never showed {jobs} in {timeout}s; last {seen}")


@pytest.fixture
def acme(rewind: Rewind, tmp_path: Path) -> Rewind:
    items_tenant(rewind, tmp_path)  # acme: shop.items, snapshot mon
    return rewind


@pytest.fixture
def backup(uris: tuple[str, str], tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """Start ``rewind backup create acme`` in a process of its own, slowed or failing."""
    started: list[Any] = []

    def start(*options: str) -> Any:
        catalog, warehouse = uris
        env = os.environ | {"REWIND_JOB_LEASE_SECONDS": "1", "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(
            [
                sys.executable,
                str(SCRIPT),
                *options,
                "--",
                "--catalog",
                catalog,
                "--warehouse",
                warehouse,
                "backup",
                "create",
                "acme",
                "--snapshot",
                "mon",
                "--to",
                f"file://{tmp_path}/backups",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
        proc.communicate()


def test_a_hung_backup_is_stale_once_its_lease_runs_out_and_a_killed_one_at_once(
    acme: Rewind, backup: Callable[..., Any], tmp_path: Path
) -> None:
    proc = backup("--put-delay", "600")
    # Running, its lease renewed: nothing to page for (acme has no objective).
    assert wait_for(acme, [("backup", "running")], proc) == 0

    proc.send_signal(signal.SIGSTOP)  # alive, but its heartbeat stops: the lease runs out
    try:
        assert wait_for(acme, [("backup", "stale")], proc, timeout=30) == EXIT_ATTENTION
    finally:
        proc.send_signal(signal.SIGCONT)
    assert wait_for(acme, [("backup", "running")], proc, timeout=30) == 0  # it renews again

    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    # The holder is gone: stale at once on this host, without waiting for the expiry.
    code, jobs = backup_jobs(acme)
    assert (code, jobs) == (EXIT_ATTENTION, [("backup", "stale")])
    text = acme("status", "acme")
    assert text.exit_code == EXIT_ATTENTION and "stale" in text.stdout

    # The next backup to the destination supersedes the dead run.
    ok(acme("backup", "create", "acme", "--snapshot", "mon", "--to", f"file://{tmp_path}/backups"))
    code, jobs = backup_jobs(acme)
    assert (code, jobs) == (0, [])


def test_a_backup_that_fails_is_failed_with_its_error_until_one_succeeds(
    acme: Rewind, backup: Callable[..., Any], tmp_path: Path
) -> None:
    proc = backup("--fail-put")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "the destination refused it" in err, (out, err)

    code, found = report(acme)

    assert code == EXIT_ATTENTION and found["healthy"] is False
    (acme_,) = found["tenants"]
    (job,) = acme_["jobs"]
    assert (job["kind"], job["state"], job["method"]) == ("backup", "failed", "physical")
    assert job["error"].startswith("StorageError: cannot write") and job["target"].endswith(
        "/backups"
    )
    assert acme_["backups"] == [] and acme_["recovery_point_ts"] is None
    ok(acme("backup", "create", "acme", "--snapshot", "mon", "--to", f"file://{tmp_path}/backups"))
    assert backup_jobs(acme) == (0, [])


def test_a_missed_objective_exits_3_and_a_met_one_0(
    acme: Rewind, backup: Callable[..., Any], tmp_path: Path
) -> None:
    ok(acme("tenant", "set", "acme", "--rpo", "1d"))
    assert report(acme)[0] == EXIT_ATTENTION  # no backup yet
    proc = backup("--put-delay", "600")
    # A running backup gives no recovery point yet: still missed.
    assert wait_for(acme, [("backup", "running")], proc) == EXIT_ATTENTION
    proc.kill()
    proc.communicate()
    ok(acme("backup", "create", "acme", "--snapshot", "mon", "--to", f"file://{tmp_path}/backups"))
    code, found = report(acme)
    assert code == 0 and found["tenants"][0]["verdict"] == "met"
