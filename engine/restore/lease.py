"""Job leases: which process runs a restore job, until when, and whether to stop.

A process that runs (or resumes) a job first takes its lease: one
compare-and-set on the job row naming the holder (``host:pid:start:token``)
and an expiry on the wall clock. A heartbeat thread renews it every third of
its lifetime and reads whether someone asked the job to stop. Every state
change the holder makes is conditional on still holding the lease, so a
process that lost it (paused past its expiry, then taken over) can change
nothing. This is CockroachDB's job-lease model, kept small.

A lease is *live* while it has not expired and its holder is not known to be
dead. On the holder's own host, a holder whose process is gone (or whose pid
now belongs to a newer process) is dead at once, so a restore killed by
SIGKILL can be resumed or cancelled immediately instead of after the expiry.
On another host only the expiry can tell.

Clocks: lease expiries are wall-clock microseconds of the hosts involved (not
the catalog's commit clock, which a backup restore can push far ahead). Hosts
must keep their clocks within a fraction of the lease lifetime of each other
(NTP does far better than the default 60 s).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType

from tenants.catalog import Catalog, Row
from tenants.catalog.base import wall_clock_us
from tenants.catalog.engine.jobs import (
    holder_and_stop,
    job_lease_and_stop,
    renew_lease,
    stop_requested_at,
    take_lease,
)
from tenants.errors import ConcurrentModification, InvalidArgument, RewindError, TransientError
from tenants.times import format_duration

log = logging.getLogger(__name__)
LEASE_SECONDS_ENV = "REWIND_JOB_LEASE_SECONDS"
DEFAULT_LEASE_SECONDS = 60.0
_ACTIVE: set[str] = set()  # tokens of the leases this process holds right now
_ACTIVE_LOCK = threading.Lock()


class JobBusy(TransientError):
    """Another live process runs this job; wait for it, or ask it to stop with --cancel."""


class LeaseLost(ConcurrentModification):
    """This process no longer holds the job's lease (it expired and another took over)."""


class StopRequested(RewindError):
    """Someone asked the job to stop (``--cancel``); the holder cancels it itself."""


def lease_seconds() -> float:
    raw = os.environ.get(LEASE_SECONDS_ENV)
    if not raw:
        return DEFAULT_LEASE_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0.5 <= value <= 86_400:
        raise InvalidArgument(f"{LEASE_SECONDS_ENV}={raw!r}: give seconds between 0.5 and 86400")
    return value


@dataclass(frozen=True)
class Holder:
    host: str
    pid: int
    started: str  # the process's start time in clock ticks since boot, "" when unknown
    token: str

    @property
    def text(self) -> str:
        return f"{self.host}:{self.pid}:{self.started}:{self.token}"

    @property
    def label(self) -> str:
        return f"{self.host} pid {self.pid}"

    @classmethod
    def parse(cls, text: str) -> Holder | None:
        parts = text.rsplit(":", 3)
        if len(parts) != 4 or not parts[1].isdigit():
            return None
        return cls(parts[0], int(parts[1]), parts[2], parts[3])

    @classmethod
    def this_process(cls) -> Holder:
        pid = os.getpid()
        # lease_holder is VARCHAR(255), which PostgreSQL enforces: a host name may be
        # 253 characters. A cut name never matches this host, so such a holder is
        # judged by its expiry alone, the safe direction.
        return cls(socket.gethostname()[:200], pid, _process_start(pid), uuid.uuid4().hex[:12])


