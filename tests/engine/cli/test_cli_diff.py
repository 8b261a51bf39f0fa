"""``rewind diff``, ``rewind revert`` and ``restore-table --keys/--where`` as a user runs
them: see the damage of a runaway delete, undo just it, keep every later write.

Commands run in-process (typer's CliRunner) against a SQLite catalog file and a
moto bucket; "nothing changed" is every catalog row and every bucket key, before
and after (tests/helpers/cli.py: catalog_and_bucket).
"""

from __future__ import annotations

import json
import re
import shlex
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner, Result

from engine.cli import confirm
from engine.cli.app import app
from tenants.objectstore.embedded import EmbeddedS3
from tests.helpers.cli import as_json, catalog_and_bucket, fails, ok

# Not the catalog's behaviour: on SQLite alone (conftest.py, one_catalog).
pytestmark = pytest.mark.one_catalog

UNKNOWN_TS = "1795600800000000"


@dataclass(frozen=True)
class World:
    """Tenant ``acme`` (PITR 72h): ``db.t`` rows 1..5 (a..e) and ``db.u``; snapshot
    ``mon``; a runaway delete of 1, 2, 3 (commit ``bad``); snapshot ``tue``; a
    later good write of 9 (commit ``good``). Tenant ``bare`` (no PITR, no
    snapshot) with two writes to its ``db.t``."""

    run: Callable[..., Result]
    folder: Path
    warehouse: str
    state: Callable[[], Any]
    bad: str  # the runaway delete's commit ts
    good: str  # the later write's commit ts
    create: str  # db.t's create commit ts
    other: str  # db.u's load commit ts
    bare_first: str  # bare's first write ts, no longer protected

    def rewind(self, *args: Any, input: str | None = None) -> Result:
        return self.run(*map(str, args), input=input)

    def ids(self, tenant: str = "acme", table: str = "db.t") -> dict[int, Any]:
        rows = as_json(self.rewind("--json", "query", tenant, table))
        return {r["id"]: r.get("v", r.get("w")) for r in rows}

    def commits(self) -> list[dict[str, Any]]:
        return as_json(self.rewind("history", "acme", "--commits", "--json"))  # type: ignore[no-any-return]

    def csv(self, name: str, text: str) -> Path:
        path = self.folder / name
        path.write_text(text)
        return path


def make_world(catalog_uri: str, warehouse: str, s3_server: EmbeddedS3, folder: Path) -> World:
    runner = CliRunner()

    def run(*args: str, input: str | None = None) -> Result:
        return runner.invoke(
            app, ["--catalog", catalog_uri, "--warehouse", warehouse, *args], input=input
        )

    bucket = warehouse[len("s3://") :].split("/")[0]

    def state() -> Any:
        return catalog_and_bucket(catalog_uri, s3_server, bucket)

    def write(name: str, text: str) -> str:
        (folder / name).write_text(text)
        return str(folder / name)

    def newest(tenant: str) -> str:
        return str(as_json(run("history", tenant, "--commits", "--json"))[0]["ts"])

    ok(run("tenant", "create", "acme"))
    ok(run("pitr", "set", "acme", "72h"))
    ok(run("table", "create", "acme", "db.t", "-c", "id:int64", "-c", "v:string", "-k", "id"))
    create = newest("acme")
    ok(run("table", "create", "acme", "db.u", "-c", "id:int64", "-c", "v:string", "-k", "id"))
    rows = write("rows.csv", "id,v\n1,a\n2,b\n3,c\n4,d\n5,e\n")
    ok(run("load", "acme", "db.u", rows))
    other = newest("acme")
    ok(run("load", "acme", "db.t", rows))
    ok(run("snapshot", "create", "acme", "mon"))
    ok(run("delete", "acme", "db.t", "--keys", write("bad.csv", "id\n1\n2\n3\n")))
    bad = newest("acme")
    ok(run("snapshot", "create", "acme", "tue"))
    ok(run("load", "acme", "db.t", write("good.csv", "id,v\n9,z\n")))
    good = newest("acme")

    ok(run("tenant", "create", "bare"))
    ok(run("table", "create", "bare", "db.t", "-c", "id:int64", "-c", "v:string", "-k", "id"))
    ok(run("load", "bare", "db.t", rows))
    bare_first = newest("bare")
    ok(run("load", "bare", "db.t", write("again.csv", "id,v\n2,B\n")))
    made = World(run, folder, warehouse, state, bad, good, create, other, bare_first)
    assert made.ids() == {4: "d", 5: "e", 9: "z"}
    return made


