"""Keep inheritance shallow: flatten the deepest level of a table's chain.

A restored table reads its own rows plus one range per base it inherits
(``tenants.catalog.inherited``); each restore from a table that has its own rows
adds a level. GC bounds that: while a table's chain is deeper than
``MAX_DEPTH``, or its deepest level holds nothing any more (a full compaction
of the table shadowed all of it), the deepest level's members are copied into
the table's own rows, in chunks of ``CHUNK`` ids, each its own short
transaction, and the base is dropped. Readers see the same members throughout
and a crash between chunks leaves a consistent chain for the next run.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from tenants.catalog import Catalog
from tenants.catalog.inherited import flatten_deepest, inheriting_tables, level_is_empty, levels

log = logging.getLogger(__name__)

MAX_DEPTH = 3  # levels a table reads through; bench_restore_scale measures the cost of each
CHUNK = 10_000


@dataclass(frozen=True)
class Flattened:
    table_id: str
    depth: int  # the level the table no longer reads through
    rows: int  # members it copied into the table's own rows


def flatten_chains(
    catalog: Catalog, *, max_depth: int = MAX_DEPTH, chunk: int = CHUNK, dry_run: bool = False
) -> list[Flattened]:
    """Flatten every table's chain to at most ``max_depth`` levels, and drop deepest
    levels nothing is left in; with ``dry_run`` only say which would go."""
    with catalog.snapshot() as tx:
        tables = inheriting_tables(tx)
    done: list[Flattened] = []
    for table_id in tables:
        while True:
            with catalog.snapshot() as tx:
                chain = levels(tx, table_id, own=False)
                if not chain:
                    break
                deepest = chain[-1]
                assert deepest.base is not None
                if len(chain) <= max_depth and not level_is_empty(tx, deepest):
                    break
            if dry_run:
                done.append(Flattened(table_id, deepest.base.depth, 0))
                break
            copied = 0
            after: str | None = ""
            while after is not None:
                with catalog.transaction() as tx:
                    n, next_after = flatten_deepest(tx, table_id, after, chunk)
                copied += n
                after = next_after
            log.info(
                "gc: table %s reads level %d (table %s) from its own rows now (%d copied)",
                table_id,
                deepest.base.depth,
                deepest.base.table_id,
                copied,
            )
            done.append(Flattened(table_id, deepest.base.depth, copied))
    return done
