"""Instant restore under faults, with real processes: kills, races, cancels and S3 errors.

An instant job installs its tenant first, each straddler held with a cut at
S, then rewrites the straddlers and swaps the copies in, a few per
transaction (engine/restore/swap.py). The restores here run in their own
process (tests/helpers/instant_restore_process.py), which stops at an exact point of
its rewrite or swap, so this process can SIGKILL it there, race it, or cancel
it, on a real moto S3 server and both catalogs. Every test checks what the
design promises whatever happens: the restored tenant reads as of S
throughout, the source is untouched, each straddler is read through its cut
or through its copy (never both, never neither), the job can be finished
(resumed) or abandoned (cancelled), and every key the catalog records is in
the bucket.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import engine.restore.swap
from engine.gc.run import run_gc
from engine.restore.job import cancel_restore, restore_tenant, resume_restore
from engine.restore.journal import JobRecord, load_job
from engine.restore.lease import JobBusy
from tenants.errors import InvalidArgument, StorageError
from tenants.objectstore.embedded import EmbeddedS3
from tenants.store import TableStore
from tests.helpers.gc import dangling_keys
from tests.helpers.paths import HELPERS
from tests.helpers.restores import (
    SCHEMA,
    WrappedObjectStore,
    bucket_keys,
    catalog_rows,
    keys,
    reads,
    rows,
    tenant_prefix,
    unique,
    with_objects,
)

SCRIPT = HELPERS / "instant_restore_process.py"
LOADER = HELPERS / "concurrent_worker.py"
BATCH = 2  # straddlers per swap transaction in these tests: 5 straddlers, 3 transactions
TABLE = "db.items"


@dataclass
class Source:
    """A tenant whose table has five objects straddling "mon", and what it held."""

    store: TableStore
    catalog_uri: str
    warehouse_uri: str
    name: str
    tenant_id: str
    at_mon: list[dict[str, Any]]  # db.items as of "mon": what every restore must read
    now: dict[str, list[dict[str, Any]]]
    objects: list[Any]
    keys: dict[str, int]

    def untouched(self) -> None:
        """The source reads, holds and stores what it did (retired or not)."""
        ref = f"{self.name}@{self.tenant_id}"
        assert reads(self.store, ref) == self.now
        assert self.store.objects_of(ref) == self.objects
        assert bucket_keys(self.store, tenant_prefix(self.tenant_id)) == self.keys


@pytest.fixture
def source(
    new_catalog_uri: Callable[[], str], s3_server: EmbeddedS3, bucket: str
) -> Iterator[Source]:
    catalog_uri, warehouse_uri = new_catalog_uri(), f"s3://{bucket}/wh"
    store = TableStore.open(catalog_uri, warehouse_uri, s3=s3_server.settings)
    name = unique("acme")
    store.create_tenant(name)
    store.create_table(name, "db.items", SCHEMA)
    store.write(name, "db.items", upserts=rows(*[(i, f"v{i}") for i in range(40)]))
    store.write(name, "db.items", upserts=rows((3, "x")), deletes=keys(4, 5))
    store.create_snapshot(name, "mon")
    at_mon = reads(store, name)[TABLE]
    store.write(name, "db.items", upserts=rows(*[(i, "later") for i in range(0, 40, 3)]))
    store.compact(name, "db.items", target_bytes=600)  # five objects straddle "mon"
    store.write(name, "db.items", deletes=keys(7))
    tenant = store.tenant(name)
    yield Source(
        store,
        catalog_uri,
        warehouse_uri,
        name,
        tenant.id,
        at_mon,
        reads(store, name),
        store.objects_of(name),
        bucket_keys(store, tenant_prefix(tenant.id)),
    )
    store.close()


# --- the process under test ------------------------------------------------------------------


class Worker:
    """tests/helpers/instant_restore_process.py, running; its JSON lines arrive on a queue."""

    def __init__(self, source: Source, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), source.catalog_uri, source.warehouse_uri, source.name,
             "mon", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )  # fmt: skip
        self.lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.lines.put(json.loads(line))
        self.lines.put(None)

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        self.stderr.extend(self.proc.stderr)

    def next_line(self, timeout: float = 120) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"pid {self.proc.pid} said nothing in {timeout}s") from None
        if line is None:
            self.proc.wait(timeout=30)
            raise AssertionError(
                f"pid {self.proc.pid} exited {self.proc.returncode}: {''.join(self.stderr)[-3000:]}"
            )
        return line

    def expect(self, event: str) -> dict[str, Any]:
        """The next line, which must be ``event`` (a paused worker stays paused)."""
        line = self.next_line()
        assert line.get("event") == event, line
        return line

    def outcome(self, timeout: float = 120) -> dict[str, Any]:
        """The result line (after any events); the process then exits."""
        while True:
            line = self.next_line(timeout)
            if "ok" in line:
                return line

    def exit_code(self) -> int:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        return self.proc.wait(timeout=60)

    def kill(self) -> None:
        """SIGKILL: no handler, no finally, no rollback but the catalog's own."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.kill()


