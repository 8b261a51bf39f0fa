"""Deleting many keys from S3 at S3's rate: several DeleteObjects requests in flight.

One DeleteObjects request carries at most 1,000 keys and takes tens of
milliseconds, so one request at a time caps GC far below what S3 accepts
(3,500 deletes/s per prefix, and GC's keys spread over one prefix per table).
:func:`delete_keys` keeps :data:`DELETES_IN_FLIGHT` requests going from a small
thread pool (tenants/objectstore/batches.py): the keys are an iterator and are
never materialised.

Throttling is retried with tenacity, as every other S3 call (``_retry`` in
``s3.py``): a request refused whole (SlowDown, 503, 5xx, a dropped connection)
is sent again, and a 200 answer whose ``Errors`` list throttled keys resends
just those keys. A key S3 reports missing is deleted as far as GC cares.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential, wait_random

from tenants.errors import RewindError, StorageError, TransientError
from tenants.objectstore.batches import in_parallel
from tenants.objectstore.s3 import MAX_ATTEMPTS, MISSING_CODES, RETRYABLE_CODES, _is_retryable

if TYPE_CHECKING:
    from tenants.objectstore.s3 import S3ObjectStore

DELETE_BATCH = 1000  # S3's limit for one DeleteObjects request
# Requests in flight. Eight 1,000-key requests of ~0.1 s each reach ~80k keys/s,
# well above one prefix's 3,500/s: past that S3 answers SlowDown and the backoff
# paces us, so more threads would only queue. The client's pool has 32 connections.
DELETES_IN_FLIGHT = 8


class KeysThrottled(Exception):
    """DeleteObjects answered 200 but throttled some keys: resend just ``keys``."""

    def __init__(self, keys: list[str], code: str) -> None:
        super().__init__(f"{len(keys)} key(s) throttled ({code})")
        self.keys = keys
        self.code = code


def _retryable(error: BaseException) -> bool:
    return isinstance(error, KeysThrottled) or _is_retryable(error)


def delete_batch(store: S3ObjectStore, keys: list[str]) -> int:
    """One DeleteObjects request of up to 1,000 keys, retried until every key is gone.

    Raises:
        StorageError: S3 refused a key for another reason than throttling
            (AccessDenied...): it fails at once, naming the first such key.
        TransientError: still throttled after ``MAX_ATTEMPTS`` attempts.
    """
    bucket = store.warehouse.bucket
    pending = keys

    def send() -> None:
        nonlocal pending
        response = store._client.delete_objects(
            Bucket=bucket,
            Delete={"Objects": [{"Key": store._full(k)} for k in pending], "Quiet": True},
        )
        errors = [e for e in response.get("Errors", []) if e.get("Code") not in MISSING_CODES]
        if not errors:
            return
        fatal = [e for e in errors if e.get("Code") not in RETRYABLE_CODES]
        if fatal:
            first = fatal[0]
            raise StorageError(
                f"cannot delete {len(fatal)} of {len(pending)} objects in s3://{bucket}, "
                f"first s3://{bucket}/{first.get('Key')}: {first.get('Code')}"
            )
        failed = {e.get("Key") for e in errors}
        pending = [k for k in pending if store._full(k) in failed]
        raise KeysThrottled(pending, str(errors[0].get("Code")))

    retrying = Retrying(
        retry=retry_if_exception(_retryable),
        stop=stop_after_attempt(MAX_ATTEMPTS),
        wait=wait_exponential(multiplier=0.05, max=2.0) + wait_random(0, 0.05),
        reraise=True,
    )
    try:
        retrying(send)
    except KeysThrottled as e:
        raise TransientError(
            f"cannot delete {len(e.keys)} objects in s3://{bucket} (e.g. "
            f"{store._where(e.keys[0])}): {e.code} after {MAX_ATTEMPTS} attempts"
        ) from e
    except RewindError:
        raise
    except Exception as e:
        raise store._translate(e, pending[0], "delete") from e
    return len(keys)


def delete_keys(store: S3ObjectStore, keys: Iterable[str]) -> int:
    """Delete ``keys``, :data:`DELETES_IN_FLIGHT` requests of :data:`DELETE_BATCH` at once.

    The first failure stops cutting batches; the requests already in flight
    finish, then it is raised: keys not yet sent stay, and the caller's record
    of them (GC's ``gc_pending``) finishes them on a rerun.
    """
    store._client  # noqa: B018  # built here, before the threads that share it
    return in_parallel(
        keys,
        lambda batch: delete_batch(store, batch),
        batch=DELETE_BATCH,
        in_flight=DELETES_IN_FLIGHT,
        name="s3-delete",
    )
