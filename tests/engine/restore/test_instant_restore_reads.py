"""Every reader of a tenant an instant restore installed honours its cut members.

An instant restore to S installs first: each object that straddles S joins
the new table as it is, held by a membership row cut at S, and a reader must
keep only its rows at or before the cut (docs/membership.md). Here every
object of the source straddles S and its rows after S differ (updates,
deletes and new keys), so a reader that ignored a cut would show visibly
wrong rows. While the restore's rewrite is pending (``wait=False``), each
reader, exporter, backup, compaction, write and GC pass is checked against
the source read at S: the reference, which reads the same objects with no
cut at all.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from typer.testing import Result

from engine.backup.api import create_backup, restore_backup, show_backup
from engine.export import export_tables
from engine.export.iceberg_catalog import sql_uri
from engine.export.parquet import POINTER
from engine.gc.flatten import flatten_chains
from engine.gc.purge import purge_tenant
from engine.gc.reclaim import scan
from engine.gc.run import run_gc
from engine.gc.storage import storage
from engine.restore.job import RestoreOutcome, cancel_restore, restore_tenant, resume_restore
from engine.restore.journal import load_job
from engine.restore.tables import restore_database, restore_table
from tenants.errors import RestoreInProgress
from tenants.objects.reader import open_object
from tenants.objects.record import ObjectRecord
from tenants.objectstore.embedded import EmbeddedS3
from tenants.reads.interop import duckdb_sql, to_duckdb, to_polars
from tenants.schema import TS
from tenants.spark_reader import read_as_of
from tenants.store import TableStore
from tests.helpers.cli import as_json, ok
from tests.helpers.item_rows import SCHEMA, keys, rows

# What each reader makes of cut members; the catalog side runs on both backends
# in test_instant_restore.py, the fault tests and the models.
pytestmark = pytest.mark.one_catalog

TABLES = ("items", "other", "log")
"""``items`` and ``other``: updates, deletes and new keys on both sides of S;
``log``: append only, even keys before S and odd ones after, so each of its
objects holds every key once (an object an export could copy as it is, if it
ignored the cut)."""
SMALL_OBJECTS = 1500  # bytes: every table compacts into several objects


@dataclass(frozen=True)
class Built:
    """The source tenant (snapshots ``early`` < ``s`` < ``later``, every object
    straddling ``s``): the ts of ``s``."""

    s: int


def build(store: TableStore, tenant: str = "acme") -> Built:
    """A tenant whose every object straddles snapshot ``s`` (fully compacted after it)."""
    store.create_tenant(tenant)
    for table in TABLES:
        store.create_table(tenant, f"db.{table}", SCHEMA)
    evens = list(range(0, 120, 2))
    for start in range(3):
        for table in TABLES:
            store.write(
                tenant, f"db.{table}", upserts=rows(*[(k, f"a{k}") for k in evens[start::3]])
            )
    store.create_snapshot(tenant, "early")
    for table in ("items", "other"):
        store.write(
            tenant,
            f"db.{table}",
            upserts=rows(*[(k, f"b{k}") for k in range(0, 120, 8)]),
            deletes=keys(*range(2, 120, 8)),
        )
    store.create_snapshot(tenant, "s")
    for table in ("items", "other"):
        store.write(
            tenant, f"db.{table}", upserts=rows(*[(k, f"late{k}") for k in range(4, 120, 8)])
        )
        store.write(
            tenant,
            f"db.{table}",
            upserts=rows(*[(k, f"new{k}") for k in range(1, 120, 4)]),
            deletes=keys(*range(6, 120, 8), *range(16, 120, 16)),
        )
    store.write(tenant, "db.log", upserts=rows(*[(k, f"new{k}") for k in range(1, 120, 2)]))
    store.create_snapshot(tenant, "later")
    store.compact(tenant, full=True, target_bytes=SMALL_OBJECTS)
    built = Built(store.snapshot(tenant, "s").ts)
    objects = [o for _, o in store.objects_of(tenant)]
    assert len(objects) >= 3 * len(TABLES)
    assert all(o.min_ts <= built.s < o.max_ts for o in objects), "every object straddles s"
    return built


def at(store: TableStore, tenant: str, point: str | int | None) -> dict[str, list[dict]]:
    """Every table of the world, read at ``point`` (None: now)."""
    return {t: store.read(tenant, f"db.{t}", as_of=point).to_pylist() for t in TABLES}


def instant(store: TableStore, to: str = "copy") -> RestoreOutcome:
    """``acme`` restored to ``s`` as ``to``, installed and its rewrite left pending."""
    outcome = restore_tenant(store, "acme", "s", to=to, executor="local", instant=True, wait=False)
    assert outcome.rewrite_pending
    assert load_job(store.catalog, outcome.job_id).state == "rewriting"
    return outcome


def cut_members(store: TableStore, tenant: str) -> list[ObjectRecord]:
    return [o for _, o in store.objects_of(tenant) if o.cut_ts is not None]


def straddlers(store: TableStore, tenant: str = "copy") -> list[ObjectRecord]:
    """The cut members of ``tenant``: every one must be read through its cut."""
    found = cut_members(store, tenant)
    assert found and {o.cut_ts for o in found} == {store.snapshot("acme", "s").ts}
    return found


def raw_rows(store: TableStore, record: ObjectRecord) -> pa.Table:
    """An object's stored rows, ``__ts`` included, whatever any table holds of it."""
    with open_object(store.objects, replace(record, cut_ts=None)) as r:
        return r.read_all()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_reads_of_the_world_show_different_rows_after_s(store: TableStore) -> None:
    """The premise: a reader that ignored the cut would see other rows."""
    built = build(store)
    now, s = at(store, "acme", None), at(store, "acme", "s")
    for table in TABLES:
        assert now[table] != s[table], table
    assert {r["id"] for r in now["items"]} - {r["id"] for r in s["items"]}  # new keys
    assert {r["id"] for r in s["items"]} - {r["id"] for r in now["items"]}  # deleted keys
    instant(store)
    for o in straddlers(store):
        stored = raw_rows(store, o)
        assert pc.max(stored.column(TS)).as_py() > built.s  # rows the table does not hold


