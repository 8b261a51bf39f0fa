"""Cancel and resume never lose data: jobs hold leases, and cancel deletes only the unreferenced.

The restores here run in a real second process (tests/helpers/restore_process.py),
slowed by a delay on every object put, so this process can cancel, resume,
pause or kill it while it works. Every test ends with the same checks: the
source reads as before, and every key any tenant references is in the bucket.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from engine.restore.job import (
    AlreadyInstalled,
    cancel_restore,
    restore_tenant,
    resume_restore,
)
from engine.restore.lease import JobBusy, lease_seconds
from tenants.errors import InvalidArgument
from tenants.objectstore.embedded import EmbeddedS3
from tenants.store import TableStore
from tests.helpers.paths import HELPERS
from tests.helpers.restores import (
    SCHEMA,
    catalog_rows,
    job_state,
    keys,
    pins_of,
    reads,
    rows,
    unique,
)

SCRIPT = HELPERS / "restore_process.py"


@dataclass
class Source:
    store: TableStore
    catalog_uri: str
    warehouse_uri: str
    name: str
    at_mon: dict[str, list[dict]]
    now: dict[str, list[dict]]


@pytest.fixture
def source(
    new_catalog_uri: Callable[[], str], s3_server: EmbeddedS3, bucket: str, tmp_path: Path
) -> Iterator[Source]:
    """A tenant whose table has several objects straddling "mon" (rewritten by a restore)."""
    catalog_uri, warehouse_uri = new_catalog_uri(), f"s3://{bucket}/wh"
    store = TableStore.open(catalog_uri, warehouse_uri, s3=s3_server.settings)
    name = unique("acme")
    store.create_tenant(name)
    store.create_table(name, "db.items", SCHEMA)
    store.write(name, "db.items", upserts=rows(*[(i, f"v{i}") for i in range(40)]))
    store.write(name, "db.items", upserts=rows((3, "x")), deletes=keys(4, 5))
    store.create_snapshot(name, "mon")
    at_mon = reads(store, name)
    store.write(name, "db.items", upserts=rows(*[(i, "later") for i in range(0, 40, 3)]))
    store.compact(name, "db.items", target_bytes=600)  # many objects straddling mon
    store.write(name, "db.items", deletes=keys(7))
    yield Source(store, catalog_uri, warehouse_uri, name, at_mon, reads(store, name))
    store.close()


def start(source: Source, *extra: str, delay: float = 1.5, lease_s: float | None = None) -> Any:
    env = dict(os.environ)
    if lease_s is not None:
        env["REWIND_JOB_LEASE_SECONDS"] = str(lease_s)
    return subprocess.Popen(
        [
            sys.executable,
            str(SCRIPT),
            source.catalog_uri,
            source.warehouse_uri,
            source.name,
            "mon",
            "--put-delay",
            str(delay),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def wait_for_job(source: Source, state: str, proc: Any, timeout: float = 60) -> str:
    """The id of the job once it reaches ``state`` (the other process is then mid-work)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = catalog_rows(source.store, "SELECT id FROM restore_jobs WHERE state = ?", (state,))
        if found:
            return str(found[0]["id"])
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError(f"no job reached {state} in {timeout}s")


def finish(proc: Any) -> tuple[int, dict[str, Any]]:
    out, err = proc.communicate(timeout=120)
    lines = out.strip().splitlines()
    assert lines, err
    return proc.returncode, json.loads(lines[-1])


def nothing_lost(source: Source) -> None:
    """Every key a live or retained tenant references is in the bucket."""
    store = source.store
    present = {info.key for info in store.objects.list("tenants/")}
    referenced = {
        r["object_key"]
        for r in catalog_rows(
            store,
            "SELECT DISTINCT o.object_key FROM objects o JOIN membership m ON m.object_id = o.id",
        )
    }
    assert referenced <= present, sorted(referenced - present)[:3]


def new_tenant_keys(source: Source, job_id: str) -> list[str]:
    [row] = catalog_rows(
        source.store, "SELECT new_tenant_id FROM restore_jobs WHERE id = ?", (job_id,)
    )
    return [i.key for i in source.store.objects.list(f"tenants/{row['new_tenant_id']}/")]


def test_cancel_of_a_running_restore_asks_it_to_stop_and_waits(source: Source) -> None:
    proc = start(source, "--to", "copy")
    job_id = wait_for_job(source, "rewriting", proc)

    job = cancel_restore(source.store, job_id)

    code, said = finish(proc)
    assert job.state == "cancelled" and pins_of(source.store, job_id) == []
    assert code == 3 and said["type"] == "RestoreCancelled", said
    assert "cancelled on request" in said["error"]
    assert new_tenant_keys(source, job_id) == []
    assert reads(source.store, source.name) == source.now
    nothing_lost(source)
    # The tenant is free again: a new restore runs to the end.
    outcome = restore_tenant(source.store, source.name, "mon", to="copy", executor="local")
    assert reads(source.store, outcome.tenant.ref) == source.at_mon


