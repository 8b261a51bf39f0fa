"""A table or database restore killed between any two catalog writes.

Every write statement an uninterrupted restore makes is recorded; then, on a
fresh tenant for each, the process "dies" inside the transaction running it,
or right after that transaction commits. Afterwards the tenant reads either
exactly as before the restore or exactly as after it, never a mix; the
tables it did not name never change; and resuming the job (or finding it
done) converges on the uninterrupted result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from engine.restore.job import RestoreOutcome, resume_restore
from engine.restore.journal import ACTIVE_STATES
from engine.restore.tables import restore_database, restore_table
from tenants.store import TableStore
from tests.helpers.item_rows import SCHEMA, keys, rows
from tests.helpers.restores import (
    FaultyCatalog,
    ObservedTx,
    SimulatedCrash,
    crashed_at,
    reads,
    with_catalog,
)


class RecordingCatalog:
    """The real catalog; every statement of a write transaction is recorded."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.statements: list[str] = []

    def seen(self, sql: str) -> None:
        self.statements.append(" ".join(sql.split()))

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        with self.inner.transaction() as tx:
            yield ObservedTx(tx, self)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def tenant(store: TableStore, name: str) -> None:
    """``shop.orders`` with an object straddling snapshot ``s`` and a bad delete
    after it; ``shop.users`` and ``aux.kept`` written on both sides."""
    store.create_tenant(name)
    store.set_pitr(name, 3_600_000_000)
    for database, table in (("shop", "orders"), ("shop", "users"), ("aux", "kept")):
        store.create_table(name, f"{database}.{table}", SCHEMA)
        store.write(name, f"{database}.{table}", upserts=rows((1, "a"), (2, "b")))
    store.create_snapshot(name, "s")
    store.write(name, "shop.orders", upserts=rows((3, "c")), deletes=keys(1))
    store.compact(name, "shop.orders")  # one object across S: rewritten
    store.create_table(name, "shop.later", SCHEMA)
    for database, table in (("shop", "users"), ("aux", "kept")):
        store.write(name, f"{database}.{table}", upserts=rows((9, "late")))


Restore = Callable[[TableStore, str], RestoreOutcome]
RESTORES: dict[str, Restore] = {
    "table": lambda store, name: restore_table(store, name, "shop.orders", "s", executor="local"),
    "database": lambda store, name: restore_database(store, name, "shop", "s", executor="local"),
}


def unfinished_jobs(store: TableStore, name: str) -> list[str]:
    states = ", ".join(f"'{s}'" for s in ACTIVE_STATES)
    with store.catalog.snapshot() as tx:
        return [
            str(r[0])
            for r in tx.tuples(
                f"SELECT id FROM restore_jobs WHERE target_name = ? AND state IN ({states})",
                (name,),
            )
        ]


@pytest.mark.parametrize("scope", sorted(RESTORES))
def test_a_kill_between_any_two_catalog_writes_leaves_before_or_after_and_resumes(
    store: TableStore, scope: str
) -> None:
    restore = RESTORES[scope]
    tenant(store, "ref")
    before = reads(store, "ref")
    recorder = RecordingCatalog(store.catalog)
    restore(with_catalog(store, recorder), "ref")
    after = reads(store, "ref")
    assert after != before
    kept_after = after["aux.kept"]
    points = []
    for index, sql in enumerate(recorder.statements):
        prefix = " ".join(sql.split()[:4])
        occurrence = sum(1 for s in recorder.statements[: index + 1] if s.startswith(prefix))
        points.append((prefix, occurrence))
    assert len(points) >= 10, recorder.statements

    for case, (prefix, occurrence) in enumerate(dict.fromkeys(points)):
        for after_commit in (False, True):
            name = f"t{case}{'c' if after_commit else 'i'}"
            tenant(store, name)
            faulty = FaultyCatalog(
                store.catalog, prefix, occurrence=occurrence, after_commit=after_commit
            )
            with pytest.raises(SimulatedCrash, match=crashed_at(prefix, after_commit=after_commit)):
                restore(with_catalog(store, faulty), name)
            state = reads(store, name)
            where = f"{scope} restore killed {'after' if after_commit else 'inside'} {prefix!r} #{occurrence}"
            assert state in (before, after), where
            assert state["aux.kept"] == kept_after, where  # never touched
            jobs = unfinished_jobs(store, name)
            for job_id in jobs:
                resume_restore(store, job_id)
            if not jobs and state == before:  # died before the job was journaled
                restore(store, name)
            assert reads(store, name) == after, where
            # the table takes writes again (no hold left behind)
            store.write(name, "shop.orders", upserts=rows((5, "e")))
