"""``rewind snapshot create|list|show|drop|schedule|tick``: named, protected times.

A snapshot is one catalog row (no data is copied), so creating one is O(1).
Listing and showing follow the tenant's lineage: after a restore, snapshots
taken after the restore point stay restorable by name from the retired tenant
they live in, until that tenant's retention ends; the views say where.
"""

from __future__ import annotations

from enum import StrEnum
from time import monotonic, sleep
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import RenderableType

from engine.cli import render, snapshot_render
from engine.cli.confirm import YesOption, confirm
from engine.cli.context import CliState, cli_state, instant_arg, tenant_arg
from engine.cli.options import MAX_COUNT, count_parser
from engine.cli.render_layout import local_time
from tenants.errors import InvalidArgument, NotFound
from tenants.store import TableStore
from tenants.tenancy import active_tenant, find_tenant
from tenants.times import parse_duration

if TYPE_CHECKING:
    from tenants.timeline.snapshots import SnapshotKind, SnapshotRecord

app = typer.Typer(
    help="Create, list, show and drop snapshots; schedule them.", no_args_is_help=True
)

Tenant = Annotated[str, typer.Argument(metavar="TENANT", help="Tenant name.", show_default=False)]
SnapshotName = Annotated[
    str, typer.Argument(metavar="NAME", help="Snapshot name, e.g. monday.", show_default=False)
]


class KindChoice(StrEnum):
    manual = "manual"
    scheduled = "scheduled"


@app.command("create")
def create(
    ctx: typer.Context,
    tenant: Tenant,
    name: SnapshotName,
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            metavar="TIME",
            help="Snapshot an earlier, still protected time: -1h, PT15M (that long ago), "
            "an ISO-8601 instant or a ts in µs (default: now).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Record a snapshot: a name for a point in time. No data is copied.

    Example:
      rewind snapshot create acme mon
    """
    from tenants.timeline.snapshots import snapshot_name

    state = cli_state(ctx)
    tenant_arg(tenant)
    snapshot_name(name)
    at_ts = None if at is None else instant_arg("--at", at)
    record = state.store().create_snapshot(tenant, name, at=at_ts)
    if state.json:
        render.emit_json({"tenant": tenant, **snapshot_render.snapshot_json(record)})
    else:
        render.say(
            f"created snapshot {record.name} of {tenant} at ts {record.ts} "
            f"({local_time(record.ts)})"
        )


@app.command("list")
def list_(ctx: typer.Context, tenant: Tenant) -> None:
    """List the snapshots restorable by name, including those kept in retired tenants."""
    from tenants.timeline.lineage import lineage_snapshots
    from tenants.timeline.protection import wall_now

    state = cli_state(ctx)
    tenant_arg(tenant)
    with state.store().catalog.snapshot() as tx:
        tenant_rec = find_tenant(tx, tenant)
        found = lineage_snapshots(tx, tenant_rec)
        now = wall_now(tx)
    if state.json:
        render.emit_json(
            [
                snapshot_render.snapshot_json(s, now, tenant=tenant_rec, holder=holder)
                for holder, s in found
            ]
        )
    else:
        render.show(snapshot_render.snapshots_table(tenant_rec, found, now))


@app.command("show")
def show(ctx: typer.Context, tenant: Tenant, name: SnapshotName) -> None:
    """Show one snapshot (found through the tenant's lineage)."""
    from tenants.timeline.lineage import snapshot_in_lineage
    from tenants.timeline.protection import wall_now
    from tenants.timeline.snapshots import snapshot_name

    state = cli_state(ctx)
    tenant_arg(tenant)
    snapshot_name(name)
    with state.store().catalog.snapshot() as tx:
        tenant_rec = find_tenant(tx, tenant)
        holder, record = snapshot_in_lineage(tx, tenant_rec, name)
        now = wall_now(tx)
    if state.json:
        render.emit_json(
            snapshot_render.snapshot_json(record, now, tenant=tenant_rec, holder=holder)
        )
    else:
        render.show(snapshot_render.snapshot_view(tenant_rec, holder, record, now))


@app.command("drop")
def drop(
    ctx: typer.Context,
    tenant: Tenant,
    name: Annotated[
        str | None,
        typer.Argument(
            metavar="NAME", help="The snapshot to drop (or use filters).", show_default=False
        ),
    ] = None,
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than",
            metavar="DURATION",
            help="Drop every snapshot older than this duration, e.g. 30d.",
            show_default=False,
        ),
    ] = None,
    kind: Annotated[
        KindChoice | None,
        typer.Option("--kind", help="Drop only snapshots of this kind.", show_default=False),
    ] = None,
    yes: YesOption = False,
) -> None:
    """Drop one snapshot by name, or every snapshot matching the filters.

    Times only the dropped snapshots protected stop being recoverable, and a
    full compaction may then remove the versions they needed.

    Examples:
      rewind snapshot drop acme mon
      rewind snapshot drop acme --kind scheduled --older-than 30d --yes
    """
    from tenants.timeline.protection import wall_now
    from tenants.timeline.snapshots import matching_snapshots, snapshot_name

    state = cli_state(ctx)
    tenant_arg(tenant)
    if name is not None:
        snapshot_name(name)
        if older_than is not None or kind is not None:
            raise InvalidArgument("give either a snapshot name or filters (--older-than, --kind)")
    elif older_than is None and kind is None:
        raise InvalidArgument(
            "give a snapshot name, or --older-than DURATION and/or --kind to drop many"
        )
    older_than_us = None if older_than is None else parse_duration(older_than)
    kind_name: SnapshotKind | None = None if kind is None else kind.value
    if name is not None:
        what = f"drop snapshot {name} of {tenant}"
    else:
        filters = []
        if older_than is not None:
            filters.append(f"older than {older_than}")
        if kind_name is not None:
            filters.append(f"of kind {kind_name}")
        what = f"drop every snapshot of {tenant} {' and '.join(filters)}"

    def plan() -> list[RenderableType]:
        store = state.store()
        if name is not None:
            doomed = [_own_snapshot(store, tenant, name)]
        else:
            with store.catalog.snapshot() as tx:
                cutoff = None if older_than_us is None else wall_now(tx) - older_than_us
                doomed = matching_snapshots(
                    tx, find_tenant(tx, tenant), older_than=cutoff, kind=kind_name
                )
        if not doomed:
            return [f"no snapshot of {tenant} matches: nothing would be dropped"]
        return [
            *(f"{s.name}: ts {s.ts} ({local_time(s.ts)}), {s.kind}" for s in doomed),
            "times only these snapshots protect stop being recoverable",
        ]

    confirm(what, yes=yes, as_json=state.json, plan=plan)
    store = state.store()
    if name is not None:
        dropped = [_drop_one(store, tenant, name)]
    else:
        dropped = store.drop_snapshots(tenant, older_than_us=older_than_us, kind=kind_name)
    if state.json:
        render.emit_json(
            {"tenant": tenant, "dropped": [snapshot_render.snapshot_json(s) for s in dropped]}
        )
    elif not dropped:
        render.say(f"no snapshot of {tenant} matched; nothing dropped")
    else:
        names = ", ".join(s.name for s in dropped)
        render.say(f"dropped {len(dropped)} snapshot(s) of {tenant}: {names}")


