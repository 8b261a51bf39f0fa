"""Shared builders, observers and fault-injecting wrappers for the GC tests.

The wrappers wrap the real backends (the S3 object store, the SQLite catalog,
the boto3 client) and delegate everything they do not break, so GC runs its
production code path up to the exact point where a fault is injected.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import boto3

from tenants.catalog import Catalog
from tenants.catalog.base import wall_clock_us
from tenants.objects.record import live_objects
from tenants.objectstore import ObjectStore
from tenants.store import TableStore
from tenants.times import US
from tests.helpers.restores import ObservedTx, SimulatedCrash, catalog_rows

H = US["h"]
M = US["m"]
D = US["d"]
GRACE = H  # the default grace of run_gc / collect
RETENTION = 7 * D  # the default retention of a dropped tenant


class Timeline:
    """Freezes the catalog clock at ``base`` (the wall clock when created) + an offset.

    The base is "now" so that S3's real last-modified times (which the orphan
    sweep compares with the catalog clock) line up with catalog time.
    """

    def __init__(self, clock: Any) -> None:
        self.clock = clock
        self.base = wall_clock_us()
        clock.fixed = self.base

    def __call__(self, hours: float) -> int:
        value = self.base + int(hours * H)
        assert self.clock.fixed is None or value >= self.clock.fixed, "time only moves forward"
        self.clock.fixed = value
        return value

    def set(self, us: int) -> int:
        assert self.clock.fixed is None or us >= self.clock.fixed, "time only moves forward"
        self.clock.fixed = us
        return us


# --- observing a store --------------------------------------------------------------------


def orphan_keys(report: Any) -> set[str]:
    """Every orphan a GC pass deleted (or would): under stale intents and listed."""
    found = {o.key for o in report.orphans.orphans}
    return found | {o.key for o in report.intents.orphans}


def bucket_listing(store: TableStore) -> set[str]:
    """Every warehouse-relative key under ``tenants/`` (a real listing)."""
    return {info.key for info in store.objects.list("tenants/")}


def raw_bucket_keys(s3: Any, bucket: str) -> set[str]:
    """Every key of the whole bucket, outside the warehouse too (plain boto3)."""
    client = boto3.client("s3", **s3.settings.to_boto3())
    keys: set[str] = set()
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys |= {item["Key"] for item in page.get("Contents", [])}
    return keys


def put_raw(s3: Any, bucket: str, key: str, body: bytes = b"not ours") -> None:
    boto3.client("s3", **s3.settings.to_boto3()).put_object(Bucket=bucket, Key=key, Body=body)


def catalog_dump(store: TableStore) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every catalog table, sorted: "the catalog did not change" is equality."""
    with store.catalog.snapshot() as tx:
        names = store.catalog.dialect.table_names(tx)
        return {
            name: sorted((tuple(r.values()) for r in tx.all(f"SELECT * FROM {name}")), key=repr)
            for name in names
        }


JOURNAL = ("runs", "runs_newest")
"""The runs journal's tables: a GC pass that fails is journaled there as failed."""


def without_journal(dump: dict[str, list[tuple[Any, ...]]]) -> dict[str, list[tuple[Any, ...]]]:
    """A :func:`catalog_dump` but the runs journal (which records every pass)."""
    return {k: v for k, v in dump.items() if k not in JOURNAL}


def failed_gc_runs(store: TableStore) -> list[str]:
    """The errors of the GC passes the runs journal holds as failed."""
    return [
        str(r["error"])
        for r in catalog_rows(
            store, "SELECT error FROM runs WHERE kind = 'gc' AND state = 'failed'"
        )
    ]


def object_rows(store: TableStore) -> dict[str, str]:
    """Object id → key of every object row in the catalog."""
    return {
        r["id"]: r["object_key"] for r in catalog_rows(store, "SELECT id, object_key FROM objects")
    }


def dangling_keys(store: TableStore) -> set[str]:
    """Keys the catalog records (objects or membership) that the bucket does not hold."""
    return set(object_rows(store).values()) - bucket_listing(store)


