"""What an export reads: the tables in scope as one protected time shows them.

Everything here is the catalog's: names are checked before any I/O, then one
catalog transaction resolves the tenant, the time (a snapshot of its lineage
or a protected time, as a restore or a dump resolves it), the tables in
scope at that time and each table's read plan. No object is read.
"""

from __future__ import annotations

import calendar
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

from tenants.catalog import Catalog
from tenants.errors import InvalidArgument, NotFound
from tenants.names import did_you_mean, object_name, qualified_table
from tenants.tenancy import TableRecord, TenantRecord, find_tenant, parse_tenant_ref, tables_at
from tenants.times import AsOf, format_ts

if TYPE_CHECKING:
    from tenants.reads.visible import ReadPlan

Format = Literal["parquet", "iceberg"]
FORMATS: tuple[Format, ...] = get_args(Format)

ALL = "*"
"""In a table list: every table of the tenant at the time (``--all``)."""


def check_format(text: str) -> Format:
    """``text`` as an export format.

    Raises:
        InvalidArgument: not one of ``parquet`` or ``iceberg``.
    """
    if text not in FORMATS:
        raise InvalidArgument(f"unknown export format {text!r}: use parquet or iceberg")
    return text  # type: ignore[return-value]


@dataclass(frozen=True)
class Scope:
    """Which tables: ``db.table`` names, whole databases (``db.*``), or every table."""

    tables: tuple[tuple[str, str], ...] = ()
    databases: tuple[str, ...] = ()
    every: bool = False

    @classmethod
    def parse(cls, names: str | Sequence[str]) -> Scope:
        """From ``"db.table"``, ``"db.*"``, ``"*"`` or a list of them, checked before any I/O.

        Raises:
            InvalidArgument: no table named.
            InvalidName: a malformed database or table name.
        """
        items = [names] if isinstance(names, str) else list(names)
        if not items:
            raise InvalidArgument("name the tables to export: DB.TABLE, DB.* or *")
        tables: list[tuple[str, str]] = []
        databases: list[str] = []
        every = False
        for item in items:
            if not isinstance(item, str):
                raise InvalidArgument(f"table {item!r}: give it as 'database.table'")
            if item == ALL:
                every = True
            elif item.endswith(".*"):
                databases.append(object_name(item[:-2], "database"))
            else:
                tables.append(qualified_table(item))
        return cls(tuple(dict.fromkeys(tables)), tuple(dict.fromkeys(databases)), every)

    def pick(self, present: Sequence[TableRecord], tenant: str, at_ts: int) -> list[TableRecord]:
        """The tables of ``present`` (the tenant's at the time) in scope, by database
        and name.

        Raises:
            NotFound: a named table, or a database with no table, at that time.
        """
        by_name = {(t.database, t.name): t for t in present}
        when = f"{format_ts(at_ts)} (ts {at_ts})"
        for database, name in self.tables:
            if (database, name) not in by_name:
                close = did_you_mean(f"{database}.{name}", (f"{d}.{n}" for d, n in by_name))
                raise NotFound(
                    f"table {database}.{name} does not exist in tenant {tenant!r} at {when}{close}"
                )
        for database in self.databases:
            if not any(t.database == database for t in present):
                close = did_you_mean(database, (t.database for t in present))
                raise NotFound(
                    f"database {database} of tenant {tenant!r} has no table at {when}{close}"
                )
        picked = [
            t
            for t in present
            if self.every or t.database in self.databases or (t.database, t.name) in self.tables
        ]
        if not picked:
            raise NotFound(f"tenant {tenant!r} has no table at {when}")
        return sorted(picked, key=lambda t: (t.database, t.name))


@dataclass(frozen=True)
class ExportPlan:
    """The tables to export, each as a read at one protected time."""

    requested: str
    """The tenant as asked for (a name, or ``name@id``)."""
    holder: TenantRecord
    """The tenant that held the data at the time (before a restore: a retired one)."""
    at_ts: int
    label: str
    """The snapshot's name, or the ts as text."""
    reads: tuple[ReadPlan, ...]
    export_id: str

    @property
    def snapshot(self) -> str | None:
        """The snapshot named, if the time was named by one."""
        return None if self.label == str(self.at_ts) else self.label


def plan_export(
    catalog: Catalog, tenant: str, tables: str | Sequence[str], as_of: AsOf
) -> ExportPlan:
    """Resolve the tenant, the time and the tables, in one catalog transaction.

    Raises:
        NotFound: the tenant, the snapshot, a table or database at that time.
        UnprotectedTime: the time is not protected.
        InvalidName, InvalidArgument: a malformed name or time.
    """
    from tenants.reads.visible import read_plan_in
    from tenants.timeline.lineage import resolve_time

    parse_tenant_ref(tenant)
    scope = Scope.parse(tables)
    with catalog.snapshot() as tx:
        holder, at_ts, label = resolve_time(tx, find_tenant(tx, tenant), as_of)
        picked = scope.pick(tables_at(tx, holder, at_ts), tenant, at_ts)
        reads = tuple(read_plan_in(tx, holder, t.database, t.name, at_ts) for t in picked)
    return ExportPlan(tenant, holder, at_ts, label, reads, new_export_id())


def new_export_id() -> str:
    """A fresh export id that sorts by creation time: ``20261125T100000Z-1a2b3c4d``."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return f"{stamp}-{uuid.uuid4().hex[:8]}"


def export_id_time(export_id: str) -> float | None:
    """When an export id was made (seconds since the epoch), or None if it is not one."""
    try:
        return float(calendar.timegm(time.strptime(export_id.split("-", 1)[0], "%Y%m%dT%H%M%SZ")))
    except ValueError:
        return None
