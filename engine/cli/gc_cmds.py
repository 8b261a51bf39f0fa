"""``rewind gc`` and ``rewind storage``.

Both carry on past a damaged object (missing, size or checksum mismatch,
unreadable Parquet): they report every one (tenant, table, key, why), finish
the rest of the work, and exit with status 3 (``EXIT_DAMAGED``) instead of 0,
so a cron job or monitor notices. Nothing is deleted for being damaged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from engine.cli import render
from engine.cli.confirm import YesOption, confirm
from engine.cli.context import cli_state, tenant_arg
from engine.cli.render_layout import fixed, human_bytes, local_time, titled, wrapping
from engine.gc import DEFAULT_GRACE_US, DEFAULT_THRESHOLD
from tenants.errors import InvalidArgument
from tenants.times import format_duration, format_ts, parse_duration

if TYPE_CHECKING:
    from engine.gc.reclaim import DamagedObject
    from engine.gc.run import GcReport

EXIT_DAMAGED = 3  # finished, but found damaged objects (reported, kept)


def gc_cmd(
    ctx: typer.Context,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List what would be deleted and why; delete nothing.")
    ] = False,
    grace: Annotated[
        str,
        typer.Option(
            "--grace", metavar="DURATION", help="Only delete what has been unreferenced this long."
        ),
    ] = format_duration(DEFAULT_GRACE_US),
    allow_short_grace: Annotated[
        bool, typer.Option("--allow-short-grace", help="Permit a grace under 1h.")
    ] = False,
    no_compact: Annotated[
        bool,
        typer.Option(
            "--no-compact", help="Skip full compaction of tables with reclaimable versions."
        ),
    ] = False,
    orphan_grace: Annotated[
        str,
        typer.Option(
            "--orphan-grace", metavar="DURATION", help="Only sweep unknown keys older than this."
        ),
    ] = "24h",
    threshold: Annotated[
        float,
        typer.Option(
            "--threshold",
            metavar="FRACTION",
            help="Full-compact a table when this fraction of its rows is reclaimable.",
        ),
    ] = DEFAULT_THRESHOLD,
    yes: YesOption = False,
) -> None:
    """Collect garbage: expired tenants, versions no protected time needs, unreferenced objects, orphans.

    Without --dry-run it asks first at a terminal, showing what a dry run would
    delete; elsewhere (cron, scripts) it needs --yes.

    Examples:
      rewind gc --dry-run
      rewind gc --yes
    """
    from engine.gc.run import check_gc_args, run_gc

    state = cli_state(ctx)
    if not 0 <= threshold <= 1:  # also refuses nan
        raise InvalidArgument(f"invalid --threshold {threshold}: use a fraction from 0 to 1")
    grace_us = 0 if grace.strip() in ("0", "0s") else parse_duration(grace)
    orphan_grace_us = 0 if orphan_grace.strip() in ("0", "0s") else parse_duration(orphan_grace)
    check_gc_args(
        grace_us=grace_us,
        orphan_grace_us=orphan_grace_us,
        allow_short_grace=allow_short_grace,
        threshold=threshold,
    )

    def gc(dry_run: bool) -> GcReport:
        return run_gc(
            state.store(),
            dry_run=dry_run,
            grace_us=grace_us,
            allow_short_grace=allow_short_grace,
            compact=not no_compact,
            orphan_grace_us=orphan_grace_us,
            threshold=threshold,
        )

    if not dry_run:
        confirm(
            "run gc and delete what it collects",
            yes=yes,
            as_json=state.json,
            plan=lambda: gc_summary(gc(dry_run=True)),
            plan_checks=False,  # a whole dry run, and gc names nothing that could be wrong
        )
    report = gc(dry_run)
    if state.json:
        render.emit_json(gc_json(report))
    else:
        _print_gc(report)
    _exit_if_damaged(report.damaged)


def _exit_if_damaged(damaged: tuple[DamagedObject, ...]) -> None:
    """End with a one-line error and ``EXIT_DAMAGED`` when damaged objects were found."""
    if not damaged:
        return
    tables = sorted({(d.tenant, d.table) for d in damaged})
    render.print_error(
        f"{len(damaged)} damaged object(s) in {len(tables)} table(s), e.g. {damaged[0].tenant}/"
        f"{damaged[0].table} {damaged[0].key}: kept, everything else was done; check them "
        "(`rewind objects TENANT`) and restore the table or tenant from a snapshot or backup"
    )
    raise typer.Exit(EXIT_DAMAGED)


def damaged_json(damaged: tuple[DamagedObject, ...]) -> list[dict[str, str]]:
    return [{"tenant": d.tenant, "table": d.table, "key": d.key, "error": d.error} for d in damaged]


def gc_json(report: GcReport) -> dict[str, Any]:
    c = report.collected
    return {
        "dry_run": report.dry_run,
        "purged_tenants": [p.tenant for p in c.purged],
        "compacted": [
            {
                "tenant": r.tenant,
                "table": r.table.qualified,
                "reclaimable_rows": r.reclaimable_rows,
                "rows": r.rows,
                "objects_in": res.inputs,
                "objects_out": res.outputs,
            }
            for r, res in report.compacted
        ],
        "flattened": [
            {"table_id": f.table_id, "depth": f.depth, "rows_copied": f.rows}
            for f in report.flattened
        ],
        "reclaimable": [
            {
                "tenant": r.tenant,
                "table": r.table.qualified,
                "rows": r.rows,
                "reclaimable_rows": r.reclaimable_rows,
                "reclaimable_bytes": r.reclaimable_bytes,
            }
            for r in report.reclaimable
        ],
        "objects": [
            {
                "key": x.key,
                "bytes": x.bytes,
                "reason": x.reason,
                "unreferenced_since": x.unreferenced_since,
                "unreferenced_since_time": format_ts(x.unreferenced_since),
            }
            for x in c.candidates
        ],
        "deleted_objects": c.deleted_objects,
        "deleted_bytes": c.deleted_bytes,
        "resumed": c.resumed,
        "orphans": [{"key": o.key, "bytes": o.size} for o in report.orphans.orphans],
        "orphans_too_young": report.orphans.too_young,
        "kept_not_ours": list(report.orphans.not_ours),
        "catalog_id": report.catalog_id,
        "kept_other_catalogs": {
            "keys": report.orphans.foreign,
            "tenant_ids": list(report.orphans.foreign_tenants),
        },
        "incomplete_writes": {
            "multipart_uploads_aborted": report.partial.count("multipart"),
            "temp_files_removed": report.partial.count("temp"),
            "too_young": report.partial.too_young,
            "not_ours": report.partial.not_ours,
            "keys": [w.key for w in report.partial.stale],
        },
        "damaged": damaged_json(report.damaged),
        "seconds": report.seconds,
    }


def gc_summary(report: GcReport) -> list[str]:
    """A dry run's findings in counts: the plan shown before ``rewind gc`` asks."""
    c = report.collected
    objects = len(c.candidates) + len(report.orphans.orphans)
    size = sum(x.bytes for x in c.candidates) + report.orphans.orphan_bytes
    reclaimable = [r for r in report.reclaimable if r.reclaimable_rows]
    return [
        f"a dry run would delete {objects} object(s), {human_bytes(size)} "
        f"({len(report.orphans.orphans)} of them orphans), purge "
        f"{len(c.purged)} retired tenant(s) whose retention ended, abort or remove "
        f"{len(report.partial.stale)} incomplete write(s), and finds {len(reclaimable)} "
        "table(s) holding versions no protected time needs (full-compacted past --threshold)",
        "`rewind gc --dry-run` lists them",
    ]


