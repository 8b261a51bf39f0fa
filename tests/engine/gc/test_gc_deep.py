"""``rewind gc --deep``: the streamed full sweep decides exactly as today's sweep does.

Each world mixes every kind of key the orphan sweep tells apart (known objects,
pending deletions, outputs of an active restore job, orphans, keys too young,
keys under tenant ids this catalog never minted, keys not in our pattern,
``staging/`` dumps of finished and running jobs), and the deep sweep's report
must equal ``sweep_orphans``'s, on file:// and moto, on both catalogs. Its merge
relies on the listing and the catalog agreeing on byte order: tests with keys
where a locale's order differs, and with either order broken, show it holds
and that a broken one stops the sweep before it deletes a misjudged key.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

import engine.gc.deep as deep_module
from engine.gc.deep import deep_sweep
from engine.gc.orphans import sweep_orphans
from engine.gc.run import run_gc
from engine.restore.cancel import cancel_restore
from engine.restore.journal import start_job
from engine.restore.plan import plan_restore
from tenants.catalog.dialect import to_pyformat
from tenants.catalog.engine.gc import known_keys_in_order
from tenants.errors import RewindError, StorageError, WarehouseOwned
from tenants.objects.intents import begin_intent
from tenants.objects.record import object_key
from tenants.objectstore import ObjectInfo
from tenants.store import TableStore
from tenants.tenancy import new_id
from tests.helpers.gc import H, RecordingStore, Timeline, object_key_for
from tests.helpers.paths import HELPERS
from tests.helpers.restores import SCHEMA, rows

GRACE = 24 * H
MIB = 1024 * 1024


@pytest.fixture(params=["file", "s3"])
def any_store(
    request: pytest.FixtureRequest, default_catalog_uri: str, clock: Any, tmp_path: Path
) -> Iterator[TableStore]:
    """A TableStore on the test's catalog backend and a file:// or moto warehouse."""
    if request.param == "file":
        store = TableStore.open(default_catalog_uri, f"file://{tmp_path / 'wh'}", clock=clock)
    else:
        s3 = request.getfixturevalue("s3_server")
        bucket = request.getfixturevalue("bucket")
        store = TableStore.open(
            default_catalog_uri, f"s3://{bucket}/warehouse", s3=s3.settings, clock=clock
        )
    yield store
    store.close()


@dataclass
class World:
    """The keys a varied warehouse holds, by what the sweep should make of them."""

    orphans: set[str]
    young: set[str]
    foreign: set[str]
    foreign_tenants: set[str]
    not_ours: set[str]
    known_unregistered: set[str]  # known, though not as a registered object
    hidden: set[str]  # staging keys not listed: a running job's, or no job of ours


def put_all(store: TableStore, keys: set[str]) -> None:
    for key in sorted(keys):
        store.objects.put(key, b"x" * 7)


def pend(store: TableStore, key: str) -> None:
    """A pending deletion of a key no object row names any more (as GC records them)."""
    with store.catalog.transaction() as tx:
        tx.execute(
            "INSERT INTO gc_pending (object_id, object_key, byte_size, decided_ts) "
            "VALUES (?, ?, ?, ?)",
            (new_id(), key, 7, tx.commit_ts()),
        )


