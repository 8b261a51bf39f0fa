"""bench_instant_restore's other process: a reader that opens the same catalog and
warehouse as the benchmark and reads what it is told to, timing each read.

``python -m benchmarks.instant_reader CATALOG WAREHOUSE`` opens the store once
(an ``s3://`` warehouse reaches its endpoint through the AWS environment the
benchmark exported), prints ``{"ready": ...}`` and then answers one JSON
request a line on stdin with one JSON line on stdout:

- ``{"op": "first", "tenant": T, "table": "db.t", "limit": 10}``: the work of
  ``rewind query T db.t --limit 10`` (plan the read now, stream the visible
  rows with ``limit + 1``, as the CLI does to tell whether rows were left out);
- ``{"op": "count", ...}``: every visible row's key, streamed
  (``read_arrow(columns=["id"])``: the key and ``__ts`` alone are read);
- ``{"op": "scan", ...}``: a full scan, every column, streamed (``read_arrow``);
- ``{"op": "bare", ...}``: the floor under ``first``: the first rows of the
  table's first object (lowest key) read by pyarrow alone, no catalog, no MVCC.

Each answer carries ``started`` and ``done`` on ``time.monotonic()`` (Linux's
CLOCK_MONOTONIC, one clock for every process of the machine), so the benchmark
can say when, on its own clock, the row came back. The process is started
before the restore it measures and warm (imports done, store open), as a
serving process would be: the figure is the query, not an interpreter start
(which the benchmark measures apart, with a cold ``rewind query``).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any


def answer(store: Any, request: dict[str, Any]) -> dict[str, Any]:
    """Run one request; its figures (rows, bytes, first row's name) and times."""
    from tenants.reads.visible import stream_visible

    tenant, table = request["tenant"], request["table"]
    database, name = table.split(".", 1)
    started = time.monotonic()
    out: dict[str, Any] = {"op": request["op"], "tenant": tenant}
    if request["op"] == "first":
        limit = int(request.get("limit", 10))
        plan = store.plan_read(tenant, f"{database}.{name}")
        parts = list(stream_visible(store.objects, plan, limit=limit + 1))
        rows = [row for part in parts for row in part.slice(0, limit).to_pylist()][:limit]
        out |= {
            "rows": len(rows),
            "first_id": rows[0]["id"] if rows else None,
            "first_name": rows[0]["name"] if rows else None,
            "objects": len(plan.objects),
            "cut_objects": sum(1 for o in plan.objects if o.cut_ts is not None),
        }
    elif request["op"] in ("count", "scan"):
        columns = ["id"] if request["op"] == "count" else None
        count = nbytes = 0
        for batch in store.read_arrow(tenant, table, columns=columns):
            count += batch.num_rows
            nbytes += batch.nbytes
        out |= {"rows": count, "arrow_bytes": nbytes}
    elif request["op"] == "bare":
        import pyarrow.parquet as pq

        plan = store.plan_read(tenant, f"{database}.{name}")
        first = min(plan.objects, key=lambda o: (o.kind != "data", o.min_pk))
        started = time.monotonic()  # the plan is not the floor's: time the read alone
        with store.objects.open_input(first.key) as source:
            batch = next(
                pq.ParquetFile(source).iter_batches(batch_size=int(request.get("limit", 10)))
            )
        out |= {"rows": batch.num_rows, "object_bytes": first.bytes}
    else:
        raise ValueError(f"unknown request {request!r}")
    done = time.monotonic()
    return out | {"started": started, "done": done, "seconds": done - started}


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    from tenants.store import TableStore

    store = TableStore.open(args[0], args[1], create=False)
    print(json.dumps({"ready": time.monotonic()}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            reply = answer(store, json.loads(line))
        except Exception as e:  # the benchmark raises it, naming the request
            reply = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(reply), flush=True)
    store.close()


if __name__ == "__main__":
    main()
