"""``rewind backup create|list|show|verify|delete|restore``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from engine.cli import render
from engine.cli.choices import BackupKindOption
from engine.cli.confirm import YesOption, confirm
from engine.cli.context import cli_state, tenant_arg
from engine.cli.render_layout import Stack, fixed, human_bytes, local_time, titled, wrapping
from tenants.errors import NotFound
from tenants.names import backup_id as checked_backup_id
from tenants.names import tenant_name

if TYPE_CHECKING:
    from engine.backup.destination import BackupEntry

app = typer.Typer(
    help="Backups that outlive the bucket: logical dumps or physical object copies.",
    no_args_is_help=True,
)

Uri = Annotated[
    str,
    typer.Argument(
        metavar="URI", help="Backup destination, e.g. s3://other-bucket/prefix.", show_default=False
    ),
]
BackupId = Annotated[
    str,
    typer.Argument(
        metavar="BACKUP_ID", help="A backup id, from `rewind backup list URI`.", show_default=False
    ),
]


@app.command("create")
def create(
    ctx: typer.Context,
    tenant: Annotated[
        str, typer.Argument(metavar="TENANT", help="Tenant name (or name@id).", show_default=False)
    ],
    snapshot: Annotated[
        str,
        typer.Option(
            "--snapshot",
            metavar="NAME|TIME",
            help="Snapshot name or protected time to back up: -1h, PT15M (that long ago), "
            "now, an ISO-8601 instant or a ts in µs.",
        ),
    ],
    to: Annotated[
        str,
        typer.Option(
            "--to", metavar="URI", help="Destination URI (empty, or holding Rewind backups)."
        ),
    ],
    kind: BackupKindOption = "physical",
    lock: Annotated[
        str | None,
        typer.Option(
            "--lock",
            metavar="MODE",
            help="Lock the backup with S3 Object Lock: compliance (nobody can delete it before "
            "--retain ends) or governance (only with --bypass-governance). Needs a bucket "
            "with Object Lock enabled.",
            show_default=False,
        ),
    ] = None,
    retain: Annotated[
        str | None,
        typer.Option(
            "--retain",
            metavar="DURATION",
            help="How long a locked backup is kept from now, e.g. 30d (at most 36500d; "
            "a lock is never shortened).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Back up a tenant as of a snapshot to another bucket or directory.

    Example:
      rewind backup create acme --snapshot mon --to s3://backups/rewind
      rewind backup create acme --snapshot mon --to s3://vault/rewind --lock compliance --retain 30d
    """
    from engine.backup.api import create_backup

    state = cli_state(ctx)
    tenant_arg(tenant)
    result = create_backup(state.store(), tenant, snapshot, to, kind=kind, lock=lock, retain=retain)
    if state.json:
        render.emit_json(result.__dict__)
        return
    locked = "" if lock is None else f", locked ({lock.lower()}) for {retain}"
    render.say(
        f"backup {result.backup_id} ({result.kind}{locked}) of {tenant} at {snapshot} written to {to}: "
        f"{result.objects} file(s), {result.copied_objects} copied ({human_bytes(result.copied_bytes)}), "
        f"{result.referenced_objects} already there from earlier backups, in {result.seconds:.2f}s"
    )


@app.command("list")
def list_(ctx: typer.Context, uri: Uri) -> None:
    """List the backups at a destination (incomplete and unreadable ones too, flagged)."""
    from engine.backup.api import backups

    state = cli_state(ctx)
    entries = backups(uri)
    if state.json:
        render.emit_json([render.with_times(e.__dict__, "at_ts", "created_ts") for e in entries])
        return
    render.show(_backups_table(uri, entries))
    for e in entries:
        if e.problem:
            render.warn(e.problem)


_BACKUP = Stack(("backup", "tenant"), header="backup\nof tenant")
_AT = Stack(("at", "at time"), header="at")


def _backups_table(uri: str, entries: list[BackupEntry]) -> Table:
    """One backup a row: its id over the tenant it holds, the point it was taken
    at over that point's time (under ``--wide``, each in its own column);
    ``complete`` only when one is not."""
    every = all(e.complete for e in entries)
    table = titled(
        f"backups at {uri}",
        caption=f"{len(entries)} backup(s)" + (", all complete" if every and entries else ""),
    )
    _BACKUP.add_to(table)
    fixed(table, "kind")
    _AT.add_to(table)
    wrapping(table, "created")
    fixed(table, "size", right=True)
    locks = any(e.lock_mode or e.legal_hold for e in entries)
    if locks:
        wrapping(table, "locked")
    if not every:
        wrapping(table, "complete")
    for e in entries:
        cells = [
            *_BACKUP.cells(e.backup_id, e.tenant),
            e.kind or "",
            *_AT.cells(e.at_label, None if e.at_ts is None else local_time(e.at_ts)),
            "" if e.created_ts is None else local_time(e.created_ts),
            human_bytes(e.bytes),
        ]
        if locks:
            cells.append(_lock_cell(e))
        if not every:
            cells.append(
                "yes"
                if e.complete
                else "NO (unreadable manifest; delete it)"
                if e.problem
                else "NO (no manifest; delete it)"
            )
        table.add_row(*map(Text, cells))  # a label may hold [brackets]: never markup
    return table


