"""Write intents: the catalog's record of every upload that is not yet committed.

A writer records its intent in a short transaction before its first upload:
an id (the prefix of every object id it mints), its kind, its start on the
wall clock, the tables it may write and the object kinds (``data``, ``tomb``)
it mints ids for (so the keys it may leave are
``tenants/<tenant>/<table>/<object kind>/<id>…``). The transaction that registers what
it wrote deletes the row (:func:`end_intent`); a row that outlives the orphan
grace is a writer that crashed or gave up. GC then revokes it
(:func:`revoke_intent`: from then on the writer's commit cannot land), lists
only its prefixes, deletes the keys no catalog row names, and forgets it
(engine/gc/intents.py). A restore job's intent names no prefix: its outputs
are the keys its plan names (``job_id``).
"""

from __future__ import annotations

from collections.abc import Sequence

from tenants.catalog.base import Row, Tx

OPEN = "open"
SWEEPING = "sweeping"
OBJECT_KINDS = ("data", "tomb")
"""Every object kind: what a sweep lists under an intent recorded before its kinds were."""


def record_intent(
    tx: Tx,
    intent_id: str,
    kind: str,
    started_us: int,
    tables: Sequence[tuple[str, str]],
    holder: str,
    job_id: str | None = None,
    object_kinds: Sequence[str] = OBJECT_KINDS,
) -> None:
    """Record intent ``intent_id`` of a writer of ``kind`` that may upload objects
    of ``object_kinds`` into ``tables`` (``(tenant_id, table_id)`` pairs)."""
    tx.execute(
        "INSERT INTO write_intents (id, kind, started_us, state, job_id, holder, object_kinds) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (intent_id, kind, started_us, OPEN, job_id, holder[:300], ",".join(sorted(object_kinds))),
    )
    add_intent_tables(tx, intent_id, tables)


def add_intent_tables(tx: Tx, intent_id: str, tables: Sequence[tuple[str, str]]) -> None:
    """Let intent ``intent_id`` upload into ``tables`` too (before it does)."""
    tx.executemany(
        "INSERT INTO write_intent_tables (intent_id, tenant_id, table_id) VALUES (?, ?, ?)",
        [(intent_id, tenant_id, table_id) for tenant_id, table_id in sorted(set(tables))],
    )


def end_intent(tx: Tx, intent_id: str) -> bool:
    """End an open intent in the transaction that registers its writes. False
    when GC revoked it (or it was ended before): the caller must not commit, as
    its uploads may already be deleted."""
    ended = tx.execute("DELETE FROM write_intents WHERE id = ? AND state = ?", (intent_id, OPEN))
    if ended:
        tx.execute("DELETE FROM write_intent_tables WHERE intent_id = ?", (intent_id,))
    return ended == 1


def end_job_intents(tx: Tx, job_id: str) -> int:
    """End the intent of restore job ``job_id`` (its outputs are installed or deleted)."""
    ids = [str(r["id"]) for r in tx.all("SELECT id FROM write_intents WHERE job_id = ?", (job_id,))]
    for intent_id in ids:
        forget_intent(tx, intent_id)
    return len(ids)


def stale_intents(
    tx: Tx, started_before_us: int, after: tuple[int, str] | None, limit: int
) -> list[Row]:
    """Intents begun before ``started_before_us``, oldest first, after the
    ``(started_us, id)`` of the last one a caller saw, at most ``limit``: ``id``,
    ``kind``, ``started_us``, ``state``, ``job_id``, ``holder``, ``object_kinds``
    (read it with :func:`object_kinds_of`)."""
    start, last_id = after if after is not None else (-1, "")
    return tx.all(
        "SELECT id, kind, started_us, state, job_id, holder, object_kinds FROM write_intents "
        "WHERE started_us < ? AND (started_us > ? OR (started_us = ? AND id > ?)) "
        "ORDER BY started_us, id LIMIT ?",
        (started_before_us, start, start, last_id, limit),
    )


def object_kinds_of(row: Row) -> tuple[str, ...]:
    """The object kinds an intent's writer mints ids for; both for an intent
    recorded before they were (NULL), so its sweep lists what it always did."""
    kinds = row["object_kinds"]
    if kinds is None:
        return OBJECT_KINDS
    return tuple(k for k in str(kinds).split(",") if k)


def count_stale_intents(tx: Tx, started_before_us: int) -> int:
    """How many intents began before ``started_before_us`` (what a sweep has ahead)."""
    return int(
        tx.scalar("SELECT COUNT(*) FROM write_intents WHERE started_us < ?", (started_before_us,))
    )


