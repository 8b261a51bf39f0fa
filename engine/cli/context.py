"""From command-line options and arguments to the values the store takes.

The root callback stores the global options in a :class:`CliState`; commands
ask it for the :class:`~tenants.store.TableStore`, which opens lazily. Commands
validate their arguments (names, table references) *before* asking, so a bad
name is rejected before any I/O: not even the catalog file gets created.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import typer

from tenants.config import S3Settings
from tenants.errors import InvalidArgument
from tenants.names import qualified_table, tenant_name
from tenants.spark.credentials import environment_settings
from tenants.store import TableStore
from tenants.tenancy import parse_tenant_ref
from tenants.times import parse_time, starts_time, time_word

# The commands that may create a store where none is: the first command of a
# deployment (`tenant create`) and a restore of a backup into a new one. Any
# other command needs something that exists (a tenant, a table, a job), so run
# where no store is (the wrong directory, a typo in --catalog) it says where it
# looked instead of leaving an empty catalog and warehouse behind.
MAY_CREATE = frozenset({"tenant create", "backup restore"})


@dataclass
class CliState:
    """The global options, shared with every command through ``ctx.obj``.

    ``None`` for a URI means "the default": :func:`tenants.config.default_catalog_uri`
    and :func:`tenants.config.default_warehouse_uri` (under ``REWIND_HOME``).
    """

    catalog_uri: str | None = None
    warehouse_uri: str | None = None
    verbose: bool = False
    json: bool = False
    wide: bool = False  # --wide: tables at their natural width (engine.cli.render)
    adopt_warehouse: bool = False  # --adopt-warehouse: take over a warehouse another catalog owns
    log_format: str = (
        "text"  # --log-format: json prints each job step on stderr (engine.cli.log_format)
    )
    create: bool = True  # False but for a command in MAY_CREATE (set by cli_state)
    _store: TableStore | None = field(default=None, repr=False)

    def store(self) -> TableStore:
        """The store, opened on first use: migrated, and created only for a command
        in MAY_CREATE (for any other, a missing one is ``NotFound``, naming both)."""
        if self._store is None:
            self._store = TableStore.open(
                self.catalog_uri,
                self.warehouse_uri,
                s3=warehouse_s3_settings(),
                adopt_warehouse=self.adopt_warehouse,
                create=self.create,
            )
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def warehouse_s3_settings() -> S3Settings:
    """How the CLI reaches S3 (its warehouse, and the exports the store opens):
    the one source, read here at the edge and passed down
    (:func:`tenants.spark.credentials.environment_settings`; under spark-submit,
    the restore job's ``spark.hadoop.fs.s3a.*`` keys complete it)."""
    return environment_settings()


def cli_state(ctx: typer.Context) -> CliState:
    """The :class:`CliState` the root callback put on the context.

    A command's own ``--json`` (commands take it after their name too) is
    folded into the state here, so whatever reads the state later (the
    progress bars, engine/cli/progress.py) knows the output is for a machine.
    """
    state = ctx.find_root().obj
    if not isinstance(state, CliState):  # only if a command runs without the root app
        raise RuntimeError("rewind commands must run under the root app (engine.cli.app)")
    if ctx.params.get("json_output"):
        state.json = True
    names = []
    level: Any = ctx  # typer's Context, then click's parents
    while level.parent is not None:  # "rewind tenant list": ["list", "tenant"]
        names.append(level.info_name or "")
        level = level.parent
    state.create = " ".join(reversed(names)) in MAY_CREATE
    return state


def tenant_arg(text: str) -> str:
    """Validate a tenant reference (``acme`` or ``acme@<id>``) before any I/O."""
    parse_tenant_ref(text)
    return text


def new_tenant_arg(text: str) -> str:
    """Validate the name of a tenant to create (no ``@id`` allowed)."""
    return tenant_name(text)


def table_arg(text: str) -> tuple[str, str]:
    """``DB.TABLE`` → (database, table), validated before any I/O."""
    return qualified_table(text)


def instant_arg(option: str, text: str) -> int | str:
    """A time (never a snapshot name) for an option documented as one (``--at``),
    checked before any I/O.

    Returns an absolute time (ISO-8601 instant, ts) as its ts, as before. A
    relative one (``now``, ``-1h``, ``PT15M``) needs the catalog's clock, so it
    is returned as text that starts with ``-`` (``now`` → ``-0s``, ``PT15M`` →
    ``-PT15M``): every API taking ``str | int`` reads that as a time, never as a
    snapshot, and pins it when it opens the catalog (tenants.timeline.lineage.resolve_time,
    TableStore.create_snapshot). A bare word is refused rather than looked up
    as a snapshot of that name.
    """
    if not (starts_time(text) or time_word(text)):
        raise InvalidArgument(
            f"invalid {option} {text!r}: use an ISO-8601 instant (2026-11-22T10:00:00Z), "
            "a ts in µs since the epoch, now, or a time before now (-1h, -90s, PT15M); "
            "for a snapshot use --snapshot NAME"
        )
    return parse_time(text).as_point()


def read_time_arg(as_of: str | None, snapshot: str | None, at: str | None) -> str | int | None:
    """The time one of ``--as-of``, ``--snapshot`` or ``--at`` names (None: now),
    checked before any I/O: ``--snapshot`` takes only a snapshot name, ``--at``
    only a time (:func:`instant_arg`), ``--as-of`` either."""
    given = [n for n, v in (("--as-of", as_of), ("--snapshot", snapshot), ("--at", at)) if v]
    if len(given) > 1:
        raise InvalidArgument(f"give one of --as-of, --snapshot or --at, not {' and '.join(given)}")
    if snapshot is not None:
        return snapshot_arg(snapshot)
    if at is not None:
        return instant_arg("--at", at)
    return as_of


def snapshot_arg(text: str) -> str:
    """A ``--snapshot`` value, checked before any I/O: a snapshot name, never a
    time (``--at`` takes those)."""
    from tenants.timeline.snapshots import snapshot_name

    if starts_time(text.strip()):
        raise InvalidArgument(f"invalid snapshot name {text!r}; for a time use --at")
    return snapshot_name(text)


_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gib": 1 << 30,
    "t": 1 << 40,
    "tib": 1 << 40,
}


INT64_MAX = 2**63 - 1  # what a catalog's int64 column, a SQL LIMIT or a size holds


def size_arg(text: str, option: str) -> int:
    """Bytes from ``512MiB``, ``2G``, ``1.5GiB`` or a plain number of bytes (units of 1024)."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise InvalidArgument(
            f"invalid {option} {text!r}: give a size such as 512MiB, 2GiB or a number of bytes"
        )
    size = int(float(match.group(1)) * _UNITS[unit])
    if size > INT64_MAX:
        raise InvalidArgument(f"invalid {option} {text!r}: at most {INT64_MAX} bytes (8 EiB)")
    return size
