"""Compaction: merge a table's objects into large objects sorted by (pk, ts).

Objects are grouped by (kind, schema fingerprint) so an output never mixes
schemas. The merge streams (tenants.reads.merge): every input is read a batch at a
time and rows go to outputs of about the target size as the merge passes
them, so memory is a batch per input, whatever the table's size. A partial
merge (the default) keeps every version; a full one decides, key by key
inside the merge, which versions and tombstones some protected time still
needs (tenants.timeline.retention) and drops the rest.

The memory budget (``memory``, default a quarter of the machine's RAM, at
most 1 GiB) sets how many objects one merge reads at once and the batch size
each is read with. A table with more objects than that is merged in passes:
each pass merges runs of objects into fewer, larger ones and swaps them in
(a committed partial compaction, so a crash between passes loses nothing),
until one merge can read them all.

Outputs are swapped in by one catalog transaction per merge, conditional on
every input still being a live member; a cut member that an instant restore's
swap replaced meanwhile counts by its copy, which holds the same rows, so the
swap never makes a compaction lose. If another compaction won the race the
swap aborts with ``ConcurrentModification`` and its outputs are orphans for
GC; so does the merge when GC, under a short grace, collected an input the
winner replaced while this merge read it. Merged objects span wide ts
ranges, which is the layout restores must handle.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from tenants.catalog import Catalog
from tenants.errors import ConcurrentModification, InvalidArgument, ObjectMissing
from tenants.objects.intents import WriteIntent, begin_intent, give_up
from tenants.objects.io import record_of
from tenants.objects.reader import (
    BATCH_BYTES,
    CHUNK_BYTES,
    IN_MEMORY_BYTES,
    open_object,
    stream_object,
)
from tenants.objects.record import (
    ObjectRecord,
    add_member,
    insert_object,
    live_objects,
    object_key,
    remove_members,
    swapped_copies,
)
from tenants.objects.sizes import DEFAULT_TARGET_BYTES, MAX_TARGET_BYTES, MIB, MIN_MEMORY
from tenants.objects.writer import PAGE_BYTES as WRITER_PAGE_BYTES
from tenants.objects.writer import ROW_GROUP_BYTES, ObjectWriter
from tenants.objectstore import ObjectStore
from tenants.observe import events
from tenants.progress import Share, step
from tenants.reads.merge import SRC, MergeInput, gather, merge_rounds, overlap_depth, typed_key
from tenants.schema import TS
from tenants.tenancy import TableRecord, active_tenant, find_table, tables_at, tenant_by_id
from tenants.timeline.protection import Protection, protection
from tenants.timeline.retention import keep_sorted

log = logging.getLogger(__name__)

# DEFAULT_TARGET_BYTES, MAX_TARGET_BYTES, MIB and MIN_MEMORY: tenants.objects.sizes.
MIN_BATCH_BYTES = 64 * 1024
MIN_BUFFER_BYTES = 64 * 1024
# A merge round hands an output several row groups at once: up to this many bytes
# of them queue for its encoder (tenants.objects.writer) while the merge goes on.
FLIGHT_BYTES = 2 * ROW_GROUP_BYTES
# What one output being written holds: the row group it gathers, the row groups
# queued for its encoder (the one encoding among them), and the encoder's own
# working memory (pages and their compression), about a row group.
WRITER_BYTES = 2 * ROW_GROUP_BYTES + FLIGHT_BYTES
READER_BYTES = 512 * 1024  # an open reader's own state (footer, decoders)
# An object read in place is checksummed alongside, a chunk at a time
# (tenants.objects.reader): one more chunk per open input.
CHECK_BYTES = CHUNK_BYTES
# A reader holds a decompressed data page of each column it reads and, while
# it reads a column chunk, the chunk's dictionary page; Rewind writes both of at
# most tenants.objects.writer.PAGE_BYTES. (Not counting them let a 512 MiB merge
# of 58 five-column inputs reach 938 MiB: benchmarks/README.md, bench_memory.)
PAGE_BYTES = 2 * WRITER_PAGE_BYTES
DEFAULT_COLUMNS = 8
# What the process holds before a merge starts (interpreter, pyarrow, catalog,
# the CLI): 135 MiB measured for ``rewind compact``.
PROCESS_BYTES = 144 * MIB
# What the allocator holds once a merge runs, whatever its size: each thread
# that allocates (the merge, the read-ahead workers, the encoder) keeps partly
# used pages of every size class it has used, and freed pages wait out the
# purge delay (tenants.allocator). Measured: a merge of ten objects whose live
# Arrow memory peaked at 70 MiB grew the process by 216 MiB.
ALLOCATOR_BYTES = 112 * MIB
# And in proportion to what is live (fragmentation): measured, a 66-object
# merge at 512 MiB and 1 GiB peaked 11% and 2% above the live bytes counted.
ALLOCATOR_SLACK = 1.15
# Batches no smaller than this when every input must be read at once: smaller
# rounds cost more in per-round work than a pass of merging costs in I/O.
MERGE_MIN_BATCH_BYTES = 256 * 1024


def default_memory() -> int:
    """A quarter of the machine's RAM, at most 1 GiB: what a merge may use by default
    (a merge of many objects uses it; a rewrite or a merge of few needs far less)."""
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        ram = 4 * 1024 * MIB
    return max(MIN_MEMORY, min(1024 * MIB, ram // 4))


@dataclass(frozen=True)
class CompactionResult:
    table: str
    inputs: int
    outputs: int
    rows: int
    bytes_in: int
    bytes_out: int


@dataclass(frozen=True)
class MergeShape:
    """How one merge reads its inputs within a memory budget."""

    fan_in: int  # objects read at once
    batch_bytes: int  # per input batch
    buffer_bytes: int  # per input column read buffer

    @classmethod
    def within(
        cls,
        memory: int,
        inputs: Sequence[ObjectRecord],
        groups: int,
        depth: int | None = None,
        columns: int = DEFAULT_COLUMNS,
    ) -> MergeShape:
        """The widest merge ``memory`` allows, with the largest batches that fit.

        ``memory`` bounds the process's peak RSS. The process itself
        (interpreter, pyarrow, catalog) takes ``PROCESS_BYTES``; the allocator
        keeps ``ALLOCATOR_BYTES``, and ``ALLOCATOR_SLACK`` of what is live, on
        top; each output group holds its row groups (``WRITER_BYTES``); inputs
        small enough to be fetched whole hold their bytes. Each input read at
        once holds its buffered batch, the next one (read ahead), its share of
        a round (taken, gathered, taken again in key order: three copies), read
        buffers, its reader's own state, the chunk its checksum is reading and
        a decompressed data and dictionary page per column it reads
        (``columns``). Batches shrink to ``MERGE_MIN_BATCH_BYTES`` to read
        every input at once; below that, rounds get so small that merging in
        passes is faster, so the fan-in drops instead. ``depth``: how many
        inputs are read at once (their key ranges' overlap; default all).
        """
        count = len(inputs) if depth is None else depth
        # Objects under IN_MEMORY_BYTES are fetched whole: each holds its bytes,
        # counted once for all of them (an upper bound: not all are open at once).
        fixed = PROCESS_BYTES + ALLOCATOR_BYTES
        left = int((memory - fixed) / ALLOCATOR_SLACK) - groups * WRITER_BYTES
        left -= sum(o.bytes for o in inputs if o.bytes <= IN_MEMORY_BYTES)
        batch = BATCH_BYTES
        while True:
            buffer = max(MIN_BUFFER_BYTES, min(1024 * 1024, batch // 8))
            per_input = 5 * batch + 8 * buffer + READER_BYTES + CHECK_BYTES + columns * PAGE_BYTES
            if count * per_input <= left or batch <= MERGE_MIN_BATCH_BYTES:
                break
            batch //= 2
        fan_in = max(2, min(count, max(0, left) // per_input))
        return cls(fan_in, batch, buffer)


def _groups(records: list[ObjectRecord]) -> list[list[ObjectRecord]]:
    """Groups a partial merge touches: several objects, or one unsorted object."""
    return [g for g in _all_groups(records) if len(g) > 1 or not g[0].sorted]


def compact_table(
    catalog: Catalog,
    objects: ObjectStore,
    table: TableRecord,
    *,
    target_bytes: int = DEFAULT_TARGET_BYTES,
    full: bool = False,
    memory: int | None = None,
) -> CompactionResult:
    """Merge the table's live objects, per (kind, fingerprint) group.

    A partial merge (``full=False``) touches only groups of several objects and
    keeps every version. A full compaction rewrites every group and drops the
    versions and tombstones no protected time needs (tenants.timeline.retention); the
    protected times are read from the catalog here, never passed in.
    """
    budget = memory or default_memory()
    consumed: dict[str, ObjectRecord] = {}  # inputs that existed before this compaction
    created: dict[str, ObjectRecord] = {}  # its outputs still live
    rows = 0
    previous: int | None = None
    while True:
        with catalog.snapshot() as tx:
            live = live_objects(tx, table.id)
            guard = protection(tx, tenant_by_id(tx, table.tenant_id)) if full else None
        groups = _all_groups(live) if full else _groups(live)
        inputs = [o for g in groups for o in g]
        if not inputs:
            break
        depth = _depth(inputs, table)
        shape = MergeShape.within(budget, inputs, len(groups), depth, _columns(table))
        stalled = previous is not None and depth >= previous
        if depth <= shape.fan_in or stalled:
            if stalled:
                # Passes cannot shrink the table below its size / target objects:
                # read them all, each with the smallest batches.
                log.warning(
                    "table %s (%s): %d objects exceed the %d a %d MiB budget merges at once; "
                    "merging them all with the smallest batches",
                    table.qualified,
                    table.id,
                    len(inputs),
                    shape.fan_in,
                    budget // MIB,
                )
                shape = MergeShape(depth, MIN_BATCH_BYTES, MIN_BUFFER_BYTES)
            intent = _intent(catalog, table, inputs)
            outputs, rows = _merge(
                catalog, objects, table, inputs, guard, target_bytes, shape, intent
            )
            _swap(catalog, objects, table, inputs, outputs, intent)
            _account(consumed, created, inputs, outputs)
            break
        # Too many to read at once: merge runs of fan_in objects (oldest first)
        # within each group, keeping every version, and go round again.
        previous = depth
        for group in groups:
            ordered = sorted(group, key=lambda o: (o.min_ts, o.id))
            for start in range(0, len(ordered), shape.fan_in):
                run = ordered[start : start + shape.fan_in]
                if len(run) < 2:
                    continue
                intent = _intent(catalog, table, run)
                outputs, _ = _merge(catalog, objects, table, run, None, target_bytes, shape, intent)
                _swap(catalog, objects, table, run, outputs, intent)
                _account(consumed, created, run, outputs)
                log.info(
                    "table %s (%s): merged a run of %d objects into %d (%d at once)",
                    table.qualified,
                    table.id,
                    len(run),
                    len(outputs),
                    shape.fan_in,
                )
    return CompactionResult(
        table.qualified,
        len(consumed),
        len(created),
        rows,
        sum(o.bytes for o in consumed.values()),
        sum(o.bytes for o in created.values()),
    )


def _columns(table: TableRecord) -> int:
    """Columns a merge reads from each input: the table's and ``__ts``."""
    return len(table.schema.columns) + 1


def _depth(inputs: Sequence[ObjectRecord], table: TableRecord) -> int:
    """How many of ``inputs`` a merge reads at once: the most whose key ranges
    share a key (a compacted table's disjoint objects: one at a time)."""
    key_schema = table.schema.key_arrow()
    return overlap_depth(
        [(typed_key(o.min_pk, key_schema), typed_key(o.max_pk, key_schema)) for o in inputs]
    )


def _account(
    consumed: dict[str, ObjectRecord],
    created: dict[str, ObjectRecord],
    inputs: list[ObjectRecord],
    outputs: list[ObjectRecord],
) -> None:
    """Count a swap: an input this compaction made is no longer one of its outputs."""
    for record in inputs:
        if created.pop(record.id, None) is None:
            consumed[record.id] = record
    for record in outputs:
        created[record.id] = record


class _Outputs:
    """Rows of one (kind, fingerprint) group, written as objects of about the target
    size: each takes as many rows as the group's inputs stored in that many bytes."""

    def __init__(
        self,
        objects: ObjectStore,
        table: TableRecord,
        inputs: Sequence[ObjectRecord],
        schema: pa.Schema,
        target_bytes: int,
        intent: WriteIntent,
    ) -> None:
        self.objects, self.table, self.first = objects, table, inputs[0]
        self.intent = intent
        self.schema = schema
        per_row = max(1.0, sum(o.bytes for o in inputs) / max(1, sum(o.rows for o in inputs)))
        self.capacity = max(1, int(target_bytes / per_row))
        self.records: list[ObjectRecord] = []
        self._writer: ObjectWriter | None = None
        self._id = ""

    def write(self, rows: pa.Table) -> None:
        while rows.num_rows:
            if self._writer is None:
                self._id = self.intent.new_object_id(self.first.kind)
                key = object_key(self.table.tenant_id, self.table.id, self.first.kind, self._id)
                self._writer = ObjectWriter(
                    self.objects,
                    key,
                    self.schema,
                    self.table.schema.primary_key,
                    flight_bytes=FLIGHT_BYTES,
                )
            room = self.capacity - self._writer.rows
            self._writer.write(rows.slice(0, room))
            rows = rows.slice(room)
            if self._writer.rows >= self.capacity:
                self.close()

    def close(self) -> None:
        if self._writer is not None:
            writer, self._writer = self._writer, None
            written = writer.finish()
            self.records.append(
                record_of(written, self._id, self.first.kind, self.first.fingerprint, 0)
            )

    def abort(self) -> None:
        if self._writer is not None:
            self._writer.abort()


def _merge(
    catalog: Catalog,
    objects: ObjectStore,
    table: TableRecord,
    inputs: list[ObjectRecord],
    guard: Protection | None,
    target_bytes: int,
    shape: MergeShape,
    intent: WriteIntent,
) -> tuple[list[ObjectRecord], int]:
    """Merge ``inputs`` into new objects, minted under ``intent``; (their records, rows kept).

    Raises:
        ConcurrentModification: an input went missing because another
            compaction (GC's, say) replaced it and GC collected it under a
            short grace while this merge read it. The race is lost as at the
            swap: nothing changed, and the outputs written so far are aborted.
        ObjectMissing: an input is missing yet still live (lost bytes).
    """
    objects_ = f"{len(inputs)} object{'' if len(inputs) == 1 else 's'}"
    with step(
        f"compacting {table.qualified} ({objects_})", sum(o.bytes for o in inputs)
    ) as merging:
        share = Share(merging, sum(o.bytes for o in inputs), sum(o.rows for o in inputs))
        try:
            merged = _merge_inputs(
                objects, table, inputs, guard, target_bytes, shape, share, intent
            )
        except ObjectMissing as e:
            with catalog.snapshot() as tx:
                live = {o.id for o in live_objects(tx, table.id)}
            replaced = sum(o.id not in live for o in inputs)
            if not replaced:
                raise
            raise ConcurrentModification(
                f"compaction of table {table.qualified} ({table.id}) lost a race: "
                f"{replaced} of its inputs were replaced and collected while it read them; "
                "run it again"
            ) from e
        share.finish()
        return merged


def _merge_inputs(
    objects: ObjectStore,
    table: TableRecord,
    inputs: list[ObjectRecord],
    guard: Protection | None,
    target_bytes: int,
    shape: MergeShape,
    share: Share,
    intent: WriteIntent,
) -> tuple[list[ObjectRecord], int]:
    # Oldest first: a key's versions then meet in ts order, which the merge's
    # sort of an integer key relies on to sort the key alone (tenants.reads.merge).
    inputs = sorted(inputs, key=lambda o: (o.min_ts, o.max_ts, o.id))
    key_schema = table.schema.key_arrow()
    pk = list(table.schema.primary_key)
    kept = 0
    with ExitStack() as stack:

        def opener(record: ObjectRecord) -> Callable[[], Iterator[pa.RecordBatch]]:
            def open_() -> Iterator[pa.RecordBatch]:
                batches = stream_object(
                    objects, record, buffer_bytes=shape.buffer_bytes, batch_bytes=shape.batch_bytes
                )
                stack.callback(batches.close)  # an early end closes it too
                return batches

            return open_

        members: dict[tuple[str, str], list[int]] = {}
        for index, record in enumerate(inputs):
            members.setdefault((record.kind, record.fingerprint), []).append(index)
        outputs = {
            group: _Outputs(
                objects,
                table,
                [inputs[i] for i in indexes],
                _group_schema(_schema_of(objects, inputs[indexes[0]])),
                target_bytes,
                intent,
            )
            for group, indexes in members.items()
        }
        for out in outputs.values():
            stack.callback(out.abort)
        # Inputs open as the merge reaches their first key: a compacted table's
        # disjoint objects are read one after another.
        sources = [
            MergeInput(record.kind, opener(record), typed_key(record.min_pk, key_schema))
            for record in inputs
        ]
        for round_ in merge_rounds(sources, key_schema):
            events = round_.events
            share.rows(events.num_rows)
            if guard is not None:
                events = events.filter(pa.array(keep_sorted(events, pk, guard)))
            kept += events.num_rows
            for group, indexes in members.items():
                rows = gather(round_, events, indexes, outputs[group].schema)
                if rows is not None and rows.num_rows:
                    outputs[group].write(rows)
        for out in outputs.values():
            out.close()
        return [r for out in outputs.values() for r in out.records], kept


@dataclass(frozen=True)
class RowCount:
    """One object's rows as a full compaction of its table would see them."""

    held: int
    """Rows the table holds: all of them, or a cut member's up to its cut."""
    unneeded: int
    """Of those, rows no protected time needs (the compaction drops them)."""


def count_unneeded(
    objects: ObjectStore,
    table: TableRecord,
    records: list[ObjectRecord],
    guard: Protection,
    *,
    memory: int | None = None,
) -> dict[str, RowCount]:
    """Rows of each object the table holds and those a full compaction would drop
    now (a dry run of its decisions, reading only keys and ``__ts``), by object
    id. A member held with a cut counts only its rows up to the cut: the others
    are not the table's, so they count neither as held nor as reclaimable."""
    key_schema = table.schema.key_arrow()
    pk = list(table.schema.primary_key)
    depth = _depth(records, table)
    shape = MergeShape.within(memory or default_memory(), records, 0, depth, len(pk) + 1)
    if shape.fan_in < depth:
        shape = MergeShape(depth, MIN_BATCH_BYTES, MIN_BUFFER_BYTES)
    dropped = np.zeros(len(records), dtype=np.int64)
    held = np.zeros(len(records), dtype=np.int64)
    with ExitStack() as stack:

        def opener(record: ObjectRecord) -> Callable[[], Iterator[pa.RecordBatch]]:
            def open_() -> Iterator[pa.RecordBatch]:
                batches = stream_object(
                    objects,
                    record,
                    [*pk, TS],
                    buffer_bytes=shape.buffer_bytes,
                    batch_bytes=shape.batch_bytes,
                )
                stack.callback(batches.close)
                return batches

            return open_

        sources = [
            MergeInput(record.kind, opener(record), typed_key(record.min_pk, key_schema))
            for record in records
        ]
        for round_ in merge_rounds(sources, key_schema):
            keep = keep_sorted(round_.events, pk, guard)
            src = round_.events.column(SRC).to_numpy()
            held += np.bincount(src, minlength=len(records))
            dropped += np.bincount(src[~keep], minlength=len(records))
    return {
        record.id: RowCount(int(h), int(d))
        for record, h, d in zip(records, held, dropped, strict=True)
    }


def _schema_of(objects: ObjectStore, record: ObjectRecord) -> pa.Schema:
    """An object's rows' schema, from its footer (a ranged read, no checksum)."""
    with open_object(objects, record, verify=False) as reader:
        return reader.schema


def _group_schema(schema: pa.Schema) -> pa.Schema:
    """An input's schema with ``__ts`` as every writer stores it (non-null, last)."""
    fields = [f for f in schema if f.name != TS]
    return pa.schema([*fields, pa.field(TS, pa.int64(), False)])


def _all_groups(records: list[ObjectRecord]) -> list[list[ObjectRecord]]:
    by_group: dict[tuple[str, str], list[ObjectRecord]] = {}
    for record in records:
        by_group.setdefault((record.kind, record.fingerprint), []).append(record)
    return list(by_group.values())


def _intent(catalog: Catalog, table: TableRecord, inputs: Sequence[ObjectRecord]) -> WriteIntent:
    """The write intent of one merge's outputs (tenants/objects/intents.py): each
    output has the kind of the inputs it merges."""
    kinds = {record.kind for record in inputs}
    return begin_intent(catalog, "compaction", [(table.tenant_id, table.id)], kinds)


def _swap(
    catalog: Catalog,
    objects: ObjectStore,
    table: TableRecord,
    inputs: list[ObjectRecord],
    outputs: list[ObjectRecord],
    intent: WriteIntent,
) -> None:
    """Replace ``inputs`` by ``outputs`` in one transaction, iff all inputs are still
    live; it ends the outputs' intent. A lost race (or a revoked intent) rolls
    the transaction back and deletes the outputs."""
    try:
        with catalog.transaction() as tx:
            ts = tx.commit_ts()
            intent.finish(tx)
            # An instant restore's swap may have replaced cut members this merge read by
            # their copies, which hold the same rows: the merge replaces the copies then.
            copies = swapped_copies(tx, table.id, [o.id for o in inputs if o.cut_ts is not None])
            removed = remove_members(tx, table.id, [copies.get(o.id, o.id) for o in inputs], ts)
            if removed != len(inputs):
                raise ConcurrentModification(
                    f"compaction of table {table.qualified} ({table.id}) lost a race: "
                    f"{len(inputs) - removed} of its inputs were replaced meanwhile; run it again"
                )
            for record in outputs:
                insert_object(tx, _with_created_ts(record, ts))
                add_member(tx, table.id, record.id, ts)
    except ConcurrentModification:  # raised before COMMIT: nothing of it landed
        give_up(catalog, objects, outputs, intent)
        raise
    log.info(
        "table %s (%s): compacted %d objects into %d at ts %d",
        table.qualified,
        table.id,
        len(inputs),
        len(outputs),
        ts,
    )


def _with_created_ts(record: ObjectRecord, ts: int) -> ObjectRecord:
    return replace(record, created_ts=ts)


def compact(
    catalog: Catalog,
    objects: ObjectStore,
    tenant: str,
    database: str | None = None,
    table: str | None = None,
    *,
    target_bytes: int = DEFAULT_TARGET_BYTES,
    full: bool = False,
    memory: int | None = None,
) -> list[CompactionResult]:
    """Compact one table, or every live table of the tenant (see ``compact_table``).

    Raises:
        InvalidArgument: ``target_bytes`` is not a whole number of bytes from 1
            to ``MAX_TARGET_BYTES`` (4 GiB), or ``memory`` is below 64 MiB.
    """
    if memory is not None and (
        isinstance(memory, bool) or not isinstance(memory, int) or memory < MIN_MEMORY
    ):
        raise InvalidArgument(
            f"invalid compaction memory budget {memory!r} bytes: give at least {MIN_MEMORY // MIB} MiB"
        )
    if (
        isinstance(target_bytes, bool)
        or not isinstance(target_bytes, int)
        or not 1 <= target_bytes <= MAX_TARGET_BYTES
    ):
        raise InvalidArgument(
            f"invalid compaction target {target_bytes!r} bytes: use 1 to {MAX_TARGET_BYTES:,} "
            "(4 GiB)"
        )
    with catalog.snapshot() as tx:
        tenant_rec = active_tenant(tx, tenant)
        now = tx.last_ts()
        if database is not None and table is not None:
            tables = [find_table(tx, tenant_rec, database, table, now)]
        else:
            tables = [
                t
                for t in tables_at(tx, tenant_rec, now)
                if database is None or t.database == database
            ]
    results = []
    with events.job("compaction", tenant):
        for t in tables:
            with events.step("compact") as compacting:
                compacting.table = t.qualified
                result = compact_table(
                    catalog, objects, t, target_bytes=target_bytes, full=full, memory=memory
                )
                compacting.objects, compacting.bytes = result.inputs, result.bytes_out
                compacting.rows = result.rows
            results.append(result)
    return results
