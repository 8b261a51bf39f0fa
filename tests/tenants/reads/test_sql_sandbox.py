"""What ``rewind query TENANT --sql`` and ``to_duckdb`` can reach: the tables at the
asked time, and nothing else (docs/promises.md, "Sandbox").

A query is a string a user (or an attacker holding one tenant's operator
rights) types: the worst it may do is fail with one clean line. The store is
a real one on files (a SQLite catalog and a ``file://`` warehouse under the
test's folder), so a check of that folder sees anything a statement wrote.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

from engine.cli.app import app
from tenants.catalog.query_views import relation_name
from tenants.errors import InvalidArgument
from tenants.reads.interop import duckdb_sql, to_duckdb
from tenants.schema import TableSchema
from tenants.store import TableStore
from tests.helpers.cli import as_json, ok
from tests.helpers.paths import ROOT

# Not the catalog's behaviour: on SQLite alone (conftest.py, one_catalog).
pytestmark = pytest.mark.one_catalog

ROWS = TableSchema.of([("id", "int64"), ("v", "string")], ["id"])


class Local:
    """A store on files under one folder, and the CLI over the same store."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.catalog = folder / "catalog.db"
        self.warehouse = folder / "warehouse"
        self.runner = CliRunner()

    @contextmanager
    def store(self) -> Iterator[TableStore]:
        opened = TableStore.open(f"sqlite:///{self.catalog}", f"file://{self.warehouse}")
        try:
            yield opened
        finally:
            opened.close()

    def __call__(self, *args: str) -> Result:
        base = ["--catalog", f"sqlite:///{self.catalog}", "--warehouse", f"file://{self.warehouse}"]
        return self.runner.invoke(app, [*base, *args])

    def files(self) -> dict[str, str]:
        """Every file under the folder and a digest of its bytes."""
        return {
            str(p.relative_to(self.folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(self.folder.rglob("*"))
            if p.is_file()
        }


def put(store: TableStore, tenant: str, database: str, table: str, values: list[str]) -> None:
    store.create_table(tenant, f"{database}.{table}", ROWS)
    rows = pa.table({"id": list(range(len(values))), "v": values})
    store.write(tenant, f"{database}.{table}", upserts=rows.cast(ROWS.arrow()))


@pytest.fixture
def local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Local]:
    """Tenant ``acme`` with shop.items (a, b); tenant ``beta`` with crm.secrets.
    The working directory is the store's folder: a relative path lands there."""
    monkeypatch.chdir(tmp_path)
    here = Local(tmp_path)
    with here.store() as store:
        store.create_tenant("acme")
        put(store, "acme", "shop", "items", ["a", "b"])
        store.create_tenant("beta")
        put(store, "beta", "crm", "secrets", ["hunter2"])
    yield here


def attacks(local: Local) -> list[str]:
    """Statements that would write a file, read one, change a setting or load code."""
    catalog, warehouse, folder = local.catalog, local.warehouse, local.folder
    return [
        f"COPY (SELECT * FROM shop.items) TO '{catalog}'",
        f"COPY shop.items TO '{folder}/out.csv'",
        "COPY shop.items TO 'relative.csv'",
        f"SELECT * FROM shop.items, read_parquet('{warehouse}/**/*.parquet')",
        f"SELECT * FROM shop.items, '{warehouse}/**/*.parquet'",
        "SELECT * FROM shop.items, read_csv('/etc/passwd')",
        f"SELECT * FROM shop.items, read_text('{catalog}')",
        "SELECT * FROM shop.items, glob('/*')",
        "SELECT getenv('HOME') AS home, * FROM shop.items",
        f"SELECT * FROM shop.items, query('COPY (SELECT 1) TO ''{folder}/q.csv''')",
        "SELECT * FROM shop.items, duckdb_extensions()",
        "SELECT * FROM shop.items, store",  # a Python variable, by replacement scan
        "SET enable_external_access = true",
        "RESET lock_configuration",
        f"ATTACH '{folder}/other.db' AS other",
        "INSTALL httpfs",
        "LOAD httpfs",
        f"EXPORT DATABASE '{folder}/exported'",
        "CREATE TABLE shop.copy AS SELECT * FROM shop.items",
        "DROP VIEW shop.items",
        "SET VARIABLE x = 1",
        "PRAGMA version",
        "PRAGMA enable_profiling",
        "CALL pragma_version()",
        "CHECKPOINT",
        "EXPLAIN SELECT * FROM shop.items",
        "SELECT * FROM shop.items; SELECT 1",
        "",
        "  -- only a comment",
    ]


def test_a_sql_query_can_reach_no_file_setting_extension_or_other_tenant(local: Local) -> None:
    before = local.files()
    for attack in attacks(local):
        done = local("query", "acme", "--sql", attack)
        assert done.exit_code == 1, (attack, done.output)
        assert len(done.stderr.strip().splitlines()) == 1, (attack, done.stderr)
        assert "hunter2" not in done.output and "root:" not in done.output, attack
        failed = local("--json", "query", "acme", "--sql", attack)
        assert failed.exit_code == 1, (attack, failed.output)
        assert set(json.loads(failed.stdout)) == {"error"}, (attack, failed.stdout)
        assert local.files() == before, attack
    # The catalog still works, and the query the attacks dressed up still runs.
    count = "SELECT count(*) AS n FROM shop.items"
    assert as_json(local("--json", "query", "acme", "--sql", count)) == [{"n": 2}]
    assert as_json(local("--json", "query", "beta", "crm.secrets")) == [{"id": 0, "v": "hunter2"}]


def test_a_refused_statement_says_which_statements_a_query_may_be(local: Local) -> None:
    for statement, why in [
        ("COPY shop.items TO 'x.csv'", "COPY"),
        ("SELECT 1 FROM shop.items; SELECT 2", "one statement"),
        ("", "one statement"),
        ("PRAGMA version", "PRAGMA"),
        ("EXPLAIN SELECT * FROM shop.items", "EXPLAIN"),
    ]:
        done = local("query", "acme", "--sql", statement)
        assert done.exit_code == 1 and why in done.stderr and "SELECT" in done.stderr, done.stderr


def test_duckdb_sql_refuses_a_writing_statement_before_touching_the_callers_connection(
    local: Local,
) -> None:
    connection = duckdb.connect()
    views = connection.sql("SELECT count(*) FROM duckdb_views() WHERE NOT internal").fetchall()
    with local.store() as store:
        with pytest.raises(InvalidArgument, match="only a single read-only query"):
            duckdb_sql(
                store, "acme", "CREATE TABLE t AS SELECT * FROM shop.items", connection=connection
            )
        assert (
            connection.sql("SELECT count(*) FROM duckdb_views() WHERE NOT internal").fetchall()
            == views
        )
        # A connection the caller passes is the caller's: Rewind changes none of its settings.
        assert duckdb_sql(store, "acme", "FROM shop.items", connection=connection).fetchall() == [
            (0, "a"),
            (1, "b"),
        ]
        setting = "SELECT current_setting('enable_external_access')"
        assert connection.sql(setting).fetchall() == [(True,)]


def test_to_duckdb_on_its_own_connection_reads_no_file(local: Local) -> None:
    with local.store() as store:
        relation = to_duckdb(store, "acme", "shop.items")
        assert relation.query("t", "SELECT v FROM t ORDER BY id").fetchall() == [("a",), ("b",)]
        with pytest.raises(duckdb.PermissionException, match="disabled by configuration"):
            relation.query("t", "SELECT * FROM t, read_csv('/etc/passwd')").fetchall()
        with pytest.raises(InvalidArgument, match="connection"):
            to_duckdb(store, "acme", "shop.items", name="items")
        # A view is made on the caller's connection, whose settings stay the caller's.
        mine = duckdb.connect()
        to_duckdb(store, "acme", "shop.items", connection=mine, name="items")
        assert mine.sql("SELECT count(*) FROM items").fetchall() == [(2,)]
        setting = "SELECT current_setting('enable_external_access')"
        assert mine.sql(setting).fetchall() == [(True,)]


# Item 2: names DuckDB would confuse.

ODD = st.text(
    alphabet=st.sampled_from(list("aAbB_.\"'` ßSſKk\u212a\u0130i\u00e9e\u0301")), max_size=8
)


@st.composite
def look_alikes(draw: st.DrawFn) -> tuple[tuple[str, str], tuple[str, str]]:
    """Two (database, table) pairs, the second often the first joined and split
    again elsewhere, or in other case: what a careless encoding confuses."""
    database, table = draw(ODD), draw(ODD)
    how = draw(st.sampled_from(["any", "resplit", "case"]))
    if how == "resplit":
        joined = f"{database}__{table}"
        cut = draw(st.integers(0, len(joined)))
        return (database, table), (joined[:cut].removesuffix("__"), joined[cut:].removeprefix("__"))
    if how == "case":
        return (database, table), (
            database.swapcase(),
            draw(st.sampled_from([table, table.upper()])),
        )
    return (database, table), (draw(ODD), draw(ODD))


@settings(max_examples=500, deadline=None)
@given(look_alikes())
def test_hidden_relation_names_are_injective_even_where_duckdb_ignores_case(
    pairs: tuple[tuple[str, str], tuple[str, str]],
) -> None:
    (db1, table1), (db2, table2) = pairs
    one, two = relation_name(db1, table1), relation_name(db2, table2)
    if (db1, table1) != (db2, table2):
        assert one != two
        assert one.casefold() != two.casefold()
        assert one.lower() != two.lower() and one.upper() != two.upper()
    else:
        assert one == two


def test_tables_whose_joined_names_look_alike_each_show_their_own_rows(local: Local) -> None:
    with local.store() as store:
        put(store, "acme", "a", "b__c", ["first"])
        put(store, "acme", "a__b", "c", ["second"])
        both = "SELECT 'a.b__c' AS t, v FROM a.b__c UNION ALL SELECT 'a__b.c', v FROM a__b.c"
        assert sorted(duckdb_sql(store, "acme", both).fetchall()) == [
            ("a.b__c", "first"),
            ("a__b.c", "second"),
        ]
        assert duckdb_sql(store, "acme", "SELECT v FROM a.b__c").fetchall() == [("first",)]
        assert duckdb_sql(store, "acme", "SELECT v FROM a__b.c").fetchall() == [("second",)]


def test_a_name_reads_the_table_of_exactly_that_case_and_two_that_duckdb_confuses_are_refused(
    local: Local,
) -> None:
    with local.store() as store:
        put(store, "acme", "shop", "Orders", ["upper"])
        put(store, "acme", "shop", "orders", ["lower"])
        assert duckdb_sql(store, "acme", "SELECT v FROM shop.Orders").fetchall() == [("upper",)]
        assert duckdb_sql(store, "acme", "SELECT v FROM shop.orders").fetchall() == [("lower",)]
        assert duckdb_sql(store, "acme", 'SELECT v FROM "shop"."Orders"').fetchall() == [("upper",)]
        with pytest.raises(InvalidArgument, match="differ only in case"):
            duckdb_sql(store, "acme", "SELECT * FROM shop.Orders, shop.orders")
        with pytest.raises(InvalidArgument, match="differ only in case"):
            duckdb_sql(store, "acme", "SELECT * FROM shop.items, SHOP.items")
        # A name in another form that DuckDB would resolve to a registered view.
        with pytest.raises(InvalidArgument, match="database.table"):
            duckdb_sql(store, "acme", "SELECT * FROM shop.orders, memory.shop.Orders")


NAME_PART = st.text(alphabet="aA_", min_size=1, max_size=5)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.tuples(NAME_PART, NAME_PART), st.tuples(NAME_PART, NAME_PART))
def test_a_query_over_two_tables_never_shows_one_under_the_others_name(
    local: Local, one: tuple[str, str], two: tuple[str, str]
) -> None:
    if one == two:
        return
    with local.store() as store:
        tenant = "t" + hashlib.sha256(repr((one, two)).encode()).hexdigest()[:12]
        if tenant in {t.name for t in store.tenants()}:
            return  # hypothesis replays an example: its tenant is already there
        store.create_tenant(tenant)
        put(store, tenant, *one, ["one"])
        put(store, tenant, *two, ["two"])
        query = (
            f'SELECT \'one\' AS t, v FROM "{one[0]}"."{one[1]}" '
            f'UNION ALL SELECT \'two\', v FROM "{two[0]}"."{two[1]}"'
        )
        if (one[0].casefold(), one[1].casefold()) == (two[0].casefold(), two[1].casefold()):
            with pytest.raises(InvalidArgument, match="differ only in case"):
                duckdb_sql(store, tenant, query)
        else:
            rows = sorted(duckdb_sql(store, tenant, query).fetchall())
            assert rows == [("one", "one"), ("two", "two")]


