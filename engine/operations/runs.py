"""Journal a run (a backup, a GC pass, a restore drill) in the catalog as it happens.

``journaled(...)`` inserts the run as ``running`` before the work starts, with a
lease (the restore jobs' holder format and lifetime, engine/restore/lease.py)
that a heartbeat thread renews, and records ``done`` with the run's size or
``failed`` with its one-line, redacted error when the body ends. A process
killed mid-run leaves a ``running`` row whose lease runs out: ``rewind status``
shows it as stale and ``rewind metrics`` counts it, from any host.

Journaling never decides anything: a catalog that cannot take the final row
(it went away with the work) is logged, not raised over the work's own outcome.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from engine.restore.lease import Holder, held, lease_seconds
from tenants.catalog import Catalog
from tenants.catalog.base import wall_clock_us
from tenants.catalog.engine.runs import (
    DONE,
    FAILED,
    RunEnd,
    RunStart,
    finish_run,
    insert_run,
    renew_run,
)
from tenants.redaction import redact

log = logging.getLogger(__name__)


@dataclass
class Run:
    """A run in progress: the body fills in its size as it learns it."""

    run_id: str
    kind: str
    tenant_name: str | None
    bytes: int | None = None
    objects: int | None = None
    row_count: int | None = None
    backup_id: str | None = None
    point_ts: int | None = None
    extra: dict[str, object] = field(default_factory=dict)


def new_run_id() -> str:
    return uuid.uuid4().hex


@contextmanager
def journaled(
    catalog: Catalog,
    kind: str,
    *,
    tenant: str | None = None,
    target: str | None = None,
    method: str | None = None,
    point_ts: int | None = None,
    backup_id: str | None = None,
) -> Iterator[Run]:
    """Journal the body as one run of ``kind`` (see the module doc)."""
    seconds = lease_seconds()
    holder = Holder.this_process().text
    run = Run(new_run_id(), kind, tenant, backup_id=backup_id, point_ts=point_ts)
    start = RunStart(
        run.run_id,
        kind,
        tenant,
        None if target is None else redact(target),
        method,
        point_ts,
        backup_id,
    )
    with catalog.transaction() as tx:
        insert_run(tx, start, wall_clock_us(), holder, wall_clock_us() + int(seconds * 1e6))
    done = threading.Event()
    beat = threading.Thread(
        target=_heartbeat,
        args=(catalog, run.run_id, holder, seconds, done),
        name=f"run-{run.run_id[:8]}",
        daemon=True,
    )
    beat.start()
    state, message = DONE, None
    try:
        with held(holder):
            yield run
    except BaseException as error:
        first = (str(error).splitlines() or [""])[0]
        state = FAILED
        message = redact(f"{type(error).__name__}: {first}" if first else type(error).__name__)
        raise
    finally:
        done.set()
        beat.join(timeout=5)
        _finish(catalog, run, state, None if message is None else message[:2000])


def _finish(catalog: Catalog, run: Run, state: str, error: str | None) -> None:
    end = RunEnd(
        state,
        wall_clock_us(),
        run.bytes,
        run.objects,
        run.row_count,
        error,
        run.backup_id,
        run.point_ts,
    )
    try:
        with catalog.transaction() as tx:
            finish_run(tx, run.run_id, end)
    except Exception:
        log.warning(
            "%s run %s (tenant %s): could not journal its end (%s)",
            run.kind,
            run.run_id,
            run.tenant_name,
            state,
            exc_info=True,
        )


def _heartbeat(
    catalog: Catalog, run_id: str, holder: str, seconds: float, done: threading.Event
) -> None:
    while not done.wait(seconds / 3):
        try:
            with catalog.transaction() as tx:
                if not renew_run(tx, run_id, holder, wall_clock_us() + int(seconds * 1e6)):
                    return
        except Exception:  # a busy catalog: try again at the next beat
            log.warning("run %s: lease heartbeat failed", run_id, exc_info=True)
