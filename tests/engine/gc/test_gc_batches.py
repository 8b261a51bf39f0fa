"""Collection streamed: decisions recorded set-based, finished in batches, reported in counts.

``finish_pending`` deletes the recorded decisions a batch at a time and
forgets each batch's rows before it reads the next, so a crash between two
batches leaves exactly the unfinished decisions for the next run. The report
counts every decision and lists only the first ``SAMPLE`` by key. Each test
runs on the moto server and both catalogs, with batch and sample sizes
shrunk so that a few objects cross their bounds.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import pytest

import engine.gc.collect as collect_module
from engine.cli.gc_cmds import gc_json
from engine.gc.collect import collect
from engine.gc.run import run_gc
from tenants.store import TableStore
from tests.helpers.gc import (
    RecordingStore,
    Timeline,
    bucket_listing,
    dangling_keys,
    keys_of,
    object_rows,
    pending_rows,
)
from tests.helpers.restores import SCHEMA, SimulatedCrash, reads, rows, with_objects

GARBAGE = 11


def gc(store: TableStore, **kwargs: Any) -> Any:
    return run_gc(store, dry_run=False, grace_us=0, allow_short_grace=True, compact=False, **kwargs)


@pytest.fixture
def garbage(store: TableStore, clock: Any) -> set[str]:
    """A tenant of one table whose first 11 commit objects a compaction replaced."""
    at = Timeline(clock)
    store.create_tenant("a")
    store.create_table("a", "db.items", SCHEMA)
    for i in range(GARBAGE):
        store.write("a", "db.items", upserts=rows((i, f"v{i}")))
    before = keys_of(store, "a")
    store.compact("a")
    replaced = before - keys_of(store, "a")
    assert len(replaced) == GARBAGE
    at(2)
    return replaced


@pytest.fixture
def batches_of_4(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collect_module, "FINISH_BATCH", 4)


class ObservingStore(RecordingStore):
    """Records each delete_many's keys and, when it is called, the pending rows;
    ``crash_at``: the call (1-based) that raises instead of deleting,
    ``crash_after``: the call that deletes its keys, then raises."""

    def __init__(
        self,
        inner: Any,
        store: TableStore,
        *,
        crash_at: int | None = None,
        crash_after: int | None = None,
    ) -> None:
        super().__init__(inner)
        self.store = store
        self.crash_at, self.crash_after = crash_at, crash_after
        self.pending_at_call: list[int] = []

    def delete_many(self, keys: Iterable[str]) -> int:
        batch = list(keys)
        self.deletes.append(batch)
        self.pending_at_call.append(len(pending_rows(self.store)))
        if len(self.deletes) == self.crash_at:
            raise SimulatedCrash(f"crash before deleting batch {self.crash_at}")
        deleted = self.inner.delete_many(batch)
        if len(self.deletes) == self.crash_after:
            raise SimulatedCrash(f"crash after deleting batch {self.crash_after}")
        return deleted


def test_decisions_are_finished_in_batches_each_forgotten_before_the_next(
    store: TableStore, garbage: set[str], batches_of_4: None
) -> None:
    expected = reads(store, "a")
    observing = ObservingStore(store.objects, store)
    report = gc(with_objects(store, observing))
    assert [len(b) for b in observing.deletes] == [4, 4, 3]
    assert sorted(k for b in observing.deletes for k in b) == sorted(garbage)
    # Each batch's rows were gone before the next batch was read.
    assert observing.pending_at_call == [11, 7, 3]
    assert report.collected.deleted_objects == GARBAGE
    assert report.collected.candidate_count == GARBAGE
    assert report.collected.resumed == 0
    assert not garbage & bucket_listing(store)
    assert pending_rows(store) == []
    assert reads(store, "a") == expected
    assert dangling_keys(store) == set()


@pytest.mark.parametrize("how", ["before_delete", "after_delete"])
def test_a_crash_between_batches_leaves_the_rest_for_the_next_run(
    store: TableStore, garbage: set[str], batches_of_4: None, how: str
) -> None:
    expected = reads(store, "a")
    if how == "before_delete":
        crashing = ObservingStore(store.objects, store, crash_at=2)
    else:
        crashing = ObservingStore(store.objects, store, crash_after=2)
    with pytest.raises(SimulatedCrash, match="batch 2"):
        gc(with_objects(store, crashing))

    first, second = (set(b) for b in crashing.deletes)
    # The first batch is finished: its keys and rows are gone.
    assert not first & bucket_listing(store)
    assert not first & set(object_rows(store).values())
    # The rest is recorded, its rows and (but for the crashed batch's, if it was sent) keys kept.
    left = garbage - first
    assert {r["object_key"] for r in pending_rows(store)} == left
    assert left <= set(object_rows(store).values())
    kept = left - second if how == "after_delete" else left
    assert kept <= bucket_listing(store)
    assert dangling_keys(store) <= (second if how == "after_delete" else set())
    assert reads(store, "a") == expected

    report = gc(store)  # finishes what was left first, deciding nothing new
    assert report.collected.candidate_count == 0
    assert report.collected.deleted_objects == len(left) == report.collected.resumed
    assert not garbage & bucket_listing(store)
    assert pending_rows(store) == []
    assert dangling_keys(store) == set()
    assert reads(store, "a") == expected


def test_reports_count_every_candidate_and_list_the_first_by_key(
    store: TableStore, garbage: set[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(collect_module, "SAMPLE", 3)
    with store.catalog.snapshot() as tx:
        sizes = {
            r["object_key"]: int(r["byte_size"])
            for r in tx.all("SELECT object_key, byte_size FROM objects")
        }
    dry = collect(store.catalog, store.objects, grace_us=0)
    assert dry.dry_run and pending_rows(store) == []
    assert (dry.candidate_count, dry.candidate_bytes) == (
        GARBAGE,
        sum(sizes[k] for k in garbage),
    )
    assert [c.key for c in dry.candidates] == sorted(garbage)[:3]
    assert all(c.bytes == sizes[c.key] for c in dry.candidates)
    assert all(c.reason.startswith("unreferenced since") for c in dry.candidates)
    assert dry.candidates_cut

    real = collect(store.catalog, store.objects, grace_us=0, dry_run=False)
    assert [c.key for c in real.candidates] == [c.key for c in dry.candidates]
    assert (real.candidate_count, real.candidate_bytes) == (
        dry.candidate_count,
        dry.candidate_bytes,
    )
    assert (real.deleted_objects, real.deleted_bytes) == (GARBAGE, dry.candidate_bytes)
    assert not garbage & bucket_listing(store)


def test_the_cli_counts_all_and_says_the_list_is_cut(
    store: TableStore,
    garbage: set[str],
    monkeypatch: pytest.MonkeyPatch,
    rewind_on: Callable[..., Any],
) -> None:
    monkeypatch.setattr(collect_module, "SAMPLE", 3)
    report = run_gc(store, grace_us=0, allow_short_grace=True, compact=False)
    out = gc_json(report)
    assert len(out["objects"]) == 3
    assert (out["objects_total"], out["objects_cut"]) == (GARBAGE, True)
    assert out["objects_total_bytes"] == report.collected.candidate_bytes

    shown = rewind_on("gc", "--dry-run", "--grace", "0", "--allow-short-grace")
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.output.split())
    assert f"listed the first 3 of {GARBAGE} unreferenced object(s) by key" in text
    assert f"would delete {GARBAGE} object(s)" in text
    as_json = json.loads(
        rewind_on("--json", "gc", "--dry-run", "--grace", "0", "--allow-short-grace").output
    )
    assert (len(as_json["objects"]), as_json["objects_total"]) == (3, GARBAGE)


@pytest.fixture
def rewind_on(default_catalog_uri: str, bucket: str) -> Callable[..., Any]:
    """Run the CLI in-process on the ``store`` fixture's catalog and warehouse."""
    from typer.testing import CliRunner

    from engine.cli.app import app

    def run(*args: str) -> Any:
        where = ["--catalog", default_catalog_uri, "--warehouse", f"s3://{bucket}/warehouse"]
        return CliRunner().invoke(app, [*where, *args])

    return run


