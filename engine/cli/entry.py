"""The ``rewind`` console script, and ``python -m engine.cli.app``: a bare
``--version`` answered before anything heavy loads, every other command line
handed to the typer app (engine.cli.app).

Importing the app imports typer and rich (about 0.09 s) before it parses even
an eager option: time that a version check from a cron job or a health probe
does not need (benchmarks/bench_cli_start.py, goal 0.1 s). Any other command
line with ``--version`` in it (``--json --version``) goes through typer, whose
``--version`` prints the same :func:`version_line`.
"""

from __future__ import annotations

import sys


def version_line() -> str:
    """What ``rewind --version`` prints: ``rewind 0.1.0``."""
    from tenants import __version__

    return f"rewind {__version__}"


def main() -> None:
    """Console-script entry point (``rewind``); exits with the command's status."""
    if sys.argv[1:] == ["--version"]:
        print(version_line())
        return
    from engine.cli.app import main as run_app

    run_app()
