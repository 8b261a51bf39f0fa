"""Real processes sharing one catalog and warehouse, on both backends.

Four processes load four tenants (random upserts and deletes, compacting now
and then) while a fifth restores another tenant in place and clones it, and a
sixth runs GC with no grace for unreferenced objects. Processes, not threads:
each has its own catalog connection and its own S3 client, as separate hosts
would. Afterwards every loaded tenant equals the oracle built from the commits
its loader reports, the restored tenant and its clones equal the snapshot, and
no object the catalog references is missing from the bucket.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable

import pyarrow as pa

from tenants.objectstore.embedded import EmbeddedS3
from tenants.schema import TableSchema
from tenants.store import TableStore
from tests.helpers.gc import dangling_keys
from tests.helpers.paths import HELPERS

WORKER = str(HELPERS / "concurrent_worker.py")
SCHEMA = TableSchema.of([("id", "int64"), ("v", "string")], ["id"])
LOADERS = ("t0", "t1", "t2", "t3")
COMMITS = 12
RESTORE_ROUNDS = 2


def contents(store: TableStore, tenant: str, as_of: str | None = None) -> dict[int, str]:
    table = store.read(tenant, "db.items", as_of)
    return dict(zip(table.column("id").to_pylist(), table.column("v").to_pylist(), strict=True))


def replay(log: str) -> dict[int, str]:
    """The oracle: a loader's commits applied in order (an update wins over its delete)."""
    state: dict[int, str] = {}
    for line in log.splitlines():
        commit = json.loads(line)
        for key in commit["deletes"]:
            state.pop(key, None)
        for key, value in commit["upserts"]:
            state[key] = value
    return state


def test_four_loaders_a_restore_and_gc_at_once_lose_nothing(
    new_catalog_uri: Callable[[], str], s3_server: EmbeddedS3, bucket: str
) -> None:
    catalog, warehouse = new_catalog_uri(), f"s3://{bucket}/wh"
    store = TableStore.open(catalog, warehouse, s3=s3_server.settings)
    try:
        for tenant in (*LOADERS, "r"):
            store.create_tenant(tenant)
            store.create_table(tenant, "db.items", SCHEMA)
        ids = pa.array(range(20), pa.int64())
        store.write("r", "db.items", upserts=pa.table({"id": ids, "v": ["before"] * 20}))
        store.create_snapshot("r", "s")
        store.write("r", "db.items", upserts=pa.table({"id": ids[:5], "v": ["after"] * 5}))
        store.compact("r", "db.items")  # an object straddling "s": the restore rewrites it
        expected_r = contents(store, "r", "s")
    finally:
        store.close()

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    commands = {
        **{
            t: [WORKER, "load", catalog, warehouse, t, "--seed", str(i), "--commits", str(COMMITS)]
            for i, t in enumerate(LOADERS)
        },
        "restore": [WORKER, "restore", catalog, warehouse, "r", "--snapshot", "s",
                    "--rounds", str(RESTORE_ROUNDS)],
        "gc": [WORKER, "gc", catalog, warehouse, "--rounds", "4"],
    }  # fmt: skip
    running = {
        name: subprocess.Popen(
            [sys.executable, *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for name, argv in commands.items()
    }
    outputs = {name: proc.communicate(timeout=600) for name, proc in running.items()}
    failed = {n: outputs[n][1][-2000:] for n, p in running.items() if p.returncode != 0}
    assert not failed, failed

    store = TableStore.open(catalog, warehouse, s3=s3_server.settings)
    try:
        for tenant in LOADERS:
            expected = replay(outputs[tenant][0])
            assert len(outputs[tenant][0].splitlines()) == COMMITS
            assert contents(store, tenant) == expected, tenant
        assert contents(store, "r") == expected_r
        for n in range(RESTORE_ROUNDS):
            assert contents(store, f"r-clone{n}") == expected_r
        assert dangling_keys(store) == set(), "the catalog references keys the bucket lost"
    finally:
        store.close()
