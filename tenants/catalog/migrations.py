"""The catalog's DDL as ordered migration steps.

Step N brings a catalog from schema version N-1 to N. The catalog records its
version and the fingerprint of the DDL that produced it: a catalog written by a
newer Rewind, or one whose recorded fingerprint disagrees with the steps here,
is refused rather than guessed at. Steps are append-only; never edit one that
has shipped. The SQL is kept portable (no SQLite-only types or syntax) so a
PostgreSQL catalog can run the same steps.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

Statement = str | dict[str, str]
"""One DDL statement, or its spelling per dialect (``{"sqlite": ..., "postgresql":
...}``; a dialect it does not name skips it) where the backends cannot share one:
triggers."""


@dataclass(frozen=True)
class _QueueEvent:
    """An event by which objects can stop being needed, and the objects it queues:
    ``sqlite`` over the trigger's row (NEW or OLD, under ``when``), ``postgresql``
    over the statement's transition table ``r`` (every changed row)."""

    name: str
    table: str
    event: str  # INSERT, UPDATE OF <column> or DELETE
    when: str
    sqlite: str
    postgresql: str


_LIVE_AT_BASE = "m.added_ts <= {b}.base_ts AND (m.removed_ts IS NULL OR m.removed_ts > {b}.base_ts)"

_QUEUE_EVENTS = (
    # An object registered: if no table ever takes it, it is garbage.
    _QueueEvent("objects_added", "objects", "INSERT", "", "SELECT NEW.id", "SELECT id FROM r"),
    # A row born removed: a shadow row, hiding an inherited member.
    _QueueEvent(
        "membership_added",
        "membership",
        "INSERT",
        "NEW.removed_ts IS NOT NULL",
        "SELECT NEW.object_id",
        "SELECT object_id FROM r WHERE removed_ts IS NOT NULL",
    ),
    # A membership ended: a commit, a compaction, a dropped table, a purge.
    _QueueEvent(
        "membership_ended",
        "membership",
        "UPDATE OF removed_ts",
        "NEW.removed_ts IS NOT NULL",
        "SELECT NEW.object_id",
        "SELECT object_id FROM r WHERE removed_ts IS NOT NULL",
    ),
    _QueueEvent(
        "membership_gone",
        "membership",
        "DELETE",
        "",
        "SELECT OLD.object_id",
        "SELECT object_id FROM r",
    ),
    # A base released or deleted: what its table held at the base ts.
    _QueueEvent(
        "bases_released",
        "membership_bases",
        "UPDATE OF released_ts",
        "NEW.released_ts IS NOT NULL",
        "SELECT m.object_id FROM membership m WHERE m.table_id = NEW.base_table_id AND "
        + _LIVE_AT_BASE.format(b="NEW"),
        "SELECT m.object_id FROM r JOIN membership m ON m.table_id = r.base_table_id AND "
        + _LIVE_AT_BASE.format(b="r")
        + " WHERE r.released_ts IS NOT NULL",
    ),
    _QueueEvent(
        "bases_gone",
        "membership_bases",
        "DELETE",
        "",
        "SELECT m.object_id FROM membership m WHERE m.table_id = OLD.base_table_id AND "
        + _LIVE_AT_BASE.format(b="OLD"),
        "SELECT m.object_id FROM r JOIN membership m ON m.table_id = r.base_table_id AND "
        + _LIVE_AT_BASE.format(b="r"),
    ),
    # The change log let an object go.
    _QueueEvent(
        "changes_gone",
        "change_objects",
        "DELETE",
        "",
        "SELECT OLD.object_id",
        "SELECT object_id FROM r",
    ),
    # A restore job let its pins go: it ended, or its pins or the job were deleted.
    _QueueEvent(
        "pins_gone", "job_pins", "DELETE", "", "SELECT OLD.object_id", "SELECT object_id FROM r"
    ),
    _QueueEvent(
        "jobs_ended",
        "restore_jobs",
        "UPDATE OF state",
        "NEW.state IN ('done', 'cancelled')",
        "SELECT object_id FROM job_pins WHERE job_id = NEW.id",
        "SELECT p.object_id FROM r JOIN job_pins p ON p.job_id = r.id "
        "WHERE r.state IN ('done', 'cancelled')",
    ),
    _QueueEvent(
        "jobs_gone",
        "restore_jobs",
        "DELETE",
        "",
        "SELECT object_id FROM job_pins WHERE job_id = OLD.id",
        "SELECT p.object_id FROM r JOIN job_pins p ON p.job_id = r.id",
    ),
)


