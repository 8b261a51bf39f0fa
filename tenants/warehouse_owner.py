"""Which catalog owns a warehouse: a marker object at the warehouse root.

Two deployments whose catalogs point at one warehouse would each see the
other's objects as orphans. So a warehouse names its owner, as Iceberg refuses
a table location another table uses and Feldera refuses to run on state it did
not write: ``rewind-warehouse.json`` at the root holds the format version, the
owner catalog's id (a row of the catalog's ``meta`` table) and when it was
created, never credentials or local paths. It is written at first use and
checked on every :meth:`TableStore.open <tenants.store.TableStore.open>` and
before GC. A second catalog is refused (:class:`WarehouseOwned`) unless told to
adopt the warehouse; adopting makes it the owner and is recorded in the marker
and in the catalog. Whoever owns it, GC deletes only keys under tenant ids its
own catalog minted (engine/gc/ownership.py), so adoption never endangers the
previous owner's objects.

A warehouse written before markers existed gets one on first open if every
tenant and staging prefix in it is this catalog's; if any is not, the open is
refused unless adopted (:class:`ForeignWarehouse`).

Races: the marker is created with a conditional write (S3 ``If-None-Match: *``,
``O_EXCL``-style hard link on ``file://``), so of two processes claiming a fresh
warehouse exactly one wins; both read the marker back and the loser is refused
(or accepted, if it is the same catalog). Adoption overwrites the marker and
reads it back; of two racing adopters the one whose write is read back wins.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tenants.catalog import Catalog
from tenants.catalog.ownership import catalog_id, own_job_ids, own_tenant_ids, record_adoption
from tenants.errors import ForeignWarehouse, ObjectMissing, StorageError, WarehouseOwned
from tenants.objectstore import ObjectStore

MARKER = "rewind-warehouse.json"
FORMAT = "rewind-warehouse"
FORMAT_VERSION = 1
# engine.backup.destination.MARKER (tenants/ does not import engine/).
BACKUPS_MARKER = "rewind-backups.json"
ADOPT_HINT = "--adopt-warehouse (adopt_warehouse=True in the API)"


@dataclass(frozen=True)
class Adoption:
    catalog_id: str
    previous_owner: str | None  # None: the warehouse had no marker (written before them)
    at: str  # ISO-8601 UTC


@dataclass(frozen=True)
class WarehouseMarker:
    owner: str
    created_at: str
    adoptions: tuple[Adoption, ...] = ()
    format_version: int = FORMAT_VERSION

    def encode(self) -> bytes:
        return json.dumps(
            {
                "format": FORMAT,
                "format_version": self.format_version,
                "owner_catalog_id": self.owner,
                "created_at": self.created_at,
                "adoptions": [a.__dict__ for a in self.adoptions],
            },
            indent=2,
            sort_keys=True,
        ).encode()

    @classmethod
    def decode(cls, data: bytes, where: str) -> WarehouseMarker:
        try:
            raw: Any = json.loads(data)
            if raw.get("format") != FORMAT:
                raise ValueError(f"format {raw.get('format')!r}")
            version = int(raw["format_version"])
            if version > FORMAT_VERSION:
                raise ForeignWarehouse(
                    f"the owner marker {where} has format version {version}; this Rewind "
                    f"reads up to {FORMAT_VERSION}: upgrade Rewind to use this warehouse"
                )
            return cls(
                str(raw["owner_catalog_id"]),
                str(raw["created_at"]),
                tuple(
                    Adoption(str(a["catalog_id"]), a.get("previous_owner"), str(a["at"]))
                    for a in raw.get("adoptions", [])
                ),
                version,
            )
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ForeignWarehouse(
                f"the owner marker {where} is unreadable ({e}); restore it from the owner's "
                f"copy, or delete it and reopen with the owner catalog (which re-creates it)"
            ) from e


def _now(catalog: Catalog) -> str:
    return datetime.fromtimestamp(catalog.clock() / 1e6, tz=UTC).isoformat(timespec="seconds")


def read_marker(objects: ObjectStore) -> WarehouseMarker | None:
    """The warehouse's marker, or None if it has none."""
    try:
        data = objects.get(MARKER)
    except ObjectMissing:
        return None
    return WarehouseMarker.decode(data, f"{objects.warehouse.uri}/{MARKER}")


