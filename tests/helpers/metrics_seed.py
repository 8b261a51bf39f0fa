"""A catalog of many tenants and journaled jobs, made in a few set-based statements.

What ``rewind metrics`` reads at each scrape, at deployment scale (10^4 tenants,
10^4 runs) without running 10^4 backups: tenants, a snapshot, a table with its
member totals, an objective and (every other tenant) a PITR window each; runs
spread over the tenants (backups, one in ten a GC pass, one in seventeen
failed); restore jobs (done or cancelled), each with a rewritten task. Each
table is one ``INSERT ... SELECT`` over a recursive counter, which SQLite and
PostgreSQL both take, so seeding costs a few statements, not one per row.
benchmarks/bench_metrics.py and the tests use it; no Rewind code path is
exercised here.
"""

from __future__ import annotations

from tenants.catalog import Catalog

BASE_TS = 1_700_000_000_000_000  # µs: 2023-11-14
HOUR_US = 3_600_000_000

_COUNTER = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "


def seed(catalog: Catalog, tenants: int, runs: int, restores: int = 0, *, first: int = 1) -> None:
    """Add tenants ``bench<first>`` .. ``bench<first + tenants - 1>`` and their rows,
    ``runs`` runs and ``restores`` restore jobs over them, in one transaction."""
    last = first + tenants - 1
    with catalog.transaction() as tx:
        tx.execute(
            _COUNTER + "INSERT INTO tenants (id, name, state, created_ts, last_change_ts) "
            "SELECT 'tid' || i, 'bench' || i, 'active', ?, ? FROM n WHERE i >= ?",
            (last, BASE_TS, BASE_TS, first),
        )
        tx.execute(
            _COUNTER + "INSERT INTO snapshots (tenant_id, name, ts, kind, created_ts) "
            "SELECT 'tid' || i, 'daily', ? + i, 'manual', ? + i FROM n WHERE i >= ?",
            (last, BASE_TS, BASE_TS, first),
        )
        tx.execute(
            _COUNTER + "INSERT INTO databases (id, tenant_id, name, created_ts) "
            "SELECT 'did' || i, 'tid' || i, 'shop', ? FROM n WHERE i >= ?",
            (last, BASE_TS, first),
        )
        tx.execute(
            _COUNTER + "INSERT INTO tables (id, tenant_id, database_id, name, created_ts) "
            "SELECT 'bid' || i, 'tid' || i, 'did' || i, 'orders', ? FROM n WHERE i >= ?",
            (last, BASE_TS, first),
        )
        for kind, objects in (("data", 40), ("tomb", 3)):
            tx.execute(
                _COUNTER
                + "INSERT INTO member_totals (table_id, kind, fingerprint, objects, bytes) "
                "SELECT 'bid' || i, ?, 'fp', ?, ? * i FROM n WHERE i >= ?",
                (last, kind, objects, objects * 1000, first),
            )
        tx.execute(
            _COUNTER + "INSERT INTO recovery_objectives (tenant_name, rpo_us, set_ts) "
            "SELECT 'bench' || i, ?, ? FROM n WHERE i >= ?",
            (last, 24 * HOUR_US, BASE_TS, first),
        )
        tx.execute(
            _COUNTER + "INSERT INTO pitr_windows (tenant_id, window_us, since_ts) "
            "SELECT 'tid' || i, ?, ? FROM n WHERE i >= ? AND i % 2 = 0",
            (last, 72 * HOUR_US, BASE_TS, first),
        )
        if runs:
            tx.execute(
                _COUNTER + "INSERT INTO runs (id, kind, tenant_name, target, method, state, "
                "started_us, ended_us, lease_holder, lease_expires_us, point_ts, backup_id, "
                "bytes, objects) "
                "SELECT 'run' || ? || '-' || i, "
                "CASE WHEN i % 10 = 0 THEN 'gc' ELSE 'backup' END, "
                "CASE WHEN i % 10 = 0 THEN NULL ELSE 'bench' || (? + i % ?) END, "
                "NULL, CASE WHEN i % 10 = 0 THEN 'default' ELSE 'physical' END, "
                "CASE WHEN i % 17 = 0 THEN 'failed' ELSE 'done' END, "
                "? + i * 1000, ? + i * 1000 + CAST(i % 3600 AS BIGINT) * 1000000, 'h:1::t', 0, "
                "? + i, NULL, 1000 * i, i FROM n",
                (runs, first, first, tenants, BASE_TS, BASE_TS, BASE_TS),
            )
        if restores:
            tx.execute(
                _COUNTER + "INSERT INTO restore_jobs (id, lock_name, source_tenant_id, "
                "new_tenant_id, target_name, at_ts, mode, method, state, executor, verify, "
                "created_ts, updated_ts, installed_ts, scope) "
                "SELECT 'job' || ? || '-' || i, 'bench' || (? + i % ?), 'tid' || (? + i % ?), "
                "'new' || i, 'bench' || (? + i % ?), ?, 'clone', 'physical', "
                "CASE WHEN i % 5 = 0 THEN 'cancelled' ELSE 'done' END, 'local', 'objects', "
                "? + i * 1000, ? + i * 1000 + CAST(i % 600 AS BIGINT) * 1000000, ? + i * 1000 + 20000, "
                "CASE WHEN i % 3 = 0 THEN 'table' ELSE 'tenant' END FROM n",
                (
                    restores,
                    first,
                    first,
                    tenants,
                    first,
                    tenants,
                    first,
                    tenants,
                    BASE_TS,
                    BASE_TS,
                    BASE_TS,
                    BASE_TS,
                ),
            )
            tx.execute(
                _COUNTER + "INSERT INTO restore_tasks (job_id, task_id, state, result_json) "
                "SELECT 'job' || ? || '-' || i, 'task', 'done', "
                "'{\"output\": {\"bytes\": ' || (i * 100) || '}}' FROM n",
                (restores, first),
            )