def _drop_one(store: TableStore, tenant: str, name: str) -> SnapshotRecord:
    """Drop a snapshot of the tenant itself; name the retired tenant if it lives there."""
    try:
        return store.drop_snapshot(tenant, name)
    except NotFound:
        _own_snapshot(store, tenant, name)  # raises, saying where it lives
        raise


def _own_snapshot(store: TableStore, tenant: str, name: str) -> SnapshotRecord:
    """The tenant's own snapshot ``name``.

    Raises:
        NotFound: it has none; naming the retired tenant of the lineage that holds
            it, if one does (drop it there).
    """
    from tenants.timeline.lineage import snapshot_in_lineage
    from tenants.timeline.snapshots import find_snapshot

    try:
        with store.catalog.snapshot() as tx:
            return find_snapshot(tx, find_tenant(tx, tenant), name)
    except NotFound as missing:
        with store.catalog.snapshot() as tx:
            try:
                holder, _ = snapshot_in_lineage(tx, find_tenant(tx, tenant), name)
            except NotFound:
                raise missing from None
        raise NotFound(
            f"snapshot {name!r} of {tenant} lives in the retired tenant {holder.ref}; "
            f"drop it there: `rewind snapshot drop {holder.ref} {name}`"
        ) from None


@app.command("schedule")
def schedule(
    ctx: typer.Context,
    tenant: Tenant,
    first: Annotated[
        str | None,
        typer.Option(
            "--first",
            metavar="HH:MM",
            help="First snapshot time of day, HH:MM[:SS] UTC.",
            show_default=False,
        ),
    ] = None,
    every: Annotated[
        str | None,
        typer.Option(
            "--every", metavar="DURATION", help="Interval, e.g. 1d, 6h or 90m.", show_default=False
        ),
    ] = None,
    keep_for: Annotated[
        str | None,
        typer.Option(
            "--keep-for",
            metavar="DURATION",
            help="Expire scheduled snapshots older than this.",
            show_default=False,
        ),
    ] = None,
    keep_last: Annotated[
        int | None,
        typer.Option(
            "--keep-last",
            metavar="N",
            parser=count_parser("--keep-last", ceiling=MAX_COUNT),  # the schedule names its bound
            help="Keep at most N scheduled snapshots.",
            show_default=False,
        ),
    ] = None,
    prefix: Annotated[
        str, typer.Option("--prefix", help="Name prefix: <prefix>-YYYYMMDDTHHMMSSZ.")
    ] = "auto",
    show_only: Annotated[
        bool, typer.Option("--show", help="Show the schedule (the default without options).")
    ] = False,
    off: Annotated[bool, typer.Option("--off", help="Remove the schedule.")] = False,
) -> None:
    """Set, show or remove the tenant's snapshot schedule (applied by `rewind snapshot tick`).

    Snapshots already taken stay until they expire or are dropped.
    """
    from tenants.timeline.schedules import parse_time_of_day
    from tenants.timeline.snapshots import snapshot_name

    state = cli_state(ctx)
    tenant_arg(tenant)
    setting = (first, every, keep_for, keep_last)
    wants_set = any(v is not None for v in setting) or prefix != "auto"
    if sum([wants_set, show_only, off]) > 1:
        raise InvalidArgument("use either --show, --off, or --first/--every with retention options")
    if off:
        _schedule_off(state, tenant)
    elif wants_set:
        if first is None or every is None:
            raise InvalidArgument("a schedule needs both --first HH:MM and --every DURATION")
        first_at_us = parse_time_of_day(first)
        interval_us = parse_duration(every)
        retain_age_us = None if keep_for is None else parse_duration(keep_for)
        if keep_last is not None and keep_last < 1:
            raise InvalidArgument(f"invalid --keep-last {keep_last}: must be at least 1")
        snapshot_name(f"{prefix}-20260101T000000Z")  # the names it will make must be valid
        state.store().set_schedule(
            tenant,
            first_at_us=first_at_us,
            interval_us=interval_us,
            retain_age_us=retain_age_us,
            retain_count=keep_last,
            name_prefix=prefix,
        )
        _schedule_show(state, tenant)
    else:
        _schedule_show(state, tenant)


