"""A catalog that ``rewind catalog copy`` moved: it names its successor and writes no more.

The copy keeps the catalog's id, so the warehouse's owner marker is valid for
both catalogs. Were both writable, each would see the other's new objects as
orphans and its GC would delete them once the orphan grace passed. So the
source is marked **moved** (a ``meta`` row, ``moved_to``, naming the successor
with any password redacted) in its own transaction *before* the copy reads it,
and from then on every write transaction on it is refused
(:func:`refuse_if_moved`, called by :meth:`Catalog.transaction`), GC included.
Reads still work. Marking first makes the crash window harmless: a copy that
exists was read after the mark, so at most one catalog ever accepts writes.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from tenants.errors import CatalogMoved

if TYPE_CHECKING:
    from tenants.catalog.base import Catalog, Tx

MOVED_TO = "moved_to"


def moved_to(tx: Tx) -> dict[str, str] | None:
    """The successor and the time of the move (``{"successor", "at"}``), or None."""
    raw = tx.scalar("SELECT value FROM meta WHERE key = ?", (MOVED_TO,))
    return None if raw is None else dict(json.loads(raw))


def refuse_if_moved(tx: Tx, uri: str, what: str = "writes") -> None:
    """``CatalogMoved`` if the catalog was moved; nothing otherwise.

    Raises:
        CatalogMoved: names the successor, and what to point at it.
    """
    moved = moved_to(tx)
    if moved is not None:
        raise CatalogMoved(
            f"catalog {uri} was moved to {moved['successor']} by a catalog copy "
            f"at {moved['at']}, and refuses {what}; reads still work. Use the successor: "
            f"--catalog {moved['successor']} (or REWIND_CATALOG)"
        )


def mark_moved(catalog: Catalog, successor: str, at: str) -> None:
    """Mark ``catalog`` moved to ``successor`` (already redacted), in its own transaction.

    Marking again to the same successor is a no-op, so a copy killed after the
    mark can be run again.

    Raises:
        CatalogMoved: it was moved to another successor already.
    """
    with catalog.transaction(moving=True) as tx:
        moved = moved_to(tx)
        if moved is not None:
            if moved["successor"] == successor:
                return
            refuse_if_moved(tx, catalog.uri, f"another copy (to {successor})")
        value = json.dumps({"successor": successor, "at": at}, sort_keys=True)
        tx.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (MOVED_TO, value))


def unmark_moved(catalog: Catalog, successor: str) -> None:
    """Undo :func:`mark_moved`: only when the copy left nothing (its transaction rolled back)."""
    with catalog.transaction(moving=True) as tx:
        moved = moved_to(tx)
        if moved is not None and moved["successor"] == successor:
            tx.execute("DELETE FROM meta WHERE key = ?", (MOVED_TO,))