# --- reads ------------------------------------------------------------------------------


@pytest.mark.parametrize("finish", ["resume", "cancel"])
def test_an_instant_restore_in_place_reads_as_of_s_even_once_the_retired_source_is_purged(
    store: TableStore, tmp_path: Path, finish: str
) -> None:
    """In place, the straddlers belong to the retired tenant that held the name:
    readers, an export, and GC after that tenant is purged all go through the cuts."""
    build(store)
    expected = at(store, "acme", "s")
    early = at(store, "acme", "early")
    retired = store.tenant("acme")
    outcome = restore_tenant(store, "acme", "s", executor="local", instant=True, wait=False)
    assert outcome.rewrite_pending
    cut = cut_members(store, "acme")
    assert cut and all(o.key.startswith(f"tenants/{retired.id}/") for o in cut)
    assert at(store, "acme", None) == expected
    assert at(store, "acme", "s") == expected and at(store, "acme", "early") == early
    for table in TABLES:
        got = store.read_arrow("acme", f"db.{table}", keys=(9, 99), columns=["v"]).read_all()
        assert got.to_pylist() == [{"v": r["v"]} for r in expected[table] if 9 <= r["id"] <= 99]
    export_tables(store, "acme", "*", "now", f"file://{tmp_path / 'out'}")
    pointer = json.loads((tmp_path / "out" / POINTER).read_text())
    for table in TABLES:
        folder = tmp_path / "out" / pointer["tables"][f"db.{table}"]["path"]
        assert pq.read_table(folder).to_pylist() == expected[table], table
    # An installed instant job reads nothing more of its source: it may be purged
    # while the rewrite is pending, and GC with no grace keeps what the cuts hold.
    purge_tenant(store.catalog, retired.ref)
    run_gc(store, dry_run=False, grace_us=0, allow_short_grace=True, compact=False)
    assert {o.key for o in cut} <= bucket(store)
    assert at(store, "acme", None) == expected
    assert_live_keys_exist(store)
    if finish == "resume":
        resume_restore(store, outcome.job_id)  # rewritten from the purged tenant's objects
        assert cut_members(store, "acme") == []
    else:
        cancel_restore(store, outcome.job_id)
        run_gc(store, dry_run=False, grace_us=0, allow_short_grace=True, compact=False)
        assert {o.key for o in cut} <= bucket(store)  # the cut members still hold them
        store.compact("acme", full=True, target_bytes=SMALL_OBJECTS)
    assert at(store, "acme", None) == expected
    run_gc(store, dry_run=False, grace_us=0, allow_short_grace=True, compact=False)
    assert not {o.key for o in cut} & bucket(store)  # swapped or merged away: no view holds them
    assert at(store, "acme", None) == expected
    assert_live_keys_exist(store)


def test_store_reads_now_and_at_carried_snapshots_equal_the_source_then(store: TableStore) -> None:
    build(store)
    expected = at(store, "acme", "s")
    instant(store)
    assert at(store, "copy", None) == expected
    for snapshot in ("early", "s"):
        assert at(store, "copy", snapshot) == at(store, "acme", snapshot), snapshot
    assert {s.name for s in store.snapshots("copy")} >= {"early", "s"}
    assert "later" not in {s.name for s in store.snapshots("copy")}
    straddlers(store)  # still pending


