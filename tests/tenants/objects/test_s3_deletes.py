"""S3 deletes at S3's rate: parallel DeleteObjects requests, streamed keys, throttling retried.

Every test runs against the moto HTTP server. moto never throttles, so the
throttling faults are injected by wrapping the store's real boto3 client
(its ``delete_objects`` answers from a script, or throttles chosen keys, and
otherwise calls the server): the code under test runs its production path
and the keys it does delete are really gone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

import tenants.objectstore.s3_deletes as s3_deletes
from tenants.errors import StorageError, TransientError
from tenants.objectstore import ObjectStore, open_object_store
from tenants.objectstore.embedded import EmbeddedS3


@pytest.fixture
def s3_store(s3_server: EmbeddedS3, bucket: str) -> ObjectStore:
    return open_object_store(f"s3://{bucket}/warehouse", s3_server.settings)


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of 10 keys, 4 requests in flight: many batches from few keys."""
    monkeypatch.setattr(s3_deletes, "DELETE_BATCH", 10)
    monkeypatch.setattr(s3_deletes, "DELETES_IN_FLIGHT", 4)


def fill(s3: EmbeddedS3, bucket: str, keys: list[str]) -> None:
    """Put each key straight into the bucket (filling it is not under test)."""
    client = boto3.client("s3", **s3.settings.to_boto3())
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(
            pool.map(
                lambda k: client.put_object(Bucket=bucket, Key=f"warehouse/{k}", Body=b"."), keys
            )
        )


def keys_under(store: ObjectStore, prefix: str = "") -> list[str]:
    return sorted(info.key for info in store.list(prefix))


class WrappedDeletes:
    """The store's real boto3 client; ``delete_objects`` goes through ``answer``.

    ``answer(send, keys)`` gets the real call and the request's (full) keys and
    returns the response. Records every request's keys and the most requests
    ever in flight at once (each real call is held ``hold_s`` to overlap them).
    """

    def __init__(
        self,
        store: ObjectStore,
        answer: Callable[[Callable[[], Any], list[str]], Any] | None = None,
        hold_s: float = 0.0,
    ) -> None:
        self.inner = store._client  # type: ignore[attr-defined]
        self.answer = answer or (lambda send, keys: send())
        self.hold_s = hold_s
        self.requests: list[list[str]] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self._lock = threading.Lock()
        store._client_obj = self  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name != "delete_objects":
            return attr

        def call(**kwargs: Any) -> Any:
            keys = [o["Key"] for o in kwargs["Delete"]["Objects"]]
            with self._lock:
                self.requests.append(keys)
                self.in_flight += 1
                self.most_in_flight = max(self.most_in_flight, self.in_flight)
            try:
                time.sleep(self.hold_s)
                return self.answer(lambda: attr(**kwargs), keys)
            finally:
                with self._lock:
                    self.in_flight -= 1

        return call


def per_key_errors(keys: list[str], code: str) -> dict[str, Any]:
    return {
        "Errors": [{"Key": k, "Code": code, "Message": f"injected {code}"} for k in keys],
        "ResponseMetadata": {"HTTPStatusCode": 200},
    }


def slow_down() -> ClientError:
    return ClientError(
        {
            "Error": {"Code": "SlowDown", "Message": "injected SlowDown"},
            "ResponseMetadata": {"HTTPStatusCode": 503},
        },
        "DeleteObjects",
    )


def test_many_keys_go_out_as_parallel_requests_of_one_batch_each(
    s3_store: ObjectStore, s3_server: EmbeddedS3, bucket: str, small_batches: None
) -> None:
    keys = [f"d/{i:03d}" for i in range(95)]
    fill(s3_server, bucket, [*keys, "keep/0"])
    client = WrappedDeletes(s3_store, hold_s=0.05)

    assert s3_store.delete_many(iter(keys)) == 95

    assert sorted(len(r) for r in client.requests) == [5] + [10] * 9
    assert sorted(k for r in client.requests for k in r) == [f"warehouse/{k}" for k in keys]
    assert 1 < client.most_in_flight <= 4
    assert keys_under(s3_store) == ["keep/0"]


def test_one_batch_is_one_request_without_a_pool(s3_store: ObjectStore) -> None:
    threads: list[str] = []

    def answer(send: Callable[[], Any], batch: list[str]) -> Any:
        threads.append(threading.current_thread().name)
        return send()

    client = WrappedDeletes(s3_store, answer)
    assert s3_store.delete_many(["a", "b"]) == 2
    assert [len(r) for r in client.requests] == [2]
    assert threads == [threading.current_thread().name]  # sent from the caller's thread
    assert s3_store.delete_many([]) == 0
    assert len(client.requests) == 1


