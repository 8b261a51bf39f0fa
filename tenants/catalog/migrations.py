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

MIGRATIONS: list[tuple[str, list[str]]] = [
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
]

LATEST_VERSION = len(MIGRATIONS)


def ddl_fingerprint(version: int) -> str:
    """Hash of every DDL statement up to ``version``, in order."""
    digest = hashlib.sha256()
    for _, statements in MIGRATIONS[:version]:
        for statement in statements:
            digest.update(" ".join(statement.split()).encode())
            digest.update(b"\x00")
    return digest.hexdigest()
