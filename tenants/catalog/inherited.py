"""Membership by reference: a table inherits another table's members as of a time.

A restored table does not copy its reused objects into ``membership``. It
records a *base* ``(depth, base_table_id, base_ts, cut_ts)``: "every member
``base_table_id`` held at ``base_ts`` whose rows are all at or before
``cut_ts``". Its own rows (rewritten objects, later commits, compaction) are
ordinary membership rows. A chain is flat: restoring from a table that has
bases copies them one level deeper with ``cut_ts = min(cut, S)``, so reading
never recurses (docs/membership.md).

What a table holds, its *view*:

- level 0: its own rows with ``removed_ts IS NULL``;
- level k: the rows of base k's table live at its ``base_ts`` (added at or
  before it, not removed by it) with ``max_ts <= cut_ts``, whose object has no
  membership row at all in the table itself or in the tables of levels 1..k-1.

A row may carry a cut of its own (``membership.cut_ts``): an instant restore
holds each object that straddles its point S by an own row cut at S, and
every reader keeps only that object's rows at or before the cut. Such a row's
``max_ts`` is ``min(object max_ts, cut_ts)``, so levels, plans and GC, which
all range on ``m.max_ts``, see what the table really holds; a shadow or a
flattened copy of it keeps its cut.

Removing an inherited object (a compaction of the restored table) writes a
*shadow*, an own row ``(table, object, added_ts = first base_ts, removed_ts =
now)``: it hides the object at every level and, read at a later base ts by a
table restored from this one, says the object was there until ``now``.

Base rows are written when a restore job starts, under the table id the
install will create: the job's pin by time. GC keeps every object some
unreleased base reaches (``tenants.catalog.engine.gc``). Purging or releasing a table
stamps its bases ``released_ts``; a job that installs nothing (cancelled, or
logical) deletes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tenants.catalog.base import Tx

# Members with their objects. Without the hint SQLite's planner prefers the unique
# index on objects.id (one row, it assumes) to the covering objects_plan, and then
# reads every object's row: 3-10x slower for a restore plan's aggregates.
_FROM = "FROM membership m JOIN objects o INDEXED BY objects_plan ON o.id = m.object_id"
# A table's own live members (bind the table id).
OWN_MEMBERS = f"{_FROM} WHERE m.table_id = ? AND m.removed_ts IS NULL"
# The own live members of a list of tables (format ``marks``, bind the ids).
OWN_MEMBERS_IN = _FROM + " WHERE m.table_id IN ({marks}) AND m.removed_ts IS NULL"
# Table ids per ``IN (...)`` list: far under SQLite's bound-parameter limit.
CHUNK = 500
# Parts per UNION ALL statement: SQLite refuses a compound SELECT of over 500.
MAX_PARTS = 200


@dataclass(frozen=True)
class Base:
    """One level of a table's chain: ``table_id``'s members live at ``base_ts``
    with every row at or before ``cut_ts``."""

    depth: int
    table_id: str
    base_ts: int
    cut_ts: int


@dataclass(frozen=True)
class Level:
    """One source of a table's members: its own live rows (``base is None``) or a
    base, hidden where any table of ``masks`` has a row for the object."""

    table_id: str
    base: Base | None
    masks: tuple[str, ...]

    def hidden(self) -> tuple[str, list[Any]]:
        """``NOT EXISTS`` clause (and its parameters) keeping the members ``m`` of
        this level that no table of ``masks`` has a row for."""
        marks = ", ".join("?" for _ in self.masks)
        return (
            "NOT EXISTS (SELECT 1 FROM membership s "
            f"WHERE s.table_id IN ({marks}) AND s.object_id = m.object_id)",
            list(self.masks),
        )

    def sources(self) -> list[tuple[str, list[Any]]]:
        """``FROM ... WHERE ...`` over this level's members (``membership m`` joined
        to ``objects o``) with their parameters, as disjoint parts that each read
        one range of ``membership_view``; a caller appends ``AND`` clauses (on
        ``m.max_ts`` to stay in the range) and their parameters."""
        if self.base is None:
            return [(OWN_MEMBERS, [self.table_id])]
        b = self.base
        unmasked, masks = self.hidden()
        rest = f"AND m.added_ts <= ? AND m.max_ts <= ? AND {unmasked}"
        params = [b.base_ts, b.cut_ts, *masks]
        return [
            (
                f"{_FROM} WHERE m.table_id = ? AND m.removed_ts IS NULL {rest}",
                [b.table_id, *params],
            ),
            (
                f"{_FROM} WHERE m.table_id = ? AND m.removed_ts > ? {rest}",
                [b.table_id, b.base_ts, *params],
            ),
        ]


def bases_of(tx: Tx, table_id: str) -> tuple[Base, ...]:
    """The table's unreleased bases, shallowest first (empty for a table that
    holds only its own rows)."""
    return bases_of_tables(tx, [table_id]).get(table_id, ())


def bases_of_tables(tx: Tx, table_ids: Sequence[str]) -> dict[str, tuple[Base, ...]]:
    """``bases_of`` for many tables in one statement per ``CHUNK`` of them (a
    restore of a tenant of 100 tables reads its chains in one round trip);
    tables with no base are left out."""
    out: dict[str, list[Base]] = {}
    for chunk in chunked(table_ids):
        marks = ", ".join("?" for _ in chunk)
        for table_id, depth, base_table, base_ts, cut_ts in tx.tuples(
            "SELECT table_id, depth, base_table_id, base_ts, cut_ts FROM membership_bases "
            f"WHERE table_id IN ({marks}) AND released_ts IS NULL ORDER BY table_id, depth",
            chunk,
        ):
            out.setdefault(str(table_id), []).append(
                Base(int(depth), str(base_table), int(base_ts), int(cut_ts))
            )
    return {table_id: tuple(chain) for table_id, chain in out.items()}


def chunked(items: Sequence[str], size: int = CHUNK) -> list[list[str]]:
    """``items`` in lists of at most ``size``, for ``IN (...)`` lists."""
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def levels(
    tx: Tx, table_id: str, *, own: bool = True, chain: tuple[Base, ...] | None = None
) -> list[Level]:
    """The sources of ``table_id``'s members, its own rows first (unless
    ``own=False``: only what it inherits). ``chain`` is its bases when the caller
    has read them already (``bases_of_tables``)."""
    if chain is None:
        chain = bases_of(tx, table_id)
    out = [Level(table_id, None, ())] if own else []
    for i, base in enumerate(chain):
        masks = (table_id, *(b.table_id for b in chain[:i]))
        out.append(Level(base.table_id, base, masks))
    return out


def member_sources(tx: Tx, table_id: str, *, own: bool = True) -> list[tuple[str, list[Any]]]:
    """Every part of ``table_id``'s view (``Level.sources``), its own rows first
    (unless ``own=False``: only what it inherits)."""
    return [part for level in levels(tx, table_id, own=own) for part in level.sources()]


def view_select(
    tx: Tx,
    table_id: str,
    columns: str,
    where: str = "",
    params: Sequence[Any] = (),
    *,
    own: bool = True,
) -> tuple[str, list[Any]]:
    """One statement selecting ``columns`` over every part of ``table_id``'s view
    (``UNION ALL``), each part narrowed by ``where`` (``AND ...``) and its
    ``params``: a read is one round trip however many levels the table has."""
    parts, bound = [], []
    for source, source_params in member_sources(tx, table_id, own=own):
        parts.append(f"SELECT {columns} {source} {where}")
        bound += [*source_params, *params]
    if not parts:  # no level at all (own=False and no base): an empty result
        return f"SELECT {columns} {OWN_MEMBERS} AND 1 = 0", [table_id]
    return " UNION ALL ".join(parts), bound


def views_select(
    tx: Tx, table_ids: Sequence[str], columns: str, where: str = "", params: Sequence[Any] = ()
) -> list[tuple[str, list[Any]]]:
    """Statements selecting ``view_table_id, columns`` over the views of all of
    ``table_ids`` (``view_select`` for many tables), each part narrowed by
    ``where`` and its ``params``: the tables' own rows in one part per
    ``CHUNK`` of tables, and each inherited level's parts tagged with the table
    that inherits them. A restore plans a tenant of 100 tables in one or two
    round trips instead of 100 (a part costs a round trip on PostgreSQL).
    """
    statements: list[tuple[str, list[Any]]] = []
    chains = bases_of_tables(tx, table_ids)
    for chunk in chunked(table_ids):
        marks = ", ".join("?" for _ in chunk)
        parts = [
            f"SELECT m.table_id AS view_table_id, {columns} {OWN_MEMBERS_IN.format(marks=marks)} "
            f"{where}"
        ]
        bound: list[Any] = [*chunk, *params]
        for table_id in chunk:
            for level in levels(tx, table_id, own=False, chain=chains.get(table_id, ())):
                for source, source_params in level.sources():
                    if len(parts) >= MAX_PARTS:
                        statements.append((" UNION ALL ".join(parts), bound))
                        parts, bound = [], []
                    parts.append(
                        f"SELECT CAST(? AS TEXT) AS view_table_id, {columns} {source} {where}"
                    )
                    bound += [table_id, *source_params, *params]
        statements.append((" UNION ALL ".join(parts), bound))
    return statements


def insert_job_bases(
    tx: Tx, job_id: str, tables: Sequence[tuple[str, str]], read_ts: int, cut_ts: int
) -> int:
    """For each ``(table_id, source_table_id)`` of ``tables``: make ``table_id`` (not
    created yet) inherit ``source_table_id``'s members live at ``read_ts`` with
    rows at or before ``cut_ts``, and whatever the source inherits, cut at
    ``cut_ts`` too. Returns how many base rows it wrote.

    Written in the transaction that starts job ``job_id``: until the install
    creates the tables these rows are the job's pin, and GC keeps what they
    reach. A source with no membership row at all adds no level of its own.
    The statements are per ``CHUNK`` of tables, never per table.
    """
    sources = [source for _, source in tables]
    chains = bases_of_tables(tx, sources)
    owning: set[str] = set()
    for chunk in chunked(sources):
        marks = ", ".join("?" for _ in chunk)
        owning.update(
            str(r[0])
            for r in tx.tuples(
                f"SELECT t.id FROM tables t WHERE t.id IN ({marks}) "
                "AND EXISTS (SELECT 1 FROM membership m WHERE m.table_id = t.id)",
                chunk,
            )
        )
    rows: list[tuple[Any, ...]] = []
    for table_id, source in tables:
        depth = 0
        if source in owning:
            depth += 1
            rows.append((table_id, depth, source, read_ts, cut_ts, job_id))
        for base in chains.get(source, ()):
            depth += 1
            rows.append(
                (table_id, depth, base.table_id, base.base_ts, min(base.cut_ts, cut_ts), job_id)
            )
    tx.insert_many(
        "membership_bases",
        ("table_id", "depth", "base_table_id", "base_ts", "cut_ts", "job_id"),
        rows,
    )
    return len(rows)


def delete_uninstalled_bases(tx: Tx, job_id: str) -> None:
    """Drop the bases job ``job_id`` wrote for tables no install created: its pins
    by time, once the job is done or cancelled."""
    tx.execute(
        "DELETE FROM membership_bases WHERE job_id = ? AND table_id NOT IN (SELECT id FROM tables)",
        (job_id,),
    )


def release_bases_of_tables(tx: Tx, table_ids_sql: str, params: Sequence[Any], ts: int) -> None:
    """Stamp ``released_ts = ts`` on the unreleased bases of the tables the
    subquery ``table_ids_sql`` selects (a purge, a released dropped table)."""
    tx.execute(
        "UPDATE membership_bases SET released_ts = ? WHERE released_ts IS NULL "
        f"AND table_id IN ({table_ids_sql})",
        (ts, *params),
    )


def shadow_members(tx: Tx, table_id: str, object_ids: Sequence[str], ts: int) -> list[str]:
    """End at ``ts`` the table's inherited membership of each of ``object_ids`` (one
    shadow row each); return the ids it ended.

    An object the table holds by no level, or already has a row for (its own,
    or a shadow another writer wrote first), is left out: the caller's
    compare-and-set sees the count fall short.
    """
    inherited = levels(tx, table_id, own=False)
    if not inherited or not object_ids:
        return []
    first = inherited[0].base
    assert first is not None
    ended: list[str] = []
    for object_id in object_ids:
        if tx.one(
            "SELECT 1 FROM membership WHERE table_id = ? AND object_id = ?", (table_id, object_id)
        ):
            continue
        found = next(
            (
                row
                for level in inherited
                for source, params in level.sources()
                if (
                    row := tx.one(
                        f"SELECT m.max_ts, m.cut_ts {source} AND m.object_id = ?",
                        (*params, object_id),
                    )
                )
            ),
            None,
        )
        if found is not None:
            tx.execute(
                "INSERT INTO membership "
                "(table_id, object_id, added_ts, removed_ts, max_ts, cut_ts) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (table_id, object_id, first.base_ts, ts, found["max_ts"], found["cut_ts"]),
            )
            ended.append(object_id)
    return ended


def inheriting_tables(tx: Tx) -> list[str]:
    """Installed tables with an unreleased base: those GC flattens when their chain
    is too deep, or whose deepest level holds nothing any more."""
    return [
        str(r[0])
        for r in tx.tuples(
            "SELECT b.table_id FROM membership_bases b JOIN tables t ON t.id = b.table_id "
            "WHERE b.released_ts IS NULL GROUP BY b.table_id ORDER BY b.table_id"
        )
    ]


def flatten_deepest(tx: Tx, table_id: str, after: str, limit: int) -> tuple[int, str | None]:
    """Copy up to ``limit`` members of the table's deepest level, in object id order
    after ``after``, into its own rows; when none is left, drop that base.

    Returns (rows copied, the id to continue after, or None once the level is
    gone). The view does not change: a copied object is an own live row and no
    longer inherited (the copy hides it at every level), and a table restored
    from this one sees it at this table's level instead of the deeper one (the
    copy is added at the first base's ts, before any such restore). A rerun
    after a crash skips what an earlier chunk copied, for the same reason.
    """
    chain = levels(tx, table_id, own=False)
    if not chain:  # released meanwhile (a purge): nothing to flatten
        return 0, None
    deepest = chain[-1]
    first = chain[0].base
    assert deepest.base is not None and first is not None
    b = deepest.base
    unmasked, masks = deepest.hidden()
    # One pass in object id order (the primary key), not the level's two
    # membership_view ranges: each chunk continues where the last stopped.
    found = tx.tuples(
        "SELECT m.object_id, m.max_ts, m.cut_ts FROM membership m "
        "WHERE m.table_id = ? AND m.object_id > ? AND m.added_ts <= ? "
        f"AND (m.removed_ts IS NULL OR m.removed_ts > ?) AND m.max_ts <= ? AND {unmasked} "
        "ORDER BY m.object_id LIMIT ?",
        (b.table_id, after, b.base_ts, b.base_ts, b.cut_ts, *masks, limit),
    )
    ids = [str(r[0]) for r in found]
    tx.executemany(
        "INSERT INTO membership (table_id, object_id, added_ts, max_ts, cut_ts) "
        "VALUES (?, ?, ?, ?, ?)",
        [(table_id, str(r[0]), first.base_ts, r[1], r[2]) for r in found],
    )
    if len(ids) == limit:
        return len(ids), ids[-1]
    tx.execute("DELETE FROM membership_bases WHERE table_id = ? AND depth = ?", (table_id, b.depth))
    return len(ids), None


def level_is_empty(tx: Tx, level: Level) -> bool:
    """Whether nothing is left for the table to inherit through ``level``."""
    return not any(
        tx.one(f"SELECT 1 {source} LIMIT 1", params) for source, params in level.sources()
    )