@pytest.fixture
def world(uris: tuple[str, str], s3_server: EmbeddedS3, tmp_path: Path) -> World:
    """A world of its own, for a test that writes."""
    return make_world(*uris, s3_server, tmp_path)


@pytest.fixture(scope="module")
def seen(s3_server: EmbeddedS3, tmp_path_factory: pytest.TempPathFactory) -> World:
    """One world shared by the tests that only read, or are refused (each checks
    that it changed nothing), made once: a world costs a few seconds."""
    folder = tmp_path_factory.mktemp("diff")
    bucket = f"rewind-diff-{uuid.uuid4().hex[:12]}"
    s3_server.create_bucket(bucket)
    return make_world(f"sqlite:///{folder / 'catalog.db'}", f"s3://{bucket}/wh", s3_server, folder)


def json_lines(result: Result) -> Any:
    """The diff's ``--json``: one document (rows one per line), parsed whole."""
    return json.loads(ok(result).stdout)


# 1. The README-tour story


def test_diff_of_a_table_shows_the_runaway_delete_and_the_later_insert(seen: World) -> None:
    out = ok(seen.rewind("diff", "acme", "db.t", "--from", "mon")).stdout
    head = out.splitlines()[0]
    assert head.startswith("acme/db.t: 4 rows changed from ")
    assert head.endswith("(1 inserted, 0 updated, 3 deleted)")
    table = [line for line in out.splitlines() if line.startswith("│")]
    cells = [[c.strip() for c in line.strip("│").split("│")] for line in table]
    assert cells == [
        ["delete", "1", "a"],
        ["delete", "2", "b"],
        ["delete", "3", "c"],
        ["insert", "9", "z"],
    ]
    assert "4 rows" in out and "scanning" not in out

    document = json_lines(seen.rewind("diff", "acme", "db.t", "--from", "mon", "--json"))
    assert list(document) == ["tenant", "table", "from", "to", "read", "schema", "rows", "counts"]
    assert (document["tenant"], document["table"], document["read"]) == (
        "acme",
        "db.t",
        "change log",
    )
    assert document["schema"] == {"added": [], "dropped": [], "retyped": []}
    assert document["from"]["ts"] < int(seen.bad) <= int(seen.good) <= document["to"]["ts"]
    assert document["rows"] == [
        {"__change": "delete", "id": 1, "before": {"v": "a"}, "after": None},
        {"__change": "delete", "id": 2, "before": {"v": "b"}, "after": None},
        {"__change": "delete", "id": 3, "before": {"v": "c"}, "after": None},
        {"__change": "insert", "id": 9, "before": None, "after": {"v": "z"}},
    ]
    assert document["counts"] == {"insert": 1, "update": 0, "delete": 3}


def test_diff_limit_shows_fewer_rows_but_whole_counts(seen: World) -> None:
    document = json_lines(
        seen.rewind("diff", "acme", "db.t", "--from", "mon", "--json", "--limit", "1")
    )
    assert [r["id"] for r in document["rows"]] == [1]
    assert document["counts"] == {"insert": 1, "update": 0, "delete": 3}
    assert (
        json_lines(seen.rewind("diff", "acme", "db.t", "--from", "mon", "--json", "--limit", "0"))[
            "rows"
        ]
        == []
    )
    out = ok(seen.rewind("diff", "acme", "db.t", "--from", "mon", "--limit", "1")).stdout
    assert "(1 inserted, 0 updated, 3 deleted)" in out and "first 1 of 4" in out
    assert re.search(r"│ delete │ 1 ", out) and "│ 2 " not in out
    out = ok(seen.rewind("diff", "acme", "db.t", "--from", "mon", "--limit", "0")).stdout
    assert "4 rows changed" in out and "│" not in out  # counts only, no table
    huge = "99999999999999999999"  # more than there is: every row
    assert len(world_rows(seen, "--limit", huge)) == 4


def world_rows(world: World, *extra: str) -> list[dict[str, Any]]:
    return json_lines(world.rewind("diff", "acme", "db.t", "--from", "mon", "--json", *extra))[  # type: ignore[no-any-return]
        "rows"
    ]


