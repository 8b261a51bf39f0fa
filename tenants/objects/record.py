"""Object records: what the catalog knows about each immutable Parquet object.

Keys are built from ids only (``tenants/<tenant_id>/<table_id>/<kind>/<id>.parquet``),
never from names. A record carries everything a restore planner needs to
classify the object without opening it: kind, fingerprint, rows, bytes, ts
range, key range, sortedness and checksum.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

# The catalog's statements on objects and membership are re-exported (``as``): the
# writers import them from here (tenants.catalog.objects imports no domain code).
from tenants.catalog import Row, Tx
from tenants.catalog.objects import add_member as add_member
from tenants.catalog.objects import insert_object as insert_object
from tenants.catalog.objects import (
    live_member_tuples,
    restore_job_of_table,
    swapped_members,
    tenant_member_rows,
)
from tenants.catalog.objects import remove_members as remove_members
from tenants.schema import TS

if TYPE_CHECKING:
    import pyarrow as pa

ObjectKind = Literal["data", "tomb"]


def object_key(tenant_id: str, table_id: str, kind: ObjectKind, object_id: str) -> str:
    return f"tenants/{tenant_id}/{table_id}/{kind}/{object_id}.parquet"


def rewritten_object_id(job_id: str, object_id: str) -> str:
    """The id of restore job ``job_id``'s rewritten copy of object ``object_id``.

    Derived, not drawn: a retried rewrite task overwrites its own output, and a
    compaction finds the copy an instant restore's swap put in place of a cut
    member it merged (``swapped_copies``)."""
    return hashlib.sha256(f"{job_id}/{object_id}".encode()).hexdigest()[:32]


@dataclass(frozen=True)
class ObjectRecord:
    id: str
    key: str
    kind: ObjectKind
    fingerprint: str
    rows: int
    bytes: int
    min_ts: int
    max_ts: int
    min_pk: str
    max_pk: str
    sorted: bool
    checksum: str
    created_ts: int
    # The table holds only the rows at or before this ts (None: all of them): an
    # object that straddled an instant restore's point, until its rewritten copy
    # replaces it. It describes the membership, not the bytes (docs/membership.md).
    cut_ts: int | None = None

    @property
    def visible_max_ts(self) -> int:
        """The newest ts of a row the table holds: ``max_ts``, or the cut below it."""
        return self.max_ts if self.cut_ts is None else min(self.max_ts, self.cut_ts)

    def read_ts(self, as_of: int) -> int:
        """The ts up to which a read at ``as_of`` keeps this object's rows."""
        return as_of if self.cut_ts is None else min(as_of, self.cut_ts)

    @classmethod
    def from_row(cls, row: Row) -> ObjectRecord:
        return cls(
            row["id"],
            row["object_key"],
            row["kind"],
            row["fingerprint"],
            row["row_count"],
            row["byte_size"],
            row["min_ts"],
            row["max_ts"],
            row["min_pk"],
            row["max_pk"],
            bool(row["sorted"]),
            row["checksum"],
            row["created_ts"],
            row.get("cut_ts"),
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def sort_by_key_and_ts(table: pa.Table, primary_key: Sequence[str]) -> pa.Table:
    return table.sort_by([(k, "ascending") for k in primary_key] + [(TS, "ascending")])


def sort_by_key(table: pa.Table, primary_key: Sequence[str]) -> pa.Table:
    """One commit's rows (a key appears once) in key order."""
    return table.sort_by([(k, "ascending") for k in primary_key])


def record_from_tuple(r: tuple[Any, ...]) -> ObjectRecord:
    """A record from a row in ``tenants.catalog.objects.RECORD_COLUMNS`` order (or
    ``MEMBER_COLUMNS``: with the member's cut)."""
    return ObjectRecord(
        r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], bool(r[10]), r[11], r[12],
        r[13] if len(r) > 13 else None,
    )  # fmt: skip


def swapped_copies(tx: Tx, table_id: str, cut_ids: Sequence[str]) -> dict[str, str]:
    """Of ``cut_ids`` (members the table held with a cut when a compaction read it),
    those the restore that created the table has since swapped for their copies:
    cut member id -> copy id. A copy holds exactly the rows the cut member held,
    so what a merge made of the one stands for the other."""
    if not cut_ids:
        return {}
    job_id = restore_job_of_table(tx, table_id)
    if job_id is None:
        return {}
    return swapped_members(tx, table_id, {i: rewritten_object_id(job_id, i) for i in cut_ids})


def live_objects(tx: Tx, table_id: str, kind: ObjectKind | None = None) -> list[ObjectRecord]:
    """The table's current members, oldest first (sorted here: SQLite would sort
    without an index, slower than Python's sort of already-built records)."""
    records = [record_from_tuple(r) for r in live_member_tuples(tx, table_id, kind)]
    records.sort(key=lambda o: (o.min_ts, o.id))
    return records


def tenant_objects(tx: Tx, tenant_id: str) -> list[tuple[str, ObjectRecord]]:
    """(``db.table``, object) for every live member of every table of a tenant."""
    return [(r["qualified"], ObjectRecord.from_row(r)) for r in tenant_member_rows(tx, tenant_id)]