def test_resume_while_another_process_runs_the_job_is_refused_naming_it(source: Source) -> None:
    proc = start(source, "--to", "copy")
    job_id = wait_for_job(source, "rewriting", proc)

    with pytest.raises(JobBusy, match=rf"restore job {job_id} is running on .* pid {proc.pid}"):
        resume_restore(source.store, job_id)

    code, said = finish(proc)
    assert code == 0, said
    assert job_state(source.store, job_id) == "done"
    assert reads(source.store, "copy") == source.at_mon
    nothing_lost(source)


def test_a_killed_holder_is_seen_dead_at_once_and_its_job_resumes(source: Source) -> None:
    proc = start(source)  # in place
    job_id = wait_for_job(source, "rewriting", proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()

    started = time.monotonic()
    outcome = resume_restore(source.store, job_id)

    assert time.monotonic() - started < 30  # not held up by the 60 s lease
    assert outcome.job_id == job_id and job_state(source.store, job_id) == "done"
    assert reads(source.store, source.name) == source.at_mon
    nothing_lost(source)


def test_a_paused_holder_that_lost_its_lease_installs_nothing(source: Source) -> None:
    proc = start(source, "--to", "copy", lease_s=1.0, delay=1.0)
    job_id = wait_for_job(source, "rewriting", proc)
    proc.send_signal(signal.SIGSTOP)
    try:
        time.sleep(1.5)  # its lease expires while it cannot renew it
        job = cancel_restore(source.store, job_id, wait_s=0)
        assert job.state == "cancelled"
    finally:
        proc.send_signal(signal.SIGCONT)

    code, said = finish(proc)

    assert code == 3 and said["type"] == "LeaseLost", said
    assert job_state(source.store, job_id) == "cancelled"
    assert catalog_rows(source.store, "SELECT id FROM tenants WHERE name = 'copy'") == []
    assert reads(source.store, source.name) == source.now
    nothing_lost(source)


def test_cancel_of_a_job_whose_logical_swap_committed_deletes_nothing(source: Source) -> None:
    """An older Rewind swapped and marked the job done in two transactions; a crash
    between them left an installed tenant behind a job that looked cancellable."""
    store = source.store
    outcome = restore_tenant(store, source.name, "mon", method="logical", executor="local")
    with store.catalog.transaction() as tx:  # the journal as that crash left it
        tx.execute(
            "UPDATE restore_jobs SET state = 'failed', installed_ts = NULL WHERE id = ?",
            (outcome.job_id,),
        )
    keys_before = sorted(i.key for i in store.objects.list("tenants/"))

    with pytest.raises(AlreadyInstalled, match=f"--resume {outcome.job_id}"):
        cancel_restore(store, outcome.job_id)

    assert sorted(i.key for i in store.objects.list("tenants/")) == keys_before
    assert reads(store, source.name) == source.at_mon
    resume_restore(store, outcome.job_id)  # the advice works: the job ends done
    assert job_state(store, outcome.job_id) == "done"
    assert reads(store, source.name) == source.at_mon
    nothing_lost(source)


def test_cancel_of_a_done_restore_is_refused_with_how_to_undo_it(source: Source) -> None:
    outcome = restore_tenant(source.store, source.name, "mon", executor="local")
    with pytest.raises(AlreadyInstalled, match="to undo it, restore"):
        cancel_restore(source.store, outcome.job_id)
    assert reads(source.store, source.name) == source.at_mon
    nothing_lost(source)


def test_two_processes_cancelling_one_job_both_end_it_cancelled_or_say_so(source: Source) -> None:
    proc = start(source, "--to", "copy")
    job_id = wait_for_job(source, "rewriting", proc)
    other = TableStore.open(source.catalog_uri, source.warehouse_uri)
    try:
        first = cancel_restore(source.store, job_id)
        with pytest.raises(InvalidArgument, match=f"restore job {job_id} is cancelled"):
            cancel_restore(other, job_id)
    finally:
        other.close()
    finish(proc)
    assert first.state == "cancelled"
    nothing_lost(source)


def test_writes_to_the_source_after_a_cancel_are_kept(source: Source) -> None:
    proc = start(source)
    job_id = wait_for_job(source, "rewriting", proc)
    cancel_restore(source.store, job_id)
    finish(proc)
    source.store.write(source.name, "db.items", upserts=pa.table({"id": [99], "v": ["new"]}))
    assert {"id": 99, "v": "new"} in reads(source.store, source.name)["db.items"]
    nothing_lost(source)


@pytest.mark.parametrize("raw", ["abc", "0", "1e9"])
def test_a_bad_lease_setting_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("REWIND_JOB_LEASE_SECONDS", raw)
    with pytest.raises(InvalidArgument, match="REWIND_JOB_LEASE_SECONDS.*between 0.5 and 86400"):
        lease_seconds()
