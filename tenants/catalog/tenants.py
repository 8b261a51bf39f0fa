"""Tenant rows: who holds a name, and each tenant's state, times and lineage columns.

A ``tenants`` row is one tenant id. Its ``state`` is ``active`` (writable; at
most one per name, enforced by the partial unique index ``tenants_live_name``),
``dropped`` (retired, kept until ``retain_until``) or ``staging`` (being built
by a reload or restore, invisible to name lookups here). ``last_change_ts`` is
the commit ts of the tenant's last data or DDL change; ``source_tenant_id``,
``source_ts``, ``restore_job_id`` and ``previous_holder_id`` are its lineage
(tenants.timeline.lineage walks them), ``purged_ts`` marks a tenant whose data GC removed.

Rows come back as dicts (``Row``) of every column; ``tenants.tenancy.TenantRecord``
builds the domain record from one. This module imports no domain code.
"""

from __future__ import annotations

from tenants.catalog.base import Row, Tx
from tenants.errors import AlreadyExists


def tenant_row(tx: Tx, tenant_id: str) -> Row | None:
    """The tenant with id ``tenant_id``, in any state."""
    return tx.one("SELECT * FROM tenants WHERE id = ?", (tenant_id,))


def tenant_row_named(tx: Tx, tenant_id: str, name: str) -> Row | None:
    """The tenant with id ``tenant_id`` if it is (or, dropped, was last) called ``name``."""
    return tx.one("SELECT * FROM tenants WHERE id = ? AND name = ?", (tenant_id, name))


def active_tenant_row(tx: Tx, name: str) -> Row | None:
    """The active tenant holding ``name`` (there is at most one)."""
    return tx.one("SELECT * FROM tenants WHERE name = ? AND state = 'active'", (name,))


def active_holder_id(tx: Tx, name: str) -> str | None:
    """The id of the active tenant holding ``name``, if any.

    Callers that then create or reactivate a tenant under ``name`` must do both
    in one write transaction: the check is what makes the clash a clear
    ``AlreadyExists`` rather than a constraint error from ``tenants_live_name``.
    """
    row = tx.one("SELECT id FROM tenants WHERE name = ? AND state = 'active'", (name,))
    return None if row is None else str(row["id"])


def last_dropped_id(tx: Tx, name: str) -> str | None:
    """The id of the tenant called ``name`` dropped most recently (a hint for lookups
    that found no active holder)."""
    row = tx.one(
        "SELECT id FROM tenants WHERE name = ? ORDER BY dropped_ts DESC NULLS LAST LIMIT 1", (name,)
    )
    return None if row is None else str(row["id"])


def tenant_rows(tx: Tx, *, include_dropped: bool = False) -> list[Row]:
    """Active tenants (and with ``include_dropped`` every other one), by name then age."""
    sql = "SELECT * FROM tenants"
    if not include_dropped:
        sql += " WHERE state = 'active'"
    return tx.all(sql + " ORDER BY name, created_ts")


def insert_tenant(tx: Tx, tenant_id: str, name: str, ts: int) -> None:
    """Insert a new active tenant created (and last changed) at commit ts ``ts``.

    Raises:
        AlreadyExists: an active tenant holds ``name`` (index ``tenants_live_name``).
    """
    with tx.unique(lambda: AlreadyExists(f"an active tenant named {name!r} already exists")):
        tx.execute(
            "INSERT INTO tenants (id, name, state, created_ts, last_change_ts) "
            "VALUES (?, ?, 'active', ?, ?)",
            (tenant_id, name, ts, ts),
        )


def set_last_change(tx: Tx, tenant_id: str, ts: int) -> None:
    """Record that the tenant's data or DDL changed at commit ts ``ts``."""
    tx.execute("UPDATE tenants SET last_change_ts = ? WHERE id = ?", (ts, tenant_id))


def set_last_change_if(tx: Tx, tenant_id: str, ts: int, expected: int) -> bool:
    """``set_last_change`` iff the tenant's last change is still ``expected``
    (compare-and-set): False when another commit changed the tenant meanwhile."""
    return (
        tx.execute(
            "UPDATE tenants SET last_change_ts = ? WHERE id = ? AND last_change_ts = ?",
            (ts, tenant_id, expected),
        )
        == 1
    )


def retire_tenant_row(tx: Tx, tenant_id: str, ts: int, retain_until: int) -> bool:
    """Drop the tenant at ``ts``, keeping its data until ``retain_until``.

    Compare-and-set on ``state = 'active'``: returns False when the tenant was no
    longer active (dropped or replaced meanwhile), and then changes nothing.
    """
    changed = tx.execute(
        "UPDATE tenants SET state = 'dropped', dropped_ts = ?, retain_until = ? "
        "WHERE id = ? AND state = 'active'",
        (ts, retain_until, tenant_id),
    )
    return changed == 1


def reactivate_tenant_row(tx: Tx, tenant_id: str, name: str) -> None:
    """Make a dropped tenant active again under ``name`` (undrop).

    The caller has checked, in this transaction, that no active tenant holds
    ``name`` (:func:`active_holder_id`) and that the tenant's retention has not
    ended.
    """
    tx.execute(
        "UPDATE tenants SET state = 'active', name = ?, dropped_ts = NULL, retain_until = NULL "
        "WHERE id = ?",
        (name, tenant_id),
    )
