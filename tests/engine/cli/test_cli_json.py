"""``--json`` output is always machine output.

Every result and every error is one JSON document on stdout, with the same
exit codes as the text form (1 for an error, 2 for a usage error, 3 for damaged
objects); stderr is left for people. No bare NaN or Infinity. Every time is
given both ways: its ts in µs since the epoch and, beside it in the same
object, its ISO-8601 UTC time with µs (``"ts": 1767225600000000, "at":
"2026-01-01T00:00:00.000000Z"``).

Commands run in-process through ``typer.testing.CliRunner`` against the test's
catalog (both backends) and a moto warehouse.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from engine.cli.app import app
from tenants.times import format_ts
from tests.helpers.cli import ok

# Not the catalog's behaviour: on SQLite alone (conftest.py, one_catalog).
pytestmark = pytest.mark.one_catalog

Rewind = Callable[..., Result]

ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")
TS_RANGE = range(10**15, 10**17)  # µs since the epoch: years 2001 to 5138


def strict(text: str) -> Any:
    """Parse one JSON document, refusing the bare words NaN and Infinity."""

    def refuse(word: str) -> None:
        raise AssertionError(f"bare {word} in JSON output")

    return json.loads(text, parse_constant=refuse)


def one_json(result: Result, exit_code: int = 0) -> Any:
    """The one JSON document a ``--json`` command printed on stdout."""
    assert result.exit_code == exit_code, result.output
    return strict(result.stdout)


def untimed(node: Any, where: str = "$") -> list[str]:
    """Every ts without its ISO time beside it and every ISO time without its ts,
    as ``path: why``."""
    found: list[str] = []
    if isinstance(node, dict):
        stamps = {
            k: v
            for k, v in node.items()
            if isinstance(v, int) and not isinstance(v, bool) and v in TS_RANGE
        }
        times = {k: v for k, v in node.items() if isinstance(v, str) and ISO.match(v)}
        for key, ts in stamps.items():
            if format_ts(ts) not in times.values():
                found.append(f"{where}.{key}: ts {ts} has no ISO time beside it")
        for key, text in times.items():
            if text not in {format_ts(ts) for ts in stamps.values()}:
                found.append(f"{where}.{key}: time {text} has no ts beside it")
        for key, value in node.items():
            found += untimed(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += untimed(value, f"{where}[{i}]")
    return found


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "rows.csv").write_text("id,v,f\n1,a,1.5\n2,b,nan\n3,c,inf\n4,d,-inf\n")
    (tmp_path / "keys.csv").write_text("id\n4\n")
    return tmp_path


def test_every_time_in_every_json_output_has_its_ts_and_iso_side_by_side(
    rewind: Rewind, files: Path, tmp_path: Path
) -> None:
    outputs: dict[str, Any] = {}

    def run(*args: str | Path) -> Any:
        value = one_json(rewind("--json", *args))
        outputs[" ".join(map(str, args))] = value
        return value

    backups = str(tmp_path / "backups")
    run("tenant", "create", "acme")
    run("table", "create", "acme", "shop.items", "-c", "id:int64", "-c", "v:string", "-c", "f:double", "-k", "id")  # fmt: skip
    run("load", "acme", "shop.items", files / "rows.csv")
    run("snapshot", "create", "acme", "mon")
    run("delete", "acme", "shop.items", "--keys", files / "keys.csv")
    run("pitr", "set", "acme", "1h")
    run("pitr", "show", "acme")
    run("snapshot", "schedule", "acme", "--first", "00:00", "--every", "1d", "--keep-last", "3")
    run("snapshot", "schedule", "acme", "--show")
    run("snapshot", "tick", "acme")
    run("snapshot", "list", "acme")
    run("snapshot", "show", "acme", "mon")
    run("table", "alter", "acme", "shop.items", "--add", "n:int64=0")
    run("table", "list", "acme")
    run("ddl", "acme")
    run("compact", "acme")
    run("objects", "acme")
    run("storage", "acme")
    run("history", "acme", "--commits")
    run(
        "export", "acme", "shop.items", "--snapshot", "mon", "--to", f"file://{tmp_path / 'export'}"
    )
    run("restore-tenant", "acme", "--snapshot", "mon", "--to", "clone", "--dry-run")
    run("restore-tenant", "acme", "--snapshot", "mon", "--to", "clone")
    run("restore-table", "acme", "shop.items", "--snapshot", "mon", "--dry-run")
    run("restore-table", "acme", "shop.items", "--snapshot", "mon", "--yes")
    run("table", "drop", "acme", "shop.items")
    run("table", "undrop", "acme", "shop.items")
    run("restore-tenant", "acme", "--snapshot", "mon", "--yes")  # retires the old acme
    run("history", "acme")
    dropped = run("tenant", "drop", "clone", "--yes")
    run("tenant", "list", "--all")
    run("tenant", "undrop", f"clone@{dropped['id']}", "--as", "clone2")
    for kind in ("physical", "logical"):
        backup = run(
            "backup", "create", "acme", "--snapshot", "mon", "--to", backups, "--kind", kind
        )
        run("backup", "list", backups)
        run("backup", "show", backups, backup["backup_id"])
        run("backup", "verify", backups, backup["backup_id"])
    restored = run("backup", "restore", "--from", backups, "--tenant", "restored")
    run("backup", "delete", backups, backup["backup_id"], "--yes")
    gone = run("tenant", "drop", "restored", "--yes")  # its objects are its own
    run("tenant", "purge", f"restored@{gone['id']}", "--yes")
    assert restored["id"] == gone["id"]
    collect = ("--grace", "0", "--orphan-grace", "0", "--allow-short-grace")
    assert run("gc", "--dry-run", *collect)["objects"]  # unreferenced since the purge
    run("gc", "--yes", *collect)
    run("--version")

    problems = [
        f"rewind --json {command}: {p}" for command, v in outputs.items() for p in untimed(v)
    ]
    assert problems == [], "\n".join(problems)
    times = sum(
        len(re.findall(r'"\d{4}-\d\d-\d\dT[^"]*Z"', json.dumps(v))) for v in outputs.values()
    )
    assert times > 50  # the walk saw them


def test_non_finite_floats_are_strings(rewind: Rewind, files: Path) -> None:
    ok(rewind("tenant", "create", "acme"))
    ok(rewind("table", "create", "acme", "shop.items", "-c", "id:int64", "-c", "v:string", "-c", "f:double", "-k", "id"))  # fmt: skip
    ok(rewind("load", "acme", "shop.items", files / "rows.csv"))
    for args in (["query", "acme", "shop.items"], ["query", "acme", "shop.items", "--limit", "9"]):
        rows = one_json(rewind("--json", *args))
        assert [r["f"] for r in rows] == [1.5, "NaN", "Infinity", "-Infinity"]
        assert math.isnan(float(rows[1]["f"]))


def error_of(result: Result, exit_code: int) -> dict[str, str]:
    """The one JSON error: on stdout, nothing on stderr."""
    assert result.stderr == "", result.stderr
    assert len(result.stdout.strip().splitlines()) == 1, result.stdout
    error = one_json(result, exit_code)["error"]
    assert set(error) == {"type", "message"} and "\n" not in error["message"]
    return dict(error)


@pytest.mark.parametrize("where", ["global", "command"])
def test_an_error_is_one_json_object_on_stdout_with_exit_1(rewind: Rewind, where: str) -> None:
    ok(rewind("tenant", "create", "acme"))  # a store, without the tenant named below
    args = ["restore-tenant", "ghost", "--snapshot", "mon", "--to", "copy"]
    result = rewind("--json", *args) if where == "global" else rewind(*args, "--json")
    error = error_of(result, 1)
    assert error["type"] == "NotFound" and "ghost" in error["message"]


def test_the_text_error_stays_one_line_on_stderr(rewind: Rewind) -> None:
    ok(rewind("tenant", "create", "acme"))
    result = rewind("restore-tenant", "ghost", "--snapshot", "mon", "--to", "copy")
    assert result.exit_code == 1 and result.stdout == ""
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and "ghost" in line


def test_a_refused_destructive_command_is_a_json_error(rewind: Rewind) -> None:
    ok(rewind("tenant", "create", "acme"))
    error = error_of(rewind("--json", "tenant", "drop", "acme"), 1)
    assert error["type"] == "NotConfirmed" and "--yes" in error["message"]


@pytest.mark.parametrize(
    ("args", "kind", "words"),
    [
        (["load", "acme"], "MissingParameter", "DB.TABLE"),
        (["tenant", "list", "--bogus"], "NoSuchOption", "--bogus"),
        (["--bogus", "tenant", "list"], "NoSuchOption", "--bogus"),
        (["tenat", "list"], "UsageError", "tenat"),
        (["query", "acme", "shop.items", "--reader", "gpu"], "BadParameter", "gpu"),
        (["tenant"], "UsageError", "rewind tenant COMMAND"),
        ([], "UsageError", "rewind COMMAND"),
    ],
    ids=[
        "missing",
        "unknown-option",
        "unknown-root-option",
        "unknown-command",
        "choice",
        "no-subcommand",
        "no-command",
    ],  # fmt: skip
)
def test_a_usage_error_is_one_json_object_on_stdout_with_exit_2(
    args: list[str], kind: str, words: str
) -> None:
    error = error_of(CliRunner().invoke(app, ["--json", *args]), 2)
    assert error["type"] == kind and words in error["message"], error


def test_without_json_a_usage_error_is_one_line_naming_the_help(rewind: Rewind) -> None:
    result = CliRunner().invoke(app, ["load", "acme"])
    assert result.exit_code == 2 and result.stdout == ""
    [line] = result.stderr.strip().splitlines()
    assert "Missing argument" in line and "`rewind load -h`" in line


@pytest.mark.parametrize("json_flag", [False, True])
def test_a_bug_is_one_line_not_a_traceback(
    rewind: Rewind, monkeypatch: pytest.MonkeyPatch, json_flag: bool
) -> None:
    """An exception that is no RewindError (a bug) still ends in one line, exit 1;
    the traceback is shown only under --verbose."""
    from engine.cli import render

    def broken(*args: Any, **kwargs: Any) -> Any:
        secret = "hunter" + "2"  # not in this source line, which the traceback shows
        raise TypeError(f"unsupported operand\nsecond line postgresql://u:{secret}@h/db")

    monkeypatch.setattr(render, "tenants_table", broken)
    monkeypatch.setattr(render, "tenant_json", broken)
    ok(rewind("tenant", "create", "acme"))
    result = rewind(*(["--json"] if json_flag else []), "tenant", "list")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "hunter2" not in result.output
    if json_flag:
        error = error_of(result, 1)
        assert error["type"] == "InternalError" and "TypeError" in error["message"]
    else:
        [line] = result.stderr.strip().splitlines()
        assert line.startswith("error: unexpected TypeError: unsupported operand")
    verbose = rewind("--verbose", "tenant", "list")
    assert verbose.exit_code == 1 and "Traceback" in verbose.stderr
    assert "hunter2" not in verbose.output
