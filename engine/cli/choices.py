"""The options that take one word of a fixed set: ``--executor``, ``--verify``,
``--method`` and ``backup create --kind``.

Each is typed with the API's ``Literal`` (engine.pipeline, engine.backup.api),
which typer shows as the choices in ``--help`` (``<local|spark|auto>``). Its
parser is the API's own check, run while typer parses the command line, so a
bad word is refused before the command runs: nothing is opened or written.
The check raises the :class:`~tenants.errors.InvalidArgument` the API would,
and the root command (engine.cli.app) reports it as it reports every error:
one line naming the valid words, exit 1, JSON under ``--json``. A command
gets the plain string the API takes.

(``--reader`` and ``snapshot drop --kind`` are choices too, typer's own
enums; a bad word there is typer's usage error, exit 2. The root's
``--log-format`` is checked the same way, in engine.cli.log_format, which
every command line imports: this module's imports are not needed there.)
"""

from __future__ import annotations

from typing import Annotated, get_args

import typer

from engine.pipeline import (
    ExecutorName,
    Kind,
    Method,
    VerifyLevel,
    check_executor,
    check_level,
    check_method,
)
from tenants.errors import InvalidArgument


def check_backup_kind(kind: str) -> Kind:
    """``kind`` as a backup kind.

    Raises:
        InvalidArgument: not one of ``logical`` or ``physical``.
    """
    if kind not in get_args(Kind):
        raise InvalidArgument(f"unknown backup kind {kind!r}: use logical or physical")
    return kind  # type: ignore[return-value]


ExecutorOption = Annotated[
    ExecutorName,
    typer.Option(
        "--executor",
        parser=check_executor,
        help="Where straddling objects are rewritten; auto picks Spark when the Spark "
        "master is a cluster (the plan says why).",
    ),
]
VerifyOption = Annotated[
    VerifyLevel,
    typer.Option(
        "--verify",
        parser=check_level,
        help="What is proven before install: none; objects (every object's size, rewritten "
        "rows' hashes); full (also every table's rows and content hash).",
    ),
]
MethodOption = Annotated[
    Method,
    typer.Option(
        "--method",
        parser=check_method,
        help="physical (reuse objects, rewrite straddlers), logical (dump and reload) or auto.",
    ),
]
BackupKindOption = Annotated[
    Kind,
    typer.Option(
        "--kind",
        parser=check_backup_kind,
        help="physical (objects, incremental) or logical (a dump).",
    ),
]
