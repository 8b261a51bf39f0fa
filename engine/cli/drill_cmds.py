"""``rewind backup drill``: restore a backup into a scratch deployment and check it.

Once, from cron or a Kubernetes CronJob, or in the foreground with ``--every``
(as ``snapshot tick --every``), one drill a period, for a container or a
systemd service. SIGTERM and SIGINT stop it cleanly: a drill they interrupt
removes its scratch area and is journaled ``failed`` (interrupted), and the
loop ends. The drill itself is engine/backup/drill.py.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from time import monotonic, sleep
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer

from engine.cli import render
from engine.cli.context import cli_state
from engine.cli.options import count_parser
from engine.cli.render_layout import human_bytes
from tenants.config import Warehouse
from tenants.errors import InvalidArgument, RewindError
from tenants.names import backup_id as checked_backup_id
from tenants.names import tenant_name
from tenants.times import parse_duration

if TYPE_CHECKING:
    from engine.backup.drill import DrillResult

# The longest one sleep lasts: time.sleep refuses more than ~292 years, --every
# takes up to 1000.
_NAP_S = 3600.0


class DrillStopped(KeyboardInterrupt):
    """SIGTERM or SIGINT arrived: the drill running, if any, is abandoned (its
    scratch removed, its run journaled failed) and the command ends."""


@contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """SIGTERM and SIGINT raise :class:`DrillStopped` in the main thread, once: a
    second signal while the first one's clean-up runs is ignored, so the clean-up
    finishes. Outside the main thread (an embedding program) nothing is installed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    raised = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal raised
        if not raised:
            raised = True
            raise DrillStopped(signal.Signals(signum).name)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def drill_cmd(
    ctx: typer.Context,
    uri: Annotated[
        str,
        typer.Argument(
            metavar="DEST",
            help="Backup destination, e.g. s3://other-bucket/prefix.",
            show_default=False,
        ),
    ],
    backup_id: Annotated[
        str | None,
        typer.Argument(
            metavar="BACKUP_ID",
            help="The backup to drill (default: the newest complete one, as --latest).",
            show_default=False,
        ),
    ] = None,
    tenant: Annotated[
        str | None,
        typer.Option(
            "--tenant",
            metavar="NAME",
            help="Only backups of this tenant.",
            show_default=False,
        ),
    ] = None,
    latest: Annotated[
        bool,
        typer.Option("--latest", help="Drill the newest complete backup (the default)."),
    ] = False,
    scratch: Annotated[
        str | None,
        typer.Option(
            "--scratch",
            metavar="URI",
            help="Where restored objects go, under a fresh drill-<id>/ prefix deleted after "
            "(s3://bucket/prefix or file:///path; default: a temporary directory). Never "
            "inside the warehouse or the destination.",
            show_default=False,
        ),
    ] = None,
    every: Annotated[
        str | None,
        typer.Option(
            "--every",
            metavar="DURATION",
            help="Keep running in the foreground and drill every DURATION (1d, 12h), for a "
            "container or a systemd service; SIGTERM or Ctrl-C stops it.",
            show_default=False,
        ),
    ] = None,
    count: Annotated[
        int | None,
        typer.Option(
            "--count",
            metavar="N",
            parser=count_parser("--count"),
            help="With --every: stop after N drills (default: run until stopped).",
            show_default=False,
        ),
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print machine-readable JSON.")
    ] = False,
) -> None:
    """Restore a backup into a scratch catalog and warehouse, verify it fully, clean up.

    The drill checks every object's size and checksum and the rows the backup's
    manifest promises, records the result in this catalog's runs journal
    (kind drill) and exits 1, with one line naming what differs, on any
    difference. The tenant the backup came from is never touched. Run it from
    cron, or in the foreground with --every (under --json, one JSON object a
    line per drill).

    Examples:
      rewind backup drill s3://backups/rewind --tenant acme --latest
      rewind backup drill s3://backups/rewind --every 1d
    """
    from engine.backup.drill import choose_backup, drill_backup

    state = cli_state(ctx)
    as_json = json_output or state.json
    if backup_id is not None and latest:
        raise InvalidArgument("give a BACKUP_ID or --latest, not both")
    if backup_id is not None:
        checked_backup_id(backup_id)
    if tenant is not None:
        tenant_name(tenant)
    if count is not None and every is None:
        raise InvalidArgument("--count goes with --every: without it, one drill runs")
    interval_s = None if every is None else parse_duration(every) / 1_000_000
    Warehouse.parse(uri, what="backup destination")
    if scratch is not None:
        Warehouse.parse(scratch, what="scratch warehouse")
    store = state.store()
    if interval_s is not None:
        # An unknown backup, tenant or an empty destination is refused here, once,
        # before the loop: one line and exit 1, as a single drill refuses it (before
        # it journals anything), not one failed drill a period.
        choose_backup(uri, backup_id, tenant=tenant)
    with _stopped_by_signals():
        if interval_s is None:
            try:
                result = drill_backup(store, uri, backup_id, tenant=tenant, scratch=scratch)
            except DrillStopped as stop:
                raise RewindError(
                    f"drill stopped by {stop} before it finished (journaled failed; its "
                    "scratch area removed)"
                ) from None
            _show(result, as_json, lines=False)
            return
        last_failed = False
        done = 0
        try:
            while True:
                started = monotonic()
                try:
                    result = drill_backup(store, uri, backup_id, tenant=tenant, scratch=scratch)
                except RewindError as error:
                    last_failed = True
                    _show_failure(error, as_json)
                else:
                    last_failed = False
                    _show(result, as_json, lines=True)
                done += 1
                if count is not None and done >= count:
                    break
                # The next drill is due one interval after this one started, so a slow
                # drill does not push the schedule later and later.
                _nap(interval_s - (monotonic() - started))
        except DrillStopped as stop:
            if not as_json:
                render.warn(f"stopped by {stop} after {done} drill(s)")
        if last_failed:
            raise typer.Exit(1)


def _nap(seconds: float) -> None:
    while seconds > 0:
        step = min(seconds, _NAP_S)
        sleep(step)
        seconds -= step


def _show(result: DrillResult, as_json: bool, *, lines: bool) -> None:
    if as_json:
        (render.emit_json_line if lines else render.emit_json)(_json(result))
        return
    at = result.at_label or str(result.at_ts)
    unit = "object(s)" if result.kind == "physical" else "file(s)"
    render.say(
        f"drill of backup {result.backup_id} ({result.kind}, {result.tenant} at {at}) passed: "
        f"{result.objects} {unit} ({human_bytes(result.bytes)}), {result.tables} table(s), "
        f"{result.rows} row(s) verified in {result.seconds:.2f}s; scratch removed"
    )


def _show_failure(error: RewindError, as_json: bool) -> None:
    """A failed drill of the loop: the one line a single drill would end with."""
    if as_json:
        render.print_error_json(type(error).__name__, error.message)
    else:
        render.print_error(error.message)


def _json(result: DrillResult) -> dict[str, Any]:
    """The result, its point in time both ways (ts and ISO-8601), and ``ok``."""
    return render.with_times(asdict(result), "at_ts") | {"ok": True}