def test_read_arrow_with_keys_columns_filters_and_limits_equals_the_source_at_s(
    store: TableStore,
) -> None:
    build(store)
    instant(store)
    shapes: list[dict[str, Any]] = [
        {},
        {"columns": ["v"]},
        {"columns": ["v", "id"]},
        {"keys": (10, 70)},
        {"keys": (None, 33)},
        {"keys": (61, None), "columns": ["v"]},
        {"filter": pc.field("v").isin(["b0", "a6", "new1", "late4", "a4", "a16"])},
        {"filter": pc.starts_with(pc.field("v"), "a")},
        {"limit": 7},
        {"limit": 7, "keys": (40, None)},
        {"limit": 3, "filter": pc.field("id") > 50},
        {"batch_rows": 5, "columns": ["id"]},
    ]
    for table in TABLES:
        for shape in shapes:
            got = store.read_arrow("copy", f"db.{table}", **shape).read_all()
            want = store.read_arrow("acme", f"db.{table}", as_of="s", **shape).read_all()
            assert got.to_pylist() == want.to_pylist(), (table, shape)
            assert got.schema == want.schema, (table, shape)
        # and at a carried snapshot of the restored tenant
        for shape in shapes[:4]:
            got = store.read_arrow("copy", f"db.{table}", as_of="early", **shape).read_all()
            want = store.read_arrow("acme", f"db.{table}", as_of="early", **shape).read_all()
            assert got.to_pylist() == want.to_pylist(), (table, shape, "early")


def test_duckdb_and_polars_read_the_restored_tenant_as_the_source_at_s(store: TableStore) -> None:
    build(store)
    instant(store)
    for table in TABLES:
        want = store.read("acme", f"db.{table}", as_of="s")
        relation = to_duckdb(store, "copy", f"db.{table}")
        assert relation.order("id").fetch_arrow_table().to_pylist() == want.to_pylist(), table
        count = to_duckdb(store, "copy", f"db.{table}", keys=(20, 80)).aggregate("count(*)")
        assert count.fetchone() == (sum(1 for r in want.to_pylist() if 20 <= r["id"] <= 80),)
        frame = to_polars(store, "copy", f"db.{table}")
        assert isinstance(frame, pl.LazyFrame)
        assert frame.collect().to_arrow().to_pylist() == want.to_pylist(), table
        assert frame.head(4).collect().to_dicts() == want.to_pylist()[:4]
        odd = frame.filter(pl.col("id") % 2 == 1).select("v").collect().to_series().to_list()
        assert odd == [r["v"] for r in want.to_pylist() if r["id"] % 2 == 1], table
        connection = duckdb.connect()
        try:
            to_duckdb(store, "copy", f"db.{table}", connection=connection, name="t")
            total = connection.sql("SELECT count(*), max(v) FROM t").fetchone()
            assert total == (want.num_rows, max(want.column("v").to_pylist())), table
        finally:
            connection.close()
    joined = duckdb_sql(
        store,
        "copy",
        "SELECT i.id, i.v, o.v AS w FROM db.items i JOIN db.other o ON o.id = i.id ORDER BY i.id",
    ).fetchall()
    items = {r["id"]: r["v"] for r in store.read("acme", "db.items", as_of="s").to_pylist()}
    other = {r["id"]: r["v"] for r in store.read("acme", "db.other", as_of="s").to_pylist()}
    assert joined == [(k, items[k], other[k]) for k in sorted(items.keys() & other.keys())]
    early = duckdb_sql(store, "copy", "SELECT id, v FROM db.log ORDER BY id", as_of="early")
    assert early.fetchall() == [
        (r["id"], r["v"]) for r in store.read("acme", "db.log", as_of="early").to_pylist()
    ]


def test_spark_reads_the_restored_tenant_as_the_source_at_s(
    store: TableStore, spark: Any, tmp_path: Path
) -> None:
    build(store)
    instant(store)
    for table in TABLES:
        want = store.read("acme", f"db.{table}", as_of="s").to_pylist()
        frame = read_as_of(spark, "copy", f"db.{table}", store=store)
        assert sorted(frame.toArrow().to_pylist(), key=lambda r: r["id"]) == want, table
        assert store.read("copy", f"db.{table}", reader="spark").to_pylist() == want, table
    early = read_as_of(spark, "copy", "db.items", as_of="early", store=store).toArrow()
    assert sorted(early.to_pylist(), key=lambda r: r["id"]) == at(store, "acme", "early")["items"]
    # a logical backup whose dump the Spark executors write
    uri = f"file://{tmp_path / 'backups'}"
    backup = create_backup(store, "copy", "now", uri, kind="logical", reader="spark")
    restore_backup(store, uri, backup.backup_id, tenant="from-spark")
    assert at(store, "from-spark", None) == at(store, "acme", "s")