def test_diff_of_a_tenant_counts_each_changed_table(seen: World) -> None:
    out = ok(seen.rewind("diff", "acme", "--from", "mon")).stdout
    assert out.startswith("acme: changes from ")
    rows = [
        [c.strip() for c in line.strip("│").split("│")]
        for line in out.splitlines()
        if line.startswith("│")
    ]
    assert rows == [["db.t", "1", "0", "3", ""]]  # db.u did not change
    assert "1 table changed" in out
    summary = as_json(seen.rewind("diff", "acme", "--from", "mon", "--json"))
    assert summary["tenant"] == "acme" and summary["from"]["ts"] < int(seen.bad)
    assert summary["tables"] == [
        {
            "table": "db.t",
            "counts": {"insert": 1, "update": 0, "delete": 3},
            "created": False,
            "dropped": False,
            "schema": {"added": [], "dropped": [], "retyped": []},
            "read": "change log",
        }
    ]
    quiet = as_json(seen.rewind("diff", "acme", "--from", "mon", "--to", "mon", "--json"))
    assert quiet["tables"] == []
    assert (
        "no table changed" in ok(seen.rewind("diff", "acme", "--from", "tue", "--to", "tue")).stdout
    )


def test_find_the_bad_commit_revert_it_and_keep_the_later_write(world: World) -> None:
    commits = world.commits()
    found = next(c for c in commits if c["table"] == "db.t" and c["rows_deleted"])
    assert str(found["ts"]) == world.bad and found["rows_deleted"] == 3
    assert found["kind"] == "write"

    before = world.state()
    out = ok(world.rewind("revert", "acme", "db.t", "--commit", world.bad, "--dry-run")).stdout
    assert out.splitlines() == [
        f"acme/db.t: 3 rows changed by commit ts {world.bad}: 0 inserted, 0 updated, 3 deleted",
        "would put back 3 rows and delete 0 rows; nothing was written (--dry-run)",
    ]
    plan = as_json(
        world.rewind("revert", "acme", "db.t", "--commit", world.bad, "--dry-run", "--json")
    )
    assert plan["dry_run"] is True and plan["commit"] is None and plan["undo"] is None
    assert (plan["put_back"], plan["deleted"], plan["conflicts"]) == (3, 0, [])
    assert plan["from"]["ts"] == int(world.bad) - 1 and plan["to"]["ts"] == int(world.bad)
    assert world.state() == before

    done = as_json(world.rewind("revert", "acme", "db.t", "--commit", world.bad, "--yes", "--json"))
    assert done["dry_run"] is False and done["changes"] == {"insert": 0, "update": 0, "delete": 3}
    assert (done["put_back"], done["deleted"], done["conflicts"]) == (3, 0, [])
    revert_ts = done["commit"]["ts"]
    assert done["undo"] == f"rewind revert acme db.t --commit {revert_ts}"
    assert world.ids() == {1: "a", 2: "b", 3: "c", 4: "d", 5: "e", 9: "z"}
    assert world.ids("acme", "db.u") == {1: "a", 2: "b", 3: "c", 4: "d", 5: "e"}
    newest = world.commits()[0]
    assert (newest["ts"], newest["kind"], newest["rows_upserted"]) == (revert_ts, "write", 3)

    # The undo it printed, as a script would run it: the deletion is back.
    undo = shlex.split(done["undo"])
    assert undo[0] == "rewind"
    out = ok(world.rewind(*undo[1:], "--yes")).stdout
    assert f"3 rows changed by commit ts {revert_ts}: 3 inserted, 0 updated, 0 deleted" in out
    assert "reverted: put back 0 rows, deleted 3 rows in commit ts " in out
    assert world.ids() == {4: "d", 5: "e", 9: "z"}

    # And that undo reverts, too: the rows come back once more.
    again = re.search(r"undo it with `rewind (revert acme db\.t --commit (\d+))`", out)
    assert again is not None and int(again.group(2)) > revert_ts
    out = ok(world.rewind(*again.group(1).split(), "--yes")).stdout
    assert "reverted: put back 3 rows, deleted 0 rows" in out
    assert world.ids() == {1: "a", 2: "b", 3: "c", 4: "d", 5: "e", 9: "z"}


