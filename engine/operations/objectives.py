"""Recovery point objectives: how old a tenant's newest recovery point may be.

``rewind tenant set acme --rpo 1h`` records that acme must never be more than
an hour of writes away from a backup; ``rewind status`` says whether it is, and
exits 3 when it is not (docs/operations.md). The objective is kept by tenant
*name*, so a restore (a new tenant id under the name) keeps it.
"""

from __future__ import annotations

from tenants.catalog.engine.runs import set_objective
from tenants.catalog.engine.status import objectives
from tenants.errors import InvalidArgument
from tenants.store import TableStore
from tenants.tenancy import active_tenant
from tenants.timeline.protection import wall_now
from tenants.times import check_duration, parse_duration

OFF = "off"
RPO_FORMS = "a duration such as 15m, 1h or 1d, or off"


def parse_rpo(value: str | int | None) -> int | None:
    """An objective as the API and ``--rpo`` take it: a duration (``"1h"``), µs
    (an int), or ``None``/``"off"`` for none.

    Raises:
        InvalidArgument: zero, negative or malformed (``0``, ``-1h``, ``abc``).
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InvalidArgument(f"invalid recovery point objective {value!r}: give {RPO_FORMS}")
    if isinstance(value, int):
        if value <= 0:
            raise InvalidArgument(
                f"invalid recovery point objective {value} µs: must be longer than zero"
            )
        return check_duration(value)
    if value.strip().lower() == OFF:
        return None
    try:
        return parse_duration(value)
    except InvalidArgument as error:
        raise InvalidArgument(f"recovery point objective: {error}; off removes it") from None


def set_recovery_objective(store: TableStore, tenant: str, rpo: str | int | None) -> int | None:
    """Set (``None`` or ``"off"``: remove) the active tenant's recovery point objective.

    Args:
        tenant: an active tenant's name (or ``name@id``).
        rpo: ``"1h"``, ``"90m"``, µs as an int, or ``None``/``"off"``.

    Returns:
        The objective in µs, or None when it was removed.

    Raises:
        InvalidArgument: a zero, negative or malformed ``rpo``; nothing is written.
        NotFound: no such tenant. TenantDropped: it is not active.
    """
    rpo_us = parse_rpo(rpo)  # before the catalog: a bad value changes nothing
    with store.catalog.transaction() as tx:
        record = active_tenant(tx, tenant)
        set_objective(tx, record.name, rpo_us, wall_now(tx))
    return rpo_us


def recovery_objectives(store: TableStore) -> dict[str, int]:
    """Every tenant name's recovery point objective in µs (one statement)."""
    with store.catalog.snapshot() as tx:
        return objectives(tx)