def claim_warehouse(
    catalog: Catalog, objects: ObjectStore, *, adopt: bool = False
) -> WarehouseMarker:
    """Make sure this catalog owns the warehouse; claim it if it is new.

    Raises:
        WarehouseOwned: another catalog owns it and ``adopt`` is False.
        ForeignWarehouse: it has no marker but holds data this catalog never
            wrote (and ``adopt`` is False), or it is a backup destination.
    """
    me = catalog_id(catalog)
    marker = read_marker(objects)
    if marker is None:
        marker = _first_claim(catalog, objects, me, adopt)
    if marker.owner == me:
        return marker
    if not adopt:
        raise WarehouseOwned(
            f"warehouse {objects.warehouse.uri} belongs to catalog {marker.owner}, not to "
            f"catalog {me} ({catalog.uri}), as its {MARKER} says: check that --catalog and "
            f"--warehouse belong together, or pass {ADOPT_HINT} to make catalog {me} its owner "
            f"(GC then still never deletes objects of catalog {marker.owner}'s tenants)"
        )
    return _adopt(catalog, objects, me, marker)


def foreign_prefixes(catalog: Catalog, objects: ObjectStore) -> list[str]:
    """Tenant and staging prefixes of the warehouse that this catalog never created."""
    with catalog.snapshot() as tx:
        tenants = own_tenant_ids(tx)
        jobs = own_job_ids(tx)
    found = [f"tenants/{c}/" for c in objects.children("tenants/") if c not in tenants]
    found += [f"staging/{c}/" for c in objects.children("staging/") if c not in jobs]
    return found


def _first_claim(catalog: Catalog, objects: ObjectStore, me: str, adopt: bool) -> WarehouseMarker:
    where = objects.warehouse.uri
    if any(info.key == BACKUPS_MARKER for info in objects.list(BACKUPS_MARKER)):
        raise ForeignWarehouse(
            f"{where} is a Rewind backup destination ({BACKUPS_MARKER}), not a warehouse: "
            "point --warehouse at another prefix"
        )
    foreign = foreign_prefixes(catalog, objects)
    if foreign and not adopt:
        raise ForeignWarehouse(
            f"warehouse {where} has no owner marker ({MARKER}) and holds data this catalog "
            f"({me}, {catalog.uri}) never wrote: {len(foreign)} prefix(es), e.g. {foreign[0]}; "
            f"it is probably another deployment's: check that --catalog and --warehouse belong "
            f"together, or pass {ADOPT_HINT} to take it over (GC never deletes those prefixes)"
        )
    now = _now(catalog)
    fresh = WarehouseMarker(me, now, (Adoption(me, None, now),) if foreign else ())
    won = objects.create(MARKER, fresh.encode())
    # Read back whatever is there now: ours if we won; the winner's if another
    # process claimed it first (or overwrote ours on an object store without conditional
    # writes). The caller compares the owner with this catalog.
    marker = read_marker(objects)
    if marker is None:
        raise StorageError(f"wrote {where}/{MARKER} but cannot read it back; retry")
    if won and foreign and marker.owner == me:
        record_adoption(catalog, where, None, now)
    return marker


def _adopt(
    catalog: Catalog, objects: ObjectStore, me: str, marker: WarehouseMarker
) -> WarehouseMarker:
    where = objects.warehouse.uri
    now = _now(catalog)
    adopted = WarehouseMarker(
        me, marker.created_at, (*marker.adoptions, Adoption(me, marker.owner, now))
    )
    # Crash window: a crash after this write and before the catalog records the
    # adoption leaves the marker naming us without the catalog's history row; the
    # marker is the authority, the row is history, so nothing is at risk.
    objects.put(MARKER, adopted.encode())
    back = read_marker(objects)
    if back is None or back.owner != me:
        raise WarehouseOwned(
            f"warehouse {where} was adopted by catalog {back.owner if back else '?'} at the same "
            f"time as by catalog {me}; it is {back.owner if back else 'nobody'}'s now: retry "
            f"with {ADOPT_HINT} if catalog {me} should own it"
        )
    record_adoption(catalog, where, marker.owner, now)
    return back
