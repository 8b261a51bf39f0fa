"""One process of the concurrency test: a loader, a restorer or a GC loop.

    python tests/helpers/concurrent_worker.py load CATALOG WAREHOUSE TENANT --seed N --commits K
    python tests/helpers/concurrent_worker.py restore CATALOG WAREHOUSE TENANT --snapshot NAME --rounds K
    python tests/helpers/concurrent_worker.py gc CATALOG WAREHOUSE --rounds K

The S3 endpoint comes from the environment (``AWS_ENDPOINT_URL``...), as in
production. A loader commits random upserts and deletes to its tenant's table
(and now and then compacts it) and prints one JSON line per commit that landed,
``{"upserts": [[id, v]...], "deletes": [id...]}``, so the test can replay them
into the oracle. A restorer restores its tenant in place to the snapshot and
makes clones, ``--rounds`` times. GC runs with no grace for unreferenced
objects (the orphan grace stays 24 h: an upload not yet registered is an orphan
until its commit). Exits 0 when every step succeeded, else prints the error and
exits 3.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pyarrow as pa  # noqa: E402

from engine.gc.run import run_gc  # noqa: E402
from engine.restore.job import restore_tenant  # noqa: E402
from tenants.errors import ConcurrentModification, RewindError  # noqa: E402
from tenants.store import TableStore  # noqa: E402

DB, TABLE = "db", "items"
KEYS = 40


def load(store: TableStore, tenant: str, seed: int, commits: int) -> None:
    rnd = random.Random(seed)
    for n in range(commits):
        ups = sorted(rnd.sample(range(KEYS), rnd.randint(1, 6)))
        dels = sorted(set(rnd.sample(range(KEYS), rnd.randint(0, 3))) - set(ups))
        upserts = pa.table(
            {"id": pa.array(ups, pa.int64()), "v": [f"{tenant}-{n}-{k}" for k in ups]}
        )
        deletes = pa.table({"id": pa.array(dels, pa.int64())}) if dels else None
        store.write(tenant, f"{DB}.{TABLE}", upserts=upserts, deletes=deletes)
        print(json.dumps({"upserts": [[k, f"{tenant}-{n}-{k}"] for k in ups], "deletes": dels}))
        sys.stdout.flush()
        if n % 7 == 6:
            try:
                store.compact(tenant, f"{DB}.{TABLE}")
            except ConcurrentModification:
                # GC's own compaction of this table won the race: the loser
                # changed nothing (its swap is compare-and-set), as documented.
                print(json.dumps({"compaction": "lost a race"}), file=sys.stderr)


def restore(store: TableStore, tenant: str, snapshot: str, rounds: int) -> None:
    for n in range(rounds):
        restore_tenant(store, tenant, snapshot, executor="local")
        restore_tenant(store, tenant, snapshot, to=f"{tenant}-clone{n}", executor="local")


def gc(store: TableStore, rounds: int, orphan_grace_us: int, until: str | None) -> None:
    """``rounds`` passes, or (``until``) passes until that file exists."""
    n = 0
    while (n < rounds) if until is None else not os.path.exists(until):
        run_gc(
            store,
            dry_run=False,
            grace_us=0,
            allow_short_grace=True,
            orphan_grace_us=orphan_grace_us,
        )
        n += 1
    print(json.dumps({"passes": n}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["load", "restore", "gc"])
    parser.add_argument("catalog")
    parser.add_argument("warehouse")
    parser.add_argument("tenant", nargs="?")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--commits", type=int, default=10)
    parser.add_argument("--snapshot")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--orphan-grace-us", type=int, default=24 * 3600 * 1_000_000)
    parser.add_argument("--until", help="gc: run passes until this file exists")
    args = parser.parse_args()
    store = TableStore.open(args.catalog, args.warehouse)
    try:
        if args.role == "load":
            load(store, args.tenant, args.seed, args.commits)
        elif args.role == "restore":
            restore(store, args.tenant, args.snapshot, args.rounds)
        else:
            gc(store, args.rounds, args.orphan_grace_us, args.until)
    except RewindError as e:
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}), file=sys.stderr)
        sys.exit(3)
    finally:
        store.close()


if __name__ == "__main__":
    main()