def _queue_triggers() -> list[Statement]:
    """The triggers that feed ``gc_candidates``, in each dialect's spelling.

    SQLite: a row trigger per event. PostgreSQL: a statement trigger per event
    over its transition table (one INSERT ... SELECT per statement rather than a
    function call per row: a purge ends 10^5 memberships in one UPDATE), and the
    function it runs; a trigger with a transition table takes no column list,
    so its query filters the rows itself.
    """
    out: list[Statement] = []
    for e in _QUEUE_EVENTS:
        when = f"WHEN {e.when} " if e.when else ""
        rows = "OLD TABLE" if e.event == "DELETE" else "NEW TABLE"
        out.append(
            {
                "sqlite": f"CREATE TRIGGER gc_queue_{e.name} AFTER {e.event} ON {e.table} {when}"
                f"BEGIN INSERT OR IGNORE INTO gc_candidates (object_id) {e.sqlite}; END",
                "postgresql": f"CREATE FUNCTION gc_queue_{e.name}() RETURNS trigger "
                "LANGUAGE plpgsql AS $$ BEGIN INSERT INTO gc_candidates (object_id) "
                f"SELECT DISTINCT object_id FROM ({e.postgresql}) q (object_id) "
                "ON CONFLICT DO NOTHING; RETURN NULL; END $$",
            }
        )
        out.append(
            {
                "postgresql": f"CREATE TRIGGER gc_queue_{e.name} AFTER {e.event.split()[0]} "
                f"ON {e.table} REFERENCING {rows} AS r FOR EACH STATEMENT "
                f"EXECUTE FUNCTION gc_queue_{e.name}()"
            }
        )
    return out


_RUN_GROUP = ("kind", "tenant_name", "target", "method")
"""A recurring job: runs of one kind, for one tenant, to one destination, by one method."""
_GROUP_OF_NEW = (
    "NEW.kind, COALESCE(NEW.tenant_name, ''), COALESCE(NEW.target, ''), COALESCE(NEW.method, '')"
)
# Keep the newest run of the group by start, and the finished one with the newest
# point; in an UPDATE's SET every CASE reads the row as it was before.
_NEWEST_ON_INSERT = (
    "INSERT INTO runs_newest (kind, tenant_name, target, method, run_id, started_us, "
    f"done_id, done_point_ts) VALUES ({_GROUP_OF_NEW}, NEW.id, NEW.started_us, "
    "CASE WHEN NEW.state = 'done' AND NEW.point_ts IS NOT NULL THEN NEW.id END, "
    "CASE WHEN NEW.state = 'done' THEN NEW.point_ts END) "
    "ON CONFLICT (kind, tenant_name, target, method) DO UPDATE SET "
    "run_id = CASE WHEN excluded.started_us >= runs_newest.started_us "
    "THEN excluded.run_id ELSE runs_newest.run_id END, "
    "started_us = CASE WHEN excluded.started_us >= runs_newest.started_us "
    "THEN excluded.started_us ELSE runs_newest.started_us END, "
    "done_id = CASE WHEN excluded.done_point_ts IS NOT NULL AND (runs_newest.done_point_ts "
    "IS NULL OR excluded.done_point_ts >= runs_newest.done_point_ts) "
    "THEN excluded.done_id ELSE runs_newest.done_id END, "
    "done_point_ts = CASE WHEN excluded.done_point_ts IS NOT NULL AND (runs_newest.done_point_ts "
    "IS NULL OR excluded.done_point_ts >= runs_newest.done_point_ts) "
    "THEN excluded.done_point_ts ELSE runs_newest.done_point_ts END"
)
_NEWEST_ON_DONE = (
    "UPDATE runs_newest SET done_id = NEW.id, done_point_ts = NEW.point_ts "
    "WHERE kind = NEW.kind AND tenant_name = COALESCE(NEW.tenant_name, '') "
    "AND target = COALESCE(NEW.target, '') AND method = COALESCE(NEW.method, '') "
    "AND (done_point_ts IS NULL OR done_point_ts <= NEW.point_ts)"
)
_DONE_WITH_POINT = "NEW.state = 'done' AND NEW.point_ts IS NOT NULL"