def varied_world(store: TableStore, at: Timeline) -> World:
    """Every kind of key, the old ones then (1.1 s later: S3's times have ms precision
    at best) the young ones; the clock is left where only the young are too young."""
    store.create_tenant("a")
    store.create_table("a", "db.items", SCHEMA)
    store.write("a", "db.items", upserts=rows((1, "a"), (2, "b")))
    store.create_snapshot("a", "s")
    store.write("a", "db.items", upserts=rows((3, "c"), (1, "a2")))
    store.compact("a", "db.items")  # one object straddling s: a restore to s rewrites it
    tenant = store.tenant("a").id
    [table] = {o.key.split("/")[2] for _, o in store.objects_of("a")}
    finished = start_job(
        store.catalog,
        plan_restore(store.catalog, "a", "s", to="d"),
        executor="local",
        verify="objects",
    )
    cancel_restore(store, finished.id)
    plan = plan_restore(store.catalog, "a", "s", to="c")
    assert plan.tasks, "the restore should rewrite the straddling object"
    active = start_job(store.catalog, plan, executor="local", verify="objects")
    outputs = {t.out_key for t in plan.tasks}  # written by the job, not installed yet
    pending = object_key_for(tenant, table)
    other_tenants = [new_id(), new_id()]
    world = World(
        orphans={
            *(object_key_for(tenant, table) for _ in range(3)),
            object_key_for(tenant, table, "tomb"),
            object_key_for(plan.tasks[0].out_tenant_id, new_id()),  # the new tenant's id
            f"staging/{finished.id}/tables/items.parquet",
            f"staging/{finished.id}/manifest.json",
        },
        young=set(),
        foreign={object_key_for(t, new_id()) for t in [*other_tenants, other_tenants[0]]},
        foreign_tenants=set(other_tenants),
        not_ours={
            f"tenants/{tenant}/{table}/data/notes.txt",
            f"tenants/{tenant}/{table}/data/{new_id()}.parquet.tmp",
            f"tenants/{tenant}/scratch.parquet",
            f"tenants/{tenant}/{table}/other/{new_id()}.parquet",
            f"tenants/{tenant.upper()}/{table}/data/{new_id()}.parquet",
            "tenants/README",
        },
        known_unregistered=outputs | {pending},
        hidden={
            f"staging/{active.id}/tables/items.parquet",
            f"staging/{new_id()}/tables/items.parquet",
        },
    )
    put_all(store, world.orphans | world.foreign | world.not_ours | world.hidden)
    put_all(store, world.known_unregistered)
    pend(store, pending)
    time.sleep(1.1)
    world.young = {object_key_for(tenant, table), f"staging/{finished.id}/late.parquet"}
    put_all(store, world.young)
    youngest = min(store.objects.head(k).last_modified_us for k in world.young)
    at.set(youngest + GRACE - 1)
    return world


def registered_keys(store: TableStore) -> set[str]:
    with store.catalog.snapshot() as tx:
        return {str(r[0]) for r in tx.tuples("SELECT object_key FROM objects")}


def listing(store: TableStore) -> set[str]:
    return {i.key for p in ("tenants/", "staging/") for i in store.objects.list(p)}


