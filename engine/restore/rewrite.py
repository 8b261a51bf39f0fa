"""One rewrite task: an object's rows at or before S, sorted, under the new tenant.

Shared verbatim by every executor (local threads, Spark tasks), so they cannot
disagree. ``__ts`` is kept exactly as written: it is the MVCC timestamp, not
an ordinary column. The result carries the content hash of the kept rows,
which verification later compares with a fresh read of the output.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, dataclass, replace

import pyarrow.compute as pc

from engine.restore.plan import RewriteTask
from tenants.errors import RewindError, TaskFailed
from tenants.object_io import read_object, write_object
from tenants.objects import ObjectRecord, sort_by_key_and_ts
from tenants.objectstore import ObjectStore
from tenants.parquet_codec import content_hash
from tenants.schema import TS


@dataclass(frozen=True)
class RewriteResult:
    task_id: str
    output: ObjectRecord
    content_hash: str  # of the input's rows with __ts <= S, in (pk, ts) order
    worker: str = ""  # "host pid N": the process that ran the task (journaled)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RewriteResult:
        raw = json.loads(text)
        return cls(
            raw["task_id"],
            ObjectRecord(**raw["output"]),
            raw["content_hash"],
            raw.get("worker", ""),
        )


def row_hash(rows, primary_key: tuple[str, ...]) -> str:  # type: ignore[no-untyped-def]
    """Content hash of object rows in (pk, ts) order."""
    return content_hash(rows, [*primary_key, TS])


def worker_name() -> str:
    return f"{socket.gethostname()} pid {os.getpid()}"


def run_task(store: ObjectStore, task: RewriteTask) -> RewriteResult:
    """Run one task where it stands (a thread, a Spark task); a failure names the
    job, the input object and this process, and keeps a Rewind error's class so
    the driver can tell a missing object from a bug."""
    where = worker_name()
    try:
        return replace(_rewrite(store, task), worker=where)
    except RewindError as e:
        raise type(e)(f"restore job {task.job_id}: rewriting {task.input.key} on {where}: {e.message}") from e
    except Exception as e:
        raise TaskFailed(
            f"restore job {task.job_id}: rewriting {task.input.key} on {where}: "
            f"{type(e).__name__}: {e}"
        ) from e


def _rewrite(store: ObjectStore, task: RewriteTask) -> RewriteResult:
    rows = read_object(store, task.input)
    kept = sort_by_key_and_ts(
        rows.filter(pc.less_equal(rows.column(TS), task.as_of)), task.primary_key
    )
    record = write_object(
        store,
        kept,
        tenant_id=task.out_tenant_id,
        table_id=task.out_table_id,
        kind=task.input.kind,
        fingerprint=task.input.fingerprint,
        primary_key=task.primary_key,
        created_ts=0,
        object_id=task.out_object_id,
    )
    return RewriteResult(task.task_id, record, row_hash(kept, task.primary_key))