# Item 3: every outcome is rows or one clean error.


def big(local: Local, rows: int) -> None:
    with local.store() as store:
        store.create_table("acme", "shop.big", ROWS)
        values = pa.table({"id": list(range(rows)), "v": ["x"] * rows}).cast(ROWS.arrow())
        store.write("acme", "shop.big", upserts=values)


def test_a_query_failing_after_rows_have_streamed_ends_with_one_error(local: Local) -> None:
    rows = 300_000  # past two of DuckDB's batches, so rows stream before the error
    big(local, rows)
    late = f"SELECT CASE WHEN id >= {rows - 1000} THEN error('boom') ELSE id END AS v FROM shop.big"
    failed = local("--json", "query", "acme", "--sql", late)
    assert failed.exit_code == 1, failed.output
    lines = failed.stdout.splitlines()
    assert json.loads(lines[-1])["error"]["message"].endswith("boom"), lines[-1]
    streamed = json.loads("\n".join(lines[:-1]))  # the rows before the error: a whole array
    assert isinstance(streamed, list) and streamed, "the error came before any row streamed"
    assert streamed[:2] == [{"v": 0}, {"v": 1}]
    # In the table view rows are held, not printed, until the result is whole.
    early = "SELECT error('boom') AS v FROM shop.items"
    text = local("query", "acme", "--sql", early, "--limit", str(rows))
    assert text.exit_code == 1 and text.stderr.strip().splitlines() == [
        "error: the query failed: Invalid Input Error: boom"
    ], text.output


