"""The root ``rewind`` command: global options, sub-commands and error mapping.

:class:`RewindGroup` is the one place where a :class:`~tenants.errors.RewindError`
becomes a one-line red message on stderr (under ``--json``, one JSON object on
stdout, where a program reads the result) and exit code 1, and so does one an
option's parser raises while typer parses the command line (a bad
``--executor``: engine.cli.choices). It sits in the root command's
``parse_args`` and ``invoke`` rather than in :func:`main`, so the console
script, the demo and ``typer.testing.CliRunner`` all get the same behaviour.
Usage errors (a missing argument, an unknown option) keep typer's exit code 2
and are one line as well, naming the help to read (typer's box spans a dozen
lines); under ``--json`` they are one JSON object on stdout too. Any other exception is a bug in Rewind: it is
one line too (``InternalError``, naming the exception's type and asking for
``--verbose``), never a traceback a user must read past; ``--verbose`` shows
it, redacted.
"""

from __future__ import annotations

# `python -m engine.cli.app ...` runs what the console script runs
# (engine.cli.entry): a bare `--version` is answered there before typer is
# imported, and any other command line imports this module under its own name
# and runs its main(). This copy, run as __main__, goes no further.
if __name__ == "__main__":
    from engine.cli.entry import main as _entry_main

    _entry_main()
    raise SystemExit(0)

import io
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Annotated, Any, NoReturn

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from engine.cli import render, render_layout
from engine.cli.command_index import INDEX
from engine.cli.context import CliState
from engine.cli.entry import version_line
from engine.cli.lazy_commands import Command, LazyCommands
from engine.cli.log_format import LogFormatOption, structured_stderr
from engine.cli.progress import watched
from tenants import __version__
from tenants.errors import RewindError
from tenants.spark.logs import show_spark_logs
from tenants.spark.session import request_master

EXIT_ERROR = 1
EXIT_USAGE = 2  # typer's, for a usage error