def _lock_cell(e: BackupEntry) -> str:
    """``compliance until <time>``, ``+ hold`` when a legal hold is on."""
    parts = []
    if e.lock_mode:
        until = "" if e.retain_until_us is None else f" until {local_time(e.retain_until_us)}"
        parts.append(f"{e.lock_mode.lower()}{until}")
    if e.legal_hold:
        parts.append("legal hold")
    return ", ".join(parts) or "no"


@app.command("show")
def show(ctx: typer.Context, uri: Uri, backup_id: BackupId) -> None:
    """Show a backup's manifest (without its file list)."""
    from engine.backup.api import show_backup

    render.emit_json(render.with_times(show_backup(uri, backup_id), "at_ts", "created_ts"))


@app.command("verify")
def verify(ctx: typer.Context, uri: Uri, backup_id: BackupId) -> None:
    """Re-read every file of a backup and check sizes and hashes, without loading it."""
    from engine.backup.api import verify_backup

    state = cli_state(ctx)
    files = verify_backup(uri, backup_id)
    if state.json:
        render.emit_json({"backup_id": backup_id, "files_verified": files, "ok": True})
    else:
        render.say(f"backup {backup_id}: {files} file(s) verified, sizes and hashes match")


@app.command("delete")
def delete(
    ctx: typer.Context,
    uri: Uri,
    backup_id: BackupId,
    yes: YesOption = False,
    bypass_governance: Annotated[
        bool,
        typer.Option(
            "--bypass-governance",
            help="Delete a governance-locked backup before its retain-until (S3 may still "
            "refuse, by the bucket's policy). Never lifts a compliance lock or a legal hold.",
        ),
    ] = False,
) -> None:
    """Delete a backup (objects other backups still use are kept; a locked or held
    backup is refused until its lock ends or its hold is released)."""
    from engine.backup.api import backups, delete_backup

    state = cli_state(ctx)
    checked_backup_id(backup_id)

    def plan() -> list[RenderableType]:
        entry = [e for e in backups(uri) if e.backup_id == backup_id]
        if not entry:
            raise NotFound(f"no backup {backup_id} at {uri}")
        return [_backups_table(uri, entry)]

    confirm(f"delete backup {backup_id} at {uri}", yes=yes, as_json=state.json, plan=plan)
    deleted = delete_backup(uri, backup_id, bypass_governance=bypass_governance)
    if state.json:
        render.emit_json({"backup_id": backup_id, "deleted_files": deleted})
    else:
        render.say(f"backup {backup_id} deleted ({deleted} file(s))")


@app.command("restore")
def restore(
    ctx: typer.Context,
    source: Annotated[str, typer.Option("--from", metavar="URI", help="Backup destination URI.")],
    backup_id: Annotated[
        str | None,
        typer.Option(
            "--backup", metavar="ID", help="Backup id (default: the newest complete one)."
        ),
    ] = None,
    tenant: Annotated[
        str | None,
        typer.Option(
            "--tenant",
            metavar="NAME",
            help="Tenant name to restore as (default: the backed-up name).",
        ),
    ] = None,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace", help="Replace an existing tenant of that name (it is retired, undoable)."
        ),
    ] = False,
) -> None:
    """Restore a backup into this catalog and warehouse (any deployment)."""
    from engine.backup.api import backups, restore_backup
    from engine.backup.destination import open_destination, read_manifest

    state = cli_state(ctx)
    if tenant is not None:
        tenant_name(tenant)
    if backup_id is not None:
        checked_backup_id(backup_id)
    if backup_id is None:
        complete = [e for e in backups(source) if e.complete]
        if not complete:
            raise NotFound(f"no complete backup at {source}")
        backup_id = complete[-1].backup_id
    else:
        # The backup is found before the store is opened: `backup restore` may create
        # a store, and a bad --from or --backup must leave none behind.
        read_manifest(open_destination(source, create=False), backup_id)
    record, seconds = restore_backup(
        state.store(), source, backup_id, tenant=tenant, replace=replace
    )
    if state.json:
        render.emit_json(render.tenant_json(record) | {"backup_id": backup_id, "seconds": seconds})
    else:
        render.say(f"backup {backup_id} restored as tenant {record.ref} in {seconds:.2f}s")


hold_app = typer.Typer(
    help="Legal holds on backups: a held backup cannot be deleted, whatever its lock, "
    "until the hold is released.",
    no_args_is_help=True,
)
app.add_typer(hold_app, name="hold")


@hold_app.command("set")
def hold_set(ctx: typer.Context, uri: Uri, backup_id: BackupId) -> None:
    """Put a legal hold on every object version of a locked backup.

    Example:
      rewind backup hold set s3://vault/rewind 0f3c...
    """
    _hold(ctx, uri, backup_id, True)


@hold_app.command("release")
def hold_release(ctx: typer.Context, uri: Uri, backup_id: BackupId) -> None:
    """Release a backup's legal hold (its retention, if any, still applies)."""
    _hold(ctx, uri, backup_id, False)


def _hold(ctx: typer.Context, uri: str, backup_id: str, on: bool) -> None:
    from engine.backup.locked import set_hold

    state = cli_state(ctx)
    versions = set_hold(uri, backup_id, on)
    if state.json:
        render.emit_json({"backup_id": backup_id, "legal_hold": on, "versions": versions})
    else:
        verb = "put on" if on else "released from"
        render.say(f"legal hold {verb} backup {backup_id} ({versions} object version(s))")
