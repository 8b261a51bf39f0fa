"""Copy a whole catalog to another backend (SQLite to PostgreSQL and back), then prove it.

``rewind catalog copy SRC DST`` is how a deployment moves up from one host's
SQLite file to a shared PostgreSQL catalog (or back down for a laptop). Both
ends are opened with :func:`~tenants.catalog.base.open_catalog`, so both are
at this Rewind's schema version (the source is migrated first, as any command
opening it would; the destination is created). The copy then:

- refuses a destination that holds anything (its clock is not 0 or any table
  has a row): a copy never merges two catalogs;
- reads the source in one read transaction, so it copies one consistent state
  even if a writer commits meanwhile (stop writers anyway: their later commits
  would not be in the copy);
- writes the destination in one transaction, table by table in foreign-key
  order, streaming rows in batches of ``BATCH_ROWS`` (memory stays bounded at
  any catalog size); a failure leaves the destination empty;
- keeps ``meta.catalog_id``, so the copy still owns the source's warehouse
  (``rewind-warehouse.json`` names that id), and the clock, so timestamps keep
  increasing; ``schema_version`` and ``ddl_fingerprint`` are the destination's own;
- verifies every table afterwards: the same row count and the same
  order-independent digest of its rows (a sum of per-row BLAKE2b hashes, mod
  2^64), read back from the committed destination.

:func:`move_catalog` (what ``rewind catalog copy`` runs) first marks the source
moved to the destination (tenants/catalog/moved.py), in the source's own
transaction, then copies: from the mark on, the source refuses every write and
GC, so the two catalogs, which share an id and so a warehouse, never both
write to it or collect from it. The mark is undone only if the copy left the
destination empty; a killed copy is finished by running it again.

Table names in the statements come from :data:`COPY_ORDER`, never from input;
a catalog table neither it nor :data:`REBUILT` names stops the copy before it writes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from tenants.catalog.base import Catalog, Tx
from tenants.catalog.moved import MOVED_TO, mark_moved, unmark_moved
from tenants.catalog.ownership import CATALOG_ID
from tenants.errors import InvalidArgument

# Parents before children (foreign keys): every table of the schema, in order.
COPY_ORDER = (
    "meta",
    "clock",
    "tenants",
    "databases",
    "tables",
    "schema_versions",
    "objects",
    "membership",
    "membership_bases",
    "member_totals",
    "snapshots",
    "snapshot_schedules",
    "pitr_windows",
    "restore_jobs",
    "restore_plans",
    "restore_tasks",
    "job_pins",
    "gc_pending",
    "commits",
    "change_objects",
    "write_intents",
    "write_intent_tables",
    "table_measures",
    "runs",
    "recovery_objectives",
)
# Tables a catalog fills itself, never copied: GC's candidate queue, which the
# destination's triggers fill with every object the copy inserts (its first GC
# examines them all once, as after the queue's migration step), and the newest
# run of each recurring job, which they fill from every run it inserts.
REBUILT = ("gc_candidates", "runs_newest")
# Each catalog's own, never copied (the copy is not moved: its source is).
OWN_META_KEYS = ("schema_version", "ddl_fingerprint", MOVED_TO)
BATCH_ROWS = 10_000


@dataclass(frozen=True)
class TableCopy:
    """One table's rows on each side after the copy, and whether their digests match."""

    table: str
    source_rows: int
    copied_rows: int
    verified: bool


def move_catalog(source: Catalog, destination: Catalog) -> list[TableCopy]:
    """Mark ``source`` moved to ``destination``, then copy it there and verify.

    Order, for crashes: the mark commits before the copy reads the source, so
    any copy that exists holds every write the source ever accepted, and the
    source accepts none after it. A failure that leaves no copy in the
    destination (the copy's one transaction rolled back) undoes the mark; any other keeps
    it (two writable catalogs on one warehouse is the danger, not a stopped
    one). Run again after a kill, it finds the mark naming the same destination
    and copies (destination empty) or, if the copy had committed, says so.

    Raises:
        CatalogMoved: the source was moved to another catalog already.
        InvalidArgument: as :func:`copy_catalog`; or the destination holds this
            move's committed copy already (a rerun after a kill).
    """
    at = datetime.fromtimestamp(source.clock() / 1e6, tz=UTC).isoformat(timespec="seconds")
    mark_moved(source, destination.uri, at)
    try:
        if _holds_copy_of(source, destination):
            raise InvalidArgument(
                f"destination catalog {destination.uri} already holds the copy of "
                f"{source.uri} (the same catalog id), and {source.uri} is marked moved to it: "
                f"nothing to copy; use {destination.uri}"
            )
        return copy_catalog(source, destination)
    except BaseException:
        if _copy_absent(source, destination):
            unmark_moved(source, destination.uri)
        raise


