"""Rich tables and JSON for snapshots, snapshot schedules and PITR windows.

These are the things that make a time *protected*. The views show each time
in the local zone, exact to the µs (``--as-of`` takes it back); ``snapshot
show`` also gives the raw ts. The JSON keeps the ts and its UTC time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

from engine.cli.render_layout import fixed, local_time, local_time_or_blank, titled, wrapping
from tenants.tenancy import TenantRecord
from tenants.times import US, format_duration, format_ts

if TYPE_CHECKING:
    from tenants.timeline.pitr import PitrWindow
    from tenants.timeline.protection import Protection
    from tenants.timeline.schedules import Schedule, TickResult
    from tenants.timeline.snapshots import SnapshotRecord

_AGE_UNITS = ("w", "d", "h", "m", "s")


def format_age(us: int) -> str:
    """A coarse duration in the ``--older-than`` syntax: ``3d4h``, ``12m5s``, ``<1s``."""
    if us < US["s"]:
        return "<1s"
    for i, unit in enumerate(_AGE_UNITS):
        if us >= US[unit]:
            whole, rest = divmod(us, US[unit])
            text = f"{whole}{unit}"
            if i + 1 < len(_AGE_UNITS) and rest // US[_AGE_UNITS[i + 1]]:
                text += f"{rest // US[_AGE_UNITS[i + 1]]}{_AGE_UNITS[i + 1]}"
            return text
    return "<1s"  # unreachable: us >= 1s matched "s"


def format_time_of_day(us: int) -> str:
    seconds = us // US["s"]
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _at(ts: int | None) -> str | None:
    return None if ts is None else format_ts(ts)


def _lives_in(tenant: TenantRecord, holder: TenantRecord | None) -> str | None:
    """Where a snapshot found through lineage lives, when that is not the tenant itself."""
    if holder is None or holder.id == tenant.id:
        return None
    until = f" until {local_time(holder.retain_until)}" if holder.retain_until is not None else ""
    return f"{holder.ref}{until}"


def _expires(snapshot: SnapshotRecord) -> str:
    if snapshot.expires_at is not None:
        return local_time(snapshot.expires_at)
    return "never" if snapshot.kind == "manual" else "by schedule"


def snapshot_json(
    snapshot: SnapshotRecord,
    now: int | None = None,
    *,
    tenant: TenantRecord | None = None,
    holder: TenantRecord | None = None,
) -> dict[str, Any]:
    """One snapshot; ``lives_in`` is set when it was found in a retired tenant of the lineage."""
    value: dict[str, Any] = {
        "name": snapshot.name,
        "ts": snapshot.ts,
        "at": format_ts(snapshot.ts),
        "kind": snapshot.kind,
        "created_ts": snapshot.created_ts,
        "created": format_ts(snapshot.created_ts),
        "expires_at": snapshot.expires_at,
        "expires": _at(snapshot.expires_at),
    }
    if now is not None:
        value["age_us"] = max(0, now - snapshot.ts)
    if tenant is not None:
        lives_in = holder is not None and holder.id != tenant.id
        value["lives_in"] = (
            {
                "tenant": holder.ref,
                "state": holder.state,
                "retain_until": holder.retain_until,
                "until": _at(holder.retain_until),
            }
            if lives_in and holder is not None
            else None
        )
    return value


def snapshots_table(
    tenant: TenantRecord,
    found: Sequence[tuple[TenantRecord, SnapshotRecord]],
    now: int,
) -> Table:
    """Every snapshot restorable by name for ``tenant``, oldest first.

    Each with its time and not its ts as well: the time is exact (``--as-of``
    takes it back), restores take the name, and ``snapshot show`` gives the ts.
    """
    table = titled(f"snapshots of {tenant.name}", caption=f"{len(found)} snapshot(s)")
    wrapping(table, "name")
    wrapping(table, "time")
    fixed(table, "kind")
    fixed(table, "age", right=True)
    wrapping(table, "expires")
    retired = any(holder.id != tenant.id for holder, _ in found)
    if retired:
        wrapping(table, "lives in")
    for holder, snap in found:
        cells = [
            snap.name,
            local_time(snap.ts),
            snap.kind,
            format_age(max(0, now - snap.ts)),
            _expires(snap),
        ]
        if retired:
            cells.append(_lives_in(tenant, holder) or "")
        table.add_row(*[Text(c) for c in cells])
    return table


def snapshot_view(
    tenant: TenantRecord, holder: TenantRecord, snapshot: SnapshotRecord, now: int
) -> Table:
    """One snapshot as a two-column field/value view."""
    table = Table(title=f"snapshot {snapshot.name} of {tenant.name}", show_header=False)
    table.add_column("field", style="bold", no_wrap=True)
    wrapping(table, "value")
    rows = [
        ("name", snapshot.name),
        ("ts", str(snapshot.ts)),
        ("time", local_time(snapshot.ts)),
        ("kind", snapshot.kind),
        ("created", local_time(snapshot.created_ts)),
        ("age", format_age(max(0, now - snapshot.ts))),
        ("expires", _expires(snapshot)),
        ("lives in", _lives_in(tenant, holder) or f"{tenant.ref} (this tenant)"),
    ]
    for field, value in rows:
        table.add_row(Text(field), Text(value))
    return table


def schedule_json(tenant: str, schedule: Schedule | None, now: int) -> dict[str, Any]:
    if schedule is None:
        return {"tenant": tenant, "schedule": None}
    last = schedule.latest_due(now)
    # The first grid point after now: due times are first + k * interval since the epoch.
    upcoming = (
        schedule.first_at_us
        + ((now - schedule.first_at_us) // schedule.interval_us + 1) * schedule.interval_us
    )
    return {
        "tenant": tenant,
        "schedule": {
            "first": format_time_of_day(schedule.first_at_us),
            "first_at_us": schedule.first_at_us,
            "every": format_duration(schedule.interval_us),
            "interval_us": schedule.interval_us,
            "keep_for": None
            if schedule.retain_age_us is None
            else format_duration(schedule.retain_age_us),
            "retain_age_us": schedule.retain_age_us,
            "keep_last": schedule.retain_count,
            "name_prefix": schedule.name_prefix,
            "last_due_ts": last,
            "last_due": _at(last),
            "next_due_ts": upcoming,
            "next_due": format_ts(upcoming),
        },
    }


def schedule_lines(tenant: str, schedule: Schedule | None, now: int) -> list[str]:
    if schedule is None:
        return [f"tenant {tenant} has no snapshot schedule"]
    info = schedule_json(tenant, schedule, now)["schedule"]
    keep = [
        f"for {info['keep_for']}" if info["keep_for"] else None,
        f"the last {info['keep_last']}" if info["keep_last"] else None,
    ]
    retention = " and ".join(k for k in keep if k) or "until dropped"
    return [
        f"snapshot schedule of {tenant}: every {info['every']} from {info['first']} UTC, "
        f"named {schedule.name_prefix}-YYYYMMDDTHHMMSSZ, kept {retention}",
        f"last due {local_time_or_blank(info['last_due_ts']) or 'not yet'}; "
        f"next due {local_time_or_blank(info['next_due_ts'])}",
    ]


def tick_json(results: Sequence[TickResult]) -> list[dict[str, Any]]:
    return [
        {
            "tenant": r.tenant,
            "created": [snapshot_json(s) for s in r.created],
            "expired": [snapshot_json(s) for s in r.expired],
        }
        for r in results
    ]


def tick_lines(results: Sequence[TickResult]) -> list[str]:
    lines = []
    for r in results:
        for s in r.created:
            lines.append(f"{r.tenant}: created {s.name} at ts {s.ts} ({local_time(s.ts)})")
        for s in r.expired:
            lines.append(f"{r.tenant}: expired {s.name} (ts {s.ts}, {local_time(s.ts)})")
    created = sum(len(r.created) for r in results)
    expired = sum(len(r.expired) for r in results)
    lines.append(f"tick: {created} created, {expired} expired, {len(results)} tenant(s) checked")
    return lines


def pitr_json(tenant: str, window: PitrWindow | None, protection: Protection) -> dict[str, Any]:
    recoverable_window = (
        None
        if protection.window is None
        else {
            "from_ts": protection.window[0],
            "from": format_ts(protection.window[0]),
            "to_ts": protection.window[1],
            "to": format_ts(protection.window[1]),
        }
    )
    return {
        "tenant": tenant,
        "window_us": None if window is None else window.window_us,
        "window": None if window is None else format_duration(window.window_us),
        "since_ts": None if window is None else window.since_ts,
        "since": None if window is None else format_ts(window.since_ts),
        "recoverable": {
            "window": recoverable_window,
            "now_from_ts": protection.current_from,
            "now_from": format_ts(protection.current_from),
            "now_ts": protection.now,
            "now": format_ts(protection.now),
            "snapshots": [name for _, name in protection.snapshots],
        },
    }


def pitr_table(tenant: str, window: PitrWindow | None, protection: Protection) -> Table:
    """What is recoverable now: the PITR window, "now", and the snapshots."""
    caption = (
        "PITR is off"
        if window is None
        else f"PITR window {format_duration(window.window_us)}, "
        f"protecting history recorded since {local_time(window.since_ts)}"
    )
    table = titled(f"recoverable times of {tenant}", caption=caption)
    for name in ("protected by", "from", "to"):
        wrapping(table, name)
    if protection.window is not None:
        lo, hi = protection.window
        table.add_row(*map(Text, ("PITR window", local_time(lo), local_time(hi))))
    else:
        table.add_row(*map(Text, ("PITR window", "off", "")))
    table.add_row(*map(Text, ("now (no change since)", local_time(protection.current_from), "now")))
    count = len(protection.snapshots)
    table.add_row(*map(Text, (f"{count} snapshot(s)", f"see `rewind snapshot list {tenant}`", "")))
    return table