@pytest.fixture
def workers() -> Iterator[Callable[..., Worker]]:
    """Start workers; any still running when the test ends is killed."""
    started: list[Worker] = []

    def start(source: Source, *args: str, **kwargs: Any) -> Worker:
        started.append(Worker(source, *args, **kwargs))
        return started[-1]

    yield start
    for worker in started:
        worker.stop()


# --- what every test checks ------------------------------------------------------------------


def job_of(source: Source, target: str) -> JobRecord:
    [row] = catalog_rows(
        source.store, "SELECT id FROM restore_jobs WHERE target_name = ?", (target,)
    )
    return load_job(source.store.catalog, str(row["id"]))


def membership(source: Source, table_id: str, object_id: str) -> list[dict[str, Any]]:
    return catalog_rows(
        source.store,
        "SELECT added_ts, removed_ts, cut_ts FROM membership WHERE table_id = ? AND object_id = ?",
        (table_id, object_id),
    )


def straddlers(source: Source, job: JobRecord) -> dict[str, str]:
    """Each straddler's state in its new table: ``cut`` (read through its cut),
    ``swapped`` (its copy replaced it) or ``merged`` (a compaction ended it first,
    and its copy was never installed). Asserts the swap's promise: never both a
    live cut member and its copy, a copy registered and installed at most once."""
    states: dict[str, str] = {}
    for task in job.plan.tasks:
        [cut] = membership(source, task.out_table_id, task.input.id)
        copies = membership(source, task.out_table_id, task.out_object_id)
        registered = catalog_rows(
            source.store, "SELECT id FROM objects WHERE object_key = ?", (task.out_key,)
        )
        assert cut["cut_ts"] == job.plan.at_ts
        assert len(copies) <= 1 and len(registered) == len(copies), (task.task_id, copies)
        if cut["removed_ts"] is None:
            assert copies == [], f"{task.input.id}: both the cut member and its copy are members"
            states[task.task_id] = "cut"
        elif copies:
            assert copies[0]["added_ts"] == cut["removed_ts"], "swapped at one commit ts"
            assert copies[0]["cut_ts"] is None
            states[task.task_id] = "swapped"
        else:
            states[task.task_id] = "merged"
    return states


def count(states: dict[str, str], state: str) -> int:
    return sum(1 for s in states.values() if s == state)


def reads_as_of_s(source: Source, tenant: str) -> None:
    assert reads(source.store, tenant) == {TABLE: source.at_mon}


def sound(source: Source) -> None:
    """The source untouched and every key the catalog records in the bucket."""
    source.untouched()
    assert dangling_keys(source.store) == set(), "the catalog records keys the bucket lost"


def new_prefix_keys(source: Source, job: JobRecord) -> set[str]:
    return set(bucket_keys(source.store, tenant_prefix(job.plan.new_tenant_id)))


def registered_copies(source: Source, job: JobRecord) -> set[str]:
    """The job's copies the catalog records (a swap registered them)."""
    return {
        t.out_key
        for t in job.plan.tasks
        if catalog_rows(source.store, "SELECT 1 FROM objects WHERE object_key = ?", (t.out_key,))
    }


def no_leaked_copies(source: Source, job: JobRecord) -> None:
    """No copy the catalog does not record is left in the bucket."""
    listed = new_prefix_keys(source, job)
    assert {t.out_key for t in job.plan.tasks} & listed <= registered_copies(source, job)