@pytest.fixture
def cli_store(uris: tuple[str, str], s3_server: EmbeddedS3) -> Iterator[TableStore]:
    """The ``rewind`` fixture's catalog and warehouse, through the API."""
    table_store = TableStore.open(*uris)
    yield table_store
    table_store.close()


def test_rewind_query_plain_sql_and_limit_show_the_rows_at_s(
    cli_store: TableStore, rewind: Callable[..., Result]
) -> None:
    build(cli_store)
    expected = at(cli_store, "acme", "s")
    instant(cli_store)
    for table in TABLES:
        name = f"db.{table}"
        assert as_json(rewind("--json", "query", "copy", name)) == expected[table], table
        limited = as_json(rewind("--json", "query", "copy", name, "--limit", "5"))
        assert limited == expected[table][:5], table
        ranged = as_json(rewind("--json", "query", "copy", name, "--from", "30", "--to", "61"))
        assert ranged == [r for r in expected[table] if 30 <= r["id"] <= 61], table
        early = as_json(rewind("--json", "query", "copy", name, "--snapshot", "early"))
        assert early == at(cli_store, "acme", "early")[table], table
        sql = f"SELECT id, v FROM {name} ORDER BY id"
        assert as_json(rewind("--json", "query", "copy", "--sql", sql)) == expected[table]
        top = as_json(rewind("--json", "query", "copy", "--sql", sql, "--limit", "4"))
        assert top == expected[table][:4], table
        counted = as_json(
            rewind("--json", "query", "copy", "--sql", f"SELECT count(*) AS n FROM {name}")
        )
        assert counted == [{"n": len(expected[table])}], table
    shown = ok(rewind("query", "copy", "db.items", "--limit", "3")).stdout
    for row in expected["items"][:3]:
        assert row["v"] in shown
    assert "late" not in shown and "new" not in shown


# --- export -----------------------------------------------------------------------------


def straddler_digests(store: TableStore) -> set[str]:
    return {o.checksum for o in straddlers(store)}


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_a_parquet_export_holds_the_rows_at_s_and_copies_no_straddler(
    store: TableStore, tmp_path: Path
) -> None:
    build(store)
    expected = at(store, "acme", "s")
    instant(store)
    digests = straddler_digests(store)
    for point in ("now", "s"):
        out = tmp_path / point
        result = export_tables(store, "copy", "*", point, f"file://{out}")
        assert sorted(t.table for t in result.tables) == [f"db.{t}" for t in sorted(TABLES)]
        pointer = json.loads((out / POINTER).read_text())
        for table in TABLES:
            folder = out / pointer["tables"][f"db.{table}"]["path"]
            assert pq.read_table(folder).to_pylist() == expected[table], (point, table)
        copied = {sha256(p.read_bytes()) for p in files_under(out)}
        assert not copied & digests, point
    early = export_tables(store, "copy", "db.items", "early", f"file://{tmp_path / 'early'}")
    folder = (
        tmp_path
        / "early"
        / json.loads((tmp_path / "early" / POINTER).read_text())["tables"]["db.items"]["path"]
    )
    assert pq.read_table(folder).to_pylist() == at(store, "acme", "early")["items"]
    assert early.tables[0].rows == len(at(store, "acme", "early")["items"])


@pytest.fixture
def iceberg_catalog(
    default_catalog_uri: str, tmp_path: Path, request: pytest.FixtureRequest
) -> str:
    """An empty Iceberg SQL catalog on the test's kind of database."""
    if default_catalog_uri.startswith("postgresql"):
        make: Callable[[], str] = request.getfixturevalue("new_pg_catalog_uri")
        return make()
    return f"sqlite:///{tmp_path / 'iceberg.db'}"


def test_an_iceberg_export_holds_the_rows_at_s_and_copies_no_straddler(
    store: TableStore, s3_server: EmbeddedS3, tmp_path: Path, iceberg_catalog: str
) -> None:
    from pyiceberg.catalog import load_catalog

    build(store)
    expected = at(store, "acme", "s")
    instant(store)
    digests = straddler_digests(store)
    lake = tmp_path / "lake"
    result = export_tables(
        store,
        "copy",
        "*",
        "now",
        f"file://{lake}",
        format="iceberg",
        iceberg_catalog=iceberg_catalog,
    )
    assert sum(t.reused_files for t in result.tables) == 0  # nothing whole to copy: all cut
    assert result.copied_bytes == 0
    assert not {sha256(p.read_bytes()) for p in files_under(lake)} & digests
    catalog = load_catalog(
        "default", uri=sql_uri(iceberg_catalog), type="sql", **s3_server.settings.to_pyiceberg()
    )
    try:
        for table in TABLES:
            scanned = catalog.load_table(f"db.{table}").scan().to_arrow().to_pylist()
            assert sorted(scanned, key=lambda r: r["id"]) == expected[table], table
    finally:
        catalog.close()


