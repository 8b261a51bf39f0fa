"""The restore pipeline's values: what each step hands to the next.

A restore reads as values handed along one line (docs/architecture.md)::

    plan = plan_restore(...)                        # RestorePlan: tables, tasks, pins
    results = executor.rewrite(objects, plan.tasks) # RewriteResult per straddler
    verified = verify(plan, results, source_at(plan))   # Verified
    installed = install(plan, results)              # Installed

This module is a leaf of ``engine``: it imports nothing from ``engine``, so
every package (the executors, the logical path, backups, GC, the CLI) can name
these values without importing the packages that produce them. The choices a
caller makes (executor, verification, method, a backup's kind) are ``Literal``
types here too, with the tuples the CLI offers and the API checks, and so is
the restore's default mode (``INSTANT_BY_DEFAULT``): the CLI's options name
them without importing the restore or the backup.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from tenants.errors import InvalidArgument
from tenants.objects.record import ObjectRecord, object_key, rewritten_object_id
from tenants.objectstore import ObjectStore
from tenants.schema import TableSchema
from tenants.tenancy import TableRecord, TenantRecord

if TYPE_CHECKING:
    from tenants.reads.visible import ReadPlan

Action = Literal["reuse", "rewrite", "skip"]
Mode = Literal["in_place", "clone"]
Scope = Literal["tenant", "database", "table"]
ACTIONS: tuple[Action, ...] = ("reuse", "rewrite", "skip")

ExecutorName = Literal["local", "spark", "auto"]
EXECUTOR_NAMES: tuple[ExecutorName, ...] = ("local", "spark", "auto")
VerifyLevel = Literal["none", "objects", "full"]
VERIFY_LEVELS: tuple[VerifyLevel, ...] = ("none", "objects", "full")
Method = Literal["physical", "logical", "auto"]
METHODS: tuple[Method, ...] = ("physical", "logical", "auto")
# A backup's kind (engine.backup.api, which re-exports it; `backup create --kind`).
Kind = Literal["logical", "physical"]

# Whether a restore installs first (instant) when its caller says neither way: the
# CLI's default for --instant / --rewrite-first (its help reads it from here). Measured
# (benchmarks/README.md, bench_instant_restore): a full scan through cut members took
# 0.96-1.21x the scan after the swap, the whole instant job 0.80-0.97x a rewrite-first
# one, and the tenant is usable 15-53 ms after the call instead of after the rewrite:
# instant by default (docs/decisions.md). A logical restore is never instant.
# (Here rather than in engine.restore.job, which re-exports it, so that the CLI's
# help reads it without importing the restore.)
INSTANT_BY_DEFAULT = True


def check_executor(name: str) -> ExecutorName:
    """``name`` as an executor choice.

    Raises:
        InvalidArgument: not one of ``EXECUTOR_NAMES``.
    """
    if name not in EXECUTOR_NAMES:
        raise InvalidArgument(f"unknown executor {name!r}: use local, spark or auto")
    return name  # type: ignore[return-value]


def check_level(level: str) -> VerifyLevel:
    """``level`` as a verification level.

    Raises:
        InvalidArgument: not one of ``VERIFY_LEVELS``.
    """
    if level not in VERIFY_LEVELS:
        raise InvalidArgument(f"unknown verify level {level!r}: use none, objects or full")
    return level  # type: ignore[return-value]


def check_method(method: str) -> Method:
    """``method`` as a restore method.

    Raises:
        InvalidArgument: not one of ``METHODS``.
    """
    if method not in METHODS:
        raise InvalidArgument(f"unknown restore method {method!r}: use physical, logical or auto")
    return method  # type: ignore[return-value]


@dataclass(frozen=True)
class SchemaVersionPlan:
    valid_from_ts: int
    columns_json: str
    primary_key_json: str
    fingerprint: str


@dataclass(frozen=True)
class TablePlan:
    source_table_id: str
    new_table_id: str
    database: str
    name: str
    created_ts: int
    dropped_ts: int | None
    primary_key: tuple[str, ...]
    schema_versions: tuple[SchemaVersionPlan, ...]
    counts: dict[Action, tuple[int, int]]  # (objects, bytes) per action
    rewrites: tuple[ObjectRecord, ...]  # the straddling objects, oldest first
    # (kind, fingerprint, objects, bytes) of the reused objects: the new table's
    # member totals (empty in plans journaled before member totals existed)
    reuse_groups: tuple[tuple[str, str, int, int], ...] = ()
    # A table or database restore under another name (``--to``): the new
    # table's database and name (None: the source's).
    target_database: str | None = None
    target_name: str | None = None

    @property
    def qualified(self) -> str:
        """The source table's name at S."""
        return f"{self.database}.{self.name}"

    @property
    def out_database(self) -> str:
        return self.target_database or self.database

    @property
    def out_name(self) -> str:
        return self.target_name or self.name

    @property
    def out_qualified(self) -> str:
        """The new table's name."""
        return f"{self.out_database}.{self.out_name}"

    def record(self, table_id: str, tenant_id: str) -> TableRecord:
        """The table as of S (its newest schema version at or before S), for a read."""
        latest = self.schema_versions[-1]
        schema = TableSchema.from_json(latest.columns_json, latest.primary_key_json)
        return TableRecord(
            table_id,
            tenant_id,
            "",
            self.database,
            self.name,
            self.created_ts,
            None,
            schema,
            latest.valid_from_ts,
        )

    def totals(self) -> dict[Action, tuple[int, int]]:
        """(objects, bytes) per action."""
        return {a: self.counts.get(a, (0, 0)) for a in ACTIONS}


