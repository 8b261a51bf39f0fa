"""``rewind metrics``: the catalog's job journals and tenants in Prometheus's format.

Only the catalog is opened (never the warehouse), and only to read, so a
sidecar or a cron job on any host needs the catalog URI and nothing else.
What each metric means, and example alert rules: docs/operations.md.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from engine.cli import render
from engine.cli.context import cli_state
from engine.operations.exporter import parse_listen, serve, textfile_path, write_textfile
from engine.operations.metrics import exposition, registry_for
from tenants.catalog import open_catalog
from tenants.config import default_catalog_uri
from tenants.errors import InvalidArgument


def metrics_cmd(
    ctx: typer.Context,
    textfile: Annotated[
        str | None,
        typer.Option(
            "--textfile",
            metavar="PATH",
            help="Write to PATH atomically instead of stdout, for node_exporter's textfile "
            "collector (name it *.prom).",
            show_default=False,
        ),
    ] = None,
    serve_at: Annotated[
        str | None,
        typer.Option(
            "--serve",
            metavar="[HOST]:PORT",
            help="Serve /metrics over HTTP in the foreground until interrupted; HOST "
            "defaults to 127.0.0.1 (0.0.0.0: every interface).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Print Prometheus metrics of every tenant and job, read from the catalog.

    Restore, backup, GC and drill counts, durations and bytes from the catalog's
    journals, jobs running and stale, and per-tenant gauges (newest snapshot and
    backup, objects, bytes). Any host with the catalog exports the same numbers.

    Example: rewind metrics --textfile /var/lib/node_exporter/textfile/rewind.prom
    """
    state = cli_state(ctx)
    if textfile is not None and serve_at is not None:
        raise InvalidArgument("give --textfile or --serve, not both")
    path = None if textfile is None else textfile_path(textfile)
    listen = None if serve_at is None else parse_listen(serve_at)
    catalog = open_catalog(state.catalog_uri or default_catalog_uri(), create=False)
    try:
        registry = registry_for(catalog)
        if listen is not None:
            serve(
                registry,
                *listen,
                ready=lambda url: _serving(url, as_json=state.json),
                report=render.warn,
            )
        elif path is not None:
            data = exposition(registry)
            write_textfile(path, data)
            if state.json:
                render.emit_json({"textfile": str(path), "bytes": len(data)})
        elif state.json:
            render.emit_json({"metrics": _families_json(registry)})
        else:
            sys.stdout.write(exposition(registry).decode("utf-8"))
            sys.stdout.flush()
    finally:
        catalog.close()


def _serving(url: str, *, as_json: bool) -> None:
    if as_json:
        render.emit_json_line({"serving": url})
    else:
        print(f"serving Prometheus metrics at {url} (Ctrl-C stops)", file=sys.stderr, flush=True)


def _families_json(registry: Any) -> list[dict[str, Any]]:
    """Every family as {name, type, help, samples: [{name, labels, value}]}."""
    return [
        {
            "name": family.name,
            "type": family.type,
            "help": family.documentation,
            "samples": [
                {"name": s.name, "labels": dict(s.labels), "value": s.value} for s in family.samples
            ],
        }
        for family in registry.collect()
    ]