def test_keys_are_read_only_as_request_slots_free_up(
    s3_store: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A million keys cost a few batches of memory: the iterator is drawn one batch
    ahead of the requests in flight, never to its end up front."""
    monkeypatch.setattr(s3_deletes, "DELETE_BATCH", 100)
    monkeypatch.setattr(s3_deletes, "DELETES_IN_FLIGHT", 3)
    drawn = 0
    done = 0

    def keys() -> Iterator[str]:
        nonlocal drawn
        for i in range(3_000):
            drawn += 1
            yield f"missing/{i}"  # moto deletes missing keys without error, as S3 does

    seen: list[tuple[int, int]] = []

    def answer(send: Callable[[], Any], batch: list[str]) -> Any:
        nonlocal done
        seen.append((drawn, done))
        response = send()
        done += 1
        return response

    client = WrappedDeletes(s3_store, answer, hold_s=0.01)
    assert s3_store.delete_many(keys()) == 3_000
    assert len(client.requests) == 30
    # Drawn when a request starts: at most the requests finished, those in flight
    # (3) and the batch being cut, each of 100 keys.
    assert all(d <= (finished + 3 + 1) * 100 for d, finished in seen), seen


def test_keys_throttled_in_a_200_answer_are_resent_alone(
    s3_store: ObjectStore, s3_server: EmbeddedS3, bucket: str, small_batches: None
) -> None:
    keys = [f"t/{i:02d}" for i in range(30)]
    fill(s3_server, bucket, keys)
    throttled = {f"warehouse/t/{i:02d}" for i in range(0, 30, 3)}
    answered: set[str] = set()

    def answer(send: Callable[[], Any], batch: list[str]) -> Any:
        # The first time a throttled key is asked for, S3 keeps it and says SlowDown;
        # the others of the request are deleted.
        first_time = [k for k in batch if k in throttled and k not in answered]
        answered.update(first_time)
        if not first_time:
            return send()
        rest = [k for k in batch if k not in first_time]
        if rest:
            s3_store._client.inner.delete_objects(  # type: ignore[attr-defined]
                Bucket=bucket, Delete={"Objects": [{"Key": k} for k in rest], "Quiet": True}
            )
        return per_key_errors(first_time, "SlowDown")

    client = WrappedDeletes(s3_store, answer)
    assert s3_store.delete_many(keys) == 30
    # Three batches, each resending its throttled keys and only those.
    assert len(client.requests) == 6
    resent = [r for r in client.requests if set(r) <= throttled]
    assert sorted(k for r in resent for k in r) == sorted(throttled)
    assert sorted(k for r in client.requests for k in r) == sorted(
        [f"warehouse/{k}" for k in keys] + list(throttled)
    )
    assert keys_under(s3_store) == []


def test_whole_requests_throttled_in_parallel_are_each_retried(
    s3_store: ObjectStore, s3_server: EmbeddedS3, bucket: str, small_batches: None
) -> None:
    keys = [f"w/{i:02d}" for i in range(40)]
    fill(s3_server, bucket, keys)
    refused: set[str] = set()
    lock = threading.Lock()

    def answer(send: Callable[[], Any], batch: list[str]) -> Any:
        with lock:
            first = batch[0] not in refused
            refused.add(batch[0])
        if first:
            raise slow_down()
        return send()

    client = WrappedDeletes(s3_store, answer)
    assert s3_store.delete_many(keys) == 40
    assert len(client.requests) == 8  # four batches, each refused once
    assert keys_under(s3_store) == []


def test_keys_reported_missing_are_not_an_error(s3_store: ObjectStore) -> None:
    """Some S3-compatible stores answer NoSuchKey per key; the key is gone all the same."""
    client = WrappedDeletes(s3_store, lambda send, batch: per_key_errors(batch, "NoSuchKey"))
    assert s3_store.delete_many(["gone/1", "gone/2"]) == 2
    assert len(client.requests) == 1


def test_keys_throttled_past_every_attempt_fail_as_transient_naming_a_key(
    s3_store: ObjectStore,
) -> None:
    client = WrappedDeletes(s3_store, lambda send, batch: per_key_errors(batch[:1], "SlowDown"))
    with pytest.raises(TransientError, match=r"warehouse/x/1\b.*SlowDown after 5 attempts"):
        s3_store.delete_many(["x/1", "x/2"])
    assert len(client.requests) == 5
    assert client.requests[1:] == [["warehouse/x/1"]] * 4


def test_a_refused_key_fails_at_once_and_stops_cutting_batches(
    s3_store: ObjectStore, small_batches: None
) -> None:
    def answer(send: Callable[[], Any], batch: list[str]) -> Any:
        if "warehouse/k/013" in batch:
            return per_key_errors(["warehouse/k/013"], "AccessDenied")
        return send()

    client = WrappedDeletes(s3_store, answer, hold_s=0.02)
    with pytest.raises(StorageError, match=r"warehouse/k/013: AccessDenied"):
        s3_store.delete_many(f"k/{i:03d}" for i in range(1_000))
    # The failure stopped the cutting: far fewer than the 100 batches were sent.
    assert len(client.requests) < 20
