"""A restore in its own process, slowed down so another process can act while it runs.

    python tests/helpers/restore_process.py CATALOG WAREHOUSE TENANT POINT [--to NEW] [--method M]
        [--put-delay SECONDS] [--resume JOB]

Every object put sleeps ``--put-delay`` first (the wrapper delegates the rest),
so the job stays in its rewrite (physical) or dump (logical) for a while. The
S3 endpoint comes from the environment (``AWS_ENDPOINT_URL``...), as in
production. Prints one JSON line: ``{"ok": ..., "error": ..., "type": ...}``;
exits 0 on success, 3 on a Rewind error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.restore.job import restore_tenant, resume_restore  # noqa: E402
from tenants.errors import RewindError  # noqa: E402
from tenants.store import TableStore  # noqa: E402


class SlowPuts:
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


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("catalog", "warehouse", "tenant", "point"):
        parser.add_argument(name)
    parser.add_argument("--to")
    parser.add_argument("--method", default="physical")
    parser.add_argument("--put-delay", type=float, default=0.0)
    parser.add_argument("--resume")
    args = parser.parse_args()
    opened = TableStore.open(args.catalog, args.warehouse)
    store = TableStore(opened.catalog, SlowPuts(opened.objects, args.put_delay))  # type: ignore[arg-type]
    try:
        if args.resume:
            outcome = resume_restore(store, args.resume)
        else:
            outcome = restore_tenant(
                store, args.tenant, args.point, to=args.to, method=args.method, executor="local"
            )
        print(json.dumps({"ok": True, "job": outcome.job_id, "tenant": outcome.tenant.ref}))
        code = 0
    except RewindError as e:
        print(json.dumps({"ok": False, "type": type(e).__name__, "error": str(e)}))
        code = 3
    sys.stdout.flush()
    store.close()
    sys.exit(code)


if __name__ == "__main__":
    main()
