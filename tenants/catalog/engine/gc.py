"""What GC reads and writes in the catalog: garbage, pending deletions, purges, retention.

GC decides inside one write transaction and records its decisions in
``gc_pending`` before any key is deleted from the object store; the rows go only after
the keys are gone (engine/gc/collect.py). Every query here that GC builds a
keep-set from must run in the same transaction as the decision it protects:
a membership or pin added after the read would otherwise go unseen.

"Unfinished" restore jobs (``planned``, ``rewriting``, ``verifying``,
``installing``, ``failed``) pin their objects and their source tenant: GC never
collects the one nor purges the other while such a job exists.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from tenants.catalog.base import Row, Tx
from tenants.catalog.changes import forget_changes_of_tables
from tenants.catalog.commits import forget_commits
from tenants.catalog.engine.measures import forget_measures_of_objects
from tenants.catalog.inherited import OWN_MEMBERS, release_bases_of_tables, view_select
from tenants.catalog.totals import drop_totals

# SQLite's default limit on bound parameters is 999: forget collected objects in chunks.
_CHUNK = 500


# A candidate's reach through a base: a row of the base's table live at the base ts,
# rows within the cut (the row's max_ts: a member held with a cut of its own
# counts only up to it), and no row for the object in the inheriting table or in a
# shallower level's table (those hide it: tenants.catalog.inherited).
_REACH = (
    "SELECT c.id, b.released_ts FROM cand c "
    "JOIN membership a ON a.object_id = c.id "
    "JOIN membership_bases b ON b.base_table_id = a.table_id AND a.added_ts <= b.base_ts "
    "AND a.removed_ts > b.base_ts AND a.max_ts <= b.cut_ts "
    "WHERE NOT EXISTS (SELECT 1 FROM membership s WHERE s.object_id = c.id "
    "AND (s.table_id = b.table_id OR s.table_id IN (SELECT b2.base_table_id "
    "FROM membership_bases b2 WHERE b2.table_id = b.table_id AND b2.depth < b.depth)))"
)


# The objects no table holds, by its own live membership or through an unreleased
# base, not pinned by an unfinished restore job, not kept by the change log, among
# those ``scope`` (a condition on ``o.id``) admits: the CTE ``garbage``, a row per
# object with ``id``, ``object_key``, ``byte_size``, ``created_ts``, ``memberships``
# (how many it ever had) and ``last_ref`` (when the last table stopped holding it:
# the newest ``removed_ts`` of its memberships or ``released_ts`` of a base that
# reached it; NULL if it never had one). Only objects without a live membership
# are probed against bases, so that part of the cost follows the candidates.
def _garbage(tx: Tx, scope: str, *, queued: bool) -> str:
    # ``queued``: the objects of gc_candidates, read from the queue first (SQLite
    # keeps a CROSS JOIN's order; it scanned every object, testing each against
    # the queue, when left to choose), each looked up by id.
    # PostgreSQL inlines a CTE used once: with few rows estimated for ``cand`` (the
    # queue's fresh rows have no statistics yet) it re-ran the base probe once per
    # candidate. Materialized, it runs once. (SQLite plans it well as it is.)
    reach = "reach AS MATERIALIZED" if tx.catalog.dialect.name == "postgresql" else "reach AS"
    source = (
        "gc_candidates q CROSS JOIN objects o WHERE o.id = q.object_id AND "
        if queued
        else "objects o WHERE "
    )
    # An object with a live membership is no candidate: one indexed probe each
    # (NOT EXISTS), and only the few left are aggregated over their memberships,
    # not every object grouped with all of its own (half the audit's full scan).
    return (
        "WITH cand AS (SELECT o.id, o.object_key, o.byte_size, o.created_ts, o.max_ts, "
        "(SELECT MAX(m.removed_ts) FROM membership m WHERE m.object_id = o.id) AS last_ref, "
        "(SELECT COUNT(*) FROM membership m WHERE m.object_id = o.id) AS memberships "
        f"FROM {source}{scope} "
        "AND NOT EXISTS (SELECT 1 FROM membership m WHERE m.object_id = o.id "
        "AND m.removed_ts IS NULL) "
        "AND o.id NOT IN (SELECT object_id FROM change_objects) "
        "AND o.id NOT IN (SELECT p.object_id FROM job_pins p JOIN restore_jobs j ON j.id = p.job_id "
        "  WHERE j.state IN ('planned', 'rewriting', 'verifying', 'installing', 'failed'))), "
        f"{reach} ({_REACH}), "
        "garbage AS (SELECT c.id, c.object_key, c.byte_size, c.created_ts, c.memberships, "
        "CASE WHEN c.last_ref IS NULL OR MAX(r.released_ts) > c.last_ref THEN MAX(r.released_ts) "
        "ELSE c.last_ref END AS last_ref "
        "FROM cand c LEFT JOIN reach r ON r.id = c.id "
        "GROUP BY c.id, c.object_key, c.byte_size, c.created_ts, c.memberships, c.last_ref "
        "HAVING SUM(CASE WHEN r.id IS NOT NULL AND r.released_ts IS NULL THEN 1 ELSE 0 END) = 0) "
    )


# The decided_ts of the rows record_garbage inserts until it stamps them: the
# transaction's own decisions, told apart from earlier runs' unfinished ones.
_UNSTAMPED = -1


@dataclass(frozen=True)
class Recorded:
    """What one decision recorded: how many objects, their bytes, and the first
    ``sample`` of them by key (``garbage`` rows: see :func:`_garbage`)."""

    objects: int
    bytes: int
    sample: list[Row]


_NOT_PENDING = "o.id NOT IN (SELECT object_id FROM gc_pending)"
_SINCE = "COALESCE(last_ref, created_ts)"


def record_garbage(
    tx: Tx, *, aged_before: int | None, decided_ts: int, sample: int, full_scan: bool = False
) -> Recorded:
    """Record in ``gc_pending``, in one statement, every garbage object not already
    pending whose last reference ended (or, never referenced, which was registered)
    at or before ``aged_before`` (None: however recently), stamped ``decided_ts``.

    Only the objects in ``gc_candidates`` are examined (the triggers of the
    queue's migration step put there every object that may have stopped being
    needed), so the cost follows what changed since the last run, not the
    warehouse; ``full_scan`` examines every object instead (an audit: what the
    queue missed would be found), and rebuilds the queue. Afterwards the queue
    keeps only the garbage younger than the grace: what was decided is pending,
    and what is still needed is queued again by the event that frees it.

    Set-based (INSERT ... SELECT): no candidate passes through Python, so memory
    does not grow with the garbage; only the ``sample`` rows are read back, for
    display. Run it in the transaction whose commit is the decision: the keep-set
    must not go stale. Committed before any key is deleted: a crash after the
    commit leaves the decisions for the next run (:func:`pending_batch`). The
    commit's ts is kept as GC's last decision (:func:`gc_decided_since`).
    """
    if full_scan:
        # The audit rebuilds the queue from every object (one scan), then decides
        # from the queue as any run does: the scan runs once, not again to
        # requeue the young garbage.
        tx.execute("DELETE FROM gc_candidates")
        tx.execute(
            "INSERT INTO gc_candidates (object_id) "
            + _garbage(tx, _NOT_PENDING, queued=False)
            + "SELECT id FROM garbage"
        )
    if tx.catalog.dialect.name == "postgresql":
        # The queue (and gc_pending) swing from 10^5 rows after a bulk load to
        # none after a run: autovacuum's statistics of them are stale as often
        # as not, and with them PostgreSQL hashed every object against 1,000
        # queued. ANALYZE samples at most 30,000 rows of each: bounded, and the
        # plan then looks each queued object up by id.
        tx.execute("ANALYZE gc_candidates, gc_pending")
    aged = "" if aged_before is None else f" WHERE {_SINCE} <= ?"
    tx.execute(
        "INSERT INTO gc_pending (object_id, object_key, byte_size, decided_ts) "
        + _garbage(tx, _NOT_PENDING, queued=True)
        + "SELECT id, object_key, byte_size, ? FROM garbage"
        + aged,
        (_UNSTAMPED,) if aged_before is None else (_UNSTAMPED, aged_before),
    )
    row = tx.one(
        "SELECT COUNT(*) AS n, COALESCE(SUM(byte_size), 0) AS size FROM gc_pending "
        "WHERE decided_ts = ?",
        (_UNSTAMPED,),
    )
    assert row is not None
    objects, size = int(row["n"]), int(row["size"])
    listed: list[Row] = []
    if objects and sample > 0:
        ids = [
            str(r[0])
            for r in tx.tuples(
                "SELECT object_id FROM gc_pending WHERE decided_ts = ? ORDER BY object_key LIMIT ?",
                (_UNSTAMPED, sample),
            )
        ]
        listed = _described(tx, ids)
    if objects:
        tx.execute(
            "UPDATE gc_pending SET decided_ts = ? WHERE decided_ts = ?", (decided_ts, _UNSTAMPED)
        )
        tx.execute("UPDATE clock SET gc_decided_ts = ? WHERE id = 1", (tx.commit_ts(),))
    _requeue_young(tx, aged_before)
    return Recorded(objects, size, listed)


def _requeue_young(tx: Tx, aged_before: int | None) -> None:
    """Leave in ``gc_candidates`` exactly the garbage younger than the grace among
    what was examined (now excluding what was just decided: it is pending)."""
    if aged_before is None:
        tx.execute("DELETE FROM gc_candidates")
        return
    tx.execute(
        _garbage(tx, _NOT_PENDING, queued=True)
        + "DELETE FROM gc_candidates WHERE object_id NOT IN "
        + f"(SELECT id FROM garbage WHERE {_SINCE} > ?)",
        (aged_before,),
    )


def _described(tx: Tx, object_ids: Sequence[str]) -> list[Row]:
    """The ``garbage`` row of each of ``object_ids`` (objects just decided), by key.

    Two plain lookups per chunk of ids, merged here, rather than :func:`_garbage`
    scoped to them: PostgreSQL estimates a handful of rows for the few
    uncommitted ``gc_pending`` rows, and then re-ran the base probe once per row
    (4 s for 1,000 objects). Every base reaching a decided object is released,
    so only the newest release matters.
    """
    rows: list[Row] = []
    for start in range(0, len(object_ids), _CHUNK):
        chunk = list(object_ids[start : start + _CHUNK])
        marks = ", ".join("?" for _ in chunk)
        released = {
            str(r[0]): r[1]
            for r in tx.tuples(
                f"WITH cand AS (SELECT id FROM objects WHERE id IN ({marks})) "
                f"SELECT id, MAX(released_ts) FROM ({_REACH}) reach GROUP BY id",
                chunk,
            )
        }
        for row in tx.all(
            "SELECT o.id, o.object_key, o.byte_size, o.created_ts, "
            "MAX(m.removed_ts) AS last_ref, COUNT(m.object_id) AS memberships "
            "FROM objects o LEFT JOIN membership m ON m.object_id = o.id "
            f"WHERE o.id IN ({marks}) GROUP BY o.id, o.object_key, o.byte_size, o.created_ts",
            chunk,
        ):
            base = released.get(row["id"])
            if base is not None and (row["last_ref"] is None or base > row["last_ref"]):
                row["last_ref"] = base
            rows.append(row)
    rows.sort(key=lambda r: str(r["object_key"]))
    return rows


def gc_decided_since(tx: Tx, ts: int) -> bool:
    """Whether GC decided to delete objects in a transaction committed after ``ts``."""
    return int(tx.scalar("SELECT gc_decided_ts FROM clock WHERE id = 1")) > ts


def pending_totals(tx: Tx) -> tuple[int, int]:
    """How many recorded decisions are unfinished, and their bytes."""
    row = tx.one("SELECT COUNT(*) AS n, COALESCE(SUM(byte_size), 0) AS size FROM gc_pending")
    assert row is not None
    return int(row["n"]), int(row["size"])


def pending_batch(tx: Tx, after_id: str, limit: int) -> list[Row]:
    """Up to ``limit`` unfinished decisions (``object_id``, ``object_key``,
    ``byte_size``) with ids above ``after_id``, by id: a keyset page on the
    primary key, so each page costs its own size however many are pending."""
    return tx.all(
        "SELECT object_id, object_key, byte_size FROM gc_pending WHERE object_id > ? "
        "ORDER BY object_id LIMIT ?",
        (after_id, limit),
    )


def forget_collected(tx: Tx, object_ids: Sequence[str]) -> None:
    """Drop the catalog rows of objects whose keys are deleted: their memberships, the
    objects and the pending decisions. Call only after the object store deleted the keys:
    the other order leaves keys no row names."""
    for start in range(0, len(object_ids), _CHUNK):
        chunk = list(object_ids[start : start + _CHUNK])
        marks = ", ".join("?" for _ in chunk)
        # The ended memberships are what told GC's kept measurements their tables
        # changed: forget those measurements with them.
        forget_measures_of_objects(tx, chunk)
        tx.execute(f"DELETE FROM membership WHERE object_id IN ({marks})", chunk)
        tx.execute(f"DELETE FROM objects WHERE id IN ({marks})", chunk)
        tx.execute(f"DELETE FROM gc_pending WHERE object_id IN ({marks})", chunk)
        # Deleting their memberships queued them (the queue's triggers): they are gone.
        tx.execute(f"DELETE FROM gc_candidates WHERE object_id IN ({marks})", chunk)


def known_object_keys(tx: Tx) -> set[str]:
    """Every key the catalog records as an object or as a pending deletion."""
    keys = {r["object_key"] for r in tx.all("SELECT object_key FROM objects")}
    keys |= {r["object_key"] for r in tx.all("SELECT object_key FROM gc_pending")}
    return keys


# The keys under a prefix in byte order (COLLATE BINARY: "C" on PostgreSQL, whose
# default collation is the locale's). The bounds are compared in byte order too.
_OBJECT_KEYS_IN_ORDER = (
    "SELECT object_key FROM objects WHERE object_key COLLATE BINARY >= ? "
    "AND object_key COLLATE BINARY < ? ORDER BY object_key COLLATE BINARY"
)
_PENDING_KEYS_IN_ORDER = (
    "SELECT object_key FROM gc_pending WHERE object_key COLLATE BINARY >= ? "
    "AND object_key COLLATE BINARY < ? ORDER BY object_key COLLATE BINARY"
)


def known_keys_in_order(tx: Tx, prefix: str, batch: int = 10_000) -> Iterator[str]:
    """Every key starting with ``prefix`` that the catalog records as an object or as
    a pending deletion, each once, ascending by its UTF-8 bytes: the order of
    Python's ``str`` and of an object store's listing (tenants/objectstore/base.py).

    ``gc --deep`` merges this against the listing, so neither is ever held whole:
    both tables are read in batches of ``batch`` rows (a server-side cursor on
    PostgreSQL, which sorts there) and merged here. The result is valid only
    inside ``tx``, whose one snapshot it reads. ``prefix`` is not empty.
    """
    upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)  # the first key past the prefix
    streams = [
        _first_column(tx.batches(sql, (prefix, upper), batch))
        for sql in (_OBJECT_KEYS_IN_ORDER, _PENDING_KEYS_IN_ORDER)
    ]
    previous: str | None = None
    for key in heapq.merge(*streams):
        if key != previous:  # a pending deletion's object row may still be there
            yield key
            previous = key


def _first_column(batches: Iterator[tuple[list[str], list[tuple[str, ...]]]]) -> Iterator[str]:
    for _, rows in batches:
        for row in rows:
            yield str(row[0])


def known_among(tx: Tx, keys: Sequence[str]) -> set[str]:
    """Which of ``keys`` the catalog records as an object or a pending deletion: a
    point lookup, the check ``gc --deep`` makes before it deletes a key its merge
    found unknown."""
    found: set[str] = set()
    for start in range(0, len(keys), _CHUNK):
        chunk = list(keys[start : start + _CHUNK])
        marks = ", ".join("?" for _ in chunk)
        for table in ("objects", "gc_pending"):
            found |= {
                str(r[0])
                for r in tx.tuples(
                    f"SELECT object_key FROM {table} WHERE object_key IN ({marks})", chunk
                )
            }
    return found


def plans_of_jobs_in(tx: Tx, states: Sequence[str]) -> list[str]:
    """The plan JSON of every restore job in one of ``states`` (their outputs are
    keys the catalog knows before it installs them)."""
    marks = ", ".join("?" for _ in states)
    rows = tx.all(
        "SELECT p.plan_json FROM restore_jobs j JOIN restore_plans p ON p.job_id = j.id "
        f"WHERE j.state IN ({marks})",
        states,
    )
    return [str(r["plan_json"]) for r in rows]


def job_ids_in(tx: Tx, states: Sequence[str]) -> set[str]:
    """The ids of the restore jobs in one of ``states``."""
    marks = ", ".join("?" for _ in states)
    rows = tx.all(f"SELECT id FROM restore_jobs WHERE state IN ({marks})", states)
    return {str(r["id"]) for r in rows}


def unfinished_restore_from(tx: Tx, tenant_id: str) -> str | None:
    """The id of an unfinished restore job reading tenant ``tenant_id``, if any (such a
    tenant must not be purged). An instant job that installed its tenant reads no
    more of its source: its tables hold what its rewrite reads, and its pins too."""
    row = tx.one(
        "SELECT id FROM restore_jobs WHERE source_tenant_id = ? AND installed_ts IS NULL "
        "AND state IN ('planned', 'rewriting', 'verifying', 'installing', 'failed')",
        (tenant_id,),
    )
    return None if row is None else str(row["id"])


def tenants_past_retention(tx: Tx, expired_before: int) -> list[Row]:
    """Rows of the dropped, unpurged tenants whose ``retain_until`` is before
    ``expired_before`` and that no unfinished restore job reads."""
    return tx.all(
        "SELECT * FROM tenants WHERE state = 'dropped' AND purged_ts IS NULL "
        "AND retain_until IS NOT NULL AND retain_until < ? AND id NOT IN "
        "(SELECT source_tenant_id FROM restore_jobs WHERE installed_ts IS NULL AND state IN "
        "('planned', 'rewriting', 'verifying', 'installing', 'failed'))",
        (expired_before,),
    )


def purge_tenant_rows(tx: Tx, tenant_id: str, ts: int) -> tuple[int, int]:
    """Purge a tenant: drop its snapshots, schedule and PITR window, end every live
    membership of its tables at ``ts`` and stamp ``purged_ts``.

    Returns ``(memberships_ended, snapshots_dropped)``. Its objects stay until GC
    finds them unreferenced (another tenant may share them).
    """
    snapshots = tx.execute("DELETE FROM snapshots WHERE tenant_id = ?", (tenant_id,))
    tx.execute("DELETE FROM snapshot_schedules WHERE tenant_id = ?", (tenant_id,))
    forget_commits(tx, tenant_id)  # its history is gone
    forget_changes_of_tables(tx, "SELECT id FROM tables WHERE tenant_id = ?", (tenant_id,))
    tx.execute("DELETE FROM pitr_windows WHERE tenant_id = ?", (tenant_id,))
    ended = tx.execute(
        "UPDATE membership SET removed_ts = ? WHERE removed_ts IS NULL "
        "AND table_id IN (SELECT id FROM tables WHERE tenant_id = ?)",
        (ts, tenant_id),
    )
    release_bases_of_tables(tx, "SELECT id FROM tables WHERE tenant_id = ?", (tenant_id,), ts)
    drop_totals(tx, "SELECT id FROM tables WHERE tenant_id = ?", (tenant_id,))
    tx.execute("UPDATE tenants SET purged_ts = ? WHERE id = ?", (ts, tenant_id))
    return ended, snapshots


def active_tenant_rows(tx: Tx) -> list[Row]:
    """Rows of every active tenant (whose dropped tables retention may release)."""
    return tx.all("SELECT * FROM tenants WHERE state = 'active'")


def release_tables_dropped_by(tx: Tx, tenant_id: str, oldest: int, ts: int) -> int:
    """End at ``ts`` the live memberships of tenant ``tenant_id``'s tables dropped at or
    before ``oldest`` (its oldest protected time); return how many ended."""
    dropped = (
        "SELECT id FROM tables WHERE tenant_id = ? AND dropped_ts IS NOT NULL AND dropped_ts <= ?"
    )
    release_bases_of_tables(tx, dropped, (tenant_id, oldest), ts)
    drop_totals(tx, dropped, (tenant_id, oldest))
    forget_changes_of_tables(tx, dropped, (tenant_id, oldest))
    return tx.execute(
        f"UPDATE membership SET removed_ts = ? WHERE removed_ts IS NULL AND table_id IN ({dropped})",
        (ts, tenant_id, oldest),
    )


def objects_shared_with_other_tenants(tx: Tx, table_id: str, tenant_id: str) -> set[str]:
    """Ids of the objects table ``table_id`` holds that a table of another tenant than
    ``tenant_id`` also holds: inherits from it, lends it (a restore's clone and its
    source share their objects), or holds live by its own row."""
    shared = {r[0] for r in tx.tuples(*view_select(tx, table_id, "m.object_id", own=False))}
    shared |= {
        r[0]
        for r in tx.tuples(
            f"SELECT m.object_id {OWN_MEMBERS} AND EXISTS (SELECT 1 FROM membership x "
            "JOIN tables t ON t.id = x.table_id WHERE x.object_id = m.object_id "
            "AND x.removed_ts IS NULL AND t.tenant_id <> ?)",
            (table_id, tenant_id),
        )
    }
    shared |= {
        r[0]
        for r in tx.tuples(
            f"SELECT m.object_id {OWN_MEMBERS} AND EXISTS (SELECT 1 FROM membership_bases b "
            "LEFT JOIN tables t ON t.id = b.table_id WHERE b.base_table_id = m.table_id "
            "AND b.released_ts IS NULL AND m.added_ts <= b.base_ts AND m.max_ts <= b.cut_ts "
            "AND (t.tenant_id IS NULL OR t.tenant_id <> ?))",
            (table_id, tenant_id),
        )
    }
    return shared