# --- compaction -------------------------------------------------------------------------


def assert_holds_rows_up_to(store: TableStore, tenant: str, s: int) -> None:
    """Every object of ``tenant`` not held with a cut stores only rows at or before ``s``."""
    for qualified, record in store.objects_of(tenant):
        if record.cut_ts is None:
            stored = raw_rows(store, record)
            assert record.max_ts <= s and pc.max(stored.column(TS)).as_py() <= s, qualified


@pytest.mark.parametrize("full", [False, True], ids=["partial", "full"])
def test_a_compaction_of_the_restored_tables_keeps_only_rows_up_to_s(
    store: TableStore, full: bool
) -> None:
    built = build(store)
    expected = at(store, "acme", "s")
    outcome = instant(store)
    before = cut_members(store, "copy")
    results = store.compact("copy", full=full, target_bytes=SMALL_OBJECTS)
    # Partial: every group of several objects (each table's data); full: all of them.
    merged = before if full else [o for o in before if o.kind == "data"]
    assert sum(r.inputs for r in results) == len(merged)
    assert cut_members(store, "copy") == [o for o in before if o not in merged]
    assert_holds_rows_up_to(store, "copy", built.s)
    assert at(store, "copy", None) == expected
    for snapshot in ("early", "s"):
        assert at(store, "copy", snapshot) == at(store, "acme", snapshot), snapshot
    resume_restore(store, outcome.job_id)  # nothing left to swap: the copies are deleted
    assert at(store, "copy", None) == expected
    assert_holds_rows_up_to(store, "copy", built.s)


def test_a_partial_compaction_merges_a_cut_member_with_later_commits(store: TableStore) -> None:
    built = build(store)
    expected = at(store, "acme", "s")
    outcome = instant(store)
    store.write("copy", "db.log", upserts=rows((1, "mine"), (500, "after")))
    store.write("copy", "db.log", deletes=keys(0))
    store.compact("copy", "db.log", target_bytes=10 * SMALL_OBJECTS)
    want = sorted(
        [r for r in expected["log"] if r["id"] != 0]
        + [{"id": 1, "v": "mine"}, {"id": 500, "v": "after"}],
        key=lambda r: r["id"],
    )
    assert store.read("copy", "db.log").to_pylist() == want
    assert store.read("copy", "db.log", as_of="s").to_pylist() == expected["log"]
    mine = [o for q, o in store.objects_of("copy") if q == "db.log"]
    assert all(o.cut_ts is None for o in mine)
    merged = pa.concat_tables([raw_rows(store, o) for o in mine if o.kind == "data"])
    late = pc.filter(merged, pc.greater(merged.column(TS), built.s)).column("v").to_pylist()
    assert sorted(late) == ["after", "mine"]  # nothing of acme's after s
    resume_restore(store, outcome.job_id)
    assert store.read("copy", "db.log").to_pylist() == want


# --- backups ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["logical", "physical"])
def test_backups_of_the_restored_tenant_restore_the_rows_at_s_elsewhere(
    store: TableStore, tmp_path: Path, kind: str
) -> None:
    build(store)
    expected = at(store, "acme", "s")
    instant(store)
    digests = straddler_digests(store)
    uri = f"file://{tmp_path / 'backups'}"
    made = [create_backup(store, "copy", point, uri, kind=kind) for point in ("now", "s", "early")]
    stored = {sha256(p.read_bytes()) for p in files_under(tmp_path / "backups")}
    assert not stored & digests  # never a cut straddler as it is
    if kind == "physical":
        manifest = show_backup(uri, made[0].backup_id)
        assert manifest["kind"] == "physical"
    for backup, point in zip(made, ("now", "s", "early"), strict=True):
        name = f"back-{point}"
        restore_backup(store, uri, backup.backup_id, tenant=name)
        want = expected if point != "early" else at(store, "acme", "early")
        assert at(store, name, None) == want, point
        if point != "early":
            assert at(store, name, "s") == expected, point
    straddlers(store)  # the rewrite is still pending


# --- restores from the restored tenant ---------------------------------------------------


def test_a_restore_from_a_tenant_whose_rewrite_is_pending_names_resume_and_cancel(
    store: TableStore,
) -> None:
    build(store)
    outcome = instant(store)
    for attempt in (
        lambda: restore_tenant(store, "copy", "s", to="again", executor="local"),
        lambda: restore_table(store, "copy", "db.items", "s", to="db.items2", executor="local"),
        lambda: restore_database(store, "copy", "db", "s", to="db2", executor="local"),
        lambda: restore_tenant(store, "acme", "later", to="again", executor="local"),
    ):
        with pytest.raises(RestoreInProgress, match=rf"--resume {outcome.job_id}.*--cancel"):
            attempt()


