"""Every command and option of ``rewind``, given hostile values: a clean refusal.

hypothesis draws command lines from the typer app itself (tests/helpers/cli_fuzz_values.py
walks its command tree, so a new command is fuzzed without editing a list).
Each invocation carries at least one value the parameter can never accept
(huge, negative and non-ASCII numbers, empty strings, NUL, ``..`` and other
path parts, quotes, ``__``, URIs with a password ...), so it must fail, and
fail cleanly:

- exit code 1 (an error) or 2 (a usage error), never a traceback, never a bug
  (an exception that is no ``RewindError``, which the CLI reports as one
  ``unexpected ...`` line);
- without ``--json``, one ``error:`` line on stderr; with ``--json``, stdout is
  one JSON object with an ``error`` key (tests/engine/cli/test_cli_json.py);
- the password ``hunter2`` of a hostile URI appears in no output, not even
  under ``--verbose`` (which alone may show a traceback);
- the catalog (every row), the warehouse (every key) and the directory the
  command ran in (every file) are as they were.

The fuzz world (tenant ``acme``, ``shop.items``, snapshot ``mon``) is made once
per module and backend and shared by every example: a failing command changes
nothing, and each example compares the world before and after it. Spark never
starts (``spark check`` is left out and a fuse fails any other start).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

import tenants.spark.session
from engine.cli.app import app
from tenants.objectstore.embedded import EmbeddedS3
from tests.conftest import chosen_backends
from tests.helpers.cli import catalog_and_bucket, items_tenant
from tests.helpers.cli_fuzz_values import (
    HOSTILE,
    PASSWORD,
    Command,
    Invocation,
    culpable,
    invocations,
    leaf_commands,
    sql_hostile,
)

# Not the catalog's behaviour: on SQLite alone unless the run is deep (conftest.py).
pytestmark = pytest.mark.one_catalog

# Left out, and why: each would start Spark, and takes no value that could fail.
NOT_FUZZED = {"spark check": "starts Spark on the effective master; takes no value"}
COMMANDS = tuple(c for c in leaf_commands(typer.main.get_command(app)) if c.name not in NOT_FUZZED)
# Examples per command and parameter: a sixth of the profile's (2 in `ci`, to
# stay near a minute on two cores; 33 in `deep`).
EXAMPLES = max(1, settings().max_examples // 6)

# A hostile catalog or warehouse, in place of the world's, on some examples.
ROOT_URIS: dict[str, tuple[str, ...]] = {
    "--catalog": (f"postgresql://u:{PASSWORD}@127.0.0.1:1/x", f"sqlite:///x?password={PASSWORD}"),
    "--warehouse": (f"s3://b/k?secret={PASSWORD}", "%2e%2e"),
}


def fuzz_backends() -> tuple[str, ...]:
    """SQLite alone, as for every ``one_catalog`` module, unless the run is deep
    or names its backends (tests/conftest.py)."""
    if os.environ.get("HYPOTHESIS_PROFILE") == "deep" or "REWIND_TEST_BACKENDS" in os.environ:
        return chosen_backends()
    return ("sqlite",)


@dataclass(frozen=True)
class World:
    """The fuzz world and how to run ``rewind`` in it."""

    catalog_uri: str
    catalog_file: Path | None
    warehouse: str
    bucket: str
    root: Path  # holds the catalog file and the sandbox
    sandbox: Path  # every command runs here: `../../etc` stays under root
    s3: EmbeddedS3

    def run(self, args: tuple[str, ...]) -> Result:
        base = ["--catalog", self.catalog_uri, "--warehouse", self.warehouse]
        return CliRunner().invoke(app, [*base, *args])

    def state(self) -> Any:
        """Every catalog row, warehouse key and file under the world's root."""
        try:
            rows, keys = catalog_and_bucket(self.catalog_uri, self.s3, self.bucket)
        except Exception as error:  # a command broke the catalog: that is the finding
            rows, keys = f"unreadable: {error!r}", []
        files = sorted(
            (str(path.relative_to(self.root)), path.stat().st_size, path.stat().st_mtime_ns)
            for path in self.root.rglob("*")
            if path.is_file() and not path.name.startswith(self.catalog_name)
        )
        return rows, keys, files

    @property
    def catalog_name(self) -> str:  # with its -wal, -shm and -journal beside it
        return self.catalog_file.name if self.catalog_file is not None else "\x00"