def finished(source: Source, job_id: str, tenant: str) -> None:
    """Done exactly once: every straddler swapped, no cut member left, no copy leaked."""
    job = load_job(source.store.catalog, job_id)
    assert job.state == "done" and job.installed_ts is not None
    states = straddlers(source, job)
    assert set(states.values()) <= {"swapped", "merged"}, states
    assert not [o for _, o in source.store.objects_of(tenant) if o.cut_ts is not None]
    no_leaked_copies(source, job)
    assert catalog_rows(source.store, "SELECT * FROM job_pins WHERE job_id = ?", (job_id,)) == []
    sound(source)


# --- 1. a kill between any two swap transactions -----------------------------------------------


@pytest.mark.parametrize("after", [0, 1, 2, 3])
def test_a_kill_between_swap_transactions_keeps_reads_at_s_and_resume_swaps_each_once(
    source: Source, workers: Callable[..., Worker], monkeypatch: pytest.MonkeyPatch, after: int
) -> None:
    """SIGKILL after the swap's ``after``-th transaction (0: before the first; 3:
    after the last, before the one that marks the job done)."""
    worker = workers(source, "--to", "copy", "--batch", str(BATCH), "--pause-at", f"swap:{after}")
    worker.expect("installed")
    worker.expect("paused")
    job = job_of(source, "copy")
    assert len(job.plan.tasks) > 2 * BATCH  # three swap transactions
    swapped = min(after * BATCH, len(job.plan.tasks))
    # Paused between two transactions: half swapped, reading as of S.
    reads_as_of_s(source, "copy")
    assert count(straddlers(source, job), "swapped") == swapped

    worker.kill()

    assert load_job(source.store.catalog, job.id).state == "installing"
    reads_as_of_s(source, "copy")
    states = straddlers(source, job)
    assert count(states, "swapped") == swapped and count(states, "cut") == len(states) - swapped
    sound(source)

    monkeypatch.setattr(engine.restore.swap, "BATCH", BATCH)
    outcome = resume_restore(source.store, job.id)

    assert outcome.instant and not outcome.rewrite_pending
    reads_as_of_s(source, "copy")
    finished(source, job.id, "copy")
    assert count(straddlers(source, job), "swapped") == len(job.plan.tasks)


def cancelled_rewrite(source: Source, job_id: str, tenant: str) -> dict[str, str]:
    """The rewrite abandoned: the tenant stays installed, reading as of S; copies a
    swap installed stay members, every other copy is gone from the bucket."""
    job = load_job(source.store.catalog, job_id)
    assert job.state == "cancelled" and job.installed_ts is not None
    reads_as_of_s(source, tenant)
    states = straddlers(source, job)
    swapped = {t.out_key for t in job.plan.tasks if states[t.task_id] == "swapped"}
    assert registered_copies(source, job) == swapped
    no_leaked_copies(source, job)
    assert catalog_rows(source.store, "SELECT * FROM job_pins WHERE job_id = ?", (job_id,)) == []
    sound(source)
    return states


def test_a_job_killed_between_swap_transactions_can_be_cancelled_instead(
    source: Source, workers: Callable[..., Worker]
) -> None:
    worker = workers(source, "--to", "copy", "--batch", str(BATCH), "--pause-at", "swap:1")
    worker.expect("installed")
    worker.expect("paused")
    worker.kill()
    job = job_of(source, "copy")

    cancelled = cancel_restore(source.store, job.id)

    assert cancelled.state == "cancelled"
    states = cancelled_rewrite(source, job.id, "copy")
    assert count(states, "swapped") == BATCH and count(states, "cut") == len(states) - BATCH
    with pytest.raises(InvalidArgument, match="cancelled; there is nothing to resume"):
        resume_restore(source.store, job.id)


# --- 2. a kill during the rewrite, after the install --------------------------------------------