def test_revert_a_range_undoes_every_commit_in_it(world: World) -> None:
    plan = as_json(world.rewind("revert", "acme", "db.t", "--from", "mon", "--dry-run", "--json"))
    assert plan["changes"] == {"insert": 1, "update": 0, "delete": 3}
    assert (plan["put_back"], plan["deleted"]) == (3, 1)
    out = ok(world.rewind("revert", "acme", "db.t", "--from", "mon", "--to", "tue", "--yes")).stdout
    assert "the commits from ts " in out and "put back 3 rows, deleted 0 rows" in out
    assert world.ids() == {1: "a", 2: "b", 3: "c", 4: "d", 5: "e", 9: "z"}


# 2. Conflicts


def test_a_row_written_again_later_is_a_conflict(world: World) -> None:
    ok(world.rewind("load", "acme", "db.t", world.csv("back.csv", "id,v\n2,B\n")))
    count = len(world.commits())
    before = world.state()
    line = fails(
        world.rewind("revert", "acme", "db.t", "--commit", world.bad, "--yes"),
        r"revert of acme/db\.t \(.*\): 1 changed key\(s\) were written again later: 2; "
        r"nothing was written; --skip-conflicts",
    )
    assert line.count("\n") == 0
    result = world.rewind("revert", "acme", "db.t", "--commit", world.bad, "--yes", "--json")
    assert result.exit_code == 1 and result.stderr == ""
    error = json.loads(result.stdout)["error"]
    assert error["type"] == "RevertConflict" and error["conflicts"] == [{"id": 2}]
    assert "written again later" in error["message"]
    assert world.state() == before and len(world.commits()) == count

    plan = as_json(
        world.rewind(
            "revert",
            "acme",
            "db.t",
            "--commit",
            world.bad,
            "--skip-conflicts",
            "--dry-run",
            "--json",
        )
    )
    assert plan["conflicts"] == [{"id": 2}] and (plan["put_back"], plan["deleted"]) == (2, 0)
    assert plan["changes"] == {"insert": 0, "update": 0, "delete": 3}  # the commit's, whole
    assert world.state() == before

    out = ok(
        world.rewind("revert", "acme", "db.t", "--commit", world.bad, "--skip-conflicts", "--yes")
    ).stdout
    assert "1 row written again later, left as it is: 2" in out
    assert "reverted: put back 2 rows, deleted 0 rows" in out
    assert world.ids() == {1: "a", 2: "B", 3: "c", 4: "d", 5: "e", 9: "z"}
    assert len(world.commits()) == count + 1


def test_a_dry_run_lists_the_conflicts_and_writes_nothing(world: World) -> None:
    ok(world.rewind("load", "acme", "db.t", world.csv("back.csv", "id,v\n2,B\n")))
    before = world.state()
    out = ok(world.rewind("revert", "acme", "db.t", "--commit", world.bad, "--dry-run")).stdout
    assert "1 row written again later, would be left as it is: 2" in out
    assert "without --skip-conflicts the revert refuses them" in out
    assert "nothing was written (--dry-run)" in out
    assert world.state() == before


def test_restore_keys_takes_whole_rows_and_uses_their_keys(world: World) -> None:
    rows = world.csv("key_and_value.csv", "id,v\n1,ignored\n")
    ok(world.rewind("restore-table", "acme", "db.t", "--snapshot", "mon", "--keys", rows, "--yes"))
    assert world.ids()[1] == "a"


# 3. Schema changes between A and B


def test_diff_across_an_added_and_a_dropped_column(world: World) -> None:
    ok(world.rewind("table", "alter", "acme", "db.t", "--add", "w:int64", "--drop", "v"))
    ok(world.rewind("load", "acme", "db.t", world.csv("w.csv", "id,w\n4,40\n")))
    out = ok(world.rewind("diff", "acme", "db.t", "--from", "mon")).stdout
    lines = out.splitlines()
    assert lines[0].endswith("(1 inserted, 1 updated, 3 deleted)")
    assert lines[1] == "schema: added w; dropped v"
    assert re.search(r"┃ change ┃ id ┃ w +┃ v \(dropped\) ┃", out)
    assert re.search(r"│ update │ 4 +│ null → 40 │ d +│", out)

    document = json_lines(world.rewind("diff", "acme", "db.t", "--from", "mon", "--json"))
    assert document["schema"] == {"added": ["w"], "dropped": ["v"], "retyped": []}
    update = next(r for r in document["rows"] if r["id"] == 4)
    assert update == {
        "__change": "update",
        "id": 4,
        "before": {"w": None, "v": "d"},
        "after": {"w": 40, "v": None},
    }
    # Before the alter, the schema was the same at both ends.
    assert json_lines(
        world.rewind("diff", "acme", "db.t", "--from", "mon", "--to", "tue", "--json")
    )["schema"] == {"added": [], "dropped": [], "retyped": []}
    summary = as_json(world.rewind("diff", "acme", "--from", "mon", "--json"))
    assert summary["tables"][0]["schema"] == {"added": ["w"], "dropped": ["v"], "retyped": []}
    out = ok(world.rewind("diff", "acme", "--from", "mon")).stdout
    assert "added w; dropped v" in out


