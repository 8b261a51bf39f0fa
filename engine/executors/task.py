"""One rewrite task: an object's rows at or before S, streamed to the new tenant.

The one straddler body: every executor (local threads, Spark tasks) runs
``run_task``, and a physical backup's straddlers go through ``rewrite_object``
too, so they cannot disagree. ``__ts`` is kept exactly as written: it is the MVCC timestamp, not
an ordinary column. The result carries the content hash of the kept rows,
which verification later compares with a fresh read of the output.
"""

from __future__ import annotations

import os
import socket
from dataclasses import replace

import pyarrow.compute as pc

from engine.pipeline import RewriteResult, RewriteTask
from tenants.errors import RewindError, TaskFailed
from tenants.objects.io import record_of
from tenants.objects.read_ahead import reading_ahead
from tenants.objects.reader import open_object
from tenants.objects.record import ObjectRecord
from tenants.objects.writer import ObjectWriter, WrittenObject
from tenants.objectstore import ObjectStore
from tenants.schema import TS


def worker_name() -> str:
    return f"{socket.gethostname()} pid {os.getpid()}"


def run_task(objects: ObjectStore, task: RewriteTask) -> RewriteResult:
    """Run one task where it stands (a thread, a Spark task); a failure names the
    job, the input object and this process, and keeps a Rewind error's class so
    the driver can tell a missing object from a bug.

    Raises:
        RewindError: the input is missing or damaged (its class kept), named
            with the job, the input and this process.
        TaskFailed: any other failure, named the same way.
    """
    where = worker_name()
    try:
        return replace(_rewrite(objects, task), worker=where)
    except RewindError as e:
        raise type(e)(
            f"restore job {task.job_id}: rewriting {task.input.key} on {where}: {e.message}"
        ) from e
    except Exception as e:
        raise TaskFailed(
            f"restore job {task.job_id}: rewriting {task.input.key} on {where}: "
            f"{type(e).__name__}: {e}"
        ) from e


# Batches of a rewrite: one is filtered while the next decodes (read ahead), and
# a row group is gathered while the one before it encodes; half the reader's
# default keeps the four within a rewrite's memory goal at no measured cost.
REWRITE_BATCH_BYTES = 4 * 1024 * 1024


def _rewrite(objects: ObjectStore, task: RewriteTask) -> RewriteResult:
    written = rewrite_object(
        objects, task.input, task.as_of, task.primary_key, objects, task.out_key
    )
    record = record_of(written, task.out_object_id, task.input.kind, task.input.fingerprint, 0)
    assert written.row_hash is not None
    return RewriteResult(task.task_id, record, written.row_hash)


def rewrite_object(
    source: ObjectStore,
    record: ObjectRecord,
    as_of: int,
    primary_key: tuple[str, ...],
    dest: ObjectStore,
    dest_key: str,
) -> WrittenObject:
    """Stream ``record``'s rows at or before ``as_of`` to ``dest_key``: rows are
    stored in (pk, ts) order and a filter keeps it, so nothing is sorted and
    memory is a row group whatever the object's size. (A restore's task and a
    physical backup's straddler both come here.)

    Raises:
        TaskFailed: no row of the object is at or before ``as_of`` (it does
            not straddle the cut, so the plan was wrong).
    """
    as_of = record.read_ts(as_of)  # a member held with a cut keeps no row after it
    with (
        open_object(source, record) as reader,
        reading_ahead(reader.batches(batch_bytes=REWRITE_BATCH_BYTES)) as batches,
    ):
        with ObjectWriter(dest, dest_key, reader.schema, primary_key, hash_rows=True) as writer:
            for batch in batches:
                writer.write(batch.filter(pc.less_equal(batch.column(TS), as_of)))
            if writer.rows == 0:
                raise TaskFailed(
                    f"no row of {record.key} is at or before ts {as_of}: "
                    "only objects that straddle the cut are rewritten"
                )
            return writer.finish()
