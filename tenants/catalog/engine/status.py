"""What ``rewind status`` reads: one statement per column, over every active tenant.

Each function answers one column of the status table for all active tenants
at once (or the one ``name`` gives), grouped per tenant in SQL (GROUP BY, or
``ROW_NUMBER()`` for "the newest row per group"), so a status of 10,000
tenants sends the same statements as one of 10 (tests/engine/operations/
test_status_scale.py counts them). The runs journal grows by a row per tenant
per backup; status reads ``runs_newest`` instead, a row per recurring job kept
by triggers (tenants/catalog/migrations.py), and looks each run up by id.
Runs and objectives are keyed by tenant *name* (a restored tenant keeps them);
snapshots, PITR windows and storage by tenant *id*, joined to the active
tenant holding the name. This module imports no domain code.
"""

from __future__ import annotations

from typing import Any

from tenants.catalog.base import Row, Tx

# Restore job states that still need someone: running (or dead mid-way) and failed.
UNFINISHED_RESTORE_STATES = ("planned", "rewriting", "verifying", "installing", "failed")


def _named(name: str | None, column: str) -> tuple[str, tuple[str, ...]]:
    """The extra ``AND column = ?`` for one tenant, or nothing for all of them."""
    return ("", ()) if name is None else (f" AND {column} = ?", (name,))


# The columns read for every tenant come as tuples, not dicts: 10^4 of each.


def active_tenants(tx: Tx, name: str | None = None) -> list[tuple[str, str]]:
    """``(id, name)`` of the active tenants (or the one named), by name."""
    where, params = _named(name, "name")
    return tx.tuples(
        f"SELECT id, name FROM tenants WHERE state = 'active'{where} ORDER BY name", params
    )


def objectives(tx: Tx, name: str | None = None) -> dict[str, int]:
    """Recovery point objectives in µs, by tenant name."""
    where, params = _named(name, "tenant_name")
    return {
        str(tenant): int(rpo)
        for tenant, rpo in tx.tuples(
            f"SELECT tenant_name, rpo_us FROM recovery_objectives WHERE 1 = 1{where}", params
        )
    }


def newest_snapshots(tx: Tx, name: str | None = None) -> list[tuple[str, str, int, int]]:
    """Per active tenant with a snapshot: ``(tenant_id, name, ts, snapshots)``: its
    newest and how many it has. Snapshots sharing the newest ts all come (the
    caller keeps one). The newest ts per tenant is a GROUP BY along the index
    ``snapshots_ts`` (tenant_id, ts), then a look-up: no sort of every snapshot."""
    where, params = _named(name, "t.name")
    return tx.tuples(
        "SELECT s.tenant_id, s.name, s.ts, g.snapshots FROM ("
        "SELECT tenant_id, MAX(ts) AS ts, COUNT(*) AS snapshots FROM snapshots "
        "GROUP BY tenant_id) g "
        "JOIN tenants t ON t.id = g.tenant_id "
        "JOIN snapshots s ON s.tenant_id = g.tenant_id AND s.ts = g.ts "
        f"WHERE t.state = 'active'{where}",
        params,
    )


def pitr_windows(tx: Tx, name: str | None = None) -> list[tuple[str, int, int]]:
    """``(tenant_id, window_us, since_ts)`` of every active tenant with a PITR window."""
    where, params = _named(name, "t.name")
    return tx.tuples(
        "SELECT p.tenant_id, p.window_us, p.since_ts FROM pitr_windows p "
        f"JOIN tenants t ON t.id = p.tenant_id WHERE t.state = 'active'{where}",
        params,
    )


def newest_backups(tx: Tx, name: str | None = None) -> list[tuple[Any, ...]]:
    """The finished backup with the newest point of each (tenant name, destination,
    method): ``(tenant_name, target, method, backup_id, point_ts, ended_us, bytes)``.
    Read from ``runs_newest`` (a row per recurring job, kept by triggers), never
    the whole journal; a destination written by two methods comes twice (the
    caller keeps the newer point)."""
    where, params = _named(name, "w.tenant_name")
    return tx.tuples(
        "SELECT r.tenant_name, r.target, r.method, r.backup_id, r.point_ts, r.ended_us, r.bytes "
        "FROM runs_newest w JOIN runs r ON r.id = w.done_id "
        f"WHERE w.kind = 'backup'{where}",
        params,
    )


def newest_runs(tx: Tx, name: str | None = None) -> list[Row]:
    """The newest run (by start) of each recurring job (kind, tenant name, destination,
    method) when it is running or failed, or is a drill or a GC pass (shown
    whatever its end). Runs of no tenant (GC passes) come too when ``name`` is
    None. A run that a later one of its job superseded no longer counts: a
    backup that failed on Monday and worked on Tuesday is not a failure on
    Wednesday. (Finished backups are :func:`newest_backups`'.)"""
    where, params = _named(name, "w.tenant_name")
    return tx.all(
        "SELECT r.id, r.kind, r.tenant_name, r.target, r.method, r.state, r.started_us, "
        "r.ended_us, r.lease_holder, r.lease_expires_us, r.backup_id, r.error "
        "FROM runs_newest w JOIN runs r ON r.id = w.run_id "
        f"WHERE (r.state <> 'done' OR r.kind IN ('drill', 'gc')){where}",
        params,
    )


def unfinished_restore_jobs(tx: Tx, name: str | None = None) -> list[Row]:
    """Restore jobs still running (or dead mid-way) or failed, with the tenant
    name each concerns (``lock_name``: the tenant restored, or the new name of a
    copy) and its source's name (``source_name``)."""
    marks = ", ".join("?" for _ in UNFINISHED_RESTORE_STATES)
    where, params = (
        ("", ()) if name is None else (" AND (j.lock_name = ? OR s.name = ?)", (name,) * 2)
    )
    return tx.all(
        "SELECT j.id, j.lock_name, s.name AS source_name, j.scope, j.method, j.state, "
        "j.error, j.created_ts, j.updated_ts, j.lease_holder, j.lease_expires_us "
        "FROM restore_jobs j JOIN tenants s ON s.id = j.source_tenant_id "
        f"WHERE j.state IN ({marks}){where} ORDER BY j.created_ts",
        (*UNFINISHED_RESTORE_STATES, *params),
    )


def storage_by_kind(tx: Tx, name: str | None = None) -> list[tuple[str, str, Any, Any]]:
    """``(tenant_id, kind, objects, bytes)``: what the live tables of each active
    tenant hold, per object kind (data, tomb), from the member totals every change
    keeps (tenants.catalog.totals): no object is read. (PostgreSQL sums to numeric.)"""
    where, params = _named(name, "t.name")
    return tx.tuples(
        "SELECT b.tenant_id, m.kind, SUM(m.objects) AS objects, SUM(m.bytes) AS bytes "
        "FROM member_totals m JOIN tables b ON b.id = m.table_id "
        "JOIN tenants t ON t.id = b.tenant_id "
        f"WHERE t.state = 'active' AND b.dropped_ts IS NULL{where} "
        "GROUP BY b.tenant_id, m.kind",
        params,
    )