def live_member_keys(store: TableStore, *, active_only: bool = True) -> set[str]:
    """Keys of objects a table of an (active) tenant holds, by its own live
    membership or through a base (what the table reads)."""
    sql = "SELECT t.id FROM tables t JOIN tenants n ON n.id = t.tenant_id"
    if active_only:
        sql += " WHERE n.state = 'active'"
    with store.catalog.snapshot() as tx:
        return {o.key for r in tx.all(sql) for o in live_objects(tx, r["id"])}


def keys_of(store: TableStore, tenant: str) -> set[str]:
    """Keys of the live member objects of one tenant's tables."""
    return {o.key for _, o in store.objects_of(tenant)}


def change_log_keys(store: TableStore, since_ts: int = 0) -> set[str]:
    """Keys of the commit objects the change log keeps for diffs (tenants.catalog.changes)
    from ``since_ts`` on: GC keeps them, compacted or not, until the tenant's change
    horizon passes them."""
    with store.catalog.snapshot() as tx:
        rows = tx.all(
            "SELECT o.object_key FROM change_objects c JOIN objects o ON o.id = c.object_id "
            "WHERE c.ts >= ?",
            (since_ts,),
        )
    return {r["object_key"] for r in rows}


def pending_rows(store: TableStore) -> list[dict[str, Any]]:
    return catalog_rows(store, "SELECT * FROM gc_pending")


def object_key_for(tenant_id: str, table_id: str, kind: str = "data") -> str:
    """A fresh key in our object-key pattern (what a crashed write leaves behind)."""
    return f"tenants/{tenant_id}/{table_id}/{kind}/{uuid.uuid4().hex}.parquet"


# --- fault injection -----------------------------------------------------------------------


