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

from collections.abc import Sequence

from tenants.catalog.base import Row, Tx
from tenants.catalog.changes import forget_changes_of_tables
from tenants.catalog.commits import forget_commits
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


def unreferenced_objects(tx: Tx) -> list[Row]:
    """Objects no table holds, by its own live membership or through an unreleased
    base, not pinned by an unfinished restore job and not already pending
    deletion, ordered by key.

    Each row has ``id``, ``object_key``, ``byte_size``, ``created_ts``, ``last_ref``
    (when the last table stopped holding it: the newest ``removed_ts`` of its
    memberships or ``released_ts`` of a base that reached it; None if it never
    had one) and ``memberships`` (how many it ever had). Only objects without a
    live membership are probed against bases, so the cost follows the candidates,
    not the tenants' sizes. Run it in the transaction that records the decisions
    (:func:`record_pending`): the keep-set must not go stale.
    """
    return tx.all(
        "WITH cand AS (SELECT o.id, o.object_key, o.byte_size, o.created_ts, o.max_ts, "
        "MAX(m.removed_ts) AS last_ref, COUNT(m.object_id) AS memberships "
        "FROM objects o LEFT JOIN membership m ON m.object_id = o.id "
        "WHERE o.id NOT IN (SELECT object_id FROM gc_pending) "
        "AND o.id NOT IN (SELECT object_id FROM change_objects) "
        "AND o.id NOT IN (SELECT p.object_id FROM job_pins p JOIN restore_jobs j ON j.id = p.job_id "
        "  WHERE j.state IN ('planned', 'rewriting', 'verifying', 'installing', 'failed')) "
        "GROUP BY o.id, o.object_key, o.byte_size, o.created_ts, o.max_ts "
        "HAVING SUM(CASE WHEN m.object_id IS NOT NULL AND m.removed_ts IS NULL THEN 1 ELSE 0 END) = 0), "
        f"reach AS ({_REACH}) "
        "SELECT c.id, c.object_key, c.byte_size, c.created_ts, c.memberships, "
        "CASE WHEN c.last_ref IS NULL OR MAX(r.released_ts) > c.last_ref THEN MAX(r.released_ts) "
        "ELSE c.last_ref END AS last_ref "
        "FROM cand c LEFT JOIN reach r ON r.id = c.id "
        "GROUP BY c.id, c.object_key, c.byte_size, c.created_ts, c.memberships, c.last_ref "
        "HAVING SUM(CASE WHEN r.id IS NOT NULL AND r.released_ts IS NULL THEN 1 ELSE 0 END) = 0 "
        "ORDER BY c.object_key",
    )


def record_pending(tx: Tx, decisions: Sequence[tuple[str, str, int, int]]) -> None:
    """Record GC's decisions, ``(object_id, object_key, byte_size, decided_ts)`` each.

    Committed before any key is deleted: a crash after the commit leaves the
    decisions for the next run to finish (:func:`pending_deletions`). The
    commit's ts is kept as GC's last decision (:func:`gc_decided_since`).
    """
    tx.executemany(
        "INSERT INTO gc_pending (object_id, object_key, byte_size, decided_ts) VALUES (?, ?, ?, ?)",
        decisions,
    )
    if decisions:
        tx.execute("UPDATE clock SET gc_decided_ts = ? WHERE id = 1", (tx.commit_ts(),))


def gc_decided_since(tx: Tx, ts: int) -> bool:
    """Whether GC decided to delete objects in a transaction committed after ``ts``."""
    return int(tx.scalar("SELECT gc_decided_ts FROM clock WHERE id = 1")) > ts


def pending_deletions(tx: Tx) -> list[Row]:
    """Every recorded decision not yet finished (``object_id``, ``object_key``,
    ``byte_size``), ordered by key."""
    return tx.all("SELECT object_id, object_key, byte_size FROM gc_pending ORDER BY object_key")


def forget_collected(tx: Tx, object_ids: Sequence[str]) -> None:
    """Drop the catalog rows of objects whose keys are deleted: their memberships, the
    objects and the pending decisions. Call only after the object store deleted the keys:
    the other order leaves keys no row names."""
    for start in range(0, len(object_ids), _CHUNK):
        chunk = list(object_ids[start : start + _CHUNK])
        marks = ", ".join("?" for _ in chunk)
        tx.execute(f"DELETE FROM membership WHERE object_id IN ({marks})", chunk)
        tx.execute(f"DELETE FROM objects WHERE id IN ({marks})", chunk)
        tx.execute(f"DELETE FROM gc_pending WHERE object_id IN ({marks})", chunk)


def known_object_keys(tx: Tx) -> set[str]:
    """Every key the catalog records as an object or as a pending deletion."""
    keys = {r["object_key"] for r in tx.all("SELECT object_key FROM objects")}
    keys |= {r["object_key"] for r in tx.all("SELECT object_key FROM gc_pending")}
    return keys


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