def _holds_copy_of(source: Catalog, destination: Catalog) -> bool:
    """Whether an earlier run of this move committed its copy (same id, clock run)."""
    query = "SELECT value FROM meta WHERE key = ?"
    with source.snapshot() as src, destination.snapshot() as dst:
        mine = src.scalar(query, (CATALOG_ID,))
        return bool(
            mine is not None
            and dst.scalar(query, (CATALOG_ID,)) == mine
            and int(dst.scalar("SELECT last_ts FROM clock WHERE id = 1")) != 0
        )


def _copy_absent(source: Catalog, destination: Catalog) -> bool:
    """True only if the destination provably holds no copy of the source (its
    catalog id is not there: the copy's transaction never committed); else the
    source stays marked."""
    try:
        return not _holds_copy_of(source, destination)
    except Exception:  # noqa: BLE001 - not provably absent: the safe answer is no
        return False


def copy_catalog(source: Catalog, destination: Catalog) -> list[TableCopy]:
    """Copy every row of ``source`` into the empty ``destination`` and verify it.

    Raises:
        InvalidArgument: the destination is not empty, or either catalog has a
            table this copy does not know (nothing is written).

    A verification mismatch is not raised here: it is reported per table
    (``verified=False``), and the CLI fails on it.
    """
    with source.snapshot() as src:
        _check_tables(src, source)
        with destination.transaction() as dst:
            _check_tables(dst, destination)
            _check_empty(dst, destination)
            for table in COPY_ORDER:
                _copy_table(src, dst, table)
        with destination.snapshot() as dst:
            return [_verify(src, dst, table) for table in COPY_ORDER]


def _check_tables(tx: Tx, catalog: Catalog) -> None:
    names = set(catalog.dialect.table_names(tx))
    unknown = sorted(names - set(COPY_ORDER) - set(REBUILT))
    missing = sorted((set(COPY_ORDER) | set(REBUILT)) - names)
    if unknown or missing:
        raise InvalidArgument(
            f"catalog {catalog.uri} has tables {unknown} this Rewind cannot copy and lacks "
            f"{missing}: copy it with the Rewind version that wrote it"
        )


def _check_empty(tx: Tx, catalog: Catalog) -> None:
    if int(tx.scalar("SELECT last_ts FROM clock WHERE id = 1")) != 0:
        raise InvalidArgument(
            f"destination catalog {catalog.uri} is not empty (its clock has run): copy into "
            "a new, empty database or file; a copy never merges two catalogs"
        )
    for table in COPY_ORDER[2:]:
        if tx.scalar(f"SELECT COUNT(*) FROM {table}"):
            raise InvalidArgument(
                f"destination catalog {catalog.uri} is not empty (table {table} has rows): "
                "copy into a new, empty database or file; a copy never merges two catalogs"
            )


def _rows(tx: Tx, table: str) -> Iterator[tuple[list[str], list[tuple[object, ...]]]]:
    """The table's rows in batches, with the column names (``meta`` without the own keys)."""
    where = ""
    params: tuple[object, ...] = ()
    if table == "meta":
        where = f" WHERE key NOT IN ({', '.join('?' for _ in OWN_META_KEYS)})"
        params = OWN_META_KEYS
    yield from tx.batches(f"SELECT * FROM {table}{where}", params, BATCH_ROWS)


def _copy_table(src: Tx, dst: Tx, table: str) -> None:
    if table == "clock":
        dst.execute(
            "UPDATE clock SET last_ts = ? WHERE id = 1",
            (int(src.scalar("SELECT last_ts FROM clock WHERE id = 1")),),
        )
        return
    if table == "meta":  # the destination may have minted a catalog id when it opened
        keys = [r["key"] for r in src.all("SELECT key FROM meta")]
        for key in keys:
            if key not in OWN_META_KEYS:
                dst.execute("DELETE FROM meta WHERE key = ?", (key,))
    for columns, rows in _rows(src, table):
        dst.insert_many(table, columns, rows)


def _digest(tx: Tx, table: str) -> tuple[int, int]:
    """(rows, order-independent digest): a sum of per-row hashes, mod 2^64."""
    count = 0
    total = 0
    for columns, rows in _rows(tx, table):
        order = sorted(range(len(columns)), key=columns.__getitem__)
        for row in rows:
            canonical = json.dumps([row[i] for i in order], default=str).encode()
            total += int.from_bytes(hashlib.blake2b(canonical, digest_size=8).digest(), "big")
            count += 1
    return count, total % (1 << 64)


def _verify(src: Tx, dst: Tx, table: str) -> TableCopy:
    source_rows, source_digest = _digest(src, table)
    copied_rows, copied_digest = _digest(dst, table)
    return TableCopy(
        table,
        source_rows,
        copied_rows,
        source_rows == copied_rows and source_digest == copied_digest,
    )