@pytest.mark.parametrize("point", ["s", "early", "now"])
def test_a_full_verify_restore_from_the_restored_tenant_after_cancel(
    store: TableStore, point: str
) -> None:
    build(store)
    outcome = instant(store)
    cancel_restore(store, outcome.job_id)
    straddlers(store)  # cancelled: the tenant keeps reading through its cuts
    want = at(store, "copy", None if point == "now" else point)
    assert want == at(store, "acme", "s" if point == "now" else point)
    ts = store.now() if point == "now" else point
    for flag in (False, True):
        name = f"v-{point}-{str(flag).lower()}"
        done = restore_tenant(
            store, "copy", ts, to=name, executor="local", verify="full", instant=flag
        )
        assert done.tables_compared == len(TABLES)
        assert at(store, name, None) == want, (point, flag)
        # copy's cut members are reused as they are held (S <= the point): inherited
        # with their cut, never as whole objects
        inherited = {o.id: o.cut_ts for o in cut_members(store, name)}
        assert inherited.items() <= {o.id: o.cut_ts for o in cut_members(store, "copy")}.items()


def test_a_table_restored_from_the_tenant_after_cancel_reads_through_the_inherited_cut(
    store: TableStore,
) -> None:
    build(store)
    expected = at(store, "acme", "s")
    outcome = instant(store)
    cancel_restore(store, outcome.job_id)
    store.write("copy", "db.items", upserts=rows((1000, "copy's own")))
    store.create_snapshot("copy", "c1")
    store.write("copy", "db.items", deletes=keys(0))
    restore_table(store, "copy", "db.items", "c1", to="db.items2", executor="local")
    want = [*expected["items"], {"id": 1000, "v": "copy's own"}]
    assert store.read("copy", "db.items2").to_pylist() == want
    # the whole table restored into another tenant, instant and pending: cut twice
    store.create_tenant("third")
    late = restore_table(
        store, "copy", "db.items", "c1", to_tenant="third", instant=True, wait=False
    )
    assert store.read("third", "db.items").to_pylist() == want
    resume_restore(store, late.job_id)
    assert store.read("third", "db.items").to_pylist() == want
    # items2 reads copy's cut members through its base: once copy's own rows of
    # them end (copy compacts items) and the source compacts them away, only
    # that base reaches them, and GC keeps them
    inherited = {o.id for q, o in store.objects_of("copy") if q == "db.items2" and o.cut_ts}
    assert inherited
    store.compact("copy", "db.items", full=True, target_bytes=SMALL_OBJECTS)
    store.compact("acme", full=True, target_bytes=SMALL_OBJECTS)
    assert not {o.id for _, o in store.objects_of("acme")} & inherited
    assert not {o.id for q, o in store.objects_of("copy") if q == "db.items"} & inherited
    run_gc(store, dry_run=False, grace_us=0, allow_short_grace=True, compact=False)
    assert store.read("copy", "db.items2").to_pylist() == want
    assert store.read("third", "db.items").to_pylist() == want
    assert at(store, "copy", "s") == expected
    assert_live_keys_exist(store)
    # flattened into items2's own rows, or compacted (shadowing them), they are
    # still read through their cuts
    flatten_chains(store.catalog, max_depth=0)
    assert {o.id for q, o in store.objects_of("copy") if q == "db.items2" and o.cut_ts} == inherited
    assert store.read("copy", "db.items2").to_pylist() == want
    store.compact("copy", "db.items2", full=True, target_bytes=SMALL_OBJECTS)
    assert store.read("copy", "db.items2").to_pylist() == want
    run_gc(store, dry_run=False, grace_us=0, allow_short_grace=True, compact=False)
    assert store.read("copy", "db.items").to_pylist() == want[1:]
    assert_live_keys_exist(store)


# --- writes -----------------------------------------------------------------------------


def test_a_delete_counts_only_keys_the_restored_table_holds(
    cli_store: TableStore, rewind: Callable[..., Result], tmp_path: Path
) -> None:
    build(cli_store)
    expected = at(cli_store, "acme", "s")
    instant(cli_store)
    held = {r["id"] for r in expected["items"]}
    # 4: updated after s; 6: deleted after s; 1: new after s (only in the straddler);
    # 2: deleted before s; 8: updated before s; 16: updated before s, deleted after;
    # 999: never there
    asked = [4, 6, 1, 2, 8, 16, 999]
    present = [k for k in asked if k in held]
    assert present == [4, 6, 8, 16]
    result = cli_store.write("copy", "db.items", deletes=keys(*asked), only_present=True)
    assert result.deleted == len(present)
    assert {r["id"] for r in cli_store.read("copy", "db.items").to_pylist()} == held - set(asked)
    # the CLI's delete: odd keys of the log exist only after s
    (tmp_path / "keys.csv").write_text("id\n1\n3\n4\n6\n")
    done = as_json(rewind("--json", "delete", "copy", "db.log", "--keys", tmp_path / "keys.csv"))
    assert (done["deleted"], done["keys_given"]) == (2, 4)
    (tmp_path / "odd.csv").write_text("id\n5\n7\n")
    none = ok(rewind("delete", "copy", "db.log", "--keys", tmp_path / "odd.csv")).stdout
    assert "deleted 0 keys" in none
    assert [r["id"] for r in cli_store.read("copy", "db.log").to_pylist()] == [
        r["id"] for r in expected["log"] if r["id"] not in (4, 6)
    ]


