"""GC's measurements: each table's reclaimable rows, kept until they may be wrong.

Measuring what full compaction would drop reads every member of a table
(engine/gc/reclaim.py). A ``table_measures`` row keeps the answer with what
it depended on, so the next pass reads the objects again only when that
changed:

- the members, as of the commit ts ``measured_ts`` the measurement read them
  at, and the view's totals then (``members``, ``member_bytes``: from
  ``member_totals``, which every statement changing a view keeps). A change
  after it either adds members only, and the totals grow, or ends some: an
  ended member keeps its membership row, ``removed_ts`` after
  ``measured_ts`` (a shadow's too: tenants.catalog.inherited), until GC
  forgets the rows of collected objects, and forgetting them drops the
  measurements of the tables that held them (:func:`forget_measures_of_objects`).
  A live table's inherited members are fixed when it is created (its bases
  read history), so only its own rows say it changed. One index seek per
  table (``membership_view`` ranges on ``removed_ts``), never a read of its
  members.
- the protected times that can decide anything for the table: a digest the
  caller computes (tenants.timeline.retention.keep_digest), here only stored.

This module imports no domain code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import astuple, dataclass

from tenants.catalog.base import Tx
from tenants.catalog.inherited import chunked

_COLUMNS = (
    "table_id", "measured_ts", "members", "member_bytes", "events_until", "protection",
    "rows_held", "reclaimable_rows", "reclaimable_bytes",
)  # fmt: skip
_UPSERT = (
    f"INSERT INTO table_measures ({', '.join(_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in _COLUMNS)}) ON CONFLICT (table_id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[1:])
)


@dataclass(frozen=True)
class Measure:
    """One table's measurement and what it depended on (fields in column order)."""

    table_id: str
    measured_ts: int  # the catalog's last commit ts when the members were read
    members: int  # the view's objects then (member_totals)
    member_bytes: int  # and their bytes
    events_until: int  # the newest row ts the members held
    protection: str  # digest of the protected times that decided (caller's)
    rows: int  # rows the table held
    reclaimable_rows: int  # of those, rows no protected time needed
    reclaimable_bytes: int  # estimated


def member_counts(tx: Tx, table_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
    """(objects, bytes) each table's view holds, from ``member_totals``; a table
    holding nothing is left out. A statement per chunk of tables."""
    out: dict[str, tuple[int, int]] = {}
    for chunk in chunked(table_ids):
        marks = ", ".join("?" for _ in chunk)
        for table_id, objects, size in tx.tuples(
            "SELECT table_id, SUM(objects), SUM(bytes) FROM member_totals "
            f"WHERE table_id IN ({marks}) GROUP BY table_id",
            chunk,
        ):
            if objects:
                out[str(table_id)] = (int(objects), int(size))
    return out


def standing_measures(tx: Tx, table_ids: Sequence[str]) -> dict[str, Measure]:
    """The measurements of ``table_ids`` whose tables' members have not changed since
    (see the module doc); whether the protected times still agree is the caller's
    to check. A statement per chunk of tables, a few index seeks per table.

    The membership test sits in the select list, not the WHERE clause, so
    PostgreSQL runs it as a seek per measurement (a subplan) rather than
    planning an anti-join that could read all of ``membership``.
    """
    out: dict[str, Measure] = {}
    for chunk in chunked(table_ids):
        marks = ", ".join("?" for _ in chunk)
        for row in tx.tuples(
            f"SELECT {', '.join('g.' + c for c in _COLUMNS)}, "
            "CASE WHEN EXISTS (SELECT 1 FROM membership m WHERE m.table_id = g.table_id "
            "AND m.removed_ts > g.measured_ts) THEN 1 ELSE 0 END, "
            "(SELECT COALESCE(SUM(t.objects), 0) FROM member_totals t "
            "WHERE t.table_id = g.table_id), "
            "(SELECT COALESCE(SUM(t.bytes), 0) FROM member_totals t "
            "WHERE t.table_id = g.table_id) "
            f"FROM table_measures g WHERE g.table_id IN ({marks})",
            chunk,
        ):
            measure = Measure(
                str(row[0]), int(row[1]), int(row[2]), int(row[3]), int(row[4]), str(row[5]),
                int(row[6]), int(row[7]), int(row[8]),
            )  # fmt: skip
            ended, objects, size = int(row[9]), int(row[10]), int(row[11])
            if not ended and (objects, size) == (measure.members, measure.member_bytes):
                out[measure.table_id] = measure
    return out


def record_measures(tx: Tx, measures: Sequence[Measure]) -> None:
    """Keep ``measures``, replacing each table's previous one."""
    tx.executemany(_UPSERT, [astuple(m) for m in measures])


def forget_measures(tx: Tx, table_ids: Sequence[str]) -> None:
    """Drop the measurements of ``table_ids`` (tables found damaged: measure again)."""
    for chunk in chunked(table_ids):
        marks = ", ".join("?" for _ in chunk)
        tx.execute(f"DELETE FROM table_measures WHERE table_id IN ({marks})", chunk)


def forget_measures_of_objects(tx: Tx, object_ids: Sequence[str]) -> None:
    """Drop the measurements of the tables with a membership row for any of
    ``object_ids``: GC is about to forget those rows, which say the tables changed."""
    for chunk in chunked(object_ids):
        marks = ", ".join("?" for _ in chunk)
        tx.execute(
            "DELETE FROM table_measures WHERE table_id IN "
            f"(SELECT table_id FROM membership WHERE object_id IN ({marks}))",
            chunk,
        )


def forget_measures_of_gone_tables(tx: Tx) -> None:
    """Drop the measurements of tables no active tenant holds live any more
    (dropped, or their tenant dropped or purged): GC measures none of them."""
    tx.execute(
        "DELETE FROM table_measures WHERE table_id NOT IN (SELECT t.id FROM tables t "
        "JOIN tenants n ON n.id = t.tenant_id WHERE t.dropped_ts IS NULL AND n.state = 'active')"
    )