def _newest_runs_triggers() -> list[Statement]:
    """The triggers that keep ``runs_newest``: a row trigger per event on both
    backends (a run is inserted and finished one at a time)."""
    out: list[Statement] = []
    for name, event, when, body in (
        ("runs_newest_started", "INSERT", "", _NEWEST_ON_INSERT),
        ("runs_newest_done", "UPDATE OF state", _DONE_WITH_POINT, _NEWEST_ON_DONE),
    ):
        out.append(
            {
                "sqlite": f"CREATE TRIGGER {name} AFTER {event} ON runs "
                f"{f'WHEN {when} ' if when else ''}BEGIN {body}; END",
                "postgresql": f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS "
                f"$$ BEGIN {body}; RETURN NULL; END $$",
            }
        )
        out.append(
            {
                "postgresql": f"CREATE TRIGGER {name} AFTER {event} ON runs FOR EACH ROW "
                f"{f'WHEN ({when}) ' if when else ''}EXECUTE FUNCTION {name}()"
            }
        )
    return out


def _newest_of(columns: str, where: str, order: str) -> str:
    """The runs table's newest row per group (``n = 1``), its group keys without NULLs."""
    keys = ", ".join(f"COALESCE({c}, '')" for c in _RUN_GROUP)
    named = ", ".join(f"COALESCE({c}, '') AS {c}" for c in _RUN_GROUP)
    return (
        f"SELECT {named}, {columns}, ROW_NUMBER() OVER (PARTITION BY {keys} "
        f"ORDER BY {order}) AS n FROM runs{where}"
    )


_NEWEST_BACKFILL = (
    "INSERT INTO runs_newest (kind, tenant_name, target, method, run_id, started_us, "
    "done_id, done_point_ts) "
    "SELECT s.kind, s.tenant_name, s.target, s.method, s.id, s.started_us, d.id, d.point_ts "
    f"FROM ({_newest_of('id, started_us', '', 'started_us DESC, id DESC')}) s "
    "LEFT JOIN ("
    + _newest_of(
        "id, point_ts",
        " WHERE state = 'done' AND point_ts IS NOT NULL",
        "point_ts DESC, ended_us DESC, id DESC",
    )
    + ") d ON d.kind = s.kind AND d.tenant_name = s.tenant_name AND d.target = s.target "
    "AND d.method = s.method AND d.n = 1 WHERE s.n = 1"
)