def test_the_deep_sweep_reports_and_deletes_exactly_what_the_sweep_does(
    any_store: TableStore, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = any_store
    world = varied_world(store, Timeline(clock))
    before = listing(store)

    today = sweep_orphans(store.catalog, store.objects, grace_us=GRACE, dry_run=True)
    assert {o.key for o in today.orphans} == world.orphans  # the world is what it claims
    assert today.too_young == len(world.young)
    assert set(today.not_ours) == world.not_ours
    assert (today.foreign, set(today.foreign_tenants)) == (
        len(world.foreign),
        world.foreign_tenants,
    )
    known = (registered_keys(store) & before) | world.known_unregistered
    assert today.known == len(known)
    assert today.listed == len(before - world.hidden)

    heads: list[str] = []

    class Counting(RecordingStore):
        def head(self, key: str) -> ObjectInfo:
            heads.append(key)
            return self.inner.head(key)

    assert deep_sweep(store.catalog, Counting(store.objects), grace_us=GRACE, dry_run=True) == today  # type: ignore[arg-type]
    assert listing(store) == before  # a dry run deletes nothing
    # file:// lists keys without a stat each: only the keys the catalog does not know
    # are stat'ed (their age and size decide); S3's listing carries both.
    unknown = before - world.hidden - known
    assert sorted(heads) == (
        sorted(unknown) if store.objects.warehouse.uri.startswith("file") else []
    )

    # Pages, catalog batches and delete batches of 2: every boundary is crossed.
    for name in ("PAGE", "DELETE_BATCH", "CATALOG_BATCH"):
        monkeypatch.setattr(deep_module, name, 2)
    recording = RecordingStore(store.objects)
    done = deep_sweep(store.catalog, recording, grace_us=GRACE, dry_run=False)  # type: ignore[arg-type]
    assert done == replace(today, dry_run=False)
    assert len(recording.deletes) > 2 and all(recording.deletes)
    assert sorted(k for batch in recording.deletes for k in batch) == sorted(world.orphans)
    assert listing(store) == before - world.orphans
    after = sweep_orphans(store.catalog, store.objects, grace_us=GRACE, dry_run=True)
    assert after.orphans == () and after.known == today.known


def test_gc_deep_runs_the_deep_sweep_and_says_so(store: TableStore, clock: Any) -> None:
    at = Timeline(clock)
    store.create_tenant("a")
    store.create_table("a", "db.items", SCHEMA)
    store.write("a", "db.items", upserts=rows((1, "a")))
    [(_, record)] = store.objects_of("a")
    orphan = object_key_for(store.tenant("a").id, record.key.split("/")[2])
    store.objects.put(orphan, b"left by a crashed write")
    at(25)
    dry = run_gc(store, deep=True)
    assert dry.deep and [o.key for o in dry.orphans.orphans] == [orphan]
    default = run_gc(store)  # a key no intent names is found only by listing
    assert not default.deep and default.orphans.orphans == () and default.orphans.listed == 0
    real = run_gc(store, dry_run=False, deep=True)
    assert [o.key for o in real.orphans.orphans] == [orphan]
    assert orphan not in {i.key for i in store.objects.list("tenants/")}
    assert record.key in {i.key for i in store.objects.list("tenants/")}


def test_a_deep_pass_lists_beside_the_audit_on_a_connection_of_its_own_and_says_the_same(
    store: TableStore, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a time limit the listing merge runs in a thread on a second catalog
    connection while the audit runs on the first (3.9x the old pass at 10^6,
    benchmarks/README.md); the reports are those of the phases in turn, and the
    second connection is closed after."""
    world = varied_world(store, Timeline(clock))
    opened: list[Any] = []
    closed: list[Any] = []
    open_again = store.catalog.open_again

    def counted() -> Any:
        other = open_again()
        assert other is not None
        opened.append(other)
        close = other.close

        def recorded() -> None:
            closed.append(other)
            close()

        monkeypatch.setattr(other, "close", recorded)
        return other

    monkeypatch.setattr(store.catalog, "open_again", counted)
    beside = run_gc(store, deep=True)
    assert len(opened) == 1 and closed == opened
    assert list(beside.seconds) == ["compact", "intents", "collect", "flatten", "orphans"]
    in_turn = run_gc(store, deep=True, max_seconds=3600)  # a limit: phases in turn
    assert len(opened) == 1
    assert list(in_turn.seconds) == ["compact", "collect", "flatten", "intents", "orphans"]
    assert beside.orphans == in_turn.orphans
    assert {o.key for o in beside.orphans.orphans} == world.orphans
    assert beside.collected.candidates == in_turn.collected.candidates
    real = run_gc(store, dry_run=False, deep=True)
    assert {o.key for o in real.orphans.orphans} == world.orphans
    assert not world.orphans & listing(store)
    assert len(closed) == 2


def test_a_deep_pass_leaves_the_keys_of_a_writer_in_flight_to_the_intent_sweep(
    store: TableStore, clock: Any
) -> None:
    """A writer's uploaded key is old by the object store's clock while its intent is
    young by the catalog's (a writer slower than the grace whose intent crosses it
    during the pass; here, the catalog clock ahead). Before the fix, --deep deleted
    the key and the writer then committed an object that was gone (found by the GC
    model with deep passes). The key is the intent sweep's, which revokes first."""
    at = Timeline(clock)
    store.create_tenant("a")
    store.create_table("a", "db.items", SCHEMA)
    store.write("a", "db.items", upserts=rows((1, "a")))
    [(_, record)] = store.objects_of("a")
    tenant, table = store.tenant("a").id, record.key.split("/")[2]
    uploaded = object_key_for(tenant, table)
    store.objects.put(uploaded, b"left by a crashed write")  # no intent: an orphan
    at(25)  # both keys 25 h old by the catalog's clock
    intent = begin_intent(store.catalog, "write", [(tenant, table)], ["data"])
    slow = object_key(tenant, table, "data", intent.new_object_id("data"))
    store.objects.put(slow, b"uploaded, not committed yet")

    report = run_gc(store, dry_run=False, deep=True)

    assert [o.key for o in report.orphans.orphans] == [uploaded]
    assert report.orphans.too_young == 1
    listed = {i.key for i in store.objects.list("tenants/")}
    assert slow in listed and uploaded not in listed


@pytest.mark.one_catalog
def test_rewind_gc_deep_json_says_deep(rewind: Callable[..., Any]) -> None:
    assert rewind("tenant", "create", "acme").exit_code == 0
    for args, deep in ((("gc", "--dry-run", "--deep"), True), (("gc", "--dry-run"), False)):
        result = rewind("--json", *args)
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)
        assert report["deep"] is deep and report["orphans"] == []
    result = rewind("gc", "--help")
    assert "--deep" in result.stdout and "write intents" in " ".join(result.stdout.split())