def job_state_and_plan(tx: Tx, job_id: str) -> tuple[str, str | None] | None:
    """A restore job's state and plan JSON (None: no such job)."""
    row = tx.one(
        "SELECT j.state, p.plan_json FROM restore_jobs j "
        "LEFT JOIN restore_plans p ON p.job_id = j.id WHERE j.id = ?",
        (job_id,),
    )
    if row is None:
        return None
    return str(row["state"]), None if row["plan_json"] is None else str(row["plan_json"])


def revoke_intents(tx: Tx, intent_ids: Sequence[str]) -> set[str]:
    """Mark open intents as being swept: their writers' commits fail from now on.
    Returns the ids still there (open before, or already being swept); the others
    were ended by their commit or dropped by a writer that gave up."""
    kept: set[str] = set()
    for start in range(0, len(intent_ids), 400):
        chunk = list(intent_ids[start : start + 400])
        marks = ", ".join("?" for _ in chunk)
        tx.execute(
            f"UPDATE write_intents SET state = ? WHERE state = ? AND id IN ({marks})",
            [SWEEPING, OPEN, *chunk],
        )
        kept.update(
            str(r[0])
            for r in tx.tuples(f"SELECT id FROM write_intents WHERE id IN ({marks})", chunk)
        )
    return kept


def tables_of_intents(tx: Tx, intent_ids: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
    """The ``(tenant_id, table_id)`` pairs each intent may have written."""
    found: dict[str, list[tuple[str, str]]] = {i: [] for i in intent_ids}
    for start in range(0, len(intent_ids), 400):
        chunk = list(intent_ids[start : start + 400])
        marks = ", ".join("?" for _ in chunk)
        for intent_id, tenant_id, table_id in tx.tuples(
            "SELECT intent_id, tenant_id, table_id FROM write_intent_tables "
            f"WHERE intent_id IN ({marks}) ORDER BY intent_id, tenant_id, table_id",
            chunk,
        ):
            found[str(intent_id)].append((str(tenant_id), str(table_id)))
    return found


def forget_intents(tx: Tx, intent_ids: Sequence[str]) -> None:
    """Drop intents whose orphans are gone."""
    for start in range(0, len(intent_ids), 400):
        chunk = list(intent_ids[start : start + 400])
        marks = ", ".join("?" for _ in chunk)
        tx.execute(f"DELETE FROM write_intent_tables WHERE intent_id IN ({marks})", chunk)
        tx.execute(f"DELETE FROM write_intents WHERE id IN ({marks})", chunk)


def forget_intent(tx: Tx, intent_id: str) -> None:
    """Drop an intent whose orphans are gone (or whose writes were registered)."""
    tx.execute("DELETE FROM write_intent_tables WHERE intent_id = ?", (intent_id,))
    tx.execute("DELETE FROM write_intents WHERE id = ?", (intent_id,))


def intent_ids(tx: Tx) -> set[str]:
    """The id of every intent the catalog holds: its writer may still commit, or
    the intent sweep has yet to revoke and sweep it. ``gc --deep`` leaves the
    keys under them to that sweep. Few: one per writer in flight or dead."""
    return {str(row[0]) for row in tx.tuples("SELECT id FROM write_intents")}


def count_intents(tx: Tx) -> int:
    """Intents not yet ended or swept."""
    return int(tx.scalar("SELECT COUNT(*) FROM write_intents"))


def known_keys_among(tx: Tx, keys: Sequence[str]) -> set[str]:
    """Those of ``keys`` the catalog names: an object, or a deletion GC decided."""
    found: set[str] = set()
    for start in range(0, len(keys), 400):
        chunk = list(keys[start : start + 400])
        marks = ", ".join("?" for _ in chunk)
        for table in ("objects", "gc_pending"):
            found.update(
                str(r[0])
                for r in tx.tuples(
                    f"SELECT object_key FROM {table} WHERE object_key IN ({marks})", chunk
                )
            )
    return found


def needs_deep_sweep(tx: Tx) -> bool:
    """Whether the warehouse predates intents and no deep sweep has finished since."""
    return tx.one("SELECT 1 FROM meta WHERE key = 'gc_needs_deep'") is not None


def record_deep_sweep(tx: Tx, finished_us: int) -> None:
    """A deep sweep listed the whole warehouse: no orphan from before intents is left."""
    tx.execute("DELETE FROM meta WHERE key IN ('gc_needs_deep', 'gc_deep_swept_us')")
    tx.execute("INSERT INTO meta (key, value) VALUES ('gc_deep_swept_us', ?)", (str(finished_us),))