def _print_gc(report: GcReport) -> None:
    verb = "would delete" if report.dry_run else "deleted"
    table = titled(f"gc: objects {verb}")
    wrapping(table, "key")
    fixed(table, "size", right=True)
    wrapping(table, "why")
    for x in report.collected.candidates:
        why = f"{x.reason} ({local_time(x.unreferenced_since)})"
        table.add_row(Text(x.key), Text(human_bytes(x.bytes)), Text(why))
    for o in report.orphans.orphans:
        why = "orphan: unknown to the catalog, older than the grace"
        table.add_row(Text(o.key), Text(human_bytes(o.size)), Text(why))
    if table.row_count:
        render.show(table)
    for p in report.collected.purged:
        render.say(
            f"purged retired tenant {p.tenant}: {p.memberships_ended} membership(s), {p.snapshots_dropped} snapshot(s)"
        )
    for r in report.reclaimable:
        if r.reclaimable_rows:
            render.say(
                f"{r.tenant}/{r.table.qualified}: {r.reclaimable_rows:,} of {r.rows:,} rows "
                f"(~{human_bytes(r.reclaimable_bytes)}) no protected time needs"
            )
    for r, res in report.compacted:
        render.say(
            f"full-compacted {r.tenant}/{r.table.qualified}: {res.inputs} → {res.outputs} object(s)"
        )
    for f in report.flattened:
        verb = "would read" if report.dry_run else "reads"
        render.say(
            f"table {f.table_id} {verb} inherited level {f.depth} from its own rows "
            f"({f.rows:,} membership row(s) copied)"
        )
    c = report.collected
    n = len(c.candidates) + len(report.orphans.orphans)
    size = sum(x.bytes for x in c.candidates) + report.orphans.orphan_bytes
    if report.dry_run:
        render.say(f"dry run: would delete {n} object(s), {human_bytes(size)}; nothing was changed")
    else:
        render.say(
            f"deleted {c.deleted_objects + len(report.orphans.orphans)} object(s), "
            f"{human_bytes(c.deleted_bytes + report.orphans.orphan_bytes)}"
            + (f" ({c.resumed} finished from an earlier run)" if c.resumed else "")
        )
    if report.orphans.too_young:
        render.say(f"kept {report.orphans.too_young} unknown key(s) younger than the grace period")
    partial = report.partial
    if partial.stale:
        verb = "would abort/remove" if report.dry_run else "aborted/removed"
        render.say(
            f"{verb} {partial.count('multipart')} incomplete multipart upload(s) and "
            f"{partial.count('temp')} temp file(s) of killed writers, older than the grace"
        )
    if partial.too_young:
        render.say(f"kept {partial.too_young} incomplete write(s) younger than the grace period")
    if report.orphans.foreign or partial.not_ours:
        render.say(
            f"kept {report.orphans.foreign} key(s) and {partial.not_ours} incomplete write(s) "
            f"of {len(report.orphans.foreign_tenants)} tenant(s) this catalog "
            f"({report.catalog_id}) never created: GC never deletes another catalog's keys"
        )
    for d in report.damaged:
        render.say(f"damaged, kept, table not compacted: {d.tenant}/{d.table} {d.key}: {d.error}")