def test_keys_of_another_catalogs_tenants_are_never_touched(
    new_catalog_uri: Callable[[], str], clock: Any, tmp_path: Path
) -> None:
    """Catalog B adopted A's warehouse: A's keys, known or not, are B's foreign keys."""
    warehouse = f"file://{tmp_path / 'shared'}"
    first = TableStore.open(new_catalog_uri(), warehouse, clock=clock)
    first.create_tenant("a")
    first.create_table("a", "db.items", SCHEMA)
    first.write("a", "db.items", upserts=rows((1, "a")))
    a_id = first.tenant("a").id
    first.objects.put(object_key_for(a_id, new_id()), b"A's crashed write")
    first_keys = {i.key for i in first.objects.list("tenants/")}
    second = TableStore.open(new_catalog_uri(), warehouse, clock=clock, adopt_warehouse=True)
    second.create_tenant("b")
    b_orphan = object_key_for(second.tenant("b").id, new_id())
    second.objects.put(b_orphan, b"B's crashed write")
    Timeline(clock)(24 * 30)
    try:
        report = run_gc(
            second,
            dry_run=False,
            grace_us=0,
            orphan_grace_us=0,
            allow_short_grace=True,
            deep=True,
        )
        assert [o.key for o in report.orphans.orphans] == [b_orphan]
        assert report.orphans.foreign == len(first_keys)
        assert report.orphans.foreign_tenants == (a_id,)
        assert {i.key for i in second.objects.list("tenants/")} == first_keys
        with pytest.raises(WarehouseOwned):
            deep_sweep(first.catalog, first.objects, grace_us=0, dry_run=False)
        assert {i.key for i in first.objects.list("tenants/")} == first_keys
    finally:
        first.close()
        second.close()


# --- the order the merge relies on ---------------------------------------------------------------

# Keys where byte order and a locale's order disagree: upper case before lower case,
# '-' and '.' before '/', '_' after the upper case letters, UTF-8 after ASCII.
AWKWARD = [
    "tenants/B",
    "tenants/_x",
    "tenants/a-b",
    "tenants/a.b",
    "tenants/a/b",
    "tenants/a0",
    "tenants/aB",
    "tenants/ab",
    "tenants/é",
    "tenants/z/é/x",
    "tenantsX",  # outside the prefix, either side of it
    "tenant",
]


