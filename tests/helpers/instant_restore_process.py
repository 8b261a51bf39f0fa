"""An instant restore in its own process, stoppable at an exact point of its rewrite or swap.

    python tests/helpers/instant_restore_process.py CATALOG WAREHOUSE TENANT POINT [--to NEW]
        [--resume JOB] [--no-wait] [--batch N] [--pause-at STEP:K] [--go-file PATH]
        [--swap-delay SECONDS] [--put-delay SECONDS] [--hostname NAME] [--linger]

The fault tests of instant restore (tests/engine/restore/test_instant_restore_faults.py) kill,
race and cancel this process while it works, as another host would. It sees
its own progress through the watcher every long step reports to
(``tenants.progress``), so nothing in the engine is patched to stop it:

- ``--batch N`` swaps N straddlers per transaction (``engine.restore.swap.BATCH``),
  so a small table's swap has several transactions to die between;
- ``--pause-at swap:K`` stops after the swap's K-th transaction committed
  (``swap:0``: before the first), ``rewrite:K`` after the K-th rewrite task was
  journaled; it prints ``{"event": "paused", ...}`` and waits for ``--go-file``
  to exist (forever without one: the test SIGKILLs it there);
- ``--swap-delay`` sleeps after each swap transaction (a slow swap to race);
- ``--put-delay`` sleeps before each object put (a slow rewrite);
- ``--hostname`` names this process as another host would (its lease is then
  judged by expiry alone from the test's host);
- ``--go-file`` alone (no pause) makes the process wait for it before it starts,
  so two processes can be released at once;
- ``--linger`` keeps the process alive after it printed its outcome, until stdin closes.

The S3 endpoint comes from the environment (``AWS_ENDPOINT_URL``...), as in
production. Prints JSON lines: events (``installed``, ``paused``), then the
outcome ``{"ok": ..., "error": ..., "type": ...}``; exits 0 on success, 3 on a
Rewind error.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import engine.restore.swap  # noqa: E402
from engine.restore.job import restore_tenant, resume_restore  # noqa: E402
from tenants.errors import RewindError  # noqa: E402
from tenants.progress import Step, watching  # noqa: E402
from tenants.store import TableStore  # noqa: E402


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def wait_for(go_file: str | None) -> None:
    """Block until ``go_file`` exists; forever without one (the test kills us)."""
    while go_file is None or not Path(go_file).exists():
        time.sleep(0.02)


class Counting:
    """One long step (the rewrite or the swap), counting its advances: each is one
    journaled task or one committed swap transaction."""

    def __init__(self, name: str, pause_at: int | None, delay: float, go_file: str | None) -> None:
        self.name = name
        self.pause_at = pause_at
        self.delay = delay
        self.go_file = go_file
        self.count = 0
        self.check()

    def check(self) -> None:
        if self.pause_at == self.count:
            say(event="paused", step=self.name, after=self.count)
            wait_for(self.go_file)

    def advance(self, amount: int) -> None:
        self.count += 1
        if self.delay:
            time.sleep(self.delay)
        self.check()


class Watcher:
    """Finds the rewrite and the swap among the steps the job reports."""

    def __init__(self, pause: tuple[str, int] | None, swap_delay: float, go_file: str | None):
        self.pause = pause
        self.swap_delay = swap_delay
        self.go_file = go_file

    def begin(self, what: str, total: int | None) -> Step:
        name = what.split(" ", 1)[0]
        step = {"swapping": "swap", "rewriting": "rewrite"}.get(name)
        if step is None:
            return Counting(what, None, 0.0, None)
        at = self.pause[1] if self.pause and self.pause[0] == step else None
        return Counting(step, at, self.swap_delay if step == "swap" else 0.0, self.go_file)

    def end(self, step: Step) -> None:
        pass


class SlowPuts:
    """The real object store; every put first sleeps ``delay``."""

    def __init__(self, inner: Any, delay: float) -> None:
        self.inner = inner
        self.warehouse = inner.warehouse
        self.delay = delay

    def put(self, key: str, data: bytes) -> None:
        time.sleep(self.delay)
        self.inner.put(key, data)

    def open_output(self, key: str) -> Any:
        time.sleep(self.delay)
        return self.inner.open_output(key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def pause_point(text: str | None) -> tuple[str, int] | None:
    if text is None:
        return None
    step, _, count = text.partition(":")
    if step not in ("swap", "rewrite") or not count.isdigit():
        raise SystemExit(f"--pause-at {text!r}: give swap:K or rewrite:K")
    return step, int(count)


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("catalog", "warehouse", "tenant", "point"):
        parser.add_argument(name)
    parser.add_argument("--to")
    parser.add_argument("--resume")
    parser.add_argument("--no-wait", action="store_true")
    parser.add_argument("--batch", type=int)
    parser.add_argument("--pause-at")
    parser.add_argument("--go-file")
    parser.add_argument("--swap-delay", type=float, default=0.0)
    parser.add_argument("--put-delay", type=float, default=0.0)
    parser.add_argument("--hostname")
    parser.add_argument("--linger", action="store_true")
    args = parser.parse_args()
    pause = pause_point(args.pause_at)
    if args.batch is not None:
        engine.restore.swap.BATCH = args.batch
    if args.hostname is not None:
        name = args.hostname
        socket.gethostname = lambda: name  # the lease names its holder by this
    opened = TableStore.open(args.catalog, args.warehouse)
    store = TableStore(opened.catalog, SlowPuts(opened.objects, args.put_delay))  # type: ignore[arg-type]
    if pause is None and args.go_file is not None:
        say(event="ready")
        wait_for(args.go_file)
    watcher = Watcher(pause, args.swap_delay, args.go_file)
    try:
        with watching(watcher):
            if args.resume:
                outcome = resume_restore(store, args.resume)
            else:
                outcome = restore_tenant(
                    store,
                    args.tenant,
                    args.point,
                    to=args.to,
                    executor="local",
                    instant=True,
                    wait=not args.no_wait,
                    on_installed=lambda i: say(event="installed", tenant=i.tenant.ref, ts=i.ts),
                )
        say(
            ok=True,
            job=outcome.job_id,
            tenant=outcome.tenant.ref,
            rewritten=outcome.rewritten,
            pending=outcome.rewrite_pending,
        )
        code = 0
    except RewindError as e:
        say(ok=False, type=type(e).__name__, error=str(e))
        code = 3
    if args.linger:
        sys.stdin.read()
    store.close()
    sys.exit(code)


if __name__ == "__main__":
    main()