def test_a_process_whose_query_failed_mid_scan_exits_1_not_an_abort(local: Local) -> None:
    """A query that fails while DuckDB scans Rewind's Python stream left Arrow's
    read-ahead thread inside the stream as Python finalized: the process printed
    its error, then aborted (PyGILState_Release, exit -6) in 9 runs of 10, or hung.
    Streams read on foreign threads are closed at exit (tenants.reads.arrow)."""
    big(local, 20_000)
    failing = "SELECT CASE WHEN id >= 5000 THEN error('boom') ELSE id END AS v FROM shop.big"
    base = ["--catalog", f"sqlite:///{local.catalog}", "--warehouse", f"file://{local.warehouse}"]
    for _ in range(4):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "engine.cli.app",
                *base,
                "--json",
                "query",
                "acme",
                "--sql",
                failing,
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 1, done.stderr[-2000:]
        assert json.loads(done.stdout.splitlines()[-1])["error"]["message"].endswith("boom")
        assert done.stderr == ""


# Run as ``python -c SCRIPT catalog warehouse mode``: a to_duckdb user's process.
TO_DUCKDB_SCRIPT = """
import sys
import duckdb
from tenants.reads.interop import to_duckdb
from tenants.store import TableStore

store = TableStore.open(sys.argv[1], sys.argv[2])
relation = to_duckdb(store, "acme", "shop.big")
if sys.argv[3] == "failed":
    failing = "SELECT CASE WHEN id >= 5000 THEN error('boom') ELSE id END AS v FROM t"
    try:
        relation.query("t", failing).fetchall()
    except duckdb.Error as e:
        print(str(e).splitlines()[0])
else:  # a scan read in part and left open: its stream is still held at exit
    reader = relation.to_arrow_reader(1000)
    print(reader.read_next_batch().num_rows)
"""