def register(store: TableStore, keys: list[str], pending: list[str]) -> None:
    """Object rows for ``keys`` and pending deletions for ``pending`` (rows only, in bulk)."""
    with store.catalog.transaction() as tx:
        ts = tx.commit_ts()
        tx.insert_many(
            "objects",
            (
                "id, object_key, kind, fingerprint, row_count, byte_size, min_ts, max_ts, "
                "min_pk, max_pk, sorted, checksum, created_ts"
            ).split(", "),
            (
                (new_id(), k, "data", "fp", 1, 7, ts, ts, "[1]", "[1]", 1, "0" * 64, ts)
                for k in keys
            ),
        )
        tx.insert_many(
            "gc_pending",
            ("object_id", "object_key", "byte_size", "decided_ts"),
            ((new_id(), k, 7, ts) for k in pending),
        )


def check_known_keys_in_byte_order(store: TableStore) -> None:
    objects, pending = AWKWARD[::2], AWKWARD[1::2] + AWKWARD[4:6]  # two keys in both
    register(store, objects, pending)
    expected = sorted({k for k in AWKWARD if k.startswith("tenants/")}, key=str.encode)
    for batch in (1, 2, 10_000):
        with store.catalog.snapshot() as tx:
            assert list(known_keys_in_order(tx, "tenants/", batch)) == expected


def test_known_keys_come_in_byte_order_on_both_catalogs(
    default_catalog_uri: str, clock: Any, tmp_path: Path
) -> None:
    store = TableStore.open(default_catalog_uri, f"file://{tmp_path / 'wh'}", clock=clock)
    try:
        check_known_keys_in_byte_order(store)
    finally:
        store.close()


def test_byte_order_is_spelled_once_and_reaches_postgresql_as_the_c_collation() -> None:
    sql = "SELECT k FROM t WHERE k COLLATE BINARY >= ? ORDER BY k collate binary"
    assert to_pyformat(sql) == 'SELECT k FROM t WHERE k COLLATE "C" >= %s ORDER BY k COLLATE "C"'


