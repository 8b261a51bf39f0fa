"""The ``rewind`` console script: a bare ``--version`` answered before anything
heavy loads, every other command line handed to the typer app (engine.cli.app).

Importing the app imports typer and rich and builds all of its commands before
it parses even an eager option: about 0.15 s that a version check from a
cron job or a health probe does not need (benchmarks/bench_cli_start.py).
The answer is the one ``rewind --version`` gives through typer.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Console-script entry point (``rewind``); exits with the command's status."""
    if sys.argv[1:] == ["--version"]:
        from tenants import __version__

        print(f"rewind {__version__}")
        return
    from engine.cli.app import main as run_app

    run_app()
