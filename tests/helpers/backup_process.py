"""``rewind ARGS`` in its own process, with a slow or failing backup destination.

    python tests/helpers/backup_process.py [--put-delay SECONDS | --fail-put] -- ARGS...

The destination ``rewind backup create`` opens is wrapped: every ``put``
sleeps ``--put-delay`` first, so the backup stays running (journaled, its
lease renewed) until the test stops or kills the process; or, with
``--fail-put``, the first ``put`` raises a ``StorageError``, so the backup
fails inside its journaled run. Everything else is the real CLI
(engine.cli.app.main), and exits as it does.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import engine.backup.api as backup_api  # noqa: E402
from engine.cli.app import main as rewind  # noqa: E402
from tenants.errors import StorageError  # noqa: E402


class Destination:
    """The real destination; its puts slowed down or failing."""

    def __init__(self, inner: Any, delay: float, fail: bool) -> None:
        self.inner = inner
        self.delay = delay
        self.fail = fail

    def put(self, key: str, data: bytes) -> None:
        if self.fail:
            raise StorageError(f"cannot write {key}: the destination refused it (a test fault)")
        time.sleep(self.delay)
        self.inner.put(key, data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--put-delay", type=float, default=0.0)
    parser.add_argument("--fail-put", action="store_true")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    opened = backup_api.open_destination

    def slow_destination(*args: Any, **kwargs: Any) -> Any:
        return Destination(opened(*args, **kwargs), options.put_delay, options.fail_put)

    backup_api.open_destination = slow_destination  # type: ignore[assignment]
    rewind([a for a in options.args if a != "--"])


if __name__ == "__main__":
    main()