# 4. --to-parquet


def test_to_parquet_writes_the_change_set_as_one_file(seen: World) -> None:
    target = seen.folder / "out" / "x.parquet"
    target.parent.mkdir()
    uri = f"file://{target}"
    out = ok(seen.rewind("diff", "acme", "db.t", "--from", "mon", "--to-parquet", uri)).stdout
    assert "(1 inserted, 0 updated, 3 deleted); wrote 4 rows to " in out
    assert out.strip().endswith(uri)
    table = pq.read_table(target)
    assert table.schema.names == ["__change", "id", "before", "after"]
    assert table.schema.field("before").type == pa.struct([pa.field("v", pa.string())])
    assert table.to_pylist() == world_rows(seen)
    assert json.loads(table.schema.metadata[b"rewind.added"]) == []

    again = seen.folder / "out" / "y.parquet"
    written = as_json(
        seen.rewind(
            "diff", "acme", "db.t", "--from", "mon", "--to-parquet", f"file://{again}", "--json"
        )
    )
    assert written["file"] == f"file://{again}" and written["bytes"] == again.stat().st_size
    assert written["counts"] == {"insert": 1, "update": 0, "delete": 3}
    assert "rows" not in written
    assert pq.read_table(again).num_rows == 4
    # never over a file that is there, nor at a path without a scheme
    fails(
        seen.rewind("diff", "acme", "db.t", "--from", "mon", "--to-parquet", uri),
        r"the file exists; remove it or name another",
    )
    assert pq.read_table(target).to_pylist() == world_rows(seen)
    fails(
        seen.rewind("diff", "acme", "db.t", "--from", "mon", "--to-parquet", "rel/x.parquet"),
        r"invalid --to-parquet 'rel/x\.parquet': give a file URI",
    )


@pytest.mark.parametrize("place", ["x.parquet", "diffs/x.parquet"])
def test_to_parquet_inside_the_warehouse_is_refused(seen: World, place: str) -> None:
    before = seen.state()
    fails(
        seen.rewind(
            "diff", "acme", "db.t", "--from", "mon", "--to-parquet", f"{seen.warehouse}/{place}"
        ),
        r"inside the warehouse .*choose a place outside it",
    )
    assert seen.state() == before


# 5. Where the diff starts and ends


def test_before_a_commit_and_to_a_snapshot(seen: World) -> None:
    since = json_lines(seen.rewind("diff", "acme", "db.t", "--before", seen.bad, "--json"))
    assert since["from"]["ts"] == int(seen.bad) - 1
    assert since["rows"] == world_rows(seen)
    just = json_lines(
        seen.rewind("diff", "acme", "db.t", "--before", seen.bad, "--to", seen.bad, "--json")
    )
    assert [(r["__change"], r["id"]) for r in just["rows"]] == [
        ("delete", 1),
        ("delete", 2),
        ("delete", 3),
    ]
    to_tue = json_lines(
        seen.rewind("diff", "acme", "db.t", "--from", "mon", "--to", "tue", "--json")
    )
    assert to_tue["rows"] == just["rows"] and to_tue["counts"]["insert"] == 0
    after = json_lines(seen.rewind("diff", "acme", "db.t", "--from", "tue", "--json"))
    assert [(r["__change"], r["id"]) for r in after["rows"]] == [("insert", 9)]
    before = seen.state()
    fails(
        seen.rewind("diff", "acme", "db.t", "--from", "tue", "--to", "mon"),
        r"--from 'tue' .* is after --to 'mon' .*give the earlier time first",
    )
    fails(
        seen.rewind("diff", "acme", "db.t", "--before", seen.good, "--to", "mon"),
        r"is after --to 'mon'",
    )
    assert seen.state() == before


