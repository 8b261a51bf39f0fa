"""Every `rewind ...` command Rewind prints as a hint runs as printed (issue 32).

A hint is a message's or a help text's command in single backticks
(```rewind history acme --commits```). Each one in engine/ and tenants/ is
found in the source (string constants and f-strings, read with ``ast``, so
implicitly joined lines count as one), its ``{...}`` parts filled with a value
of the right shape, and parsed against the typer app without running it: the
command path exists, every option exists and takes its value, every required
argument is given. Double backticks (````rewind gc````) are reStructuredText
in docstrings nobody runs, and are not hints.
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest
import typer
from typer.main import get_command
from typer.testing import Result

from engine.cli.app import app
from engine.restore.journal import start_job
from engine.restore.table_plan import plan_table_restore
from tenants.catalog import open_catalog
from tests.helpers.cli import items_tenant, ok
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.one_catalog

HINT = re.compile(r"(?<!`)`rewind ([^`]+)`(?!`)")
TS = "1795600800000000"


def _filled(expression: str) -> str | None:
    """A value of the shape ``{expression}`` has in a message (None: not a hint)."""
    if "join" in expression:  # the demo echoes a command it ran, not a hint
        return None
    for part, value in (
        ("scope", "table"),
        ("ts", TS),
        ("uri", "s3://bucket/backups"),
        ("qualified", "shop.items"),
        ("named", "shop.items"),
    ):
        if expression.endswith(part) or expression.endswith(f"{part}']"):
            return value
    return "acme"  # a tenant, a name@id, a job id, a snapshot name


def _text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
                continue
            assert isinstance(value, ast.FormattedValue)
            filled = _filled(ast.unparse(value.value))
            if filled is None:
                return None
            parts.append(filled)
        return "".join(parts)
    return None


def source_hints() -> list[tuple[str, str]]:
    """(where, command line after ``rewind``) of every hint in engine/ and tenants/."""
    found: set[tuple[str, str]] = set()
    for top in ("engine", "tenants"):
        for path in sorted((ROOT / top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.JoinedStr | ast.Constant):
                    for match in HINT.finditer(_text(node) or ""):
                        where = f"{path.relative_to(ROOT)}:{node.lineno}"
                        found.add((where, match.group(1)))
    return sorted(found)


def parses(line: str) -> None:
    """Parse ``rewind LINE`` as the app would, running nothing.

    Raises:
        typer.TyperException (a usage error: typer's own click) or a RewindError
        (an option's parser).
    """
    words = shlex.split(line)
    command = get_command(app)
    ctx = typer.Context(command, info_name="rewind")
    while getattr(command, "commands", None) is not None:  # a group: the next word names one
        if not words:
            raise typer.BadParameter(f"`rewind {line}` names a group, not a command")
        sub = command.get_command(ctx, words[0])  # type: ignore[attr-defined]
        if sub is None:
            raise typer.BadParameter(f"no command {words[0]!r} in `rewind {line}`")
        command, ctx = sub, typer.Context(sub, info_name=words[0], parent=ctx)
        words = words[1:]
    with command.make_context(ctx.info_name, words, parent=ctx.parent):
        pass


HINTS = source_hints()


def test_hints_are_found_in_messages_help_and_f_strings() -> None:
    lines = {line for _, line in HINTS}
    assert len(lines) >= 20
    assert "restore-table acme --resume acme" in lines  # tenants/tenancy.py, an f-string
    assert "history TENANT --commits" in lines  # implicitly joined over two lines


@pytest.mark.parametrize(("where", "line"), HINTS, ids=[f"{w} {h}" for w, h in HINTS])
def test_every_hint_parses_as_a_valid_rewind_invocation(where: str, line: str) -> None:
    try:
        parses(line)
    except (typer.TyperException, ValueError) as error:  # InvalidArgument is a ValueError
        pytest.fail(f"{where}: `rewind {line}` does not parse: {error}")


def test_a_hint_that_misses_an_argument_or_names_no_option_is_caught() -> None:
    with pytest.raises(typer.TyperException, match="Missing parameter: ref"):
        parses("tenant undrop")
    with pytest.raises(typer.TyperException, match="No such option: --nope"):
        parses("restore-tenant acme --nope")
    with pytest.raises(typer.TyperException, match="no command 'restore-tables'"):
        parses("restore-tables acme")
    with pytest.raises(typer.TyperException, match="names a group"):
        parses("tenant")
    with pytest.raises(typer.TyperException, match="invalid --limit"):
        parses("history acme --commits --limit N")


def test_table_being_restored_hint_resumes_and_cancels_as_printed(
    rewind: Callable[..., Result], uris: tuple[str, str], tmp_path: Path
) -> None:
    items_tenant(rewind, tmp_path)
    catalog = open_catalog(uris[0])
    try:
        plan = plan_table_restore(catalog, "acme", "shop.items", "mon")
        start_job(catalog, plan, executor="local", verify="objects")  # holds the table
    finally:
        catalog.close()
    (tmp_path / "more.csv").write_text("id,v\n3,c\n")
    refused = rewind("load", "acme", "shop.items", tmp_path / "more.csv")
    assert refused.exit_code == 1 and "is being restored" in refused.stderr
    hints = HINT.findall(" ".join(refused.stderr.split()))
    assert [h.split()[-2] for h in hints] == ["--resume", "--cancel"], refused.stderr
    ok(rewind(*shlex.split(hints[0])))  # finishes it, as it says
    ok(rewind("load", "acme", "shop.items", tmp_path / "more.csv"))
    catalog = open_catalog(uris[0])
    try:
        plan = plan_table_restore(catalog, "acme", "shop.items", "mon")
        start_job(catalog, plan, executor="local", verify="objects")
    finally:
        catalog.close()
    refused = rewind("load", "acme", "shop.items", tmp_path / "more.csv")
    hints = HINT.findall(" ".join(refused.stderr.split()))
    ok(rewind(*shlex.split(hints[1])))  # cancels it, as it says
    ok(rewind("load", "acme", "shop.items", tmp_path / "more.csv"))