def _process_start(pid: int) -> str:
    """The process's start time (Linux: field 22 of /proc/PID/stat), to tell pid reuse."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return ""
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else ""


@contextmanager
def held(holder: str) -> Iterator[None]:
    """Count ``holder`` (a :class:`Holder`'s text) as live in this process for the
    body: :func:`holder_alive` asked here answers True while it runs."""
    token = holder.rsplit(":", 1)[1]
    with _ACTIVE_LOCK:
        _ACTIVE.add(token)
    try:
        yield
    finally:
        with _ACTIVE_LOCK:
            _ACTIVE.discard(token)


def holder_alive(text: str) -> bool | None:
    """True or False when this host can tell; None for a holder on another host."""
    holder = Holder.parse(text)
    if holder is None or holder.host != socket.gethostname():
        return None
    if holder.pid == os.getpid():
        with _ACTIVE_LOCK:
            return holder.token in _ACTIVE
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    started = _process_start(holder.pid)
    if holder.started and started and started != holder.started:
        return False  # the pid now belongs to a newer process
    return True


def lease_live(row: Row, now_us: int | None = None) -> bool:
    """Whether the job row's lease protects a running holder."""
    holder, expires = row.get("lease_holder"), row.get("lease_expires_us")
    if holder is None or expires is None:
        return False
    if holder_alive(holder) is False:
        return False
    return int(expires) > (wall_clock_us() if now_us is None else now_us)


def describe(row: Row) -> str:
    """``host pid N (lease renewed Xs ago)`` for error messages."""
    holder = Holder.parse(str(row.get("lease_holder") or ""))
    who = holder.label if holder else str(row.get("lease_holder"))
    expires = row.get("lease_expires_us")
    if expires is None:
        return who
    left = int(expires) - wall_clock_us()
    return f"{who} (lease expires in {format_duration(max(left, 0)) if left > 0 else '0s'})"


class JobLease:
    """The lease of one job, held by this process between ``acquire`` and ``close``.

    Use as a context manager around the work; ``check()`` raises when the job
    was asked to stop or the lease was lost. ``holder`` is the value every
    holder-conditional statement compares against.
    """

    def __init__(self, catalog: Catalog, job_id: str, *, seconds: float | None = None) -> None:
        self.catalog = catalog
        self.job_id = job_id
        self.seconds = lease_seconds() if seconds is None else seconds
        self.holder = Holder.this_process().text
        self._token = self.holder.rsplit(":", 1)[1]
        self._stop = threading.Event()
        self._lost = threading.Event()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def ttl_us(self) -> int:
        return int(self.seconds * 1_000_000)

    def expiry_us(self) -> int:
        """When a lease taken or renewed now expires."""
        return wall_clock_us() + self.ttl_us

    def begin(self) -> None:
        """Start holding: this process counts as the holder, and the heartbeat runs."""
        with _ACTIVE_LOCK:
            _ACTIVE.add(self._token)
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._heartbeat, name=f"lease-{self.job_id[:8]}", daemon=True
            )
            self._thread.start()

    def acquire(self, *, active_states: tuple[str, ...]) -> None:
        """Take the lease (compare-and-set); raise ``JobBusy`` if a live holder has it."""
        try:
            with self.catalog.transaction() as tx:
                row = job_lease_and_stop(tx, self.job_id)
                if row is None or row["state"] not in active_states:
                    return  # the caller's own state check reports this
                if lease_live(row):
                    raise JobBusy(
                        f"restore job {self.job_id} is running on {describe(row)}; wait for it "
                        f"to finish, or ask it to stop with `--cancel {self.job_id}`"
                    )
                if row["stop_requested_us"] is not None:
                    self._stop.set()
                take_lease(tx, self.job_id, self.holder, self.expiry_us())
        except BaseException:
            self.close()
            raise
        self.begin()

    def _heartbeat(self) -> None:
        while not self._done.wait(self.seconds / 3):
            try:
                with self.catalog.transaction() as tx:
                    renewed = renew_lease(tx, self.job_id, self.holder, self.expiry_us())
                    stop = stop_requested_at(tx, self.job_id)
            except Exception:  # a busy catalog: try again at the next beat
                log.warning("restore job %s: lease heartbeat failed", self.job_id, exc_info=True)
                continue
            if renewed != 1:
                self._lost.set()
                return
            if stop is not None:
                self._stop.set()

    def check(self) -> None:
        """Raise if the job must stop: asked to (``StopRequested``) or lease lost."""
        if self._lost.is_set():
            raise LeaseLost(
                f"restore job {self.job_id}: this process lost the job's lease (it was paused "
                "past its expiry or the job was cancelled); it stops and changes nothing more"
            )
        if self._stop.is_set():
            raise StopRequested(f"restore job {self.job_id}: stopping, as --cancel asked")

    def poll(self) -> None:
        """``check()`` after reading the stop request now (between steps, not on a beat)."""
        with self.catalog.snapshot() as tx:
            row = holder_and_stop(tx, self.job_id)
        if row is None or row["lease_holder"] != self.holder:
            self._lost.set()
        elif row["stop_requested_us"] is not None:
            self._stop.set()
        self.check()

    def close(self) -> None:
        self._done.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        with _ACTIVE_LOCK:
            _ACTIVE.discard(self._token)

    def __enter__(self) -> JobLease:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
