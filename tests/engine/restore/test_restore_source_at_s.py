"""A restore reads its source at S once, from what the job pinned (``SourceAtS``).

Regression (issue 16): ``--verify full`` re-planned the read of the source at
S after the rewrite. A restore planned at "now" then failed with
UnprotectedTime as soon as the source was written before the verification
ran, and a resume of such a job failed the same way, though the job's pins
still held every row at or before S. Verification and the logical dump now
share one value loaded from the pins, which never asks again whether S is
protected.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from engine.executors import DEFAULT_EXECUTORS
from engine.pipeline import (
    ExecutorChoice,
    OnResult,
    RewriteExecutor,
    RewriteResult,
    RewriteTask,
)
from engine.restore.job import restore_tenant, resume_restore
from engine.restore.journal import load_job
from tenants.errors import TaskFailed, UnprotectedTime
from tenants.objectstore import ObjectStore
from tenants.store import TableStore
from tests.helpers.restores import SCHEMA, Minutes, keys, pairs, rows, unique


class _BeforeRewrite:
    """An executor that runs ``hook`` when the rewrite step starts, then the real one."""

    def __init__(self, inner: RewriteExecutor, hook: Callable[[], None]) -> None:
        self.inner, self.hook, self.name = inner, hook, inner.name

    def rewrite(
        self, store: ObjectStore, tasks: Sequence[RewriteTask], on_result: OnResult
    ) -> list[RewriteResult]:
        self.hook()
        return self.inner.rewrite(store, tasks, on_result)


class HookedExecutors:
    """The default executors, with ``hook`` run as each job's rewrite starts."""

    def __init__(self, hook: Callable[[], None]) -> None:
        self.hook = hook

    def decide(self, name: str, rewrite_bytes: int) -> ExecutorChoice:
        return DEFAULT_EXECUTORS.decide(name, rewrite_bytes)

    def build(self, choice: ExecutorChoice) -> RewriteExecutor:
        return _BeforeRewrite(DEFAULT_EXECUTORS.build(choice), self.hook)


@pytest.fixture
def at(clock: Any) -> Minutes:
    return Minutes(clock)


@pytest.fixture
def acme(store: TableStore, at: Minutes) -> str:
    at(0)
    name = unique("acme")
    store.create_tenant(name)
    store.create_table(name, "db.items", SCHEMA)
    at(1)
    store.write(name, "db.items", upserts=rows((1, "a"), (2, "b")))
    at(2)
    store.write(name, "db.items", upserts=rows((3, "c")), deletes=keys(1))
    return name


def test_verify_full_of_a_restore_at_now_survives_a_write_to_the_source(store, at, acme):
    """S = now is protected when planned, not after the source's next write: the
    verification reads the pinned objects, so the write changes nothing."""
    expected = pairs(store.read(acme, "db.items"))

    def later_write() -> None:
        at(5)
        store.write(acme, "db.items", upserts=rows((9, "late")), deletes=keys(2))

    outcome = restore_tenant(
        store,
        acme,
        "now",
        to=unique("clone"),
        executor="local",
        verify="full",
        executors=HookedExecutors(later_write),
    )

    assert outcome.tables_compared == 1
    assert pairs(store.read(outcome.tenant.name, "db.items")) == expected
    # S is no longer protected: only the job's pins read it
    with pytest.raises(
        UnprotectedTime,
        match=rf"time {outcome.plan.at_ts} .* is not protected for tenant '{re.escape(acme)}'",
    ):
        store.read(acme, "db.items", outcome.plan.at_ts)


def test_resume_of_a_restore_at_now_verifies_after_the_source_moved_on(store, at, acme):
    """A job planned at now fails after the source was written; its resume
    verifies in full from the pins and installs the source as it was at S."""
    expected = pairs(store.read(acme, "db.items"))

    def write_then_fail() -> None:
        at(5)
        store.write(acme, "db.items", upserts=rows((9, "late")))
        raise TaskFailed("injected: the rewrite step dies after the source was written")

    with pytest.raises(TaskFailed, match="injected") as failure:
        restore_tenant(
            store,
            acme,
            "now",
            executor="local",
            verify="full",
            executors=HookedExecutors(write_then_fail),
        )
    job_id = failure.value.message.split("restore job ")[1].split()[0]
    assert load_job(store.catalog, job_id).state == "failed"

    at(6)
    outcome = resume_restore(store, job_id)

    assert outcome.tables_compared == 1
    assert outcome.tenant.name == acme  # in place: the name went to the restored tenant
    assert pairs(store.read(acme, "db.items")) == expected