MIGRATIONS: list[tuple[str, list[Statement]]] = [
    (
        "tenants, databases, tables, schema versions, objects, membership",
        [
            """CREATE TABLE meta (
                key VARCHAR(64) PRIMARY KEY,
                value TEXT NOT NULL)""",
            """CREATE TABLE clock (
                id INTEGER PRIMARY KEY CHECK (id = 1),
                last_ts BIGINT NOT NULL)""",
            "INSERT INTO clock (id, last_ts) VALUES (1, 0)",
            """CREATE TABLE tenants (
                id VARCHAR(32) PRIMARY KEY,
                name VARCHAR(63) NOT NULL,
                state VARCHAR(16) NOT NULL CHECK (state IN ('active', 'dropped', 'staging')),
                created_ts BIGINT NOT NULL,
                dropped_ts BIGINT)""",
            "CREATE UNIQUE INDEX tenants_live_name ON tenants (name) WHERE state = 'active'",
            """CREATE TABLE databases (
                id VARCHAR(32) PRIMARY KEY,
                tenant_id VARCHAR(32) NOT NULL REFERENCES tenants (id),
                name VARCHAR(128) NOT NULL,
                created_ts BIGINT NOT NULL,
                dropped_ts BIGINT)""",
            "CREATE INDEX databases_tenant ON databases (tenant_id, name)",
            """CREATE TABLE tables (
                id VARCHAR(32) PRIMARY KEY,
                tenant_id VARCHAR(32) NOT NULL REFERENCES tenants (id),
                database_id VARCHAR(32) NOT NULL REFERENCES databases (id),
                name VARCHAR(128) NOT NULL,
                created_ts BIGINT NOT NULL,
                dropped_ts BIGINT)""",
            "CREATE INDEX tables_database ON tables (database_id, name)",
            "CREATE INDEX tables_tenant ON tables (tenant_id)",
            """CREATE TABLE schema_versions (
                table_id VARCHAR(32) NOT NULL REFERENCES tables (id),
                valid_from_ts BIGINT NOT NULL,
                columns_json TEXT NOT NULL,
                primary_key_json TEXT NOT NULL,
                fingerprint VARCHAR(64) NOT NULL,
                PRIMARY KEY (table_id, valid_from_ts))""",
            """CREATE TABLE objects (
                id VARCHAR(32) PRIMARY KEY,
                object_key TEXT NOT NULL UNIQUE,
                kind VARCHAR(8) NOT NULL CHECK (kind IN ('data', 'tomb')),
                fingerprint VARCHAR(64) NOT NULL,
                row_count BIGINT NOT NULL,
                byte_size BIGINT NOT NULL,
                min_ts BIGINT NOT NULL,
                max_ts BIGINT NOT NULL,
                min_pk TEXT NOT NULL,
                max_pk TEXT NOT NULL,
                sorted INTEGER NOT NULL,
                checksum VARCHAR(64) NOT NULL,
                created_ts BIGINT NOT NULL)""",
            """CREATE TABLE membership (
                table_id VARCHAR(32) NOT NULL REFERENCES tables (id),
                object_id VARCHAR(32) NOT NULL REFERENCES objects (id),
                added_ts BIGINT NOT NULL,
                removed_ts BIGINT,
                PRIMARY KEY (table_id, object_id))""",
            "CREATE INDEX membership_object ON membership (object_id)",
            "CREATE INDEX membership_live ON membership (table_id, removed_ts)",
        ],
    ),
    (
        "snapshots, snapshot schedules, PITR windows, last change per tenant",
        [
            "ALTER TABLE tenants ADD COLUMN last_change_ts BIGINT",
            "UPDATE tenants SET last_change_ts = created_ts",
            """CREATE TABLE snapshots (
                tenant_id VARCHAR(32) NOT NULL REFERENCES tenants (id),
                name VARCHAR(128) NOT NULL,
                ts BIGINT NOT NULL,
                kind VARCHAR(16) NOT NULL CHECK (kind IN ('manual', 'scheduled')),
                created_ts BIGINT NOT NULL,
                expires_at BIGINT,
                PRIMARY KEY (tenant_id, name))""",
            "CREATE INDEX snapshots_ts ON snapshots (tenant_id, ts)",
            """CREATE TABLE snapshot_schedules (
                tenant_id VARCHAR(32) PRIMARY KEY REFERENCES tenants (id),
                first_at_us BIGINT NOT NULL,
                interval_us BIGINT NOT NULL,
                retain_age_us BIGINT,
                retain_count INTEGER,
                name_prefix VARCHAR(64) NOT NULL,
                set_ts BIGINT NOT NULL)""",
            """CREATE TABLE pitr_windows (
                tenant_id VARCHAR(32) PRIMARY KEY REFERENCES tenants (id),
                window_us BIGINT NOT NULL,
                since_ts BIGINT NOT NULL)""",
        ],
    ),
    (
        "restore jobs, their tasks and pins, tenant lineage and retention",
        [
            "ALTER TABLE tenants ADD COLUMN source_tenant_id VARCHAR(32)",
            "ALTER TABLE tenants ADD COLUMN source_ts BIGINT",
            "ALTER TABLE tenants ADD COLUMN restore_job_id VARCHAR(32)",
            "ALTER TABLE tenants ADD COLUMN retain_until BIGINT",
            """CREATE TABLE restore_jobs (
                id VARCHAR(32) PRIMARY KEY,
                lock_name VARCHAR(63) NOT NULL,
                source_tenant_id VARCHAR(32) NOT NULL REFERENCES tenants (id),
                replaced_tenant_id VARCHAR(32),
                new_tenant_id VARCHAR(32) NOT NULL,
                target_name VARCHAR(63) NOT NULL,
                at_ts BIGINT NOT NULL,
                mode VARCHAR(16) NOT NULL CHECK (mode IN ('in_place', 'clone')),
                method VARCHAR(16) NOT NULL,
                state VARCHAR(16) NOT NULL CHECK (state IN ('planned', 'rewriting',
                    'verifying', 'installing', 'done', 'failed', 'cancelled')),
                executor VARCHAR(16) NOT NULL,
                verify VARCHAR(16) NOT NULL,
                error TEXT,
                created_ts BIGINT NOT NULL,
                updated_ts BIGINT NOT NULL,
                installed_ts BIGINT)""",
            """CREATE UNIQUE INDEX restore_jobs_one_per_tenant ON restore_jobs (lock_name)
                WHERE state IN ('planned', 'rewriting', 'verifying', 'installing', 'failed')""",
            """CREATE TABLE restore_plans (
                job_id VARCHAR(32) PRIMARY KEY REFERENCES restore_jobs (id),
                plan_json TEXT NOT NULL)""",
            """CREATE TABLE restore_tasks (
                job_id VARCHAR(32) NOT NULL REFERENCES restore_jobs (id),
                task_id VARCHAR(32) NOT NULL,
                state VARCHAR(16) NOT NULL CHECK (state IN ('pending', 'done')),
                result_json TEXT,
                PRIMARY KEY (job_id, task_id))""",
            """CREATE TABLE job_pins (
                job_id VARCHAR(32) NOT NULL,
                object_id VARCHAR(32) NOT NULL,
                PRIMARY KEY (job_id, object_id))""",
            "CREATE INDEX job_pins_object ON job_pins (object_id)",
        ],
    ),
    (
        "garbage collection: pending deletions, purged tenants",
        [
            "ALTER TABLE tenants ADD COLUMN purged_ts BIGINT",
            """CREATE TABLE gc_pending (
                object_id VARCHAR(32) PRIMARY KEY,
                object_key TEXT NOT NULL,
                byte_size BIGINT NOT NULL,
                decided_ts BIGINT NOT NULL)""",
        ],
    ),
    (
        "tenant name history: the previous holder of a name",
        ["ALTER TABLE tenants ADD COLUMN previous_holder_id VARCHAR(32)"],
    ),
    (
        "set-based restore plans: pins name their table and action; covering indexes",
        [
            # A plan no longer lists reused objects: the job's pins do, so a pin
            # says which table it installs into and how. Jobs pinned before this
            # step carry action 'legacy' and cannot be resumed, only cancelled.
            """CREATE TABLE job_pins_v6 (
                job_id VARCHAR(32) NOT NULL,
                table_id VARCHAR(32) NOT NULL,
                object_id VARCHAR(32) NOT NULL,
                action VARCHAR(8) NOT NULL CHECK (action IN ('reuse', 'rewrite', 'legacy')),
                PRIMARY KEY (job_id, table_id, object_id))""",
            """INSERT INTO job_pins_v6 (job_id, table_id, object_id, action)
                SELECT job_id, '', object_id, 'legacy' FROM job_pins""",
            "DROP TABLE job_pins",
            "ALTER TABLE job_pins_v6 RENAME TO job_pins",
            "CREATE INDEX job_pins_object ON job_pins (object_id)",
            # Planning classifies 10^5 members by (max_ts, min_ts) and sums their
            # bytes: these indexes answer it without touching the tables' rows.
            "DROP INDEX membership_live",
            "CREATE INDEX membership_live ON membership (table_id, removed_ts, object_id)",
            """CREATE INDEX objects_plan ON objects
                (id, kind, max_ts, min_ts, byte_size, fingerprint)""",
        ],
    ),
    (
        "restore job leases: who runs a job, until when, and whether it was asked to stop",
        [
            # Wall-clock microseconds (the hosts' real time), never the catalog's
            # commit clock: a backup restore may push that clock far ahead.
            "ALTER TABLE restore_jobs ADD COLUMN lease_holder VARCHAR(255)",
            "ALTER TABLE restore_jobs ADD COLUMN lease_expires_us BIGINT",
            "ALTER TABLE restore_jobs ADD COLUMN stop_requested_us BIGINT",
        ],
    ),
    (
        "one live database and table per name, enforced by the database",
        [
            # Writers no longer queue for a whole commit (uploads happen before
            # the transaction): uniqueness is the constraints' job, not only a
            # check before the insert.
            """CREATE UNIQUE INDEX databases_live_name ON databases (tenant_id, name)
                WHERE dropped_ts IS NULL""",
            """CREATE UNIQUE INDEX tables_live_name ON tables (database_id, name)
                WHERE dropped_ts IS NULL""",
        ],
    ),
    (
        "membership by reference: a table inherits its source's membership as of a time",
        [
            # A restored table's reused objects are not copied into membership:
            # the table inherits its source table's members live at base_ts whose
            # rows are all at or before cut_ts (docs/membership.md). A chain is
            # flat: depth k names the k-th source, with its own base and cut.
            # Written when the job starts (the job's pin by time, table_id the
            # table the install will create); released_ts ends a base when its
            # table is purged or released, and GC ages what it held from then.
            """CREATE TABLE membership_bases (
                table_id VARCHAR(32) NOT NULL,
                depth INTEGER NOT NULL CHECK (depth >= 1),
                base_table_id VARCHAR(32) NOT NULL REFERENCES tables (id),
                base_ts BIGINT NOT NULL,
                cut_ts BIGINT NOT NULL,
                job_id VARCHAR(32),
                released_ts BIGINT,
                PRIMARY KEY (table_id, depth))""",
            "CREATE INDEX membership_bases_base ON membership_bases (base_table_id, base_ts)",
            "CREATE INDEX membership_bases_job ON membership_bases (job_id)",
            # The commit ts of GC's last decision to delete: a restore job whose
            # plan read the catalog before it may count an object GC is taking.
            "ALTER TABLE clock ADD COLUMN gc_decided_ts BIGINT NOT NULL DEFAULT 0",
            # Each membership row carries its object's max_ts, so the members
            # after a point S are one index range (a plan reads only those).
            "ALTER TABLE membership ADD COLUMN max_ts BIGINT NOT NULL DEFAULT 0",
            """UPDATE membership SET max_ts =
                (SELECT o.max_ts FROM objects o WHERE o.id = membership.object_id)""",
            "DROP INDEX membership_live",
            """CREATE INDEX membership_view ON membership
                (table_id, removed_ts, max_ts, added_ts, object_id)""",
            # What each table holds, its own and inherited members, counted per
            # kind and schema: a plan's reuse is these totals less the members
            # after S, so planning never reads every member.
            """CREATE TABLE member_totals (
                table_id VARCHAR(32) NOT NULL,
                kind VARCHAR(8) NOT NULL,
                fingerprint VARCHAR(64) NOT NULL,
                objects BIGINT NOT NULL,
                bytes BIGINT NOT NULL,
                PRIMARY KEY (table_id, kind, fingerprint))""",
            """INSERT INTO member_totals (table_id, kind, fingerprint, objects, bytes)
                SELECT m.table_id, o.kind, o.fingerprint, COUNT(*), SUM(o.byte_size)
                FROM membership m JOIN objects o ON o.id = m.object_id
                WHERE m.removed_ts IS NULL GROUP BY m.table_id, o.kind, o.fingerprint""",
        ],
    ),
    (
        "restoring a table or a database: job scope, write locks, table lineage",
        [
            # What a job restores: a whole tenant, one database or one table.
            "ALTER TABLE restore_jobs ADD COLUMN scope VARCHAR(16) NOT NULL DEFAULT 'tenant'",
            # The restore job that holds a live table (or a database) while it
            # runs: writes and DDL to it are refused until the job installs or
            # is cancelled (docs/table-restore.md).
            "ALTER TABLE tables ADD COLUMN lock_job_id VARCHAR(32)",
            "ALTER TABLE databases ADD COLUMN lock_job_id VARCHAR(32)",
            # A restored table's lineage: the table and ts it was restored from,
            # by which job.
            "ALTER TABLE tables ADD COLUMN source_table_id VARCHAR(32)",
            "ALTER TABLE tables ADD COLUMN source_ts BIGINT",
            "ALTER TABLE tables ADD COLUMN restore_job_id VARCHAR(32)",
            # One row per commit per table, what `rewind history --commits` lists
            # so a user can find the bad one and restore to just before it.
            """CREATE TABLE commits (
                tenant_id VARCHAR(32) NOT NULL,
                ts BIGINT NOT NULL,
                table_id VARCHAR(32) NOT NULL,
                kind VARCHAR(16) NOT NULL,
                rows_upserted BIGINT NOT NULL DEFAULT 0,
                rows_deleted BIGINT NOT NULL DEFAULT 0,
                objects INTEGER NOT NULL DEFAULT 0,
                bytes BIGINT NOT NULL DEFAULT 0,
                PRIMARY KEY (tenant_id, ts, table_id))""",
            "CREATE INDEX commits_table ON commits (table_id, ts)",
        ],
    ),
    (
        "instant restore: a member read only up to a cut; a job installed before its rewrite",
        [
            # A member that straddled a restore's point S is held with a cut: only
            # its rows at or before cut_ts belong to the table, and its max_ts is
            # min(object max_ts, cut_ts), so every level and plan that ranges on
            # max_ts sees what the table really holds (docs/membership.md).
            "ALTER TABLE membership ADD COLUMN cut_ts BIGINT",
            # Every view read selects the cut: keep membership_view covering.
            "DROP INDEX membership_view",
            """CREATE INDEX membership_view ON membership
                (table_id, removed_ts, max_ts, added_ts, object_id, cut_ts)""",
            # An instant job installs its tenant (straddlers held with a cut)
            # before it rewrites them, then swaps each for its rewritten copy.
            "ALTER TABLE restore_jobs ADD COLUMN instant INTEGER NOT NULL DEFAULT 0",
        ],
    ),
    (
        "the change log: each write commit's own objects, kept for diff and revert",
        [
            # One row per object a write commit (or load) registered. Compaction
            # merges commit objects into outputs that span all of history; these
            # rows keep the commit's own, key-sorted objects findable (and GC
            # keeps the objects) while the tenant's change horizon needs them, so
            # a diff reads what changed, not the table (docs/diff.md).
            """CREATE TABLE change_objects (
                table_id VARCHAR(32) NOT NULL,
                ts BIGINT NOT NULL,
                object_id VARCHAR(32) NOT NULL,
                PRIMARY KEY (table_id, ts, object_id))""",
            "CREATE INDEX change_objects_object ON change_objects (object_id)",
            # The change log of a table is complete for commits at or after this
            # ts: GC raises it when it forgets older rows. Tables that existed
            # before the log have it from now on (their earlier commits may have
            # been compacted away already).
            "ALTER TABLE tables ADD COLUMN changes_from_ts BIGINT NOT NULL DEFAULT 0",
            "UPDATE tables SET changes_from_ts = (SELECT last_ts + 1 FROM clock WHERE id = 1)",
        ],
    ),
    (
        "write intents: what every writer may upload, recorded before it uploads",
        [
            # One row per writer (a commit, a load, a compaction, a backup import, a
            # restore job) made before its first upload and deleted by the
            # transaction that registers what it wrote. The object ids it mints
            # begin with ``id``; a restore job's outputs are named by its plan
            # (``job_id``). A row older than the orphan grace is a writer that
            # never committed: GC lists just its prefixes for orphans, never the
            # warehouse (docs/gc.md). ``state``: open, then sweeping once GC
            # revoked it (its commit can no longer land).
            """CREATE TABLE write_intents (
                id VARCHAR(32) PRIMARY KEY,
                kind VARCHAR(32) NOT NULL,
                started_us BIGINT NOT NULL,
                state VARCHAR(16) NOT NULL,
                job_id VARCHAR(32),
                holder VARCHAR(300) NOT NULL)""",
            "CREATE INDEX write_intents_started ON write_intents (started_us)",
            """CREATE TABLE write_intent_tables (
                intent_id VARCHAR(32) NOT NULL,
                tenant_id VARCHAR(32) NOT NULL,
                table_id VARCHAR(32) NOT NULL,
                PRIMARY KEY (intent_id, tenant_id, table_id))""",
            # A warehouse written before intents may hold orphans no intent names:
            # GC asks for one `rewind gc --deep` until a deep pass has finished.
            """INSERT INTO meta (key, value) SELECT 'gc_needs_deep', '1'
                WHERE EXISTS (SELECT 1 FROM tenants)""",
        ],
    ),
    (
        "GC's candidate queue: objects that may have become garbage, fed by triggers",
        [
            # GC examines these objects, not every object (engine/gc/collect.py):
            # its decision costs what changed since the last run, not the
            # warehouse. An object can stop being needed only by one of the
            # events below, each of which queues the objects it may free; GC
            # drops from the queue what it decided or found still needed, and
            # keeps what is unreferenced but younger than the grace.
            "CREATE TABLE gc_candidates (object_id VARCHAR(32) PRIMARY KEY)",
            # Every object once: the first GC after this step examines them all.
            "INSERT INTO gc_candidates (object_id) SELECT id FROM objects",
            *_queue_triggers(),
        ],
    ),
    (
        "GC's measurements: each table's reclaimable rows, reused while they hold",
        [
            # What full compaction would drop from a table, as GC last measured it
            # reading every member (engine/gc/reclaim.py), and what that answer
            # depended on: the members (the commit ts they were read at, and the
            # view's totals then) and the protected times before the table's
            # newest row (a digest). A pass reads the objects of a table again
            # only when one of them changed (tenants/catalog/engine/measures.py).
            """CREATE TABLE table_measures (
                table_id VARCHAR(32) PRIMARY KEY,
                measured_ts BIGINT NOT NULL,
                members BIGINT NOT NULL,
                member_bytes BIGINT NOT NULL,
                events_until BIGINT NOT NULL,
                protection VARCHAR(64) NOT NULL,
                rows_held BIGINT NOT NULL,
                reclaimable_rows BIGINT NOT NULL,
                reclaimable_bytes BIGINT NOT NULL)""",
        ],
    ),
    (
        "operations: the runs journal, recovery point objectives",
        [
            # One row per backup, GC pass and restore drill (restore jobs keep
            # restore_jobs): what ran, for which tenant, its outcome, size and time,
            # so `rewind status` and `rewind metrics` on any host see every run.
            # ``running`` rows carry a lease like restore jobs: one whose lease ran
            # out is a run that died (stale). Wall-clock µs, not the commit clock.
            """CREATE TABLE runs (
                id VARCHAR(32) PRIMARY KEY,
                kind VARCHAR(16) NOT NULL,
                tenant_name VARCHAR(63),
                target VARCHAR(1024),
                method VARCHAR(32),
                state VARCHAR(16) NOT NULL CHECK (state IN ('running', 'done', 'failed')),
                started_us BIGINT NOT NULL,
                ended_us BIGINT,
                lease_holder VARCHAR(255) NOT NULL,
                lease_expires_us BIGINT NOT NULL,
                point_ts BIGINT,
                backup_id VARCHAR(32),
                bytes BIGINT,
                objects BIGINT,
                row_count BIGINT,
                error TEXT)""",
            "CREATE INDEX runs_kind_tenant ON runs (kind, tenant_name, started_us)",
            "CREATE INDEX runs_state ON runs (state)",
            # Keyed by name: a restored tenant (a new id under the same name) keeps
            # its objective.
            """CREATE TABLE recovery_objectives (
                tenant_name VARCHAR(63) PRIMARY KEY,
                rpo_us BIGINT NOT NULL,
                set_ts BIGINT NOT NULL)""",
        ],
    ),
    (
        "operations: the newest run of each recurring job, kept by triggers",
        [
            # One row per (kind, tenant, destination, method): its newest run by
            # start and its finished run with the newest point, so `rewind status`
            # reads a row per recurring job, not the whole journal (which grows by
            # a row per tenant per backup). Triggers keep it, as they keep the GC
            # queue: no writer of runs can forget it. '' stands for NULL in the
            # key (a GC pass has no tenant). A catalog copy rebuilds it from the
            # runs it inserts.
            """CREATE TABLE runs_newest (
                kind VARCHAR(16) NOT NULL,
                tenant_name VARCHAR(63) NOT NULL,
                target VARCHAR(1024) NOT NULL,
                method VARCHAR(32) NOT NULL,
                run_id VARCHAR(32) NOT NULL,
                started_us BIGINT NOT NULL,
                done_id VARCHAR(32),
                done_point_ts BIGINT,
                PRIMARY KEY (kind, tenant_name, target, method))""",
            _NEWEST_BACKFILL,
            *_newest_runs_triggers(),
        ],
    ),
    (
        "write intents: the object kinds each writer mints ids for",
        [
            # ``data``, ``tomb`` or ``data,tomb``, set when the intent is recorded:
            # a sweep lists only ``<table>/<kind>/<intent id>`` for these kinds (one
            # request per table for a data-only commit, not two). NULL: an intent
            # recorded before this step, whose kinds are unknown: both are listed.
            "ALTER TABLE write_intents ADD COLUMN object_kinds VARCHAR(16)",
        ],
    ),
]

LATEST_VERSION = len(MIGRATIONS)


def statement_for(statement: Statement, dialect: str) -> str | None:
    """The text of ``statement`` that ``dialect`` runs (None: none)."""
    return statement if isinstance(statement, str) else statement.get(dialect)


def ddl_fingerprint(version: int) -> str:
    """Hash of every DDL statement up to ``version``, in order."""
    digest = hashlib.sha256()
    for _, statements in MIGRATIONS[:version]:
        for statement in statements:
            texts = (
                [statement]
                if isinstance(statement, str)
                else [f"{name}: {statement[name]}" for name in sorted(statement)]
            )
            for text in texts:
                digest.update(" ".join(text.split()).encode())
                digest.update(b"\x00")
    return digest.hexdigest()