# --- GC ---------------------------------------------------------------------------------


def bucket(store: TableStore) -> set[str]:
    return {info.key for info in store.objects.list("tenants/")}


def test_gc_keeps_what_cut_members_read_and_collects_the_straddlers_after_the_swap(
    store: TableStore,
) -> None:
    built = build(store)
    expected = at(store, "acme", "s")
    # ``keep`` inherits acme's db.other as of ``later``: it reaches those straddlers
    store.create_tenant("keep")
    restore_table(store, "acme", "db.other", "later", to_tenant="keep", executor="local")
    kept_rows = store.read("keep", "db.other").to_pylist()
    assert kept_rows == store.read("acme", "db.other", as_of="later").to_pylist()
    outcome = instant(store)
    cut = straddlers(store)
    # the source moves on: its own rows of the straddlers end
    store.compact("acme", full=True, target_bytes=10 * SMALL_OBJECTS)
    assert not {o.id for _, o in store.objects_of("acme")} & {o.id for o in cut}
    report = run_gc(
        store, dry_run=False, grace_us=0, orphan_grace_us=0, allow_short_grace=True, compact=False
    )
    assert {o.key for o in cut} <= bucket(store), report.collected
    assert at(store, "copy", None) == expected
    assert at(store, "copy", "early") == at(store, "acme", "early")
    assert_live_keys_exist(store)

    resume_restore(store, outcome.job_id)
    assert cut_members(store, "copy") == []
    assert at(store, "copy", None) == expected
    run_gc(store, dry_run=False, grace_us=0, allow_short_grace=True, compact=False)
    left = bucket(store)
    other = {o.key for o in cut if o.key.split("/")[2] == table_id(store, "acme", "other")}
    assert other and other <= left  # keep's base still reaches them
    gone = {o.key for o in cut} - other
    assert gone and not gone & left  # no view reaches them any more
    assert at(store, "copy", None) == expected
    assert store.read("keep", "db.other").to_pylist() == kept_rows
    assert at(store, "acme", "s") == expected
    assert store.snapshot("acme", "s").ts == built.s
    assert_live_keys_exist(store)


def test_a_gc_that_compacts_merges_cut_members_into_rows_up_to_s(store: TableStore) -> None:
    built = build(store)
    expected = at(store, "acme", "s")
    outcome = instant(store)
    before = cut_members(store, "copy")
    store.compact("acme", full=True, target_bytes=10 * SMALL_OBJECTS)
    store.drop_snapshot("copy", "early")  # versions only it needed: GC compacts items, other
    report = run_gc(store, dry_run=False, grace_us=0, allow_short_grace=True)
    compacted = {item.table.tenant_id for item, _ in report.compacted}
    assert store.tenant("copy").id in compacted
    assert len(cut_members(store, "copy")) < len(before)
    assert_holds_rows_up_to(store, "copy", built.s)
    assert at(store, "copy", None) == expected
    assert at(store, "copy", "s") == expected
    assert_live_keys_exist(store)
    resume_restore(store, outcome.job_id)
    run_gc(store, dry_run=False, grace_us=0, allow_short_grace=True, compact=False)
    assert at(store, "copy", None) == expected
    assert_live_keys_exist(store)


def table_id(store: TableStore, tenant: str, table: str) -> str:
    return store.plan_read(tenant, f"db.{table}").table.id


def assert_live_keys_exist(store: TableStore) -> None:
    """Every object a live tenant's table holds is in the bucket."""
    listed = bucket(store)
    for tenant in store.tenants():
        for qualified, record in store.objects_of(tenant.ref):
            assert record.key in listed, (tenant.name, qualified, record.key)


# --- storage ----------------------------------------------------------------------------