class RewindGroup(TyperGroup):
    """The root command; maps every ``RewindError`` raised below it (by an option's
    parser too) to exit 1 and, under ``--json``, typer's usage errors to JSON (exit 2).

    Its commands are built as they are looked up (engine.cli.lazy_commands): a
    command line imports the module of the command it runs, and its help lists
    every command from engine.cli.command_index, importing none.
    """

    # typer types a group's commands as its own click's, which it does not export;
    # every command it builds is a TyperCommand or a TyperGroup.
    commands: LazyCommands  # type: ignore[assignment]

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        # typer built only the commands added to `app` itself (none, but a test's).
        self.commands = LazyCommands(
            self.commands,
            INDEX,
            rich_markup_mode=self.rich_markup_mode,
            suggest_commands=self.suggest_commands,
        )

    def list_commands(self, ctx: typer.Context) -> list[str]:  # type: ignore[override]
        return list(self.commands)  # the names; typer's walks the commands, building each

    def get_command(self, ctx: typer.Context, cmd_name: str) -> Command | None:  # type: ignore[override]
        if ctx.meta.get(_LISTING):
            return self.commands.listed(cmd_name)
        command = self.commands.get(cmd_name)
        if command is not None:  # built on its first look-up; bare flags again change nothing
            _bare_flags(command, ctx)
        return command

    def format_help(self, ctx: typer.Context, formatter: Any) -> None:  # type: ignore[override]
        with _listing(ctx):
            super().format_help(ctx, formatter)

    def shell_complete(self, ctx: typer.Context, incomplete: str) -> list[Any]:  # type: ignore[override]
        with _listing(ctx):  # `rewind <TAB>` needs each command's name and help line
            return super().shell_complete(ctx, incomplete)

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:  # type: ignore[override]
        # --json is global, and some commands take it too: either asks for JSON errors.
        ctx.meta["json_errors"] = "--json" in args
        _bare_params(self, ctx)
        try:
            return super().parse_args(ctx, args)
        except typer.BadParameter as error:  # a root option's parser refused its value
            refused = _parser_error(error)
            if refused is None:
                _usage_error(ctx, error)
            _report(ctx, refused)
        except typer.TyperException as error:  # an unknown root option, say
            _usage_error(ctx, error)

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except RewindError as error:
            _report(ctx, error)
        except typer.BadParameter as error:
            refused = _parser_error(error)
            if refused is None:
                _usage_error(ctx, error)
            _report(ctx, refused)
        except typer.TyperException as error:  # typer's usage errors below the root
            _usage_error(ctx, error)
        except (typer.Exit, typer.Abort):  # typer's own exits, its click's too
            raise
        except BrokenPipeError:  # `rewind ... | head`: the reader left; nothing to say
            _quiet_stdout()
            raise typer.Exit(EXIT_ERROR) from None
        except Exception as error:  # a bug: one line, the traceback under --verbose
            _report_bug(ctx, error)

    def resolve_command(  # type: ignore[override]
        self, ctx: typer.Context, args: list[str]
    ) -> tuple[str | None, Any, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if ctx.meta.get("json_errors") and not rest and getattr(command, "no_args_is_help", False):
            # `rewind --json tenant`: typer would print the group's help to stdout
            # while raising its usage error; a program that asked for JSON gets one.
            _missing_command(f"{ctx.command_path} {name}")
        return name, command, rest


def _report(ctx: typer.Context, error: RewindError) -> NoReturn:
    """Print ``error`` as one line on stderr (one JSON line on stdout under
    ``--json``) and exit 1."""
    if ctx.params.get("verbose"):
        render.print_traceback(error)
    if ctx.meta.get("json_errors"):
        render.print_error_json(type(error).__name__, error.message)
    else:
        render.print_error(error.message, type(error).__name__)
    raise typer.Exit(EXIT_ERROR) from None


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that Python's flush at exit does not raise
    the broken pipe again (the recipe in Python's signal documentation)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        pass  # no real stdout (typer's test runner): nothing will flush it


def _report_bug(ctx: typer.Context, error: Exception) -> NoReturn:
    """An exception that is no :class:`RewindError` is a bug: say so in one line
    (one JSON object under ``--json``) and exit 1, the traceback only under
    ``--verbose``. The CLI fuzz suite (tests/engine/cli/test_cli_fuzz.py) fails on any."""
    if ctx.params.get("verbose"):
        render.print_traceback(error)
    first = (str(error).splitlines() or [""])[0]
    message = (
        f"unexpected {type(error).__name__}{': ' + first if first else ''} "
        "(a bug in Rewind: please report it; --verbose shows the traceback)"
    )
    if ctx.meta.get("json_errors"):
        render.print_error_json("InternalError", message)
    else:
        render.print_error(message, "InternalError")
    raise typer.Exit(EXIT_ERROR) from None


_LISTING = "rewind.listing"
"""``ctx.meta`` key: set while the root's help or completion lists its commands."""


@contextmanager
def _listing(ctx: typer.Context) -> Iterator[None]:
    """While it lasts, the root's commands not yet built are listed by their
    index entries (engine.cli.command_index), not imported and built."""
    ctx.meta[_LISTING] = True
    try:
        yield
    finally:
        ctx.meta.pop(_LISTING, None)


def _bare_flags(command: Command, ctx: typer.Context) -> None:
    """Show ``command``'s parameters, and those of the commands below it, the way
    argparse, gh and the AWS CLI do: ``--dry-run`` with no placeholder,
    ``--namespace NAMESPACE`` for a text option, ``TENANT`` without a type.

    typer's help shows each parameter's type: a flag's (``<bool>``) as if it
    took a value, a text option's as ``<str>``, and an argument's beside the
    name its metavar already gives. An empty metavar shows nothing. The help
    option is made per command on first use, from the root context's names
    (``-h``, ``--help``), so this runs with the root context, before any help
    can be printed: the root's own parameters as it parses the command line,
    each of its commands as it is looked up. Running it again changes nothing.
    """
    _bare_params(command, ctx)
    for sub in getattr(command, "commands", {}).values():
        _bare_flags(sub, ctx)


def _bare_params(command: TyperCommand | TyperGroup, ctx: typer.Context) -> None:
    """:func:`_bare_flags` for ``command``'s own parameters."""
    for param in command.get_params(ctx):
        if isinstance(param, TyperOption) and param.metavar is None:
            if param.is_flag:
                param.metavar = ""
            elif param.display_type(ctx) == "<str>" and param.opts[0].startswith("--"):
                param.metavar = param.opts[0][2:].replace("-", "_").upper()
        elif isinstance(param, TyperArgument) and param.metavar is not None:
            setattr(param, "display_type_rich", _no_type)  # noqa: B010 (an instance's own)


def _no_type(ctx: typer.Context) -> None:
    """An argument named by its metavar (``TENANT``) shows no ``<str>`` beside it."""
    return None


def _show_version(ctx: typer.Context, value: bool) -> None:
    """``--version``: ``rewind 0.1.0`` (a JSON object under ``--json``), then exit."""
    if not value or ctx.resilient_parsing:
        return
    if ctx.meta.get("json_errors"):
        render.emit_json({"name": "rewind", "version": __version__})
    else:
        render.say(version_line())
    raise typer.Exit()


def _usage_error(ctx: typer.Context, error: typer.TyperException) -> NoReturn:
    """typer's usage error as one line with its exit code (2): on stderr, or under
    ``--json`` as one JSON line on stdout. typer's own box spans a dozen lines a
    script cannot grep; the line names the help that shows the usage."""
    where = getattr(error, "ctx", None)
    path = where.command_path if where is not None else "rewind"
    said = error.format_message()
    message = (
        f"{said} See `{path} -h`" if said.endswith("?") else f"{said.rstrip('.')}; see `{path} -h`"
    )
    if error.message == "Missing command.":  # `rewind --json`
        if ctx.meta.get("json_errors"):
            _missing_command(path)
        message = f"missing command: {path} COMMAND; `{path} -h` lists them"
    if ctx.meta.get("json_errors"):
        render.print_error_json(type(error).__name__, message)
    else:
        render.print_error(message, type(error).__name__)
    raise typer.Exit(error.exit_code) from None


def _missing_command(path: str) -> NoReturn:
    """A group run without its command, under ``--json``: a usage error, exit 2."""
    render.print_error_json(
        "UsageError", f"missing command: {path} COMMAND; `{path} -h` lists them"
    )
    raise typer.Exit(EXIT_USAGE)


def _parser_error(error: typer.BadParameter) -> RewindError | None:
    """The :class:`RewindError` an option's ``parser`` raised (engine.cli.choices), if any.

    typer runs a parser inside pydantic validation, which turns a ``ValueError``
    (``InvalidArgument`` is one) into a ``ValidationError`` that keeps it in each
    error's context; typer re-raises that as a usage error (exit 2, a boxed
    message). Found here, it is reported like the same error raised by the API.
    """
    cause = error.__cause__ or error.__context__
    if isinstance(cause, RewindError):
        return cause
    errors = getattr(cause, "errors", None)  # pydantic is typer's dependency, not ours
    for detail in errors() if callable(errors) else ():
        found = detail.get("ctx", {}).get("error")
        if isinstance(found, RewindError):
            return found
    return None


ABOUT = (
    "a multi-tenant table store on S3, with point-in-time reads, and the backup and restore "
    "engine that gives a tenant its data back as of a snapshot"
)
"""What Rewind is, in the words the README opens with and the package metadata
gives as its summary (tests/test_readme_api.py holds the three together)."""

app = typer.Typer(
    cls=RewindGroup,
    name="rewind",
    help=f"Rewind is {ABOUT}.\n\n"
    "Start with `rewind tenant create NAME`; every command takes -h for its help and examples.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    # Locals can hold credentials (S3 settings); never print them.
    pretty_exceptions_show_locals=False,
)
# Its commands are engine.cli.command_index's, each imported when it is looked up.


@app.callback()
def root(
    ctx: typer.Context,
    catalog: Annotated[
        str | None,
        typer.Option(
            "--catalog",
            metavar="URI",
            envvar="REWIND_CATALOG",
            help="Catalog URI: sqlite:///path.db or postgresql://user@host:port/db "
            "(default: sqlite:///$REWIND_HOME/catalog.db; REWIND_HOME defaults to .rewind).",
            show_default=False,
        ),
    ] = None,
    warehouse: Annotated[
        str | None,
        typer.Option(
            "--warehouse",
            metavar="URI",
            envvar="REWIND_WAREHOUSE",
            help="Warehouse URI: s3://bucket/prefix (AWS_ENDPOINT_URL and the usual AWS "
            "credential variables apply) or file:///path (default: $REWIND_HOME/warehouse).",
            show_default=False,
        ),
    ] = None,
    adopt_warehouse: Annotated[
        bool,
        typer.Option(
            "--adopt-warehouse",
            help="Make this catalog the owner of a warehouse another catalog owns (or that "
            "holds data this catalog never wrote). GC still never deletes the other catalog's "
            "objects.",
        ),
    ] = False,
    spark_master: Annotated[
        str | None,
        typer.Option(
            "--spark-master",
            metavar="URL",
            help="Spark master for Spark work (local[N], spark://host:port, yarn, k8s://...). "
            "Default: spark-submit's master, else $SPARK_MASTER, else local[2]. With a cluster "
            "master, --executor auto picks Spark.",
            show_default=False,
        ),
    ] = None,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="Show the traceback of an error, and Spark's own log lines."
        ),
    ] = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print machine-readable JSON.")
    ] = False,
    log_format: LogFormatOption = "text",
    wide: Annotated[
        bool,
        typer.Option(
            "--wide",
            help="Print tables at their natural width, one line per row, however long "
            "(for `less -S` or grep). Default: the terminal's width, or 100 columns "
            "off a terminal (COLUMNS overrides both), wrapping long cells.",
        ),
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_show_version,
            is_eager=True,
            expose_value=False,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    """Rewind: a multi-tenant table store on S3, with point-in-time reads."""
    request_master(spark_master)
    state = CliState(
        catalog,
        warehouse,
        verbose=verbose,
        json=json_output,
        wide=wide,
        adopt_warehouse=adopt_warehouse,
        log_format=log_format,
    )
    ctx.obj = state
    ctx.call_on_close(state.close)
    show_spark_logs(verbose)
    ctx.with_resource(structured_stderr(log_format))
    # Bars on stderr only for a person: not for --json, nor between JSON log lines.
    ctx.with_resource(watched(lambda: state.json or state.log_format == "json"))
    wide_output = render_layout.WIDE.set(wide)
    ctx.call_on_close(lambda: render_layout.WIDE.reset(wide_output))


def main(argv: Sequence[str] | None = None) -> None:
    """Run ``rewind ARGV`` (default: the process's arguments); exits with the
    command's status. The console script (engine.cli.entry) calls it for any
    command line but a bare ``--version``."""
    app(args=None if argv is None else list(argv), prog_name="rewind")