@pytest.mark.parametrize(("mode", "printed"), [("failed", "boom"), ("left open", "1000")])
def test_a_to_duckdb_process_exits_cleanly_with_a_scan_failed_or_left_open(
    local: Local, mode: str, printed: str
) -> None:
    """The hazard is the stream's, not the CLI's: DuckDB scans Rewind's stream
    through pyarrow's dataset scanner, whose thread reads ahead after the scan
    stops. A failed scan aborted (or hung) its process at exit; one left open
    must neither abort nor keep the process from ending."""
    big(local, 20_000)
    for _ in range(3):
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                TO_DUCKDB_SCRIPT,
                f"sqlite:///{local.catalog}",
                f"file://{local.warehouse}",
                mode,
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.strip().endswith(printed), done.stdout
        assert done.stderr == ""


def test_a_huge_limit_and_a_statement_without_rows_end_cleanly(local: Local) -> None:
    count = "SELECT v FROM shop.items ORDER BY id"
    for flags in (["--limit", str(10**30)], ["--limit", str(2**63 - 1)]):
        assert as_json(local("--json", "query", "acme", "--sql", count, *flags)) == [
            {"v": "a"},
            {"v": "b"},
        ]
        assert "2 rows" in ok(local("query", "acme", "--sql", count, *flags)).stdout
    negative = local("query", "acme", "--sql", count, "--limit", "-1")
    assert negative.exit_code == 1 and len(negative.stderr.strip().splitlines()) == 1
    for quiet in ("SET threads = 1", "BEGIN", "USE shop"):
        done = local("--json", "query", "acme", "--sql", quiet)
        assert done.exit_code == 1 and set(json.loads(done.stdout)) == {"error"}, done.output


def test_rewind_query_counts_one_row_and_many_rows(local: Local) -> None:
    one = "SELECT count(*) AS n FROM shop.items"
    assert "1 row," in ok(local("query", "acme", "--sql", one)).stdout
    shown = ok(local("query", "acme", "--sql", "FROM shop.items", "--limit", "1")).stdout
    assert "first 1 row, more follow" in shown, shown
    assert "2 rows," in ok(local("query", "acme", "--sql", "FROM shop.items")).stdout
    assert "1 row," in ok(local("query", "beta", "crm.secrets")).stdout
    assert "0 rows," in ok(local("query", "acme", "--sql", "FROM shop.items WHERE id < 0")).stdout
