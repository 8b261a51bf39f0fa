"""A tenant name's history: its lineage of tenant ids and the restore jobs around it.

The lineage is the one names and times resolve through (tenants.timeline.lineage),
purged and expired tenants included, so ``rewind history`` shows what the name
can reach. A clone's history stops at its cut: its own row names the source
and the cut, but the source's later life (its restores, drops, other clones)
belongs to the source, not to the clone.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.restore.journal import JobRecord, jobs_of
from tenants.catalog import Catalog
from tenants.catalog.commits import commit_at, commit_rows
from tenants.catalog.engine.install import tenants_named
from tenants.errors import InvalidArgument, NotFound
from tenants.names import qualified_table
from tenants.tenancy import TenantRecord, find_tenant
from tenants.timeline.lineage import chain
from tenants.times import typed_ts

MAX_LIMIT = 2**63 - 1  # a SQL LIMIT is an int64 on SQLite and PostgreSQL


@dataclass(frozen=True)
class History:
    lineage: tuple[TenantRecord, ...]  # newest first, including purged and expired ancestors
    jobs: tuple[JobRecord, ...]


def history(catalog: Catalog, tenant: str) -> History:
    with catalog.snapshot() as tx:
        current = find_tenant(tx, tenant)
        lineage = [a.tenant for a in chain(tx, current) if a.until_ts is None]
        others = tenants_named(tx, current.name)
    known = {t.id for t in lineage}
    lineage += [TenantRecord.from_row(r) for r in others if r["id"] not in known]
    jobs = jobs_of(catalog, sorted({t.name for t in lineage}), [t.id for t in lineage])
    return History(tuple(lineage), tuple(jobs))


@dataclass(frozen=True)
class CommitRecord:
    """One commit on one table: what ``rewind history --commits`` lists."""

    ts: int
    tenant: str  # name@id of the tenant that made it (an ancestor, after a restore)
    table: str  # DB.TABLE
    kind: str  # write, create, alter, drop, restore, replace (by a restore)
    upserted: int
    deleted: int
    objects: int
    bytes: int


def commit_history(
    catalog: Catalog, tenant: str, *, table: str | None = None, limit: int = 50
) -> list[CommitRecord]:
    """The newest ``limit`` commits of the tenant's history (on ``table``, ``DB.TABLE``,
    if given), newest first: its own and, through its lineage, those of the
    tenants that held the name before a restore (up to a clone's cut)."""
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidArgument(f"invalid limit {limit}: list from 1 to {MAX_LIMIT} commits")
    where = qualified_table(table) if table is not None else None
    found: list[CommitRecord] = []
    with catalog.snapshot() as tx:
        for ancestor in chain(tx, find_tenant(tx, tenant)):
            rows = commit_rows(
                tx, ancestor.tenant.id, until_ts=ancestor.until_ts, table=where, limit=limit
            )
            found += [
                CommitRecord(
                    int(r["ts"]),
                    ancestor.tenant.ref,
                    f"{r['database_name']}.{r['table_name']}",
                    str(r["kind"]),
                    int(r["rows_upserted"]),
                    int(r["rows_deleted"]),
                    int(r["objects"]),
                    int(r["bytes"]),
                )
                for r in rows
            ]
    found.sort(key=lambda c: (-c.ts, c.table))
    return found[:limit]


def before_commit(catalog: Catalog, tenant: str, commit: str | int) -> int:
    """The ts just before commit ``commit`` (its ts, as ``history --commits`` shows
    it) of the tenant's history: the point that undoes that commit and what
    followed.

    Raises:
        InvalidArgument: ``commit`` is not a ts.
        NotFound: the tenant's history has no commit at that ts.
    """
    text = str(commit).strip()
    ts = typed_ts(text)  # in range before it reaches the catalog's int64 columns
    if ts is None:
        raise InvalidArgument(
            f"invalid commit {text!r}: give its ts, as `rewind history {tenant} --commits` lists it"
        )
    with catalog.snapshot() as tx:
        for ancestor in chain(tx, find_tenant(tx, tenant)):
            if ancestor.until_ts is not None and ts > ancestor.until_ts:
                continue
            if commit_at(tx, ancestor.tenant.id, ts) is not None:
                return ts - 1
    raise NotFound(
        f"tenant {tenant!r} has no commit at ts {ts} in its history; "
        f"`rewind history {tenant} --commits` lists them"
    )