def test_to_now_explicitly_is_the_present(seen: World) -> None:
    document = json_lines(
        seen.rewind("diff", "acme", "db.t", "--from", "mon", "--to", "now", "--json")
    )
    assert document["rows"] == world_rows(seen)


@pytest.mark.parametrize("start", ["now", "-0s"])
def test_from_a_time_after_the_last_change_is_an_empty_diff(seen: World, start: str) -> None:
    out = ok(seen.rewind("diff", "acme", "db.t", "--from", start)).stdout
    assert "0 rows changed" in out


# 6. restore-table --keys / --where


def test_restore_some_keys_puts_back_only_those(world: World) -> None:
    keys = world.csv("keys.csv", "id\n1\n9\n")
    before = world.state()
    out = ok(
        world.rewind(
            "restore-table", "acme", "db.t", "--snapshot", "mon", "--keys", keys, "--dry-run"
        )
    ).stdout
    assert "2 of the rows asked for differ from " in out
    assert "1 gone since, 0 changed since, 1 added since" in out
    assert "would put back 1 row and delete 1 row; nothing was written (--dry-run)" in out
    assert world.state() == before
    done = as_json(
        world.rewind(
            "restore-table", "acme", "db.t", "--snapshot", "mon", "--keys", keys, "--yes", "--json"
        )
    )
    assert (done["put_back"], done["deleted"]) == (1, 1)
    assert done["undo"] == f"rewind revert acme db.t --commit {done['commit']['ts']}"
    assert world.ids() == {1: "a", 4: "d", 5: "e"}  # 2 and 3 still gone; 9 was not there at mon
    assert world.ids("acme", "db.u") == {1: "a", 2: "b", 3: "c", 4: "d", 5: "e"}
    # Asked again, nothing differs: nothing is written.
    count = len(world.commits())
    out = ok(
        world.rewind("restore-table", "acme", "db.t", "--snapshot", "mon", "--keys", keys, "--yes")
    ).stdout
    assert "nothing to restore: nothing was written" in out and len(world.commits()) == count


def test_restore_keys_from_a_parquet_file(world: World) -> None:
    path = world.folder / "keys.parquet"
    pq.write_table(pa.table({"id": pa.array([2], pa.int64())}), path)
    ok(
        world.rewind(
            "restore-table", "acme", "db.t", "--before", world.bad, "--keys", path, "--yes"
        )
    )
    assert world.ids() == {2: "b", 4: "d", 5: "e", 9: "z"}


def test_restore_a_key_range(world: World) -> None:
    before = world.state()
    out = ok(
        world.rewind(
            "restore-table", "acme", "db.t", "--snapshot", "mon", "--where", "2..3", "--dry-run"
        )
    ).stdout
    assert "would put back 2 rows and delete 0 rows" in out
    assert world.state() == before
    out = ok(
        world.rewind(
            "restore-table", "acme", "db.t", "--snapshot", "mon", "--where", "2..3", "--yes"
        )
    ).stdout
    assert "restored: put back 2 rows, deleted 0 rows in commit ts " in out
    assert world.ids() == {2: "b", 3: "c", 4: "d", 5: "e", 9: "z"}
    ok(
        world.rewind(
            "restore-table", "acme", "db.t", "--snapshot", "mon", "--where", "5..", "--yes"
        )
    )
    assert world.ids() == {2: "b", 3: "c", 4: "d", 5: "e"}  # 9 was not there at mon
    ok(
        world.rewind(
            "restore-table", "acme", "db.t", "--snapshot", "mon", "--where", "..1", "--yes"
        )
    )
    assert world.ids() == {1: "a", 2: "b", 3: "c", 4: "d", 5: "e"}


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (("--keys", "K", "--to", "db.x"), r"--keys and --where put rows back in place"),
        (("--keys", "K", "--instant"), r"--keys and --where put rows back in place"),
        (("--where", "1..2", "--instant"), r"--keys and --where put rows back in place"),
        (("--where", "1..2", "--to-tenant", "bare"), r"--keys and --where put rows back in place"),
        (("--keys", "K", "--where", "1..2"), r"give --keys FILE or --where LOW\.\.HIGH, not both"),
        (("--where", "1"), r"invalid --where '1': give LOW\.\.HIGH"),
        (("--where", ".."), r"invalid --where '\.\.': give at least one end"),
        (("--where", "a..b"), r"key bound 'a' of --where: 'a' is not a int64 for key column 'id'"),
        (("--keys", "V"), r"need the key column\(s\) id; id missing \(given: v\)"),
    ],
)
def test_restore_keys_refusals_change_nothing(
    seen: World, extra: tuple[str, ...], match: str
) -> None:
    keys = seen.csv("keys.csv", "id\n1\n")
    values = seen.csv("values.csv", "v\na\n")
    rows = seen.csv("key_and_value.csv", "id,v\n1,a\n")
    files = {"K": str(keys), "V": str(values), "R": str(rows)}
    args = [files.get(a, a) for a in extra]
    before = seen.state()
    fails(seen.rewind("restore-table", "acme", "db.t", "--snapshot", "mon", *args, "--yes"), match)
    assert seen.state() == before


