"""Handing a tenant name to a new tenant: the one swap every restore path makes.

A physical restore's install, a logical reload and a backup restore each end
in one transaction that gives a name to a tenant built beside the current
one. This is the part they share: in place, the current holder must still be
the one the restore planned to replace, and it is retired (kept, ``dropped``,
for the retention period, so the restore can be undone); otherwise the name
must still be free. Either way no instant has two active holders, because
the caller activates the new tenant in the same transaction.
"""

from __future__ import annotations

from tenants.catalog import Tx
from tenants.catalog.tenants import active_holder_id
from tenants.errors import ConcurrentModification
from tenants.tenancy import DEFAULT_RETENTION_US, retire_tenant, tenant_by_id


def hand_over_name(
    tx: Tx,
    name: str,
    ts: int,
    *,
    replacing: str | None,
    what: str,
    retention_us: int = DEFAULT_RETENTION_US,
) -> None:
    """Make ``name`` free for a new tenant to take at ``ts``, in ``tx``.

    ``replacing`` is the id of the active tenant the restore replaces (in
    place), retired at ``ts`` for ``retention_us``; None means the name must be
    free (a clone, a new deployment). ``what`` names the operation in errors
    ("restore job J", "backup B").

    Raises:
        ConcurrentModification: the planned holder no longer holds the name, or
            a tenant took the free name meanwhile; nothing is changed.
    """
    if replacing is not None:
        replaced = tenant_by_id(tx, replacing)
        if replaced.state != "active" or replaced.name != name:
            raise ConcurrentModification(
                f"{what}: tenant {replaced.ref} is no longer the active holder of {name!r}; "
                "cancel and restore again"
            )
        retire_tenant(tx, replaced, ts, retention_us)
    elif active_holder_id(tx, name) is not None:
        raise ConcurrentModification(
            f"{what}: the name {name!r} was taken meanwhile; restore under another name"
        )
