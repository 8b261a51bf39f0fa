"""Write intents: a writer says where it may upload before it uploads.

Every object key a writer mints is ``tenants/<tenant>/<table>/<kind>/<id>.parquet``
with an id that begins with its intent's id (16 hex digits, then 16 random
ones). The intent is recorded in a short transaction before the first upload,
with the tables and the object kinds (``data``, ``tomb``) the writer may mint
ids for, and ended by the transaction that registers the writes, so a writer
that crashed, or whose commit failed and could not clean up, leaves an intent
behind. GC sweeps only those (engine/gc/intents.py): it lists the intent's
prefixes under the tables and kinds it named, never the whole warehouse, so
finding orphans costs what was orphaned, not what is stored.

This is how Iceberg and Delta would need a "pending files" manifest to avoid
their full orphan listing; lakeFS keeps a staging area per branch for the same
reason. A full listing (``rewind gc --deep``) stays for warehouses written
before intents and as an audit.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tenants.catalog import Catalog, Tx
from tenants.catalog.intents import end_intent, forget_intent, record_intent
from tenants.errors import IntentRevoked, InvalidArgument
from tenants.objects.record import ObjectKind, ObjectRecord
from tenants.objectstore import ObjectStore

log = logging.getLogger(__name__)

INTENT_ID_CHARS = 16
"""Hex digits of an intent id: the first half of every object id minted under it."""


@dataclass(frozen=True)
class WriteIntent:
    """An open intent: mint object ids with :meth:`new_object_id`."""

    id: str
    kind: str
    object_kinds: tuple[ObjectKind, ...]
    """The kinds of object it mints ids for: GC lists only these kinds' prefixes."""

    def new_object_id(self, kind: ObjectKind) -> str:
        """A fresh id for an object of ``kind`` under this intent (its key is under
        the intent's prefix).

        Raises:
            InvalidArgument: the intent was not recorded with ``kind``, so the
                sweep would never list where the object goes (a writer's bug).
        """
        if kind not in self.object_kinds:
            raise InvalidArgument(
                f"write intent {self.id} ({self.kind}) was recorded for {self.object_kinds} "
                f"objects, not {kind!r}: begin it with object_kinds that include {kind!r}"
            )
        return self.id + uuid.uuid4().hex[:INTENT_ID_CHARS]

    def finish(self, tx: Tx) -> None:
        """End the intent inside the transaction that registers its writes.

        Raises:
            IntentRevoked: GC swept it (the writer ran past the orphan grace);
                the transaction must roll back.
        """
        if not end_intent(tx, self.id):
            raise IntentRevoked(
                f"write intent {self.id} ({self.kind}) was swept by GC: the write ran longer "
                "than the orphan grace and its uploads may be gone; nothing was committed, retry it"
            )


def holder() -> str:
    """Who holds an intent, for an operator reading the catalog."""
    return f"{socket.gethostname()} pid {os.getpid()}"


def begin_intent(
    catalog: Catalog,
    kind: str,
    tables: Sequence[tuple[str, str]],
    object_kinds: Iterable[ObjectKind],
    *,
    job_id: str | None = None,
) -> WriteIntent:
    """Record, in its own short transaction, that a ``kind`` writer may upload
    objects of ``object_kinds`` into ``tables`` (``(tenant_id, table_id)`` pairs)
    from now on."""
    intent = new_intent(kind, object_kinds)
    with catalog.transaction() as tx:
        record_intent_in(tx, intent, catalog.clock(), tables, job_id=job_id)
    return intent


def record_intent_in(
    tx: Tx,
    intent: WriteIntent,
    started_us: int,
    tables: Sequence[tuple[str, str]],
    *,
    job_id: str | None = None,
) -> None:
    """Record ``intent`` inside a transaction the caller runs anyway (a job's plan)."""
    record_intent(
        tx, intent.id, intent.kind, started_us, tables, holder(), job_id, intent.object_kinds
    )


def new_intent(kind: str, object_kinds: Iterable[ObjectKind] = ()) -> WriteIntent:
    """An intent not yet recorded (record it with :func:`record_intent_in`) that
    mints ids for objects of ``object_kinds`` (none: a restore job's, whose
    outputs its plan names)."""
    return WriteIntent(uuid.uuid4().hex[:INTENT_ID_CHARS], kind, tuple(sorted(set(object_kinds))))


def give_up(
    catalog: Catalog,
    objects: ObjectStore,
    records: Sequence[ObjectRecord],
    intent: WriteIntent | None,
) -> None:
    """A writer that will not commit (its transaction rolled back, or never ran):
    delete its uploads, then drop its intent. Best effort, as the writer's own
    error matters more: what is left, GC sweeps under the intent after the
    orphan grace. Never call it when a ``COMMIT`` may have landed."""
    keys = [r.key for r in records]
    if keys:
        try:
            objects.delete_many(keys)
        except Exception:  # noqa: BLE001
            log.warning("could not delete unregistered uploads %s; GC sweeps them", keys)
            return
    if intent is None:
        return
    try:
        with catalog.transaction() as tx:
            forget_intent(tx, intent.id)
    except Exception:  # noqa: BLE001
        log.warning("could not drop write intent %s (%s); GC sweeps it", intent.id, intent.kind)