def _schedule_show(state: CliState, tenant: str) -> None:
    from tenants.timeline.protection import wall_now
    from tenants.timeline.schedules import get_schedule

    with state.store().catalog.snapshot() as tx:
        current = get_schedule(tx, find_tenant(tx, tenant))
        now = wall_now(tx)
    if state.json:
        render.emit_json(snapshot_render.schedule_json(tenant, current, now))
    else:
        for line in snapshot_render.schedule_lines(tenant, current, now):
            render.say(line)


def _schedule_off(state: CliState, tenant: str) -> None:
    from tenants.timeline.protection import wall_now
    from tenants.timeline.schedules import clear_schedule, get_schedule

    # No store method clears a schedule; one catalog transaction does it here.
    with state.store().catalog.transaction() as tx:
        tenant_rec = active_tenant(tx, tenant)
        previous = get_schedule(tx, tenant_rec)
        clear_schedule(tx, tenant_rec)
        now = wall_now(tx)
    if state.json:
        render.emit_json(
            {
                "tenant": tenant,
                "schedule": None,
                "previous": snapshot_render.schedule_json(tenant, previous, now)["schedule"],
            }
        )
    elif previous is None:
        render.say(f"tenant {tenant} had no snapshot schedule; nothing changed")
    else:
        render.say(
            f"removed the snapshot schedule of {tenant}; its scheduled snapshots stay until "
            f"dropped (`rewind snapshot drop {tenant} --kind scheduled`)"
        )


@app.command("tick")
def tick(
    ctx: typer.Context,
    tenant: Annotated[
        str | None,
        typer.Argument(
            metavar="TENANT",
            help="One tenant (default: every active tenant).",
            show_default=False,
        ),
    ] = None,
    every: Annotated[
        str | None,
        typer.Option(
            "--every",
            metavar="DURATION",
            help="Keep running in the foreground and tick every DURATION (5m, 1h), for a "
            "container or a systemd service; stop it with Ctrl-C.",
            show_default=False,
        ),
    ] = None,
    count: Annotated[
        int | None,
        typer.Option(
            "--count",
            metavar="N",
            parser=count_parser("--count"),
            help="With --every: stop after N ticks (default: run until stopped).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Apply snapshot schedules: take due snapshots, expire old ones. Safe to repeat.

    Run it from cron (`*/5 * * * * rewind snapshot tick`), or let it loop in the
    foreground with --every (under --json, one JSON object a line per tick).

    Example: rewind snapshot tick --every 5m
    """
    state = cli_state(ctx)
    if tenant is not None:
        tenant_arg(tenant)
    if count is not None and every is None:
        raise InvalidArgument("--count goes with --every: without it, tick runs once")
    interval_s = None if every is None else parse_duration(every) / 1_000_000
    done = 0
    while True:
        started = monotonic()
        results = state.store().tick(tenant)
        if state.json and interval_s is not None:
            render.emit_json_line(snapshot_render.tick_json(results))
        elif state.json:
            render.emit_json(snapshot_render.tick_json(results))
        else:
            for line in snapshot_render.tick_lines(results):
                render.say(line)
        done += 1
        if interval_s is None or (count is not None and done >= count):
            return
        try:
            # The next tick is due one interval after this one started, so a slow
            # tick does not push the schedule later and later.
            sleep(max(0.0, interval_s - (monotonic() - started)))
        except KeyboardInterrupt:
            return