@pytest.fixture(scope="module", params=fuzz_backends())
def world(
    request: pytest.FixtureRequest,
    s3_server: EmbeddedS3,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[World]:
    root = tmp_path_factory.mktemp("fuzz")
    sandbox = root / "a" / "b" / "c"
    sandbox.mkdir(parents=True)
    (sandbox / "rows.csv").write_text("id,v\n3,c\n")
    catalog_file: Path | None = None
    if request.param == "postgresql":
        make: Callable[[], str] = request.getfixturevalue("new_pg_catalog_uri")
        catalog_uri = make()
    else:
        catalog_file = root / "catalog.db"
        catalog_uri = f"sqlite:///{catalog_file}"
    bucket = f"rewind-fuzz-{uuid.uuid4().hex[:12]}"
    s3_server.create_bucket(bucket)
    made = World(catalog_uri, catalog_file, f"s3://{bucket}/wh", bucket, root, sandbox, s3_server)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(sandbox)
        items_tenant(lambda *args: made.run(tuple(map(str, args))), root)

        def no_spark(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("the CLI fuzz started Spark; keep Spark out of it")

        patch.setattr(tenants.spark.session, "get_spark", no_spark)
        yield made


def problems(invocation: Invocation, result: Result, before: Any, after: Any) -> list[str]:
    """Every way ``result`` breaks the contract of the module's docstring (none: [])."""
    found: list[str] = []
    out, err = result.stdout, result.stderr
    if result.exit_code not in (1, 2):
        found.append(f"exit {result.exit_code}, though {invocation.failing} must fail")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        found.append(f"raised {type(result.exception).__name__}: {result.exception}")
    if not invocation.verbose and "Traceback (most recent call last)" in out + err:
        found.append("printed a traceback")
    if PASSWORD in out + err:
        found.append("printed the password")
    if after != before:
        found.append("changed the catalog, the warehouse or the files")
    if result.exit_code in (1, 2) and not found:
        found += shape_problems(invocation, result)
    return found


def shape_problems(invocation: Invocation, result: Result) -> list[str]:
    """An error's shape: one JSON object on stdout under ``--json``; otherwise one
    ``error:`` line on stderr (exit 1 or 2), and neither a bug (an exception that
    is no RewindError, which the CLI reports as ``unexpected ...``)."""
    if invocation.verbose:
        return []  # --verbose adds the traceback on purpose
    if invocation.json:
        try:
            document = json.loads(result.stdout)
        except ValueError:
            return [f"--json: stdout is not one JSON document: {result.stdout[:200]!r}"]
        if not isinstance(document, dict) or "error" not in document:
            return [f"--json: not an error object: {result.stdout[:200]!r}"]
        if document["error"].get("type") == "InternalError":
            return [f"--json: a bug: {document['error'].get('message')!r}"]
        return []
    lines = result.stderr.strip().splitlines()
    if len(lines) != 1 or not lines[0].startswith("error: "):
        return [f"stderr is not one `error:` line: {result.stderr[:300]!r}"]
    if lines[0].startswith("error: unexpected "):
        return [f"a bug: {lines[0]!r}"]
    return []


def with_root_uri(invocation: Invocation, option: str, uri: str) -> Invocation:
    """``invocation`` with the world's catalog or warehouse replaced by ``uri``."""
    return Invocation(
        (option, uri, *invocation.args),
        invocation.command,
        invocation.failing,
        invocation.json,
        invocation.verbose,
    )


@st.composite
def draws(draw: st.DrawFn, command: Command, culprit: str | None, world: World) -> Invocation:
    """The fuzz's invocations of ``command`` that ``culprit``'s value makes fail,
    now and then on a hostile catalog or warehouse."""
    extra = sql_hostile(world.sandbox, world.catalog_file)
    invocation = draw(invocations(command, world.sandbox, extra, culprit))
    option = draw(st.sampled_from([None] * 4 + list(ROOT_URIS)))
    if option is None:
        return invocation
    return with_root_uri(invocation, option, draw(st.sampled_from(ROOT_URIS[option])))


def cases() -> list[Any]:
    """One case per command and parameter that can be given a value it never
    accepts; a command without one fails on an unreachable catalog."""
    found = []
    for command in COMMANDS:
        params = culpable(command, [])
        names: list[str | None] = [p.name for p in params]
        for name in names or [None]:
            label = f"{command.name} {'--catalog' if name is None else name}"
            found.append(pytest.param(command, name, id=label))
    return found


@pytest.mark.parametrize(("command", "culprit"), cases())
def test_any_hostile_invocation_fails_cleanly_and_changes_nothing(
    world: World, command: Command, culprit: str | None
) -> None:
    @settings(max_examples=EXAMPLES)
    @given(st.data())
    def run(data: st.DataObject) -> None:
        invocation = data.draw(draws(command, culprit, world), label="invocation")
        before = world.state()
        result = world.run(invocation.args)
        after = world.state()
        found = problems(invocation, result, before, after)
        assert not found, (
            f"rewind {' '.join(invocation.args)!r}: {'; '.join(found)}\n"
            f"exit {result.exit_code}\nstdout: {result.stdout[:600]}\n"
            f"stderr: {result.stderr[:600]}"
        )

    run()


def test_the_walk_finds_every_command_and_option_of_the_app() -> None:
    """The fuzz covers what the app has, counted for the record; what it leaves
    out is listed in NOT_FUZZED, with why."""
    every = leaf_commands(typer.main.get_command(app))
    names = {c.name for c in every}
    assert len(every) >= 40, sorted(names)
    assert {"query", "export", "restore-table", "history", "backup show"} <= names
    assert set(NOT_FUZZED) <= names
    pairs = sum(len(c.params) for c in COMMANDS)
    assert pairs >= 150, pairs
    # Without a value of its own to refuse, a command fails on an unreachable catalog.
    on_catalog = sorted(c.name for c in COMMANDS if not culpable(c, []))
    assert on_catalog == ["tenant list"], on_catalog
    print(
        f"CLI fuzz: {len(COMMANDS)} commands, {pairs} command/option pairs, "
        f"{len(cases())} cases of {EXAMPLES} examples"
    )


def test_a_command_added_to_the_app_is_fuzzed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk reads the app, not a list: a new command and its options are found."""
    probe = typer.Typer()

    @probe.command("frobnicate")
    def frobnicate(tenant: str, count: int = 1, to: Path = Path(".")) -> None:
        """A command that is not there."""

    monkeypatch.setattr(app, "registered_groups", [*app.registered_groups])
    app.add_typer(probe, name="zz-probe")
    found = {c.name: c for c in leaf_commands(typer.main.get_command(app))}
    new = found["zz-probe frobnicate"]
    assert [(p.name, p.kind) for p in new.params] == [
        ("tenant", "tenant"),
        ("count", "int"),
        ("to", "write_target"),
    ]

    @settings(max_examples=20)
    @given(invocations(new, Path("/sandbox"), []))
    def drawn(invocation: Invocation) -> None:
        assert invocation.args[invocation.args.index("zz-probe") + 1] == "frobnicate"
        name, value = invocation.failing
        assert value in HOSTILE and name in ("tenant", "count", "to")

    drawn()