def test_storage_counts_cut_members_as_the_tables_objects_shared_with_the_source(
    cli_store: TableStore, rewind: Callable[..., Result]
) -> None:
    build(cli_store)
    instant(cli_store)
    cut = straddlers(cli_store)
    report = storage(cli_store.catalog, cli_store.objects, "copy")
    by_table = {t.table: t for t in report.tables}
    for table in TABLES:
        mine = [o for q, o in cli_store.objects_of("copy") if q == f"db.{table}"]
        entry = by_table[f"db.{table}"]
        assert entry.objects == len(mine)
        assert entry.bytes == entry.shared_bytes == sum(o.bytes for o in mine)
        assert entry.history_only_bytes is not None and 0 <= entry.history_only_bytes <= entry.bytes
    assert report.bytes == sum(o.bytes for o in cut)
    shown = as_json(rewind("--json", "storage", "copy"))
    assert shown["bytes"] == report.bytes and shown["shared_bytes"] == report.shared_bytes
    # the source shares them with copy
    source = storage(cli_store.catalog, cli_store.objects, "acme")
    assert source.shared_bytes == source.bytes == report.bytes


def test_gc_measures_a_cut_table_by_the_rows_it_holds(store: TableStore) -> None:
    """GC's measure (``rewind gc``: N of M rows reclaimable, the fraction that
    decides a compaction) counts a cut member's rows up to its cut: the same as
    for the tenant a rewrite-first restore makes."""
    build(store)
    restore_tenant(store, "acme", "s", to="plain", executor="local")
    instant(store)
    for tenant in ("plain", "copy"):
        store.drop_snapshot(tenant, "early")  # versions only it needed become reclaimable
    found = {(r.tenant, r.table.qualified): r for r in scan(store.catalog, store.objects)}
    for table in TABLES:
        plain, cut = found[("plain", f"db.{table}")], found[("copy", f"db.{table}")]
        assert (cut.rows, cut.reclaimable_rows) == (plain.rows, plain.reclaimable_rows), table
        assert cut.fraction == plain.fraction, table
    assert found[("copy", "db.items")].fraction >= 0.2
    report = storage(store.catalog, store.objects, "copy")
    for entry in report.tables:
        assert entry.history_only_bytes is not None
        assert (entry.history_only_bytes > 0) == (entry.table != "db.log")


# --- table and database instant restores --------------------------------------------------


def same_as_source_at_s(store: TableStore, tenant: str, tables: dict[str, str], spark: Any) -> None:
    """Each restored table (name → source table) reads, through every reader, as the
    source at s (Spark, if given, reads the first: a Spark job costs seconds)."""
    first = next(iter(tables))
    for restored, source in tables.items():
        want = store.read("acme", f"db.{source}", as_of="s")
        database, name = restored.split(".")
        assert store.read(tenant, f"{database}.{name}").to_pylist() == want.to_pylist(), restored
        arrow = store.read_arrow(tenant, restored, keys=(20, 90), columns=["v"]).read_all()
        assert arrow.to_pylist() == [{"v": r["v"]} for r in want.to_pylist() if 20 <= r["id"] <= 90]
        assert (
            to_duckdb(store, tenant, restored).order("id").fetch_arrow_table().to_pylist()
            == want.to_pylist()
        )
        if spark is not None and restored == first:
            frame = read_as_of(spark, tenant, restored, store=store).toArrow().to_pylist()
            assert sorted(frame, key=lambda r: r["id"]) == want.to_pylist(), restored


def test_instant_table_and_database_restores_read_as_the_source_at_s_until_swapped(
    store: TableStore, spark: Any
) -> None:
    build(store)
    store.create_tenant("elsewhere")
    cases: list[tuple[Callable[[], RestoreOutcome], str, dict[str, str]]] = [
        (
            lambda: restore_table(
                store, "acme", "db.items", "s", to="db.items_s", instant=True, wait=False
            ),
            "acme",
            {"db.items_s": "items"},
        ),
        (
            lambda: restore_table(
                store, "acme", "db.log", "s", to_tenant="elsewhere", instant=True, wait=False
            ),
            "elsewhere",
            {"db.log": "log"},
        ),
        (
            lambda: restore_database(store, "acme", "db", "s", to="db_s", instant=True, wait=False),
            "acme",
            {f"db_s.{t}": t for t in TABLES},
        ),
    ]
    for start, tenant, tables in cases:
        outcome = start()
        assert outcome.rewrite_pending and outcome.instant
        assert cut_members(store, tenant)
        same_as_source_at_s(store, tenant, tables, spark)
        resume_restore(store, outcome.job_id)
        assert cut_members(store, tenant) == []
        same_as_source_at_s(store, tenant, tables, None)
    # in place: the table's content becomes s's; cancelled, it stays cut and correct
    outcome = restore_database(store, "acme", "db", "s", instant=True, wait=False)
    same_as_source_at_s(store, "acme", {f"db.{t}": t for t in TABLES}, spark)
    cancel_restore(store, outcome.job_id)
    assert cut_members(store, "acme")
    same_as_source_at_s(store, "acme", {f"db.{t}": t for t in TABLES}, None)