@dataclass(frozen=True)
class RewriteTask:
    """Keep an object's rows with ``__ts <= as_of``, sorted, under the new tenant."""

    task_id: str
    job_id: str
    input: ObjectRecord
    primary_key: tuple[str, ...]
    as_of: int
    out_tenant_id: str
    out_table_id: str

    @property
    def out_object_id(self) -> str:
        """Derived from (job, input): a retried task overwrites its own output."""
        return rewritten_object_id(self.job_id, self.input.id)

    @property
    def out_key(self) -> str:
        return object_key(
            self.out_tenant_id, self.out_table_id, self.input.kind, self.out_object_id
        )


@dataclass(frozen=True)
class SnapshotPlan:
    name: str
    ts: int
    kind: str
    expires_at: int | None


@dataclass(frozen=True)
class RestorePlan:
    job_id: str
    source: TenantRecord
    replaced_tenant_id: str | None
    target_name: str
    mode: Mode
    at_ts: int
    at_label: str
    new_tenant_id: str
    databases: dict[str, tuple[str, int]]  # name -> (new id, created_ts)
    tables: tuple[TablePlan, ...]
    snapshots: tuple[SnapshotPlan, ...]
    pitr_window_us: int | None
    schedule: dict[str, Any] | None
    tasks: tuple[RewriteTask, ...] = field(default=())
    # The catalog's last commit ts in the snapshot the plan read: the job's tables
    # inherit their sources as of it (0 in plans journaled before bases existed).
    read_ts: int = 0
    # What the job restores: "tenant" (a new tenant, ``new_tenant_id``), or
    # "database" / "table": new tables installed into the existing tenant
    # ``new_tenant_id`` (docs/table-restore.md).
    scope: Scope = "tenant"
    # A table or database restore in place: the live tables its install drops
    # (the job holds them while it runs), and the database it holds.
    replaced_table_ids: tuple[str, ...] = ()
    locked_database_id: str | None = None

    @property
    def into_existing_tenant(self) -> bool:
        """Whether the install adds tables to a tenant that exists (not a new one)."""
        return self.scope != "tenant"

    def totals(self) -> dict[Action, tuple[int, int]]:
        out: dict[Action, tuple[int, int]] = {a: (0, 0) for a in ACTIONS}
        for table in self.tables:
            for action, (count, size) in table.totals().items():
                out[action] = (out[action][0] + count, out[action][1] + size)
        return out

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RestorePlan:
        raw = json.loads(text)
        tables = tuple(
            TablePlan(
                **{
                    **t,
                    "primary_key": tuple(t["primary_key"]),
                    "schema_versions": tuple(SchemaVersionPlan(**v) for v in t["schema_versions"]),
                    "counts": {a: (c[0], c[1]) for a, c in t["counts"].items()},
                    "rewrites": tuple(ObjectRecord(**o) for o in t["rewrites"]),
                    "reuse_groups": tuple(tuple(g) for g in t.get("reuse_groups", ())),
                }
            )
            for t in raw["tables"]
        )
        tasks = tuple(
            RewriteTask(
                **{**k, "input": ObjectRecord(**k["input"]), "primary_key": tuple(k["primary_key"])}
            )
            for k in raw["tasks"]
        )
        return cls(
            **{
                **raw,
                "source": TenantRecord(**raw["source"]),
                "databases": {k: tuple(v) for k, v in raw["databases"].items()},
                "tables": tables,
                "snapshots": tuple(SnapshotPlan(**s) for s in raw["snapshots"]),
                "tasks": tasks,
                "replaced_table_ids": tuple(raw.get("replaced_table_ids", ())),
            }
        )


