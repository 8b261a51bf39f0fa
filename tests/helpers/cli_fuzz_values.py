"""The CLI fuzz suite's values and its walk of the ``rewind`` command tree.

:func:`leaf_commands` reads every command and parameter from the typer app
itself, so a command added tomorrow is fuzzed without editing a list.
:func:`invocations` draws a command line for one command: every parameter is
filled with a plausible value (the fuzz world's tenant ``acme``, table
``shop.items``, snapshot ``mon``) or a value from the shared hostile pool, and
at least one parameter gets a value its kind can never accept, so the
invocation must fail: exit 1 or 2, one line, nothing changed.

Which hostile values a parameter may legitimately accept depends on what it
names (``a__b`` is a fine name for a new tenant, not an existing one), so each
parameter gets a *kind*, from its name and type; a parameter of an unknown
kind is ``text``, which accepts anything but a NUL byte.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from hypothesis import strategies as st

# Every hostile value appears in no output: a password in a URI stays secret.
PASSWORD = "hunter2"

HOSTILE: tuple[str, ...] = (
    # integers out of every range, and digits that are not ASCII
    "99999999999999999999",
    "-99999999999999999999",
    "-1",
    "0",
    "-0",
    "²",
    "٣",
    "１２",
    "1e400",
    "nan",
    "inf",
    # nothing, NUL, blanks
    "",
    "\x00",
    "a\x00b",
    " 1",
    "\t",
    # path parts
    "..",
    "../../etc",
    "/etc/passwd",
    "%2e%2e",
    "..\\..\\x",
    "a/b",
    "file:///etc/passwd",
    # names that look like others' or quote
    "a__b",
    "shop.items__x",
    "q'uo\"te",
    "'; DROP TABLE tenants; --",
    "Ümlaut",
    "x" * 300,
    # URIs carrying a password
    f"postgresql://u:{PASSWORD}@127.0.0.1:1/x",
    f"sqlite:///x?password={PASSWORD}",
    f"s3://b/k?secret={PASSWORD}",
    f"s3://AKIAX:{PASSWORD}@b/k",
    # times, relative and absolute
    "-1h",
    "2026-01-01T00:00:00Z",
    "10000-01-01",
    "1999",
)

# A catalog no command can open: nothing listens on port 1.
UNREACHABLE_CATALOG = f"postgresql://u:{PASSWORD}@127.0.0.1:1/x"

# Values that write where they point: never handed to a parameter that writes
# (the tests run as whoever runs them, root in CI containers).
SYSTEM_PATHS = frozenset({"/etc/passwd", "file:///etc/passwd"})

Kind = Literal[
    "tenant",  # an existing tenant (name or name@id)
    "new_tenant",  # a tenant the command creates
    "table",  # an existing DB.TABLE
    "new_table",
    "database",
    "snapshot",  # an existing snapshot name
    "new_name",  # a snapshot or prefix the command creates
    "time",  # a snapshot name, an ISO time, a relative time or a ts
    "duration",
    "int",
    "float",
    "size",
    "choice",
    "flag",
    "read_path",  # a file the command reads
    "write_target",  # a directory or URI the command writes into
    "backup_uri",  # a backup destination
    "backup_id",
    "job",
    "column_spec",
    "column",
    "key_bound",
    "sql",
    "catalog_uri",  # a catalog the command opens as a source
    "new_catalog_uri",  # a catalog the command writes
    "iceberg_catalog",
    "listen_address",  # [HOST]:PORT a server binds (`metrics --serve`): refused, never served
    "text",
]

# A new name that the store takes: the documented rules of tenant and object
# names (tenants/names.py), loosened, so no value is counted as one that must fail
# when a command could accept it.
NAME_LIKE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,127}")  # snapshot names take dots


def _name_like(value: str) -> bool:
    return NAME_LIKE.fullmatch(value) is not None


def _table_like(value: str) -> bool:
    parts = value.split(".")
    return 1 <= len(parts) <= 2 and all(re.fullmatch(r"[A-Za-z_]\w{0,127}", p) for p in parts)


_NUMBER_LIKE = frozenset({"0", "-0", " 1", "1999"})
_TIME_LIKE = frozenset({"-1h", "2026-01-01T00:00:00Z", "0", "-0", "-1", " 1"})
_NUL = frozenset({"\x00", "a\x00b"})


def may_accept(kind: Kind, value: str) -> bool:
    """Whether a parameter of ``kind`` could take ``value`` and the command succeed.

    Only values for which this is false count as the one that makes an
    invocation fail; the rest may still be drawn for other parameters.
    """
    if "\x00" in value:
        return False
    if kind in ("new_tenant", "new_name"):
        return _name_like(value)
    if kind == "new_table":
        return _table_like(value)
    if kind in ("time",):
        return value in _TIME_LIKE
    if kind in ("duration", "int", "float", "size", "key_bound"):
        return value in _NUMBER_LIKE or (kind == "key_bound" and value == "-1")
    if kind in ("write_target", "backup_uri", "text"):
        return True  # a relative directory, a file name: writable somewhere
    if kind in ("new_catalog_uri", "iceberg_catalog"):
        return value.startswith("sqlite:///") or _name_like(value)
    return False  # names that must exist, choices, files to read, SQL, ids


def plausible(kind: Kind, sandbox: Path, choices: tuple[str, ...]) -> list[str]:
    """Values a user would give a parameter of ``kind`` in the fuzz world."""
    table: dict[str, list[str]] = {
        "tenant": ["acme"],
        "new_tenant": ["copy"],
        "table": ["shop.items"],
        "new_table": ["shop.other"],
        "database": ["shop"],
        "snapshot": ["mon"],
        "new_name": ["tue"],
        "time": ["mon", "-1s"],
        "duration": ["1h", "7d"],
        "int": ["5"],
        "float": ["1.5"],
        "size": ["512MiB"],
        "choice": list(choices),
        "read_path": [str(sandbox / "rows.csv")],
        "write_target": [f"file://{sandbox}/out"],
        "backup_uri": [f"file://{sandbox}/backups"],
        "backup_id": ["b1"],
        "job": ["j1"],
        "column_spec": ["x:int64"],
        "column": ["v"],
        "key_bound": ["1"],
        "sql": ["SELECT * FROM shop.items"],
        "catalog_uri": [f"sqlite:///{sandbox}/none.db"],
        "new_catalog_uri": [f"sqlite:///{sandbox}/copy.db"],
        "iceberg_catalog": [f"sqlite:///{sandbox}/iceberg.db"],
        "text": ["x"],
    }
    return table.get(kind, ["x"])


def sql_hostile(sandbox: Path, catalog_file: Path | None) -> list[str]:
    """Statements a ``--sql`` must refuse: they write, read files or attach."""
    # Each names shop.items, so it passes the check that a query names a table.
    found = [
        "SELECT * FROM shop.items; SELECT 2",
        "CREATE TABLE t AS SELECT * FROM shop.items",
        "SELECT * FROM shop.items, read_csv('/etc/passwd')",
        "SELECT getenv('HOME') FROM shop.items",
        f"COPY (SELECT * FROM shop.items) TO '{sandbox}/stolen.csv'",
        "SELECT * FROM shop.items WHERE id = 1 UNION ALL SELECT * FROM shop.items__x",
        "INSTALL httpfs",
        "SET enable_external_access = true",
        "PRAGMA version",
    ]
    if catalog_file is not None:
        found += [
            f"ATTACH '{catalog_file}' AS c (TYPE sqlite)",
            f"COPY (SELECT * FROM shop.items) TO '{catalog_file}'",
        ]
    return found


# --- the walk ------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """One argument or option of a leaf command, as the fuzz fills it."""

    name: str
    opt: str | None  # the option's longest name; None for an argument
    kind: Kind
    required: bool
    multiple: bool
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Command:
    path: tuple[str, ...]
    params: tuple[Param, ...]

    @property
    def name(self) -> str:
        return " ".join(self.path)


# What a parameter names, where its name alone does not say (command, param).
_BY_COMMAND: dict[tuple[str, str], Kind] = {
    ("tenant create", "name"): "new_tenant",
    ("tenant drop", "name"): "tenant",
    ("tenant undrop", "ref"): "tenant",
    ("tenant undrop", "new_name"): "new_tenant",
    ("tenant purge", "ref"): "tenant",
    ("restore-tenant", "to"): "new_tenant",
    ("restore-table", "to"): "new_table",
    ("restore-database", "to"): "new_name",
    ("table create", "table"): "new_table",
    ("table undrop", "as_name"): "new_table",
    ("table alter", "add"): "column_spec",
    ("table alter", "drop"): "column",
    ("table create", "column"): "column_spec",
    ("table create", "key"): "column",
    ("snapshot create", "name"): "new_name",
    ("snapshot schedule", "prefix"): "new_name",
    ("backup restore", "source"): "backup_uri",
    ("backup restore", "backup_id"): "backup_id",
    ("backup restore", "tenant"): "new_tenant",
    ("backup create", "to"): "backup_uri",
    ("backup create", "snapshot"): "time",
    ("backup drill", "scratch"): "write_target",
    ("catalog copy", "source"): "catalog_uri",
    ("catalog copy", "destination"): "new_catalog_uri",
    ("export", "to"): "write_target",
    ("spark package", "out"): "write_target",
    ("query", "key_from"): "key_bound",
    ("query", "key_to"): "key_bound",
    ("delete", "keys"): "read_path",
    ("restore-table", "keys"): "read_path",
    ("restore-table", "where"): "key_bound",
    ("diff", "from_"): "time",
    ("diff", "to"): "time",
    ("diff", "to_parquet"): "write_target",
    ("revert", "commit"): "time",  # a commit ts, as --before takes
    ("revert", "from_"): "time",
    ("revert", "to"): "time",
    ("load", "file"): "read_path",
    ("compact", "memory"): "size",
    ("snapshot drop", "older_than"): "duration",
    ("metrics", "textfile"): "write_target",
    ("metrics", "serve_at"): "listen_address",
    ("tenant set", "rpo"): "duration",
}
_BY_NAME: dict[str, Kind] = {
    "tenant": "tenant",
    "to_tenant": "new_tenant",
    "table": "table",
    "database": "database",
    "snapshot": "time",
    "name": "snapshot",
    "at": "time",
    "as_of": "time",
    "before": "time",
    "first": "time",
    "grace": "duration",
    "orphan_grace": "duration",
    "every": "duration",
    "keep_for": "duration",
    "window": "duration",
    "uri": "backup_uri",
    "backup_id": "backup_id",
    "resume": "job",
    "cancel": "job",
    "sql": "sql",
    "iceberg_catalog": "iceberg_catalog",
    "namespace": "new_name",
}


def _choices(annotation: Any) -> tuple[str, ...]:
    if get_origin(annotation) is Literal:
        return tuple(str(a) for a in get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return tuple(str(m.value) for m in annotation)
    return ()


def _kind(command: str, param: Any, annotation: Any, choices: tuple[str, ...]) -> Kind:
    if getattr(param, "is_flag", False):
        return "flag"
    if choices:
        return "choice"
    found = _BY_COMMAND.get((command, param.name)) or _BY_NAME.get(param.name)
    if found is not None:
        return found
    inner = get_args(annotation)[0] if get_origin(annotation) is list else annotation
    if inner is int:
        return "int"
    if inner is float:
        return "float"
    if inner is Path:
        return "write_target"  # the careful guess: never handed a system path
    return "text"


def leaf_commands(root: Any) -> tuple[Command, ...]:
    """Every runnable command under ``root`` (a click group), with its parameters.

    Help, completion and version options are the app's plumbing, not input; an
    option whose value is a choice gets the choice's values as plausible ones.
    """
    found: list[Command] = []

    def walk(command: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
        subs = getattr(command, "commands", None)
        if subs:
            for name, sub in sorted(subs.items()):
                yield from walk(sub, (*path, name))
        else:
            yield path, command

    for path, command in walk(root, ()):
        params = []
        for p in command.params:
            if p.name in ("help", "install_completion", "show_completion", "version"):
                continue
            descriptor = getattr(p, "type_descriptor", None)
            annotation = getattr(descriptor, "annotation", None)
            choices = _choices(annotation)
            opts = [o for o in p.opts if o.startswith("-")]
            params.append(
                Param(
                    name=p.name,
                    opt=max(opts, key=len) if opts else None,
                    kind=_kind(" ".join(path), p, annotation, choices),
                    required=bool(p.required),
                    multiple=bool(p.multiple),
                    choices=choices,
                )
            )
        found.append(Command(path, tuple(params)))
    return tuple(found)


# --- drawing an invocation ----------------------------------------------------------


@dataclass(frozen=True)
class Invocation:
    args: tuple[str, ...]
    command: Command
    failing: tuple[str, str]  # (parameter, value) that must make it fail
    json: bool
    verbose: bool


def _plausible(param: Param, sandbox: Path) -> list[str]:
    values = plausible(param.kind, sandbox, param.choices)
    if param.kind == "choice":  # never Spark: the fuzz must stay fast
        values = [v for v in values if v not in ("spark", "auto")] or values
    return values


def _hostile(param: Param, extra: list[str]) -> list[str]:
    pool = [*HOSTILE, *extra] if param.kind == "sql" else list(HOSTILE)
    if param.kind in ("write_target", "backup_uri", "new_catalog_uri", "iceberg_catalog"):
        pool = [v for v in pool if v not in SYSTEM_PATHS]
    return pool


def must_fail_values(param: Param, extra: list[str]) -> list[str]:
    """The hostile values ``param`` can never accept."""
    return [v for v in _hostile(param, extra) if not may_accept(param.kind, v)]


def culpable(command: Command, sql_extra: list[str]) -> list[Param]:
    """The parameters of ``command`` that can be given a value that must fail."""
    return [p for p in command.params if p.kind != "flag" and must_fail_values(p, sql_extra)]


@st.composite
def invocations(
    draw: st.DrawFn,
    command: Command,
    sandbox: Path,
    sql_extra: list[str],
    culprit_name: str | None = None,
) -> Invocation:
    """One command line for ``command`` that must fail (see the module's docstring):
    ``culprit_name``'s value (any parameter's if None) is one it can never accept."""
    valued = [p for p in command.params if p.kind != "flag"]
    candidates = [p for p in culpable(command, sql_extra) if culprit_name in (None, p.name)]
    culprit: Param | None = None
    if candidates:
        chosen = draw(st.sampled_from(candidates))
        refused: st.SearchStrategy[str] = st.sampled_from(must_fail_values(chosen, sql_extra))
        if chosen.kind == "sql" and sql_extra:  # the statements that write or escape, often
            refused = st.sampled_from(sql_extra) | refused
        culprit, bad = chosen, draw(refused)
    else:  # a command without values fails on the catalog it cannot reach
        culprit, bad = None, UNREACHABLE_CATALOG

    # Half the time the culprit comes alone, beside the required values only, so
    # no other option's refusal (a conflict, a missing --yes) comes first.
    alone = draw(st.booleans())
    values: dict[str, list[str]] = {}
    for p in valued:
        if p is culprit:
            values[p.name] = [bad]
            continue
        if not p.required and (alone or not draw(st.booleans())):
            continue
        pool = _plausible(p, sandbox)
        count = draw(st.integers(1, 2)) if p.multiple else 1
        values[p.name] = [
            draw(st.sampled_from(pool) | st.sampled_from(_hostile(p, sql_extra)))
            if draw(st.integers(0, 3)) == 0
            else draw(st.sampled_from(pool))
            for _ in range(count)
        ]

    as_json = draw(st.booleans())
    verbose = draw(st.integers(0, 5)) == 0
    options: list[str] = []
    for p in command.params:
        if p.opt is None or p.name == "json_output":
            continue
        if p.kind == "flag":
            if (p.name == "yes" or not alone) and draw(st.booleans()):
                options.append(p.opt)
        else:
            for value in values.get(p.name, []):
                options += [p.opt, value]
    if as_json and any(p.name == "json_output" for p in command.params) and draw(st.booleans()):
        options.append("--json")  # the command's own --json, after its name
        root_json: list[str] = []
    else:
        root_json = ["--json"] if as_json else []

    arguments = [p for p in command.params if p.opt is None]
    given = [i for i, p in enumerate(arguments) if p.name in values]
    positionals: list[str] = []
    for p in arguments[: given[-1] + 1 if given else 0]:  # none left out before the last
        positionals += values.get(p.name) or _plausible(p, sandbox)[:1]
    if any(v.startswith("-") for v in positionals):
        positionals = ["--", *positionals]  # so `-1h` is a value, not an option
    root = [*root_json, *(["--verbose"] if verbose else [])]
    if culprit is None:
        root += ["--catalog", bad]
    if draw(st.integers(0, 5)) == 0:
        root.append("--wide")
    args = (*root, *command.path, *options, *positionals)
    failing = (culprit.name if culprit else "--catalog", bad)
    return Invocation(tuple(args), command, failing, as_json, verbose)