@pytest.mark.parametrize("then", ["resume", "cancel"])
def test_a_kill_during_the_rewrite_leaves_the_installed_tenant_correct(
    source: Source, workers: Callable[..., Worker], then: str
) -> None:
    """In place: the source is retired at the install, and must still be untouched.
    Killed after one rewrite task was journaled, while others were writing copies."""
    worker = workers(source, "--put-delay", "0.3", "--pause-at", "rewrite:1")
    worker.expect("installed")
    worker.expect("paused")
    worker.kill()
    job = job_of(source, source.name)
    assert job.state == "rewriting" and job.installed_ts is not None
    assert source.store.tenant(source.name).id == job.plan.new_tenant_id
    reads_as_of_s(source, source.name)
    assert set(straddlers(source, job).values()) == {"cut"}
    assert registered_copies(source, job) == set()
    assert new_prefix_keys(source, job)  # copies written, none installed
    sound(source)

    if then == "resume":
        resume_restore(source.store, job.id)
        reads_as_of_s(source, source.name)
        finished(source, job.id, source.name)
    else:
        cancel_restore(source.store, job.id)
        states = cancelled_rewrite(source, job.id, source.name)
        assert set(states.values()) == {"cut"}
        assert new_prefix_keys(source, job) == set()  # every copy deleted


# --- 3. a cancel racing the swap -------------------------------------------------------------


def test_a_cancel_racing_the_swap_stops_its_holder_between_transactions(
    source: Source, workers: Callable[..., Worker], tmp_path: Path
) -> None:
    go = tmp_path / "go"
    worker = workers(
        source, "--to", "copy", "--batch", "1", "--swap-delay", "1.0",
        "--pause-at", "swap:1", "--go-file", str(go),
    )  # fmt: skip
    worker.expect("installed")
    worker.expect("paused")
    job = job_of(source, "copy")
    go.touch()  # the holder swaps on, one straddler a second

    cancelled = cancel_restore(source.store, job.id)

    said = worker.outcome()
    assert worker.exit_code() == 3
    assert said["type"] == "RestoreCancelled" and "stays installed" in said["error"], said
    assert cancelled.state == "cancelled" and cancelled.installed_ts is not None
    states = cancelled_rewrite(source, job.id, "copy")
    # It stopped between two transactions: some swapped, the rest still cut.
    assert 1 <= count(states, "swapped") < len(states) and count(states, "merged") == 0
    assert count(states, "swapped") + count(states, "cut") == len(states)


# --- 4. two hosts resuming one rewrite ------------------------------------------------------


def test_two_hosts_resuming_one_rewrite_run_it_once(
    source: Source, workers: Callable[..., Worker], tmp_path: Path
) -> None:
    """Two processes, named as two hosts (so each judges the other's lease by its
    expiry alone), resume one --no-wait job at the same moment."""
    outcome = restore_tenant(
        source.store, source.name, "mon", to="copy", executor="local", instant=True, wait=False
    )
    assert outcome.rewrite_pending
    go = tmp_path / "go"
    racers = [
        workers(source, "--resume", outcome.job_id, "--go-file", str(go), "--put-delay", "0.5",
                "--hostname", f"host-{n}")
        for n in "ab"
    ]  # fmt: skip
    for racer in racers:
        racer.expect("ready")
    go.touch()

    said = [racer.outcome() for racer in racers]
    codes = [racer.exit_code() for racer in racers]

    winners = [n for n, s in enumerate(said) if s["ok"]]
    assert len(winners) == 1, said
    [winner] = winners
    loser = said[1 - winner]
    assert codes == [0 if n == winner else 3 for n in range(2)]
    assert loser["type"] == JobBusy.__name__, loser
    assert f"running on host-{'ab'[winner]} pid {racers[winner].proc.pid}" in loser["error"]
    assert said[winner]["rewritten"] == len(outcome.plan.tasks)
    reads_as_of_s(source, "copy")
    finished(source, outcome.job_id, "copy")
    assert count(straddlers(source, job_of(source, "copy")), "swapped") == len(outcome.plan.tasks)