def classify(record: ObjectRecord, at_ts: int) -> Action:
    """What a restore to ``at_ts`` does with ``record``; a member held with a cut
    counts only its rows up to the cut (``visible_max_ts``)."""
    if record.visible_max_ts <= at_ts:
        return "reuse"
    if record.min_ts > at_ts:
        return "skip"
    return "rewrite"


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


@dataclass(frozen=True)
class SourceTable:
    """One table of the source as of S: the plan's table and the source's objects
    that hold its rows at S (reused ones, then the straddlers)."""

    plan: TablePlan
    reused: tuple[ObjectRecord, ...]

    def read(self, source: TenantRecord, at_ts: int) -> ReadPlan:
        """The source table read at S, from exactly the job's objects."""
        from tenants.reads.visible import ReadPlan

        record = self.plan.record(self.plan.source_table_id, source.id)
        return ReadPlan(source, record, at_ts, self.reused + self.plan.rewrites)


@dataclass(frozen=True)
class SourceAtS:
    """The source as of the plan's S, loaded once from what the job pinned.

    Full verification and the logical dump both read it. Neither resolves S
    again: a point that was "now" when planned is no longer protected after
    the source's next write, but the job's pins still hold every row at or
    before it (``engine.restore.source``).
    """

    job_id: str
    tenant: TenantRecord
    at_ts: int
    label: str
    tables: tuple[SourceTable, ...]  # the tables live at S (dropped ones are not read)

    def reads(self) -> list[ReadPlan]:
        return [t.read(self.tenant, self.at_ts) for t in self.tables]


@dataclass(frozen=True)
class Verified:
    """What verification proved before the install (all zero for ``none``)."""

    level: VerifyLevel
    objects: int = 0  # installed objects found with their recorded sizes
    prefixes: int = 0  # prefixes listed to find them
    rewrites: int = 0  # rewritten objects whose rows hash to their input's at S
    tables: int = 0  # tables equal to the source at S (``full``)


@dataclass(frozen=True)
class Installed:
    """The install's outcome: the tenant that holds the result and the commit's ts."""

    tenant: TenantRecord
    ts: int


OnResult = Callable[[RewriteResult], None]


class RewriteExecutor(Protocol):
    """Runs rewrite tasks and reports each result as it completes (engine.executors)."""

    name: str

    def rewrite(
        self, objects: ObjectStore, tasks: Sequence[RewriteTask], on_result: OnResult
    ) -> list[RewriteResult]: ...


@dataclass(frozen=True)
class ExecutorChoice:
    """Which executor a job uses, and why (printed with the plan)."""

    name: Literal["local", "spark"]
    reason: str

    def describe(self) -> str:
        return f"{self.name} ({self.reason})"


class Executors(Protocol):
    """How the restore job gets its executor: decided from the work, then built.

    ``engine.executors.DEFAULT_EXECUTORS`` is the one the CLI and the job entry
    point pass; a test may pass its own (a faulty executor, say)."""

    def decide(self, name: str, rewrite_bytes: int) -> ExecutorChoice: ...

    def build(self, choice: ExecutorChoice) -> RewriteExecutor: ...
