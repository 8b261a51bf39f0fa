"""``rewind diff`` and ``rewind revert``: see the damage, undo just the damage.

``diff`` shows what changed in a table (or, counted, in every table of a
tenant) between two protected times; ``revert`` writes one commit that undoes
one commit (or a range of them) and keeps every later write. Both read only
what changed (tenants.changes.diff, tenants.changes.revert; docs/diff.md).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer

from engine.cli import render
from engine.cli.confirm import YesOption, confirm
from engine.cli.context import cli_state, table_arg, tenant_arg, warehouse_s3_settings
from engine.cli.options import BeforeOption, count_parser
from engine.cli.render_layout import local_time, titled, wrapping
from tenants.errors import InvalidArgument, RevertConflict
from tenants.times import typed_ts

if TYPE_CHECKING:
    import pyarrow as pa

    from tenants.changes.diff import DiffPlan, TenantChanges
    from tenants.changes.revert import RevertResult

DIFF_VIEW_LIMIT = 20

Tenant = Annotated[str, typer.Argument(metavar="TENANT", help="Tenant name.", show_default=False)]
Json = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
FromOption = Annotated[
    str | None,
    typer.Option(
        "--from",
        metavar="TIME",
        help="The earlier time: a snapshot name, -1h, PT15M, an ISO-8601 instant or a ts "
        "(or --before COMMIT).",
        show_default=False,
    ),
]
ToOption = Annotated[
    str | None,
    typer.Option(
        "--to",
        metavar="TIME",
        help="The later time, as --from (default: now).",
        show_default=False,
    ),
]


def diff_cmd(
    ctx: typer.Context,
    tenant: Tenant,
    table: Annotated[
        str | None,
        typer.Argument(
            metavar="DB.TABLE",
            help="The table (default: every table, counted).",
            show_default=False,
        ),
    ] = None,
    from_: FromOption = None,
    before: BeforeOption = None,
    to: ToOption = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            metavar="N",
            parser=count_parser("--limit", minimum=0, ceiling=2**62),
            help=f"Show at most N changed rows (default: {DIFF_VIEW_LIMIT} in the table view, "
            "all with --json); the counts are always whole.",
            show_default=False,
        ),
    ] = None,
    to_parquet: Annotated[
        str | None,
        typer.Option(
            "--to-parquet",
            metavar="URI",
            help="Write every changed row to one Parquet file (file:///... or s3://...): "
            "__change, the key, and before/after structs.",
            show_default=False,
        ),
    ] = None,
    json_output: Json = False,
) -> None:
    """Show the rows inserted, updated and deleted between two protected times.

    Rows are matched by primary key; updates show the values before and after.
    Only what changed in between is read, never the whole table. Without
    DB.TABLE, every table that changed is listed with its counts.

    Examples:
      rewind diff acme shop.orders --from mon
      rewind diff acme shop.orders --before TS --to -5m --json
      rewind diff acme --from mon --to tue
    """
    state = cli_state(ctx)
    as_json = json_output or state.json
    tenant_arg(tenant)
    if table is not None:
        table_arg(table)
    if limit is not None and limit < 0:
        raise InvalidArgument(f"invalid --limit {limit}: use 0 or more rows")
    if to_parquet is not None and table is None:
        raise InvalidArgument("--to-parquet writes one table's changes: name DB.TABLE")
    store = state.store()
    start = _from_point(store, tenant, from_, before)
    if table is None:
        from tenants.changes.diff import diff_tenant

        summary = diff_tenant(store.catalog, store.objects, tenant, start, to)
        if as_json:
            render.emit_json(_summary_json(summary))
        else:
            render.show(_summary_table(summary))
        return
    from tenants.changes.diff import plan_diff, stream_diff

    plan = plan_diff(store.catalog, tenant, table, start, to)
    if to_parquet is not None:
        import pyarrow as pa

        from engine.export.changes import write_changes

        counts = _Counter()
        reader = pa.RecordBatchReader.from_batches(
            plan.schema, counts.through(stream_diff(store.objects, plan))
        )
        written = write_changes(
            reader, to_parquet, warehouse_s3_settings(), store.objects.warehouse
        )
        header = _header_json(plan) | {"counts": counts.counts, "file": written.uri}
        if as_json:
            render.emit_json(header | {"bytes": written.bytes})
        else:
            render.say(
                f"{_headline(plan, counts.counts)}; wrote {render.plural(written.rows, 'row')} "
                f"to {written.uri}"
            )
        return
    if as_json:
        _emit_diff_json(plan, stream_diff(store.objects, plan), limit)
        return
    shown_limit = DIFF_VIEW_LIMIT if limit is None else limit
    counts = _Counter()
    shown: list[pa.RecordBatch] = []
    kept = 0
    for batch in counts.through(stream_diff(store.objects, plan)):
        if kept < shown_limit:
            part = batch.slice(0, shown_limit - kept)
            shown.append(part)
            kept += part.num_rows
    render.show_all(_diff_view(plan, counts.counts, shown, kept))


def revert_cmd(
    ctx: typer.Context,
    tenant: Tenant,
    table: Annotated[
        str, typer.Argument(metavar="DB.TABLE", help="The table.", show_default=False)
    ],
    commit: Annotated[
        str | None,
        typer.Option(
            "--commit",
            metavar="TS",
            help="The commit to undo (its ts, from `rewind history TENANT --commits`).",
            show_default=False,
        ),
    ] = None,
    from_: Annotated[
        str | None,
        typer.Option(
            "--from",
            metavar="TIME",
            help="Undo every commit after this time (a snapshot name, -1h, a ts, ...), up to --to.",
            show_default=False,
        ),
    ] = None,
    to: ToOption = None,
    skip_conflicts: Annotated[
        bool,
        typer.Option(
            "--skip-conflicts",
            help="Leave the rows written again later as they are (and list them) instead of "
            "refusing.",
        ),
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="Show what would be undone and the conflicts; write nothing."
        ),
    ] = False,
    yes: YesOption = False,
    json_output: Json = False,
) -> None:
    """Undo one commit (or the commits of a range) of a table, keeping every later write.

    One new commit puts back each row the commit changed: deleted rows come
    back, inserted rows go, updated rows get their values before. A row written
    again after it is a conflict: the revert refuses and lists them, unless
    --skip-conflicts. The revert is itself a commit, so it can be reverted.

    Examples:
      rewind revert acme shop.orders --commit TS --dry-run
      rewind revert acme shop.orders --commit TS --yes
      rewind revert acme shop.orders --from -1h --skip-conflicts --yes
    """
    state = cli_state(ctx)
    as_json = json_output or state.json
    tenant_arg(tenant)
    table_arg(table)
    if to is not None and from_ is None:
        raise InvalidArgument("--to ends a range: give --from TIME with it (or --commit TS alone)")
    if (commit is None) == (from_ is None):
        raise InvalidArgument(
            "say what to undo: --commit TS (from `rewind history TENANT --commits`), or "
            "--from TIME [--to TIME] for every commit in between"
        )
    commit_ts = None if commit is None else _commit_arg(commit)
    store = state.store()

    def run(dry: bool) -> RevertResult:
        return store.revert(
            tenant,
            table,
            commit_ts,
            from_as_of=from_,
            to_as_of=to,
            skip_conflicts=skip_conflicts,
            dry_run=dry,
        )

    try:
        if dry_run:
            result = run(True)
        else:
            what = f"commit ts {commit_ts}" if commit_ts is not None else "the commits of the range"
            confirm(
                f"revert {what} of {tenant}/{table}",
                yes=yes,
                as_json=as_json,
                plan=lambda: [_revert_text(run(True))],
            )
            result = run(False)
    except RevertConflict as conflict:
        if as_json and conflict.keys is not None:
            render.emit_json(
                {
                    "error": {
                        "type": "RevertConflict",
                        "message": " ".join(str(conflict).split()),
                        "conflicts": conflict.keys.to_pylist(),
                    }
                }
            )
            raise typer.Exit(1) from None
        raise
    if as_json:
        render.emit_json(revert_json(result))
    else:
        render.say(_revert_text(result))


def _from_point(store: Any, tenant: str, from_: str | None, before: str | None) -> str | int:
    """The earlier time: ``--from TIME``, or just before commit ``--before``."""
    if (from_ is None) == (before is None):
        raise InvalidArgument(
            "say where the diff starts: --from TIME (a snapshot name, -1h, a ts, ...) or "
            "--before COMMIT (its ts, from `rewind history TENANT --commits`)"
        )
    if before is None:
        assert from_ is not None
        return from_
    from engine.restore.history import before_commit

    _commit_arg(before, "--before")
    return before_commit(store.catalog, tenant, before)


def _commit_arg(text: str, option: str = "--commit") -> int:
    try:
        ts = typed_ts(text.strip())
    except InvalidArgument:
        ts = None
    if ts is None:
        raise InvalidArgument(
            f"invalid {option} {text!r}: give a commit's ts (µs since the epoch, 16 digits), "
            "as `rewind history TENANT --commits` lists it"
        )
    return ts


class _Counter:
    """Counts a diff's rows per kind as they stream past."""

    def __init__(self) -> None:
        self.counts = {"insert": 0, "update": 0, "delete": 0}

    def through(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from tenants.changes.diff import count_changes

        for batch in batches:
            for kind, n in count_changes(iter([batch])).items():
                self.counts[kind] += n
            yield batch


def _header_json(plan: DiffPlan) -> dict[str, Any]:
    return {
        "tenant": plan.tenant,
        "table": plan.table,
        "from": render.ts_json(plan.from_ts),
        "to": render.ts_json(plan.to_ts),
        "read": "scan" if plan.scans else "change log",
        "schema": {"added": plan.added, "dropped": plan.dropped, "retyped": plan.retyped},
    }


def _emit_diff_json(plan: DiffPlan, batches: Iterator[pa.RecordBatch], limit: int | None) -> None:
    """One JSON document, streamed: the header, ``rows`` (one per line, at most
    ``limit``) and, last, the whole ``counts`` (known once every row went by)."""
    import pyarrow as pa

    header = render.json_text(_header_json(plan))
    sys.stdout.write(header[:-1] + ', "rows": ')
    counts = _Counter()
    left = limit

    def rows() -> Iterator[pa.Table]:
        nonlocal left
        for batch in counts.through(batches):
            if left is None:
                yield pa.Table.from_batches([batch])
            elif left > 0:
                part = batch.slice(0, left)
                left -= part.num_rows
                yield pa.Table.from_batches([part])

    render.emit_rows_json(rows())
    sys.stdout.write(f', "counts": {render.json_text(counts.counts)}}}\n')
    sys.stdout.flush()


def _headline(plan: DiffPlan, counts: dict[str, int]) -> str:
    total = sum(counts.values())
    kinds = ", ".join(
        f"{counts[k]} {word}"
        for k, word in (("insert", "inserted"), ("update", "updated"), ("delete", "deleted"))
    )
    return (
        f"{plan.where}: {render.plural(total, 'row')} changed from {local_time(plan.from_ts)} "
        f"to {local_time(plan.to_ts)} ({kinds})"
    )


def _diff_view(
    plan: DiffPlan, counts: dict[str, int], shown: list[pa.RecordBatch], kept: int
) -> list[Any]:
    """The counts, the schema changes, how it was read, and the first rows."""
    notes = [_headline(plan, counts)]
    if plan.added or plan.dropped or plan.retyped:
        parts = [
            f"{label} {', '.join(names)}"
            for label, names in (
                ("added", plan.added),
                ("dropped", plan.dropped),
                ("retyped", plan.retyped),
            )
            if names
        ]
        notes.append(f"schema: {'; '.join(parts)}")
    if plan.scans:
        notes.append(
            "read by scanning both states: no change log covers this range (a restore or "
            "re-creation in between, or a time before the tenant's change horizon)"
        )
    out: list[Any] = ["\n".join(notes)]
    total = sum(counts.values())
    if not kept:
        return out
    out.append(_rows_table(plan, shown, kept, total))
    return out


def _rows_table(plan: DiffPlan, shown: list[pa.RecordBatch], kept: int, total: int) -> Any:
    from tenants.changes.diff import AFTER, BEFORE, CHANGE

    caption = f"first {kept} of {total}" if kept < total else render.plural(total, "row")
    table = titled(f"{plan.where}: changes", caption)
    keys = [n for n in plan.schema.names if n not in (CHANGE, BEFORE, AFTER)]
    values = [f.name for f in plan.schema.field(BEFORE).type] if BEFORE in plan.schema.names else []
    dropped = set(plan.dropped)
    wrapping(table, "change")
    for key in keys:
        wrapping(table, key)
    for name in values:
        wrapping(table, f"{name} (dropped)" if name in dropped else name)
    for batch in shown:
        for row in batch.to_pylist():
            before = row.get(BEFORE) or {}
            after = row.get(AFTER) or {}
            cells = [row[CHANGE], *(_cell(row[k]) for k in keys)]
            for name in values:
                old, new = before.get(name), after.get(name)
                if row[CHANGE] == "insert":
                    cells.append(_cell(new))
                elif row[CHANGE] == "delete":
                    cells.append(_cell(old))
                elif old == new or name in dropped:
                    cells.append(_cell(new if name not in dropped else old))
                else:
                    cells.append(f"{_cell(old)} → {_cell(new)}")
            table.add_row(*cells)
    return table


def _cell(value: Any) -> str:
    return "null" if value is None else str(value)


def _summary_json(summary: TenantChanges) -> dict[str, Any]:
    return {
        "tenant": summary.tenant,
        "from": render.ts_json(summary.from_ts),
        "to": render.ts_json(summary.to_ts),
        "tables": [
            {
                "table": t.table,
                "counts": t.counts,
                "created": t.created,
                "dropped": t.dropped,
                "schema": {"added": t.added, "dropped": t.dropped_columns, "retyped": t.retyped},
                "read": "scan" if t.scanned else "change log",
            }
            for t in summary.tables
        ],
    }


def _summary_table(summary: TenantChanges) -> Any:
    caption = (
        f"{render.plural(len(summary.tables), 'table')} changed"
        if summary.tables
        else "no table changed"
    )
    table = titled(
        f"{summary.tenant}: changes from {local_time(summary.from_ts)} to "
        f"{local_time(summary.to_ts)}",
        caption,
    )
    wrapping(table, "table")
    for header in ("inserted", "updated", "deleted"):
        wrapping(table, header, right=True)
    wrapping(table, "notes")
    for t in summary.tables:
        notes = []
        if t.created:
            notes.append("created")
        if t.dropped:
            notes.append("dropped")
        if t.added:
            notes.append(f"added {', '.join(t.added)}")
        if t.dropped_columns:
            notes.append(f"dropped {', '.join(t.dropped_columns)}")
        if t.retyped:
            notes.append(f"retyped {', '.join(t.retyped)}")
        if t.scanned:
            notes.append("scanned")
        table.add_row(
            t.table,
            str(t.counts["insert"]),
            str(t.counts["update"]),
            str(t.counts["delete"]),
            "; ".join(notes),
        )
    return table


def revert_json(result: RevertResult) -> dict[str, Any]:
    return {
        "tenant": result.tenant,
        "table": result.table,
        "from": render.ts_json(result.from_ts),
        "to": render.ts_json(result.to_ts),
        "dry_run": result.dry_run,
        "changes": result.changes,
        "put_back": result.upserted,
        "deleted": result.deleted,
        "conflicts": result.conflict_keys,
        "commit": None if result.ts is None else render.ts_json(result.ts),
        "undo": None if result.ts is None else _undo(result),
    }


def _undo(result: RevertResult) -> str:
    return f"rewind revert {result.tenant} {result.table} --commit {result.ts}"


def _revert_text(result: RevertResult) -> str:
    changed = sum(result.changes.values())
    what = (
        f"commit ts {result.to_ts}"
        if result.to_ts - result.from_ts == 1
        else f"the commits from ts {result.from_ts + 1} to {result.to_ts}"
    )
    head = (
        f"{result.tenant}/{result.table}: {render.plural(changed, 'row')} changed by {what}: "
        f"{result.changes['insert']} inserted, {result.changes['update']} updated, "
        f"{result.changes['delete']} deleted"
    )
    lines = [head]
    if result.conflict_keys:
        keys = ", ".join(
            str(next(iter(k.values())) if len(k) == 1 else k) for k in result.conflict_keys[:10]
        )
        more = len(result.conflict_keys) - 10
        many = len(result.conflict_keys)
        left = "would be left as" if result.dry_run else "left as"
        lines.append(
            f"{render.plural(many, 'row')} written again later, {left} "
            f"{'it is' if many == 1 else 'they are'}: {keys}{f' and {more} more' if more > 0 else ''}"
        )
        if result.dry_run:
            lines.append("without --skip-conflicts the revert refuses them")
    if result.dry_run:
        lines.append(
            f"would put back {render.plural(result.upserted, 'row')} and delete "
            f"{render.plural(result.deleted, 'row')}; nothing was written (--dry-run)"
        )
    elif result.ts is None:
        lines.append("nothing to undo: nothing was written")
    else:
        lines.append(
            f"reverted: put back {render.plural(result.upserted, 'row')}, deleted "
            f"{render.plural(result.deleted, 'row')} in commit ts {result.ts} "
            f"({local_time(result.ts)}); undo it with `{_undo(result)}`"
        )
    return "\n".join(lines)


def keys_restored_text(result: RevertResult) -> str:
    """``restore-table --keys|--where``: what was (or would be) put back."""
    counts = result.changes
    differ = sum(counts.values())
    head = (
        f"{result.tenant}/{result.table}: {differ} of the rows asked for "
        f"{'differs' if differ == 1 else 'differ'} from {local_time(result.from_ts)}: "
        f"{counts['delete']} gone since, "
        f"{counts['update']} changed since, {counts['insert']} added since"
    )
    if result.dry_run:
        tail = (
            f"would put back {render.plural(result.upserted, 'row')} and delete "
            f"{render.plural(result.deleted, 'row')}; nothing was written (--dry-run)"
        )
    elif result.ts is None:
        tail = "nothing to restore: nothing was written"
    else:
        tail = (
            f"restored: put back {render.plural(result.upserted, 'row')}, deleted "
            f"{render.plural(result.deleted, 'row')} in commit ts {result.ts} "
            f"({local_time(result.ts)}); undo it with `{_undo(result)}`"
        )
    return f"{head}\n{tail}"
