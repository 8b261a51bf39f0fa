"""A tiny in-memory model of what a read at time T must return.

This is the reference the store is checked against, so it is written to be
obviously correct rather than fast: plain lists and loops, no Arrow, and no
code shared with ``tenants/mvcc.py``. It follows DESIGN.md, "Reading at a time
T (MVCC)", word by word:

- per table, a list of events: (key, ts, kind, row), kind ``data`` or ``tomb``;
- for each key take the events with ``ts <= T``;
- a tombstone at d hides the data versions with ts < d;
- the key is visible iff its newest surviving data version exists, and then
  its values are that version's;
- so an update at t (a tombstone and a version, both at t) keeps the version.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Key = tuple[Any, ...]
Row = dict[str, Any]
EventKind = Literal["data", "tomb"]


@dataclass(frozen=True)
class Event:
    key: Key
    ts: int
    kind: EventKind
    row: Row | None  # the full row of a data version; None for a tombstone


@dataclass
class ModelTable:
    primary_key: tuple[str, ...]
    events: list[Event] = field(default_factory=list)

    def key_of(self, row: Row) -> Key:
        return tuple(row[k] for k in self.primary_key)


class Oracle:
    """Tables as event lists; ``read`` answers what a read at T must see."""

    def __init__(self) -> None:
        self.tables: dict[str, ModelTable] = {}

    def create_table(self, table: str, primary_key: Sequence[str]) -> None:
        assert table not in self.tables, f"model table {table} already exists"
        self.tables[table] = ModelTable(tuple(primary_key))

    def write(
        self,
        table: str,
        ts: int,
        *,
        upserts: Iterable[Row] = (),
        deletes: Iterable[Row] = (),
    ) -> None:
        """One commit at ``ts``: a tombstone per deleted key, a version per upserted row.

        ``deletes`` are rows holding at least the key columns.
        """
        model = self.tables[table]
        for row in deletes:
            model.events.append(Event(model.key_of(row), ts, "tomb", None))
        for row in upserts:
            model.events.append(Event(model.key_of(row), ts, "data", dict(row)))

    def read(self, table: str, as_of: int) -> list[Row]:
        """The visible rows at ``as_of``, sorted by primary key."""
        model = self.tables[table]
        keys: list[Key] = []
        for event in model.events:
            if event.key not in keys:
                keys.append(event.key)
        visible: list[Row] = []
        for key in keys:
            events = [e for e in model.events if e.key == key and e.ts <= as_of]
            tombstones = [e.ts for e in events if e.kind == "tomb"]
            surviving = [
                e for e in events if e.kind == "data" and not any(e.ts < d for d in tombstones)
            ]
            if not surviving:
                continue
            newest = surviving[0]
            for e in surviving:
                if e.ts > newest.ts:
                    newest = e
            assert newest.row is not None
            visible.append(dict(newest.row))
        return sorted(visible, key=model.key_of)

    def event_counts(self, table: str) -> tuple[int, int]:
        """(data versions, tombstones) ever written to ``table``."""
        events = self.tables[table].events
        return (
            sum(1 for e in events if e.kind == "data"),
            sum(1 for e in events if e.kind == "tomb"),
        )

    def visible_versions(self, table: str, as_of: int) -> set[tuple[Key, int]]:
        """(key, ts) of every data version visible at ``as_of``: what a read at that
        time needs stored. The union over protected times is all a full compaction
        may keep."""
        model = self.tables[table]
        found: set[tuple[Key, int]] = set()
        for key in {e.key for e in model.events}:
            events = [e for e in model.events if e.key == key and e.ts <= as_of]
            tombstones = [e.ts for e in events if e.kind == "tomb"]
            surviving = [
                e for e in events if e.kind == "data" and not any(e.ts < d for d in tombstones)
            ]
            if surviving:
                found.add((key, max(e.ts for e in surviving)))
        return found