def test_a_no_wait_install_gives_up_its_lease_for_any_host(
    source: Source, workers: Callable[..., Worker]
) -> None:
    """The process that installed is still alive, on another host, yet the job
    resumes here at once: its lease was given up, not left to expire."""
    worker = workers(source, "--to", "copy", "--no-wait", "--linger", "--hostname", "host-a")
    worker.expect("installed")
    said = worker.outcome()
    assert said["ok"] and said["pending"], said
    assert worker.proc.poll() is None  # alive, lingering
    [row] = catalog_rows(
        source.store,
        "SELECT state, lease_holder, lease_expires_us FROM restore_jobs WHERE id = ?",
        (said["job"],),
    )
    assert row == {"state": "rewriting", "lease_holder": None, "lease_expires_us": None}
    reads_as_of_s(source, "copy")

    started = time.monotonic()
    resumed = resume_restore(source.store, said["job"])

    assert time.monotonic() - started < 30  # the default lease is 60 s
    assert resumed.rewritten == len(resumed.plan.tasks)
    assert worker.exit_code() == 0
    finished(source, said["job"], "copy")


# --- 5. writes and compactions while the swap runs ------------------------------------------


def replay(model: dict[int, str], log: str) -> dict[int, str]:
    """The loader's commits (tests/helpers/concurrent_worker.py), applied to ``model`` in order."""
    state = dict(model)
    for line in log.splitlines():
        commit = json.loads(line)
        for key in commit["deletes"]:
            state.pop(key, None)
        for key, value in commit["upserts"]:
            state[key] = value
    return state


def contents(store: TableStore, tenant: str) -> dict[int, str]:
    return {r["id"]: r["v"] for r in reads(store, tenant)[TABLE]}