# 7. Bad inputs: one line, exit 1, nothing changed


BAD_INPUTS: list[tuple[str, Callable[[World], list[str]], str]] = [
    (
        "unknown commit",
        lambda w: ["revert", "acme", "db.t", "--commit", UNKNOWN_TS, "--yes"],
        rf"tenant 'acme' has no commit at ts {UNKNOWN_TS}; `rewind history acme --commits`",
    ),
    (
        "another table's commit",
        lambda w: ["revert", "acme", "db.t", "--commit", w.other, "--yes"],
        r"commit ts \d+ of tenant 'acme' changed table db\.u, not db\.t",
    ),
    (
        "a DDL commit",
        lambda w: ["revert", "acme", "db.t", "--commit", w.create, "--yes"],
        r"of acme/db\.t is a create, not a write; .*restore-table acme db\.t --before",
    ),
    (
        "commit not a number",
        lambda w: ["revert", "acme", "db.t", "--commit", "abc", "--yes"],
        r"invalid --commit 'abc': give a commit's ts",
    ),
    (
        "commit negative",
        lambda w: ["revert", "acme", "db.t", "--commit", "-1", "--yes"],
        r"invalid --commit '-1': give a commit's ts",
    ),
    (
        "diff from after to",
        lambda w: ["diff", "acme", "db.t", "--from", "tue", "--to", "mon"],
        r"is after --to 'mon'",
    ),
    (
        "tenant diff from after to",
        lambda w: ["diff", "acme", "--from", "tue", "--to", "mon"],
        r"diff of acme/\*: --from 'tue' .* is after --to 'mon'",
    ),
    (
        "revert from after to",
        lambda w: ["revert", "acme", "db.t", "--from", "tue", "--to", "mon", "--yes"],
        r"revert of acme/db\.t: --from .* must be before --to",
    ),
    (
        "unprotected from",
        lambda w: ["diff", "bare", "db.t", "--from", w.bare_first],
        r"is not protected for tenant 'bare'",
    ),
    (
        "unprotected tenant diff",
        lambda w: ["diff", "bare", "--from", "-1h"],
        r"is not protected for tenant 'bare'",
    ),
    (
        "unprotected revert",
        lambda w: ["revert", "bare", "db.t", "--commit", w.bare_first, "--yes"],
        r"is not protected for tenant 'bare'",
    ),
    (
        "unknown table diff",
        lambda w: ["diff", "acme", "db.nope", "--from", "mon"],
        r"table db\.nope exists in tenant 'acme' neither at",
    ),
    (
        "unknown table revert",
        lambda w: ["revert", "acme", "db.nope", "--commit", w.bad, "--yes"],
        r"table db\.nope does not exist in tenant 'acme'",
    ),
    (
        "unknown tenant",
        lambda w: ["diff", "nobody", "db.t", "--from", "mon"],
        r"tenant 'nobody' does not exist",
    ),
    (
        "not a table name",
        lambda w: ["diff", "acme", "t", "--from", "mon"],
        r"invalid table reference 't': expected DB\.TABLE",
    ),
    (
        "unknown snapshot",
        lambda w: ["diff", "acme", "db.t", "--from", "nosuch"],
        r"tenant 'acme' has no snapshot 'nosuch'",
    ),
    (
        "revert commit and from",
        lambda w: ["revert", "acme", "db.t", "--commit", w.bad, "--from", "mon", "--yes"],
        r"say what to undo: --commit TS .* or --from TIME",
    ),
    (
        "revert neither",
        lambda w: ["revert", "acme", "db.t", "--yes"],
        r"say what to undo",
    ),
    (
        "revert to alone",
        lambda w: ["revert", "acme", "db.t", "--to", "tue", "--yes"],
        r"--to ends a range: give --from TIME with it",
    ),
    (
        "diff without a start",
        lambda w: ["diff", "acme", "db.t"],
        r"say where the diff starts: --from TIME .* or --before COMMIT",
    ),
    (
        "diff from and before",
        lambda w: ["diff", "acme", "db.t", "--from", "mon", "--before", w.bad],
        r"say where the diff starts",
    ),
    (
        "diff before not a number",
        lambda w: ["diff", "acme", "db.t", "--before", "abc"],
        r"invalid --before 'abc'",
    ),
    (
        "diff before an unknown commit",
        lambda w: ["diff", "acme", "db.t", "--before", UNKNOWN_TS],
        rf"has no commit at ts {UNKNOWN_TS}",
    ),
    (
        "to-parquet without a table",
        lambda w: ["diff", "acme", "--from", "mon", "--to-parquet", f"file://{w.folder}/x.parquet"],
        r"--to-parquet writes one table's changes: name DB\.TABLE",
    ),
    (
        "to-parquet not a file",
        lambda w: ["diff", "acme", "db.t", "--from", "mon", "--to-parquet", "x.parquet"],
        r"invalid --to-parquet 'x\.parquet': give a file URI",
    ),
    (
        "limit -1",
        lambda w: ["diff", "acme", "db.t", "--from", "mon", "--limit", "-1"],
        r"invalid --limit '-1': give a whole number from 0",
    ),
    (
        "limit not a number",
        lambda w: ["diff", "acme", "db.t", "--from", "mon", "--limit", "two"],
        r"invalid --limit 'two'",
    ),
]


