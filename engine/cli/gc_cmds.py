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
    from tenants.objectstore import ObjectInfo

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
    deep: Annotated[
        bool,
        typer.Option(
            "--deep",
            help="Also find orphans by listing the whole warehouse against the catalog, streamed: "
            "once for a warehouse written before write intents, then as a periodic audit.",
        ),
    ] = False,
    max_seconds: Annotated[
        float | None,
        typer.Option(
            "--max-seconds",
            metavar="N",
            help="Stop cleanly after about N seconds; the next pass goes on from there.",
        ),
    ] = None,
    yes: YesOption = False,
) -> None:
    """Collect garbage: expired tenants, versions no protected time needs, unreferenced objects, orphans.

    Orphans (uploads no commit registered) are found under the write intents
    of writers that never committed, without listing the warehouse; --deep
    lists it all too, for warehouses written before intents.

    Without --dry-run it asks first at a terminal, showing what a dry run would
    delete; elsewhere (cron, scripts) it needs --yes.

    Examples:
      rewind gc --dry-run
      rewind gc --yes
      rewind gc --deep --dry-run
      rewind gc --max-seconds 1800 --yes
    """
    from engine.gc.run import check_gc_args, run_gc
    from engine.gc.time_limit import TimeLimit

    state = cli_state(ctx)
    if not 0 <= threshold <= 1:  # also refuses nan
        raise InvalidArgument(f"invalid --threshold {threshold}: use a fraction from 0 to 1")
    grace_us = 0 if grace.strip() in ("0", "0s") else parse_duration(grace)
    orphan_grace_us = 0 if orphan_grace.strip() in ("0", "0s") else parse_duration(orphan_grace)
    TimeLimit(max_seconds)  # refuses a bad --max-seconds before any I/O
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
            deep=deep,
            max_seconds=None if dry_run else max_seconds,
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
        "deep": report.deep,
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
        # "objects" lists the first of them by key (engine.gc.collect.SAMPLE); these count all.
        "objects_total": c.candidate_count,
        "objects_total_bytes": c.candidate_bytes,
        "objects_cut": c.candidates_cut,
        "deleted_objects": c.deleted_objects,
        "deleted_bytes": c.deleted_bytes,
        "resumed": c.resumed,
        "orphans": [{"key": o.key, "bytes": o.size} for o in _orphans(report)],
        "orphans_too_young": report.orphans.too_young,
        "kept_not_ours": list(report.orphans.not_ours),
        "catalog_id": report.catalog_id,
        "kept_other_catalogs": {
            "keys": report.orphans.foreign,
            "tenant_ids": list(report.orphans.foreign_tenants),
        },
        "intents": _intents_json(report),
        "incomplete_writes": {
            "multipart_uploads_aborted": report.partial.count("multipart"),
            "temp_files_removed": report.partial.count("temp"),
            "too_young": report.partial.too_young,
            "not_ours": report.partial.not_ours,
            "keys": [w.key for w in report.partial.stale],
        },
        "damaged": damaged_json(report.damaged),
        "seconds": report.seconds,
        "phases": _phases_json(report),
        "stopped": report.stopped,
    }


def _phases_json(report: GcReport) -> dict[str, dict[str, Any]]:
    """What each phase of the pass did, in counts (and its seconds, if it ran)."""
    c, i, o = report.collected, report.intents, report.orphans
    phases: dict[str, dict[str, Any]] = {
        "compact": {
            "tables_measured": len(report.reclaimable),
            "tables_compacted": len(report.compacted),
        },
        "collect": {
            "purged_tenants": len(c.purged),
            "objects": c.candidate_count,
            "bytes": c.candidate_bytes,
            "deleted_objects": c.deleted_objects,
        },
        "flatten": {"tables": len(report.flattened)},
        "intents": {
            "stale": i.stale,
            "swept": i.forgotten,
            "keys_listed": i.listed,
            "orphans": len(i.orphans),
            "bytes": i.orphan_bytes,
        },
        "orphans": {
            "deep": report.deep,
            "keys_listed": o.listed,
            "orphans": len(o.orphans),
            "bytes": o.orphan_bytes,
            "incomplete_writes": len(report.partial.stale),
        },
    }
    for name, counts in phases.items():
        if name in report.seconds:
            counts["seconds"] = round(report.seconds[name], 3)
    return phases


def _orphans(report: GcReport) -> list[ObjectInfo]:
    """Every orphan of the pass: under stale write intents, then from the listing."""
    return list(report.intents.orphans) + list(report.orphans.orphans)


def _intents_json(report: GcReport) -> dict[str, Any]:
    i = report.intents
    return {
        "stale": i.stale,
        "swept": i.forgotten,
        "waiting": i.waiting,
        "running_jobs": i.running_jobs,
        "keys_listed": i.listed,
        "keys_known": i.known,
        "orphans": len(i.orphans),
        "incomplete_writes": len(i.partial),
        "needs_deep": i.needs_deep and not report.deep,
    }


def gc_summary(report: GcReport) -> list[str]:
    """A dry run's findings in counts: the plan shown before ``rewind gc`` asks."""
    c = report.collected
    orphans = _orphans(report)
    objects = c.candidate_count + len(orphans)
    size = c.candidate_bytes + sum(o.size for o in orphans)
    reclaimable = [r for r in report.reclaimable if r.reclaimable_rows]
    return [
        f"a dry run would delete {objects} object(s), {human_bytes(size)} "
        f"({len(orphans)} of them orphans), purge "
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
    if report.intents is not None:
        for o in report.intents.orphans:
            why = (
                "orphan: uploaded by a writer that never committed (its intent outlived the grace)"
            )
            table.add_row(Text(o.key), Text(human_bytes(o.size)), Text(why))
    for o in report.orphans.orphans:
        why = "orphan: unknown to the catalog, older than the grace"
        table.add_row(Text(o.key), Text(human_bytes(o.size)), Text(why))
    if table.row_count:
        render.show(table)
    c = report.collected
    if c.candidates_cut:
        render.say(
            f"listed the first {len(c.candidates):,} of {c.candidate_count:,} unreferenced "
            f"object(s) by key ({human_bytes(c.candidate_bytes)} in all)"
        )
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
    orphans = _orphans(report)
    orphan_bytes = sum(o.size for o in orphans)
    n = c.candidate_count + len(orphans)
    size = c.candidate_bytes + orphan_bytes
    if report.dry_run:
        render.say(f"dry run: would delete {n} object(s), {human_bytes(size)}; nothing was changed")
    else:
        render.say(
            f"deleted {c.deleted_objects + len(orphans)} object(s), "
            f"{human_bytes(c.deleted_bytes + orphan_bytes)}"
            + (f" ({c.resumed} finished from an earlier run)" if c.resumed else "")
        )
    _print_intents(report)
    if report.stopped:
        render.say(
            f"stopped at --max-seconds in the {report.stopped} phase: the next `rewind gc` goes "
            "on from there (nothing is half done)"
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


def _print_intents(report: GcReport) -> None:
    i = report.intents
    if i.stale:
        verb = "would sweep" if report.dry_run else "swept"
        render.say(
            f"{verb} {i.stale - i.running_jobs} write intent(s) older than the orphan grace "
            f"({i.listed} key(s) under them, {i.known} registered)"
            + (f"; {i.waiting} kept for the next pass (keys still young)" if i.waiting else "")
        )
    if i.running_jobs:
        render.say(f"left {i.running_jobs} intent(s) of restore jobs still running or resumable")
    if i.needs_deep and not report.deep:
        render.say(
            "this warehouse was written before write intents: run `rewind gc --deep` once to "
            "find orphans older than them"
        )


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