def test_a_candidate_held_through_a_base_is_unreferenced_since_the_base_was_released(
    store: TableStore, clock: Any
) -> None:
    """The sample's details are looked up apart from the decision: they must say
    what the decision saw. A clone inherits its source's objects through a base;
    the source compacts them away, then the clone is purged (its base released,
    after the source's memberships ended): they are unreferenced since the release."""
    from engine.gc.purge import purge_tenant
    from engine.restore.job import restore_tenant

    at = Timeline(clock)
    store.create_tenant("a")
    store.create_table("a", "db.items", SCHEMA)
    for i in range(3):
        store.write("a", "db.items", upserts=rows((i, f"v{i}")))
    store.create_snapshot("a", "s")
    restore_tenant(store, "a", "s", to="c", executor="local")
    before = keys_of(store, "a")
    at(1)
    store.compact("a")
    replaced = before - keys_of(store, "a")
    assert replaced
    at(2)
    purge_tenant(store.catalog, store.drop_tenant("c").ref)
    with store.catalog.snapshot() as tx:
        released = {r["released_ts"] for r in tx.all("SELECT released_ts FROM membership_bases")}
        ended = tx.scalar(
            "SELECT MAX(removed_ts) FROM membership m JOIN objects o ON o.id = m.object_id "
            f"WHERE o.object_key IN ({', '.join('?' for _ in replaced)})",
            tuple(replaced),
        )
    [release] = released
    assert release is not None and release > ended
    at(3)

    dry = collect(store.catalog, store.objects, grace_us=0)
    held = [c for c in dry.candidates if c.key in replaced]
    assert {c.key for c in held} == replaced
    assert all(c.unreferenced_since == release for c in held)
    assert all("membership(s)" in c.reason for c in held)
