"""Many tenants for ``rewind status``, written set-based: a statement per table.

Creating 10,000 tenants through the API costs a transaction each (minutes on
PostgreSQL); :func:`add_tenants` writes them, and everything status reads
about them, with one ``INSERT ... SELECT`` per catalog table over a recursive
sequence (the same SQL on SQLite and PostgreSQL). Used by
tests/engine/operations/test_status_scale.py and benchmarks/bench_status.py.

Tenant ``n`` (1..count) is ``{prefix}{n}``, with one table (``db.t``) holding
data and tombstones, two snapshots, a 7-day PITR window switched on a day ago,
a 1-hour recovery point objective, two finished backups to one destination
(the newer one's point ``n`` seconds old, so tenants past 3,600 miss their
objective), a failed backup to another destination for every 100th tenant, a
finished restore drill, and a running backup whose lease ran out for every
1,000th.
"""

from __future__ import annotations

from dataclasses import dataclass

from tenants.store import TableStore
from tenants.timeline.protection import wall_now
from tenants.times import US

HOUR = US["h"]
DAY = US["d"]
_SEQ = "WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < ?) "
_N = "CAST(n AS VARCHAR(20))"


@dataclass(frozen=True)
class World:
    count: int
    prefix: str
    now: int  # the catalog time the ages are counted from

    @property
    def missing(self) -> int:
        """Tenants whose newest backup point is older than their 1-hour objective."""
        return max(self.count - 3600, 0)

    @property
    def failed(self) -> int:
        return self.count // 100

    @property
    def stale(self) -> int:
        return self.count // 1000


def add_tenants(store: TableStore, count: int, prefix: str = "t", *, history: int = 0) -> World:
    """``count`` active tenants ``{prefix}1..`` and what status reads about each;
    ``history`` more finished backups each, a day apart before the older one (the
    journal of a deployment that backs every tenant up daily, ``history`` days on)."""
    with store.catalog.snapshot() as tx:
        now = wall_now(tx)
    p = prefix
    statements: list[tuple[str, tuple[object, ...]]] = [
        (
            "INSERT INTO tenants (id, name, state, created_ts, last_change_ts) "
            f"{_SEQ}SELECT CAST(? AS VARCHAR(20)) || {_N}, CAST(? AS VARCHAR(20)) || {_N}, "
            "'active', ?, ? FROM seq",
            (count, f"{p}id", p, now - 2 * DAY, now - 2 * DAY),
        ),
        (
            "INSERT INTO databases (id, tenant_id, name, created_ts) "
            f"{_SEQ}SELECT CAST(? AS VARCHAR(20)) || {_N}, CAST(? AS VARCHAR(20)) || {_N}, "
            "'db', ? FROM seq",
            (count, f"{p}db", f"{p}id", now - 2 * DAY),
        ),
        (
            "INSERT INTO tables (id, tenant_id, database_id, name, created_ts) "
            f"{_SEQ}SELECT CAST(? AS VARCHAR(20)) || {_N}, CAST(? AS VARCHAR(20)) || {_N}, "
            f"CAST(? AS VARCHAR(20)) || {_N}, 't', ? FROM seq",
            (count, f"{p}tb", f"{p}id", f"{p}db", now - 2 * DAY),
        ),
        (
            "INSERT INTO member_totals (table_id, kind, fingerprint, objects, bytes) "
            f"{_SEQ}SELECT CAST(? AS VARCHAR(20)) || {_N}, 'data', 'f', 3, n * 1000 FROM seq",
            (count, f"{p}tb"),
        ),
        (
            "INSERT INTO member_totals (table_id, kind, fingerprint, objects, bytes) "
            f"{_SEQ}SELECT CAST(? AS VARCHAR(20)) || {_N}, 'tomb', 'f', 1, 100 FROM seq",
            (count, f"{p}tb"),
        ),
        (
            "INSERT INTO snapshots (tenant_id, name, ts, kind, created_ts) "
            f"{_SEQ}SELECT CAST(? AS VARCHAR(20)) || {_N}, 'mon', ?, 'manual', ? FROM seq",
            (count, f"{p}id", now - DAY, now - DAY),
        ),
        (
            "INSERT INTO snapshots (tenant_id, name, ts, kind, created_ts) "
            f"{_SEQ}SELECT CAST(? AS VARCHAR(20)) || {_N}, 'tue', ?, 'manual', ? FROM seq",
            (count, f"{p}id", now - HOUR, now - HOUR),
        ),
        (
            "INSERT INTO pitr_windows (tenant_id, window_us, since_ts) "
            f"{_SEQ}SELECT CAST(? AS VARCHAR(20)) || {_N}, ?, ? FROM seq",
            (count, f"{p}id", 7 * DAY, now - DAY),
        ),
        (
            "INSERT INTO recovery_objectives (tenant_name, rpo_us, set_ts) "
            f"{_SEQ}SELECT CAST(? AS VARCHAR(20)) || {_N}, ?, ? FROM seq",
            (count, p, HOUR, now),
        ),
    ]
    big = "CAST(? AS BIGINT)"
    runs = (
        "INSERT INTO runs (id, kind, tenant_name, target, method, state, started_us, ended_us, "
        "lease_holder, lease_expires_us, point_ts, backup_id, bytes, objects, row_count, error) "
        f"{_SEQ}SELECT CAST(? AS VARCHAR(20)) || {_N}, ?, CAST(? AS VARCHAR(20)) || {_N}, ?, "
        f"'physical', ?, {big}, {big}, 'elsewhere:1:1:x', {big}, "
        f"{big} - CAST(n AS BIGINT) * {{step}}, 'b', 1000, 3, 10, CAST(? AS TEXT) FROM seq {{where}}"
    )
    hundredth, thousandth, failure = "n % 100 = 0", "n % 1000 = 0", "StorageError: refused"
    past = [
        (f"h{day}", "backup", "s3://bk/a", "done", now - day * DAY, now - day * DAY, 0, None, "")
        for day in range(2, history + 2)
    ]
    # (tag, kind, destination, state, started, point, point's step back per n, error, which n)
    for tag, kind, target, state, started, point, step, error, where in (
        *past,
        ("old", "backup", "s3://bk/a", "done", now - DAY, now - DAY, 0, None, ""),
        ("new", "backup", "s3://bk/a", "done", now - HOUR, now, US["s"], None, ""),
        ("bad", "backup", "s3://bk/b", "failed", now - HOUR, None, 0, failure, hundredth),
        ("drl", "drill", "s3://bk/a", "done", now - HOUR, None, 0, None, ""),
        ("hung", "backup", "s3://bk/c", "running", now - HOUR, None, 0, None, thousandth),
    ):
        statements.append(
            (
                runs.format(step=step, where=f"WHERE {where}" if where else ""),
                (
                    count,
                    f"{p}{tag}-",
                    kind,
                    p,
                    target,
                    state,
                    started,
                    None if state == "running" else started + 1,
                    now - HOUR,  # the lease: expired an hour ago
                    point,
                    error,
                ),
            )
        )
    with store.catalog.transaction() as tx:
        for sql, params in statements:
            tx.execute(sql, params)
    return World(count, prefix, now)