def test_writes_and_compactions_during_the_swap_neither_fail_nor_conflict(
    source: Source, workers: Callable[..., Worker], tmp_path: Path
) -> None:
    go = tmp_path / "go"
    worker = workers(
        source, "--to", "copy", "--batch", "1", "--swap-delay", "0.7",
        "--pause-at", "swap:0", "--go-file", str(go),
    )  # fmt: skip
    worker.expect("installed")
    worker.expect("paused")
    job = job_of(source, "copy")
    # A loader commits 21 upserts and deletes to the restored tenant, compacting
    # its table after every 7th, while the swap goes on in the other process.
    loader = subprocess.Popen(
        [sys.executable, str(LOADER), "load", source.catalog_uri, source.warehouse_uri, "copy",
         "--seed", "7", "--commits", "21"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    assert loader.stdout is not None
    first = loader.stdout.readline()
    go.touch()
    out, err = loader.communicate(timeout=300)
    said = worker.outcome()

    assert loader.returncode == 0, err[-3000:]
    assert "lost a race" not in err, err[-3000:]
    assert said["ok"], said
    expected = replay({r["id"]: r["v"] for r in source.at_mon}, first + out)
    assert contents(source.store, "copy") == expected
    finished(source, job.id, "copy")


# --- 6. S3 errors during the rewrite and the swap ---------------------------------------------


def failing(error_at: str) -> Callable[[str], BaseException]:
    return lambda key: StorageError(f"cannot {error_at} {key}: InternalError (injected)")


class FailingDeletes(WrappedObjectStore):
    """The real object store, whose deletes fail (S3 answering 500 after its retries)."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.deletes: list[list[str]] = []

    def delete_many(self, keys: Any) -> None:
        self.deletes.append(list(keys))
        raise StorageError(f"cannot delete {len(self.deletes[-1])} key(s): InternalError")


def test_an_s3_error_in_the_rewrite_after_the_install_fails_the_job_resumable(
    source: Source,
) -> None:
    installed: list[Any] = []
    faulty = WrappedObjectStore(source.store.objects, fail_put_at=3, error=failing("write"))
    with pytest.raises(StorageError, match=r"cannot write .*failed; resume with .*--resume"):
        restore_tenant(
            with_objects(source.store, faulty), source.name, "mon", to="copy",
            executor="local", instant=True, on_installed=installed.append,
        )  # fmt: skip
    assert installed
    job = job_of(source, "copy")
    assert job.state == "failed" and job.installed_ts is not None
    assert "StorageError" in (job.error or "")
    reads_as_of_s(source, "copy")
    assert set(straddlers(source, job).values()) == {"cut"}
    sound(source)

    resume_restore(source.store, job.id)

    reads_as_of_s(source, "copy")
    finished(source, job.id, "copy")


def test_an_s3_error_deleting_unneeded_copies_fails_the_job_resumable(source: Source) -> None:
    """A compaction merged every cut member before the swap: no copy is needed, and
    deleting them fails. The job must not be done with its copies left behind.
    (Regression: they were deleted after the job was marked done, so it said
    "failed; resume with" about a done job, and the copies stayed.)"""
    outcome = restore_tenant(
        source.store, source.name, "mon", to="copy", executor="local", instant=True, wait=False
    )
    source.store.compact("copy", full=True)
    faulty = FailingDeletes(source.store.objects)

    with pytest.raises(StorageError, match=r"cannot delete .*failed; resume with .*--resume"):
        resume_restore(with_objects(source.store, faulty), outcome.job_id)

    assert faulty.deletes, "the unneeded copies were to be deleted"
    job = job_of(source, "copy")
    assert job.state == "failed" and job.installed_ts is not None
    assert set(straddlers(source, job).values()) == {"merged"}
    reads_as_of_s(source, "copy")
    sound(source)

    resume_restore(source.store, job.id)

    reads_as_of_s(source, "copy")
    finished(source, job.id, "copy")
    assert new_prefix_keys(source, job) == {o.key for _, o in source.store.objects_of("copy")}


def test_a_resume_after_gc_collected_swapped_copies_still_finishes(
    source: Source, workers: Callable[..., Worker], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after one swap transaction; the tenant is used meanwhile: a compaction
    merges the swapped copies (and the cut members left), and GC collects the
    copies. Resuming must not ask for the copies it already swapped in.
    (Regression: it verified them again, and failed with ObjectMissing each time.)"""
    worker = workers(source, "--to", "copy", "--batch", str(BATCH), "--pause-at", "swap:1")
    worker.expect("installed")
    worker.expect("paused")
    worker.kill()
    job = job_of(source, "copy")
    swapped = {t.out_key for t in job.plan.tasks if straddlers(source, job)[t.task_id] == "swapped"}
    assert len(swapped) == BATCH
    source.store.compact("copy", full=True)
    run_gc(source.store, dry_run=False, grace_us=0, allow_short_grace=True, compact=False)
    # GC also took the source's objects its compaction had replaced: what it holds now
    source.keys = bucket_keys(source.store, tenant_prefix(source.tenant_id))
    assert swapped.isdisjoint(new_prefix_keys(source, job)), "GC collected the swapped copies"
    reads_as_of_s(source, "copy")

    monkeypatch.setattr(engine.restore.swap, "BATCH", BATCH)
    resume_restore(source.store, job.id)

    reads_as_of_s(source, "copy")
    finished(source, job.id, "copy")


def test_a_compaction_that_read_cut_members_the_swap_replaced_meanwhile_wins(
    source: Source, workers: Callable[..., Worker]
) -> None:
    """The race case 5 runs by chance, made certain: a full compaction of the restored
    table reads its cut members, and before it commits another process swaps them
    all for their copies. The copies hold the same rows, so the compaction replaces
    them instead of losing the race. (Regression: it raised ConcurrentModification.)"""
    outcome = restore_tenant(
        source.store, source.name, "mon", to="copy", executor="local", instant=True, wait=False
    )
    swapped: list[dict[str, Any]] = []

    class SwapMidMerge(WrappedObjectStore):
        def open_output(self, key: str) -> Any:
            if not swapped:  # the merge has read the catalog and writes its first output
                resumer = workers(source, "--resume", outcome.job_id)
                swapped.append(resumer.outcome())
                assert resumer.exit_code() == 0
            return super().open_output(key)

    compacting = with_objects(source.store, SwapMidMerge(source.store.objects))
    [result] = compacting.compact("copy", full=True)

    assert swapped and swapped[0]["ok"], swapped
    job = job_of(source, "copy")
    assert result.inputs >= len(job.plan.tasks)
    states = straddlers(source, job)
    assert set(states.values()) == {"swapped"}  # the swap committed first...
    live = {o.id for _, o in source.store.objects_of("copy")}
    assert live.isdisjoint(t.out_object_id for t in job.plan.tasks)  # ...the merge replaced them
    reads_as_of_s(source, "copy")
    finished(source, job.id, "copy")