@pytest.fixture
def icu_catalog_uri(pg_catalog_uri: str) -> Iterator[str]:
    """A PostgreSQL database whose default collation is ICU's en-US: not byte order."""
    import psycopg

    admin_uri, _ = pg_catalog_uri.rsplit("/", 1)
    name = f"rewind_icu_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{admin_uri}/postgres", autocommit=True) as admin:
        admin.execute(
            f"CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8' "
            "LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'"
        )
    yield f"{admin_uri}/{name}"
    with psycopg.connect(f"{admin_uri}/postgres", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_known_keys_come_in_byte_order_on_a_catalog_whose_collation_is_a_locales(
    icu_catalog_uri: str, clock: Any, tmp_path: Path
) -> None:
    store = TableStore.open(icu_catalog_uri, f"file://{tmp_path / 'wh'}", clock=clock)
    try:
        with store.catalog.snapshot() as tx:  # the locale's order really is another
            plain = [r[0] for r in tx.tuples("SELECT x FROM (VALUES ('B'), ('a')) v(x) ORDER BY x")]
        assert plain == ["a", "B"]
        check_known_keys_in_byte_order(store)
        # End to end: every awkward key is in the catalog and the warehouse, so known.
        keys = [k for k in AWKWARD if k.startswith("tenants/")]
        put_all(store, set(keys))
        report = deep_sweep(store.catalog, store.objects, grace_us=0, dry_run=False)
        assert (report.known, report.listed, report.not_ours) == (len(keys), len(keys), ())
    finally:
        store.close()


def test_a_listing_out_of_order_stops_the_sweep_before_the_key_out_of_place(
    store: TableStore, clock: Any
) -> None:
    at = Timeline(clock)
    store.create_tenant("a")
    tenant = store.tenant("a").id
    orphans = sorted(object_key_for(tenant, new_id()) for _ in range(4))
    put_all(store, set(orphans))
    at(25)

    class Shuffled(RecordingStore):
        def listing(self, prefix: str) -> Iterator[tuple[str, ObjectInfo | None]]:
            found = list(self.inner.listing(prefix))
            return iter(found[:2] + found[3:] + found[2:3])  # the third comes last

    shuffled = Shuffled(store.objects)
    with pytest.raises(StorageError, match=f"listed '{orphans[2]}' after '{orphans[3]}'"):
        deep_sweep(store.catalog, shuffled, grace_us=GRACE, dry_run=False)  # type: ignore[arg-type]
    # Pages of 1,000: nothing was judged yet, so nothing was deleted.
    assert {i.key for i in store.objects.list("tenants/")} == set(orphans)


def test_a_catalog_order_that_disagrees_stops_the_sweep_before_it_deletes(
    store: TableStore, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = Timeline(clock)
    store.create_tenant("a")
    store.create_table("a", "db.items", SCHEMA)
    for i in range(3):
        store.write("a", "db.items", upserts=rows((i, "v")))
    keys = {o.key for _, o in store.objects_of("a")}
    at(25)

    def backwards(tx: Any, prefix: str, batch: int = 10_000) -> Iterator[str]:
        yield from sorted(known_keys_in_order(tx, prefix, batch), reverse=True)

    monkeypatch.setattr(deep_module, "known_keys_in_order", backwards)
    with pytest.raises(RewindError, match="the catalog has them"):
        deep_sweep(store.catalog, store.objects, grace_us=GRACE, dry_run=False)
    assert {i.key for i in store.objects.list("tenants/")} == keys


# --- memory ---------------------------------------------------------------------------------------


PER_DIRECTORY = 1_000


def fill(tmp_path: Path, catalog_uri: str, n: int) -> tuple[str, str]:
    """A file:// warehouse of ``n`` keys in our pattern, 1,000 per directory (as a
    bigger warehouse has more tables, not bigger ones): half registered objects of
    one tenant, half under 8 tenant ids this catalog never minted (kept and only
    counted), so no key ends up in the report. Rows go in directly, files are plain
    writes."""
    warehouse = tmp_path / f"wh{n}"
    store = TableStore.open(catalog_uri, f"file://{warehouse}")
    try:
        store.create_tenant("a")
        tenant = store.tenant("a").id
        half = n // 2
        ours = [(tenant, new_id()) for _ in range(max(1, half // PER_DIRECTORY))]
        others = [new_id() for _ in range(8)]
        theirs = [(others[i % 8], new_id()) for i in range(max(1, (n - half) // PER_DIRECTORY))]
        known = [object_key_for(*ours[i % len(ours)]) for i in range(half)]
        foreign = [object_key_for(*theirs[i % len(theirs)]) for i in range(n - half)]
        for directory in {k.rsplit("/", 1)[0] for k in known + foreign}:
            (warehouse / directory).mkdir(parents=True, exist_ok=True)
        for key in known + foreign:
            (warehouse / key).write_bytes(b"x")
        register(store, known, [])
    finally:
        store.close()
    return catalog_uri, f"file://{warehouse}"


def measured(catalog_uri: str, warehouse: str, sweep: str) -> dict[str, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REWIND_")}
    done = subprocess.run(
        [sys.executable, str(HELPERS / "gc_deep_memory_job.py"), catalog_uri, warehouse, sweep],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def test_the_deep_sweeps_memory_is_flat_in_the_number_of_keys(
    new_catalog_uri: Callable[[], str], tmp_path: Path
) -> None:
    """2*10^4 and 2*10^5 keys: the deep sweep's peak grows by a few MiB at most, where
    today's sweep (the listing in a list, the keys in a set) grows with the keys."""
    small = measured(*fill(tmp_path, new_catalog_uri(), 20_000), "deep")
    large_world = fill(tmp_path, new_catalog_uri(), 200_000)
    large = measured(*large_world, "deep")
    assert small["known"] == 10_000 and large["known"] == 100_000
    assert large["foreign"] == 100_000 and large["orphans"] == 0
    growth = [(r["peak_kib"] - r["baseline_kib"]) * 1024 for r in (small, large)]
    assert growth[1] - growth[0] < 8 * MIB, f"deep sweep growth {growth} bytes"
    today = measured(*large_world, "today")
    today_growth = (today["peak_kib"] - today["baseline_kib"]) * 1024
    assert today_growth > growth[1] + 32 * MIB, (today_growth, growth)