@pytest.mark.parametrize(
    ("make", "match"), [c[1:] for c in BAD_INPUTS], ids=[c[0] for c in BAD_INPUTS]
)
def test_bad_input_is_one_line_and_changes_nothing(
    seen: World, make: Callable[[World], list[str]], match: str
) -> None:
    args = make(seen)
    before = seen.state()
    fails(seen.rewind(*args), match)
    assert seen.state() == before
    result = seen.rewind("--json", *args)
    assert result.exit_code == 1, result.output
    assert "error" in json.loads(result.stdout)
    assert seen.state() == before


# 8. A revert asks first


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (
            lambda w: ["revert", "acme", "db.t", "--commit", w.bad],
            r"refusing to revert commit ts \d+ of acme/db\.t without --yes: stdin is not a "
            r"terminal.*nothing was changed",
        ),
        (
            lambda w: ["revert", "acme", "db.t", "--from", "mon"],
            r"refusing to revert the commits of the range of acme/db\.t without --yes",
        ),
        (
            lambda w: ["restore-table", "acme", "db.t", "--snapshot", "mon", "--where", "1..3"],
            r"refusing to restore some rows of acme/db\.t without --yes",
        ),
    ],
    ids=["commit", "range", "restore-keys"],
)
def test_without_yes_and_no_terminal_it_refuses_and_changes_nothing(
    seen: World, args: Callable[[World], list[str]], match: str
) -> None:
    before = seen.state()
    fails(seen.rewind(*args(seen)), match)
    result = seen.rewind(*args(seen), "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["error"]["type"] == "NotConfirmed"
    assert seen.state() == before


def test_at_a_terminal_it_shows_the_plan_and_asks(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(confirm, "stdin_is_terminal", lambda: True)
    before = world.state()
    result = world.rewind("revert", "acme", "db.t", "--commit", world.bad, input="n\n")
    assert result.exit_code == 1
    assert "would put back 3 rows and delete 0 rows" in result.output
    assert world.state() == before
    result = world.rewind("revert", "acme", "db.t", "--commit", world.bad, input="y\n")
    assert "reverted: put back 3 rows" in ok(result).stdout
    assert world.ids() == {1: "a", 2: "b", 3: "c", 4: "d", 5: "e", 9: "z"}
