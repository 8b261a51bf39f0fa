"""Shared builders and fault-injecting wrappers for the physical-restore tests.

The wrappers wrap the real backends (the S3 object store, the SQLite catalog,
the boto3 client) and delegate everything they do not break, so a test runs
the production code path up to the exact point where it injects a fault.
"""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from engine.pipeline import RestorePlan
from engine.restore.journal import ACTIVE_STATES, task_counts
from engine.restore.members import ObjectAction, live_members
from engine.restore.plan import plan_in
from tenants.catalog import Catalog
from tenants.objects.record import ObjectRecord
from tenants.objectstore import ObjectStore
from tenants.store import TableStore
from tenants.tenancy import TenantRecord
from tenants.times import US, parse_instant

# Re-exported: the restore and GC tests import their rows from here.
from tests.helpers.item_rows import SCHEMA as SCHEMA
from tests.helpers.item_rows import keys as keys
from tests.helpers.item_rows import pairs as pairs
from tests.helpers.item_rows import rows as rows

M = US["m"]
H = US["h"]
T0 = parse_instant("2026-01-05T00:00:00Z")


def unique(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


class Minutes:
    """Moves the frozen catalog clock to T0 + n minutes, so timestamps are exact."""

    def __init__(self, clock: Any) -> None:
        self.clock = clock

    def __call__(self, minutes: float) -> int:
        self.clock.fixed = T0 + int(minutes * M)
        return int(self.clock.fixed)


# --- observing a store --------------------------------------------------------------


def reads(store: TableStore, tenant: str, as_of: int | str | None = None) -> dict[str, list[dict]]:
    """Every table of ``tenant`` that exists at ``as_of`` (default now), read at ``as_of``."""
    return {
        t.qualified: store.read(tenant, t.qualified, as_of).to_pylist()
        for t in store.tables(tenant, as_of)
    }


def ddl(store: TableStore, tenant: str, as_of: int | str | None = None) -> dict[str, Any]:
    """Table name → (columns, key, created_ts) as of ``as_of``."""
    return {
        t.qualified: (t.schema.columns, t.schema.primary_key, t.created_ts)
        for t in store.tables(tenant, as_of)
    }


def bucket_keys(store: TableStore, prefix: str = "") -> dict[str, int]:
    """Key → size of every object under ``prefix`` of the warehouse (a real listing)."""
    return {info.key: info.size for info in store.objects.list(prefix)}


def tenant_prefix(tenant_id: str) -> str:
    return f"tenants/{tenant_id}/"


def tenant_rows(store: TableStore) -> list[TenantRecord]:
    return store.tenants(include_dropped=True)


def catalog_rows(store: TableStore, sql: str, params: tuple[Any, ...] = ()) -> list[dict]:
    with store.catalog.snapshot() as tx:
        return tx.all(sql, params)


def cut_members(store: TableStore, tenant: str) -> list[ObjectRecord]:
    """The members ``tenant``'s tables hold with a cut: an instant restore's
    straddlers that no swap or compaction has replaced yet."""
    return [o for _, o in store.objects_of(tenant) if o.cut_ts is not None]


def unreached_keys(store: TableStore) -> set[str]:
    """Keys under ``tenants/`` of this catalog's tenants that nothing reaches.

    Reached: a member of any table of any tenant, by its own live row or an
    unreleased base (``gc_helpers.live_member_keys``, GC's own leak check), an
    object an unfinished restore job pins, an output its plan names, or a commit
    object the change log keeps. Once
    protections end and GC ran with no grace, a key left over is a leak. Keys
    under another catalog's tenant ids (an adopted warehouse) are not judged.
    """
    from tests.helpers.gc import live_member_keys  # gc_helpers imports this module

    ours = {str(r["id"]) for r in catalog_rows(store, "SELECT id FROM tenants")}
    listed = {k for k in bucket_keys(store, "tenants/") if k.split("/")[1] in ours}
    marks = ", ".join("?" for _ in ACTIVE_STATES)
    pinned = {
        str(r["object_key"])
        for r in catalog_rows(
            store,
            "SELECT o.object_key FROM job_pins p JOIN restore_jobs j ON j.id = p.job_id "
            f"JOIN objects o ON o.id = p.object_id WHERE j.state IN ({marks})",
            ACTIVE_STATES,
        )
    }
    planned = {
        task.out_key
        for r in catalog_rows(
            store,
            "SELECT p.plan_json FROM restore_jobs j JOIN restore_plans p ON p.job_id = j.id "
            f"WHERE j.state IN ({marks})",
            ACTIVE_STATES,
        )
        for task in RestorePlan.from_json(str(r["plan_json"])).tasks
    }
    # The change log keeps a commit's own objects for diffs after compaction merged
    # them, until the tenant's change horizon passes (tenants.catalog.changes).
    logged = {
        str(r["object_key"])
        for r in catalog_rows(
            store, "SELECT o.object_key FROM change_objects c JOIN objects o ON o.id = c.object_id"
        )
    }
    return listed - live_member_keys(store, active_only=False) - pinned - planned - logged


def planned_with_members(
    store: TableStore, tenant: str, point: str | int, **kwargs: Any
) -> tuple[RestorePlan, list[ObjectAction]]:
    """A plan and every object it reuses or rewrites, listed in the planning transaction."""
    with store.catalog.snapshot() as tx:
        plan = plan_in(tx, tenant, point, **kwargs)
        members = live_members(tx, plan)
    return plan, [item for items in members.values() for item in items]


def pins_of(store: TableStore, job_id: str) -> list[dict]:
    """What a job holds against GC: its object pins and its bases not yet a table's."""
    return catalog_rows(store, "SELECT * FROM job_pins WHERE job_id = ?", (job_id,)) + catalog_rows(
        store,
        "SELECT * FROM membership_bases WHERE job_id = ? AND table_id NOT IN (SELECT id FROM tables)",
        (job_id,),
    )


def job_state(store: TableStore, job_id: str) -> str:
    [row] = catalog_rows(store, "SELECT state FROM restore_jobs WHERE id = ?", (job_id,))
    return str(row["state"])


def done_tasks(store: TableStore, job_id: str) -> int:
    return task_counts(store.catalog, job_id).get("done", 0)


@dataclass(frozen=True)
class SourceState:
    """What "the source is untouched" means: its row, its reads, its objects, the bucket."""

    tenant: TenantRecord
    reads_now: dict[str, list[dict]]
    objects: list[tuple[str, ObjectRecord]]
    keys: dict[str, int]


def source_state(store: TableStore, ref: str) -> SourceState:
    tenant = store.tenant(ref)
    return SourceState(
        tenant,
        reads(store, tenant.ref),
        store.objects_of(tenant.ref),
        bucket_keys(store, tenant_prefix(tenant.id)),
    )


def restored_signature(store: TableStore, tenant: str) -> dict[str, Any]:
    """Everything a restore decides, independent of fresh ids: DDL, rows, snapshots, objects.

    Reused objects are named by id (the same objects), rewritten ones by what
    they hold (kind, rows, ts range, checksum), since their ids derive from the job.
    """
    record = store.tenant(tenant)
    own = tenant_prefix(record.id)
    objects = sorted(
        (q, o.kind, o.rows, o.min_ts, o.max_ts, o.checksum) if o.key.startswith(own) else (q, o.id)
        for q, o in store.objects_of(tenant)
    )
    return {
        "ddl": ddl(store, tenant),
        "reads": reads(store, tenant),
        "snapshots": [(s.name, s.ts, s.kind) for s in store.snapshots(tenant)],
        "objects": objects,
        "source": (record.source_tenant_id, record.source_ts),
    }


# --- fault injection ---------------------------------------------------------------------


class SimulatedCrash(BaseException):
    """The process dying at this point.

    A ``BaseException`` (like ``SystemExit``), so no ``except Exception`` handler in
    the code under test runs: the journal is left exactly as a killed process
    would leave it.
    """


class WrappedObjectStore:
    """The real object store, recording puts (whole or streamed); optionally the N-th put
    or some lists fail."""

    def __init__(
        self,
        inner: ObjectStore,
        *,
        fail_put_at: int | None = None,
        fail_lists: int = 0,
        error: Callable[[str], BaseException] = lambda key: SimulatedCrash(f"crash at put {key}"),
    ) -> None:
        self.inner = inner
        self.warehouse = inner.warehouse
        self.fail_put_at = fail_put_at
        self.fail_lists = fail_lists
        self.error = error
        self.puts: list[str] = []
        self.lists: list[str] = []
        self._lock = threading.Lock()

    def _count_put(self, key: str) -> None:
        with self._lock:
            self.puts.append(key)
            failing = self.fail_put_at is not None and len(self.puts) == self.fail_put_at
        if failing:
            raise self.error(key)

    def put(self, key: str, data: bytes) -> None:
        self._count_put(key)
        self.inner.put(key, data)

    def open_output(self, key: str) -> Any:
        """A streamed write counts as a put, failing (if chosen) before any byte."""
        self._count_put(key)
        return self.inner.open_output(key)

    def _count_list(self, prefix: str) -> None:
        self.lists.append(prefix)
        if self.fail_lists > 0:
            self.fail_lists -= 1
            raise self.error(prefix)

    def list(self, prefix: str) -> Iterator[Any]:
        self._count_list(prefix)
        return self.inner.list(prefix)

    def listing(self, prefix: str) -> Iterator[Any]:
        self._count_list(prefix)
        return self.inner.listing(prefix)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class ObservedTx:
    """A real transaction whose statements are shown to ``owner.seen(sql)`` first,
    so a fault-injecting catalog can crash at a chosen statement."""

    def __init__(self, inner: Any, owner: Any) -> None:
        self._inner = inner
        self._owner = owner

    def execute(self, sql: str, params: Any = ()) -> int:
        self._owner.seen(sql)
        return int(self._inner.execute(sql, params))

    def executemany(self, sql: str, rows: Any) -> None:
        self._owner.seen(sql)
        self._inner.executemany(sql, rows)

    def insert_many(self, table: str, columns: Any, rows: Any) -> None:
        self._owner.seen(f"INSERT INTO {table} ({', '.join(columns)})")
        self._inner.insert_many(table, columns, rows)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class FaultyCatalog:
    """The real catalog; a chosen statement crashes, inside or just after its commit.

    ``fail_sql`` is a statement prefix: its ``occurrence``-th execution raises
    ``SimulatedCrash`` inside the transaction (which rolls back). With
    ``after_commit=True`` the transaction that ran it commits first, and the
    crash comes right after the commit, before the caller sees the result.
    """

    def __init__(
        self, inner: Catalog, fail_sql: str, *, occurrence: int = 1, after_commit: bool = False
    ) -> None:
        self.inner = inner
        self.fail_sql = fail_sql
        self.occurrence = occurrence
        self.after_commit = after_commit
        self.count = 0
        self._armed = False

    def seen(self, sql: str) -> None:
        if sql.lstrip().startswith(self.fail_sql):
            self.count += 1
            if self.count == self.occurrence:
                if not self.after_commit:
                    raise SimulatedCrash(f"crash inside the transaction running {self.fail_sql!r}")
                self._armed = True

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        with self.inner.transaction() as tx:
            yield ObservedTx(tx, self)
        if self._armed:
            self._armed = False
            raise SimulatedCrash(f"crash right after committing {self.fail_sql!r}")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def crashed_at(fail_sql: str, *, after_commit: bool = False) -> str:
    """The ``match=`` for the ``SimulatedCrash`` a ``FaultyCatalog`` (or the GC tests'
    ``CrashingCatalog``) raises at ``fail_sql``: inside its transaction, or right
    after its commit."""
    where = "right after committing" if after_commit else "inside the transaction running"
    return re.escape(f"crash {where} {fail_sql!r}")


class ThrottlingClient:
    """The real boto3 client, whose ``operation`` first answers SlowDown ``failures`` times."""

    def __init__(self, inner: Any, operation: str, failures: int) -> None:
        self.inner = inner
        self.operation = operation
        self.failures = failures
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name != self.operation:
            return attr

        def call(**kwargs: Any) -> Any:
            from botocore.exceptions import ClientError

            self.calls += 1
            if self.failures > 0:
                self.failures -= 1
                raise ClientError(
                    {
                        "Error": {
                            "Code": "SlowDown",
                            "Message": "Please reduce your request rate.",
                        },
                        "ResponseMetadata": {"HTTPStatusCode": 503},
                    },
                    "ListObjectsV2",
                )
            return attr(**kwargs)

        return call


def with_objects(store: TableStore, objects: Any) -> TableStore:
    """The same catalog over another (wrapped) object store."""
    return TableStore(store.catalog, objects)


def with_catalog(store: TableStore, catalog: Any) -> TableStore:
    """The same object store under another (wrapped) catalog."""
    return TableStore(catalog, store.objects)