class RecordingStore:
    """The real object store; records delete_many calls, optionally crashing around them.

    ``crash_before_delete``: the first delete_many raises before deleting anything.
    ``crash_after_delete``: the first delete_many deletes, then raises.
    ``crash_after_put``: every put uploads, then raises (a write that died after upload).
    """

    def __init__(
        self,
        inner: ObjectStore,
        *,
        crash_before_delete: bool = False,
        crash_after_delete: bool = False,
        crash_after_put: bool = False,
    ) -> None:
        self.inner = inner
        self.warehouse = inner.warehouse
        self.crash_before_delete = crash_before_delete
        self.crash_after_delete = crash_after_delete
        self.crash_after_put = crash_after_put
        self.deletes: list[list[str]] = []
        self.puts: list[str] = []

    def put(self, key: str, data: bytes) -> None:
        self.puts.append(key)
        self.inner.put(key, data)
        if self.crash_after_put:
            raise SimulatedCrash(f"crash after uploading {key}")

    def open_output(self, key: str) -> Any:
        self.puts.append(key)
        return _CrashAfterCommit(self.inner.open_output(key), key, self.crash_after_put)

    def delete_many(self, keys: Iterable[str]) -> int:
        batch = list(keys)
        self.deletes.append(batch)
        if self.crash_before_delete:
            self.crash_before_delete = False
            raise SimulatedCrash(f"crash before deleting {len(batch)} key(s)")
        deleted = self.inner.delete_many(batch)
        if self.crash_after_delete:
            self.crash_after_delete = False
            raise SimulatedCrash(f"crash after deleting {len(batch)} key(s)")
        return deleted

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class ReadCountingStore:
    """The real object store; records the key of every object read back (whole,
    streamed or opened for ranged reads): every way ``tenants.objects.reader``
    opens one. Keys of Parquet objects only (not the owner marker)."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.warehouse = inner.warehouse
        self.opened: list[str] = []

    def _saw(self, key: str) -> None:
        if key.endswith(".parquet"):
            self.opened.append(key)

    def get(self, key: str) -> bytes:
        self._saw(key)
        return self.inner.get(key)

    def stream(self, key: str, chunk_bytes: int) -> Iterator[bytes]:
        self._saw(key)
        return self.inner.stream(key, chunk_bytes)

    def open_input(self, key: str) -> Any:
        self._saw(key)
        return self.inner.open_input(key)

    def tables_read(self) -> set[str]:
        """Ids of the tables whose objects were read (keys name them:
        ``tenants/<tenant id>/<table id>/<kind>/<id>.parquet``)."""
        return {key.split("/")[2] for key in self.opened}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _CrashAfterCommit:
    """A streamed write that (if ``crash``) dies just after its object is published."""

    def __init__(self, inner: Any, key: str, crash: bool) -> None:
        self.inner, self.key, self.crash = inner, key, crash

    def commit(self) -> None:
        self.inner.commit()
        if self.crash:
            raise SimulatedCrash(f"crash after uploading {self.key}")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class CrashingCatalog:
    """The real catalog; the first statement starting with ``fail_sql`` crashes its transaction.

    The crash happens inside the transaction, so it rolls back, as if the
    process died before the commit. Takes ``rollback=`` like the real catalog.
    """

    def __init__(self, inner: Catalog, fail_sql: str) -> None:
        self.inner = inner
        self.fail_sql = fail_sql
        self.crashed = 0

    def seen(self, sql: str) -> None:
        if self.crashed == 0 and sql.lstrip().startswith(self.fail_sql):
            self.crashed += 1
            raise SimulatedCrash(f"crash inside the transaction running {self.fail_sql!r}")

    @contextmanager
    def transaction(self, *, rollback: bool = False) -> Iterator[Any]:
        with self.inner.transaction(rollback=rollback) as tx:
            yield ObservedTx(tx, self)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class ScriptedDeleteClient:
    """The real boto3 client whose ``delete_objects`` answers from a script first.

    Each script entry is ``("raise", code)`` (the whole request fails with that
    error code) or ``("per_key", code)`` (HTTP 200, but every key reports that
    error code, as S3's DeleteObjects does); once the script is used up, or
    ``forever`` repeats the last entry, calls go to the real client.
    """

    def __init__(self, inner: Any, script: list[tuple[str, str]], *, forever: bool = False) -> None:
        self.inner = inner
        self.script = list(script)
        self.forever = forever
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name != "delete_objects":
            return attr

        def call(**kwargs: Any) -> Any:
            from botocore.exceptions import ClientError

            self.calls += 1
            if not self.script:
                return attr(**kwargs)
            how, code = self.script[0] if self.forever else self.script.pop(0)
            if how == "raise":
                raise ClientError(
                    {
                        "Error": {"Code": code, "Message": f"injected {code}"},
                        "ResponseMetadata": {"HTTPStatusCode": 503 if code == "SlowDown" else 403},
                    },
                    "DeleteObjects",
                )
            return {
                "Errors": [
                    {"Key": o["Key"], "Code": code, "Message": f"injected {code}"}
                    for o in kwargs["Delete"]["Objects"]
                ],
                "ResponseMetadata": {"HTTPStatusCode": 200},
            }

        return call


class CountingClient:
    """The real boto3 client, counting ``delete_objects`` requests and their sizes."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.batches: list[int] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name != "delete_objects":
            return attr

        def call(**kwargs: Any) -> Any:
            self.batches.append(len(kwargs["Delete"]["Objects"]))
            return attr(**kwargs)

        return call


def register_unreferenced(store: TableStore, n: int, *, chunk: int = 50_000) -> None:
    """Register ``n`` objects of 100 bytes no table ever held ("never referenced":
    garbage once the grace passes), straight into the catalog, in one transaction
    per ``chunk``; their keys are in our pattern but not in the warehouse (deleting
    a missing key is fine). What a memory or batching test needs in bulk, fast."""
    from tenants.catalog.objects import OBJECT_COLUMNS

    tenant, table = uuid.uuid4().hex, uuid.uuid4().hex
    for start in range(0, n, chunk):
        with store.catalog.transaction() as tx:
            ts = tx.commit_ts()
            ids = (uuid.uuid4().hex for _ in range(start, min(n, start + chunk)))
            tx.insert_many(
                "objects",
                OBJECT_COLUMNS,
                (
                    (i, object_key_for(tenant, table), "data", "fp", 1, 100, ts, ts)
                    + ("[0]", "[0]", 1, "0" * 64, ts)
                    for i in ids
                ),
            )
