"""Where ``rewind metrics`` puts a scrape: a textfile written atomically, or ``/metrics``.

node_exporter's textfile collector reads every ``*.prom`` file of its
directory at each of its own scrapes, whenever that is: a file rewritten in
place could be read half written. :func:`write_textfile` writes a temporary
file in the same directory (same filesystem, so the rename is atomic; its name
does not end in ``.prom``, so the collector never reads it) and renames it over
the target, so a reader sees the old file or the new one, whole.

:func:`serve` answers ``GET /metrics`` with ``prometheus_client``'s WSGI app,
one thread per request, each scrape reading the catalog afresh, until the
process is interrupted (Ctrl-C, or SIGTERM from a container runtime). A scrape
that cannot read the catalog answers 503 with one line, and the server goes on.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import tempfile
import threading
from collections.abc import Callable, Iterable
from contextlib import suppress
from pathlib import Path
from types import FrameType
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import ThreadingWSGIServer, make_wsgi_app

from tenants.errors import InvalidArgument, RewindError
from tenants.redaction import redact

DEFAULT_HOST = "127.0.0.1"
# :PORT, HOST:PORT or [IPv6]:PORT; ASCII digits only.
_LISTEN = re.compile(r"(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9.-]*)):([0-9]{1,5})")


def parse_listen(text: str) -> tuple[str, int]:
    """``:9464`` → (127.0.0.1, 9464); ``HOST:PORT`` and ``[::1]:PORT`` as given.

    Raises:
        InvalidArgument: not of that form, or the port is not 1-65535.
    """
    match = _LISTEN.fullmatch(text)
    port = int(match.group(3)) if match else 0
    if match is None or not 1 <= port <= 65535:
        raise InvalidArgument(
            f"invalid --serve {redact(text)!r}: give :PORT or HOST:PORT with a port from 1 to "
            "65535, e.g. :9464 (127.0.0.1) or 0.0.0.0:9464 (every interface)"
        )
    return match.group(1) or match.group(2) or DEFAULT_HOST, port


def textfile_path(text: str) -> Path:
    """A ``--textfile`` value as a path, refused before any I/O if it cannot name a file."""
    if not text or "\x00" in text or text.endswith(("/", os.sep)):
        raise InvalidArgument(
            f"invalid --textfile {redact(text)!r}: give a file path, e.g. "
            "/var/lib/node_exporter/textfile/rewind.prom"
        )
    return Path(text)


def write_textfile(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (see the module doc); mode 0644, so a
    node_exporter running as another user reads it.

    Raises:
        InvalidArgument: ``path`` is a directory, its directory is missing, or it
            cannot be written there; nothing is left behind.
    """
    shown = redact(str(path))
    if path.is_dir():
        raise InvalidArgument(
            f"--textfile {shown} is a directory: give a file in it, e.g. {shown}/rewind.prom"
        )
    directory = path.parent
    if not directory.is_dir():
        raise InvalidArgument(f"--textfile {shown}: directory {redact(str(directory))} not found")
    try:
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as error:
        raise InvalidArgument(f"cannot write --textfile {shown}: {error.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except OSError as error:
        with suppress(OSError):
            os.unlink(temporary)
        raise InvalidArgument(f"cannot write --textfile {shown}: {error.strerror}") from None
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary)
        raise


class _QuietHandler(WSGIRequestHandler):
    """No access log line per scrape (Prometheus scrapes every 15-60 s)."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


def guarded_app(app: Callable[..., Iterable[bytes]], report: Callable[[str], None]) -> Any:
    """``app``, answering a scrape that fails (the catalog away, say) with 503 and one
    line, reported once, instead of a traceback and a dropped connection."""

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        try:
            return app(environ, start_response)
        except RewindError as error:
            line = redact(f"scrape failed: {error}".splitlines()[0])
        except Exception as error:  # a bug: still one line, and the server goes on
            line = redact(f"scrape failed: unexpected {type(error).__name__}: {error}")
            line = line.splitlines()[0]
        report(line)
        start_response("503 Service Unavailable", [("Content-Type", "text/plain; charset=utf-8")])
        return [f"{line}\n".encode()]

    return guarded


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def serve(
    registry: CollectorRegistry,
    host: str,
    port: int,
    *,
    ready: Callable[[str], None],
    report: Callable[[str], None],
) -> None:
    """Serve ``registry`` at ``http://host:port/metrics`` in the foreground; return on
    Ctrl-C or SIGTERM. ``ready`` gets the URL once the port is bound.

    Raises:
        InvalidArgument: the host does not resolve, or the port cannot be bound
            (in use, or privileged).
    """
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[
            0
        ][0]
    except (socket.gaierror, UnicodeError) as error:
        raise InvalidArgument(f"cannot serve metrics on {host}:{port}: {error}") from None

    class Server(ThreadingWSGIServer):
        address_family = family

    app = guarded_app(make_wsgi_app(registry), report)
    try:
        server = make_server(host, port, app, server_class=Server, handler_class=_QuietHandler)
    except OSError as error:
        raise InvalidArgument(
            f"cannot serve metrics on {host}:{port}: {error.strerror or error}"
        ) from None
    shown = f"[{host}]" if ":" in host else host
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        ready(f"http://{shown}:{port}/metrics")
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