def storage_cmd(
    ctx: typer.Context,
    tenant: Annotated[
        str, typer.Argument(metavar="TENANT", help="Tenant name (or name@id).", show_default=False)
    ],
) -> None:
    """Bytes a tenant holds: live, held only by snapshots/PITR, and shared with other tenants."""
    from engine.gc.storage import storage

    state = cli_state(ctx)
    tenant_arg(tenant)
    report = storage(state.store().catalog, state.store().objects, tenant)
    if state.json:
        render.emit_json(
            {
                "tenant": report.tenant,
                "bytes": report.bytes,
                "history_only_bytes": report.history_only_bytes,
                "shared_bytes": report.shared_bytes,
                "tables": [t.__dict__ for t in report.tables],
                "damaged": damaged_json(report.damaged),
            }
        )
        _exit_if_damaged(report.damaged)
        return
    table = titled(f"storage of {report.tenant}")
    wrapping(table, "table")
    fixed(table, "objects", right=True)
    fixed(table, "size", right=True)
    # Long headers over short sizes: they wrap, the sizes do not.
    wrapping(table, "only for snapshots/PITR", right=True)
    wrapping(table, "shared with other tenants", right=True)
    for t in report.tables:
        table.add_row(
            t.table,
            f"{t.objects:,}",
            human_bytes(t.bytes),
            "damaged" if t.history_only_bytes is None else human_bytes(t.history_only_bytes),
            human_bytes(t.shared_bytes),
        )
    table.add_row(
        "total",
        "",
        human_bytes(report.bytes),
        human_bytes(report.history_only_bytes),
        human_bytes(report.shared_bytes),
    )
    render.show(table)
    for d in report.damaged:
        render.say(f"damaged: {d.table} {d.key}: {d.error}")
    _exit_if_damaged(report.damaged)
