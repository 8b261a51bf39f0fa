"""Locked backups (issue 35): what Object Lock adds to a physical backup, on moto.

Goal: "a locked incremental backup within 1.2x the time of an unlocked one".

One tenant on a moto bucket: one table of ``--objects`` objects (default 200
of ~1 MiB; ``--quick``: 40 of ~256 KiB), each one commit of fresh keys with
an incompressible payload, so every object is copied as it is (no straddler,
no rewrite). Backups go to **two buckets that both have Object Lock** (vaults),
one backed up with ``--lock compliance --retain 30d``, the other without a
lock. Both on vaults because a write to a versioned bucket is not the write
to a plain one (moto keeps versions, S3 bills them): the unlocked backup to
a vault is the baseline whose only difference is the lock, which is the cost
the goal asks about. (An unlocked backup on a vault lists keys, not
versions, and puts no retention: it is exactly a plain bucket's backup.)

Measured side by side, alternating which one runs first at each repetition,
so the neighbours' noise hits both:

1. **Full**: the first backup of the tenant to a fresh pair of vault buckets,
   ``--repeats`` times (default 6; each time new buckets).
2. **Incremental** (the goal case): on the last pair, ``--repeats`` times:
   write ``--new`` (10%) more objects, then back up locked and unlocked; each
   backup copies the new objects and references the rest. The chain grows by
   10% of the first size at each repetition, for both sides alike.
3. **verify** of the newest locked and unlocked backup (both list versions:
   both are in vaults), **delete** of the newest locked one (refused: Locked)
   and, once at the end, of the newest unlocked one (done: its versions
   removed for good).

A locked backup's extra work is timed by wrapping, for the backup's duration,
the listings of every version under ``objects/`` (``first_versions`` before
the copies: what is present; ``first_and_sole`` after: which version was
written, and which keys have only that one), ``lock_all`` (a retention on
each referenced object version, ``LOCK_THREADS`` in flight: a HEAD to read
its lock, skipped for an object this backup just copied, then a
PutObjectRetention if it lengthens the lock) and ``lock_written`` (the
manifest's and the destination marker's); ``lock_of`` and
``extend_retention`` are wrapped to count HEADs and PUTs. Each backup's CPU
seconds (this process: moto's server threads included) are reported beside
its wall-clock seconds: on a shared machine they move less with the
neighbours' load.

moto 5.2 copies every version's bytes at each ListObjectVersions and never
frees the copies (:func:`moto_listing_without_bytes`): at this size the run
outgrew 23 GB and was killed. The benchmark therefore lists without the bytes
(the same answer); ``--moto-as-is`` keeps moto's own listing. Before each
timed call the garbage of the previous one is collected, so neither side
pays for the other's (without it, whichever ran second was ~0.2 s slower).

On moto the S3 "server" is a thread of this Python process, so a request
costs this machine's CPU (~4 ms of wall clock each, 8 in flight, on 2 busy
cores), not a 10-50 ms round trip: on real S3 the per-request cost of
locking weighs about as much or more, the copies (bandwidth) less.
"""

from __future__ import annotations

import argparse
import gc
import io
import resource
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
from rich.console import Console
from rich.table import Table

import engine.backup.physical as physical
import engine.backup.vault as vault
import tenants.objectstore.object_lock as object_lock
from benchmarks.common import finish_run, load_average, moto_server, open_store, timed
from engine.backup.api import create_backup, delete_backup, verify_backup
from tenants.errors import Locked
from tenants.schema import TableSchema
from tenants.store import TableStore

NAME = "bench_vault"
TENANT, DATABASE, TABLE = "acme", "db", "events"
LOCK, RETAIN = "compliance", "30d"
MIB = 1 << 20
SCHEMA = TableSchema.of([("id", "int64"), ("payload", "binary")], ["id"])
PAYLOAD = 1000  # random bytes a row: zstd cannot shrink them, so an object is its rows
GOAL = 1.2

console = Console() if sys.stdout.isatty() else Console(width=170)


# the tenant ----------------------------------------------------------------


class Source:
    """The tenant: one commit (one object of about ``object_bytes``) per call."""

    def __init__(self, store: TableStore, object_bytes: int, seed: int) -> None:
        self.store = store
        self.rows = max(1, object_bytes // (PAYLOAD + 8))
        self.rng = np.random.default_rng(seed)
        self.next_key = 0
        store.create_tenant(TENANT)
        store.create_table(TENANT, f"{DATABASE}.{TABLE}", SCHEMA)

    def add(self, objects: int) -> None:
        for _ in range(objects):
            keys = np.arange(self.next_key, self.next_key + self.rows, dtype=np.int64)
            self.next_key += self.rows
            payload = self.rng.integers(0, 256, self.rows * PAYLOAD, dtype=np.uint8).tobytes()
            offsets = np.arange(0, (self.rows + 1) * PAYLOAD, PAYLOAD, dtype=np.int32)
            column = pa.Array.from_buffers(
                pa.binary(), self.rows, [None, pa.py_buffer(offsets), pa.py_buffer(payload)]
            )
            self.store.write(
                TENANT, f"{DATABASE}.{TABLE}", upserts=pa.table({"id": keys, "payload": column})
            )

    def shape(self) -> dict[str, int]:
        objects = [o for _, o in self.store.objects_of(TENANT)]
        return {"objects": len(objects), "bytes": sum(o.bytes for o in objects)}


def vault_uri() -> str:
    """A fresh moto bucket with Object Lock; backups under ``/backups``."""
    bucket = f"rewind-vault-{uuid.uuid4().hex[:12]}"
    moto_server().create_bucket(bucket, object_lock=True)
    return f"s3://{bucket}/backups"


@contextmanager
def moto_listing_without_bytes(enabled: bool) -> Iterator[bool]:
    """moto 5.2's ListObjectVersions deep-copies every version in the bucket, its
    bytes included, at each request (to mark the latest without touching the
    stored keys), whatever the prefix, and the copies are not freed: a bucket of
    100 MiB costs ~0.1 s and ~100 MiB of memory a request (measured), so this
    run's vaults (every manifest read is a listing) would outgrow 20 GB. Real S3
    reads no object's bytes to list. With ``enabled``, a listed version is
    copied without its bytes (its ETag computed first): the same listing, at
    moto's cost for the metadata. Restored on exit; yields whether it is on."""
    from moto.s3.models import FakeKey

    if not enabled:
        yield False
        return
    had = "__deepcopy__" in FakeKey.__dict__
    original = FakeKey.__dict__.get("__deepcopy__")

    def listed_copy(self: Any, memo: dict[int, Any]) -> Any:
        _ = self.etag  # computed from the bytes, if not yet: the copy has none
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy._value_buffer = io.BytesIO()  # its own, empty: disposing it frees nothing shared
        copy.multipart = None  # nor the parts of a multipart upload
        copy.lock = threading.Lock()
        copy.disposed = True  # nothing of its own to dispose of: no ResourceWarning
        memo[id(self)] = copy
        return copy

    FakeKey.__deepcopy__ = listed_copy  # type: ignore[attr-defined]
    try:
        yield True
    finally:
        if had:
            FakeKey.__deepcopy__ = original  # type: ignore[attr-defined]
        else:
            del FakeKey.__deepcopy__  # type: ignore[attr-defined]


def peak_rss_mib() -> float:
    """This process's peak resident memory (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# the probe -----------------------------------------------------------------


class Probe:
    """Seconds and requests of a locked backup's extra steps (thread-safe counts)."""

    def __init__(self) -> None:
        self.guard = threading.Lock()
        self.listing_s = 0.0
        self.listings = 0
        self.lock_all_s = 0.0
        self.manifest_lock_s = 0.0
        self.heads = 0
        self.puts = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "listing_versions_s": self.listing_s,
            "version_listings": self.listings,
            "lock_objects_s": self.lock_all_s,
            "lock_manifest_s": self.manifest_lock_s,
            "retention_heads": self.heads,
            "retention_puts": self.puts,
        }


@contextmanager
def probed() -> Iterator[Probe]:
    """Time and count the vault steps ``create_physical`` calls, for one backup.

    ``engine.backup.physical`` imported its vault helpers by name, so its names
    are wrapped (those it has: the listing helpers changed as the code did);
    every PutObjectRetention goes through ``tenants.objectstore.object_lock._call``
    (counted there), and ``lock_of`` (one HEAD) is looked up in the same module.
    """
    probe = Probe()
    saved: list[tuple[Any, str, Any]] = []

    def wrap(module: Any, name: str, make: Callable[[Any], Any]) -> None:
        original = getattr(module, name, None)
        if original is not None:
            saved.append((module, name, original))
            setattr(module, name, make(original))

    def listing(original: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            result, seconds = timed(lambda: original(*args, **kwargs))
            probe.listing_s += seconds
            probe.listings += 1
            return result

        return wrapper

    def adding(field: str) -> Callable[[Any], Any]:
        def make(original: Any) -> Any:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                result, seconds = timed(lambda: original(*args, **kwargs))
                setattr(probe, field, getattr(probe, field) + seconds)
                return result

            return wrapper

        return make

    def counting(field: str, when: Callable[[Any], bool]) -> Callable[[Any], Any]:
        def make(original: Any) -> Any:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                result = original(*args, **kwargs)
                if when(result):
                    with probe.guard:
                        setattr(probe, field, getattr(probe, field) + 1)
                return result

            return wrapper

        return make

    def counting_puts(original: Any) -> Any:
        def wrapper(objects: Any, method: str, *args: Any, **kwargs: Any) -> Any:
            result = original(objects, method, *args, **kwargs)
            if method == "put_object_retention":
                with probe.guard:
                    probe.puts += 1
            return result

        return wrapper

    for name in ("first_versions", "first_and_sole"):
        wrap(physical, name, listing)
    wrap(physical, "lock_all", adding("lock_all_s"))
    wrap(physical, "lock_written", adding("manifest_lock_s"))
    wrap(object_lock, "_call", counting_puts)
    wrap(object_lock, "lock_of", counting("heads", lambda _: True))
    try:
        yield probe
    finally:
        for module, name, original in reversed(saved):
            setattr(module, name, original)


# the cases -------------------------------------------------------------------


def backup(store: TableStore, uri: str, locked: bool) -> dict[str, Any]:
    """One backup of the tenant now, timed end to end (the API call), probed."""
    lock = (LOCK, RETAIN) if locked else (None, None)
    gc.collect()  # the other side's garbage is not this one's to collect
    cpu = time.process_time()
    with probed() as probe:
        result, seconds = timed(
            lambda: create_backup(store, TENANT, "now", uri, lock=lock[0], retain=lock[1])
        )
    return {
        "locked": locked,
        "seconds": seconds,
        # This process's CPU, moto's server threads included: less at the mercy
        # of the neighbours than the wall clock on a shared machine.
        "cpu_s": time.process_time() - cpu,
        "backup_id": result.backup_id,
        "objects": result.objects,
        "copied_objects": result.copied_objects,
        "copied_bytes": result.copied_bytes,
        "referenced_objects": result.referenced_objects,
        **probe.to_json(),
    }


def pair(store: TableStore, uris: dict[bool, str], rep: int) -> dict[str, dict[str, Any]]:
    """A locked and an unlocked backup, the locked one first at even repetitions."""
    out: dict[str, dict[str, Any]] = {}
    for locked in (True, False) if rep % 2 == 0 else (False, True):
        out["locked" if locked else "unlocked"] = backup(store, uris[locked], locked)
    return out


def interleaved(reps: int, run: Callable[[bool], Any]) -> dict[str, dict[str, list[float]]]:
    """``run(locked)`` timed ``reps`` times a side (wall and CPU seconds),
    alternating which side goes first."""
    out: dict[str, dict[str, list[float]]] = {
        side: {"seconds": [], "cpu_s": []} for side in ("locked", "unlocked")
    }
    for rep in range(reps):
        for locked in (True, False) if rep % 2 == 0 else (False, True):
            side = out["locked" if locked else "unlocked"]
            gc.collect()
            cpu = time.process_time()
            side["seconds"].append(timed(partial(run, locked))[1])
            side["cpu_s"].append(time.process_time() - cpu)
    return out


def summary(runs: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Medians per side, the ratio of the medians and the median of per-pair ratios."""
    out: dict[str, Any] = {}
    for side in ("locked", "unlocked"):
        keys = [k for k, v in runs[0][side].items() if isinstance(v, int | float) and k != "locked"]
        out[side] = {k: statistics.median(r[side][k] for r in runs) for k in keys}
    out["ratio_of_medians"] = out["locked"]["seconds"] / out["unlocked"]["seconds"]
    out["median_pair_ratio"] = statistics.median(
        r["locked"]["seconds"] / r["unlocked"]["seconds"] for r in runs
    )
    out["cpu_ratio_of_medians"] = out["locked"]["cpu_s"] / out["unlocked"]["cpu_s"]
    return out


def seconds_summary(measured: dict[str, dict[str, list[float]]]) -> dict[str, Any]:
    med = {side: {k: statistics.median(v) for k, v in measured[side].items()} for side in measured}
    return {
        "runs": measured,
        "locked": med["locked"],
        "unlocked": med["unlocked"],
        "ratio_of_medians": med["locked"]["seconds"] / med["unlocked"]["seconds"],
        "cpu_ratio_of_medians": med["locked"]["cpu_s"] / med["unlocked"]["cpu_s"],
    }


def warm_up(store: TableStore) -> float:
    """A tiny tenant backed up locked and unlocked, untimed: the first backup of
    the process (imports, clients, moto's first requests) lands on neither side."""
    other = "warmup"
    store.create_tenant(other)
    store.create_table(other, f"{DATABASE}.{TABLE}", SCHEMA)
    store.write(
        other,
        f"{DATABASE}.{TABLE}",
        upserts=pa.table({"id": pa.array([1], pa.int64()), "payload": pa.array([b"x"])}),
    )

    def both() -> None:
        for locked in (True, False):
            lock = (LOCK, RETAIN) if locked else (None, None)
            create_backup(store, other, "now", vault_uri(), lock=lock[0], retain=lock[1])

    return timed(both)[1]


def run(
    objects: int, object_bytes: int, new: int, repeats: int, seed: int, *, moto_as_is: bool
) -> dict[str, Any]:
    with moto_listing_without_bytes(not moto_as_is) as shim, open_store("moto") as store:
        warm_s = warm_up(store)
        source = Source(store, object_bytes, seed)
        _, build_s = timed(lambda: source.add(objects))
        tenant = source.shape()
        console.print(
            f"tenant: {tenant['objects']} objects, {tenant['bytes'] / MIB:.0f} MiB "
            f"(written in {build_s:.0f} s)"
        )

        full: list[dict[str, dict[str, Any]]] = []
        uris: dict[bool, str] = {}
        for rep in range(repeats):
            uris = {True: vault_uri(), False: vault_uri()}
            full.append(pair(store, uris, rep))
            console.print(f"full {rep + 1}/{repeats}: {_brief(full[-1])}")

        incremental: list[dict[str, dict[str, Any]]] = []
        for rep in range(repeats):
            source.add(new)
            incremental.append(pair(store, uris, rep))
            console.print(f"incremental {rep + 1}/{repeats}: {_brief(incremental[-1])}")

        newest = {
            True: incremental[-1]["locked"]["backup_id"],
            False: incremental[-1]["unlocked"]["backup_id"],
        }
        verify = interleaved(repeats, lambda locked: verify_backup(uris[locked], newest[locked]))
        console.print(
            "verify: "
            + ", ".join(f"{k} {[round(x, 2) for x in v['seconds']]} s" for k, v in verify.items())
        )

        def refused() -> None:
            try:
                delete_backup(uris[True], newest[True])
            except Locked:
                return
            raise RuntimeError("a locked backup was deleted")

        refusals = [timed(refused)[1] for _ in range(repeats)]
        deleted, delete_s = timed(lambda: delete_backup(uris[False], newest[False]))
        console.print(f"delete: refused {refusals}, unlocked {delete_s:.2f} s ({deleted} versions)")
        final = source.shape()

    return {
        "objects": objects,
        "object_bytes": object_bytes,
        "new_objects_per_increment": new,
        "repeats": repeats,
        "lock": LOCK,
        "retain": RETAIN,
        "lock_threads": vault.LOCK_THREADS,
        "moto_listing_without_bytes": shim,
        "warm_up_s": warm_s,
        "build_s": build_s,
        "tenant_at_first_backup": tenant,
        "tenant_at_end": final,
        "full": {"runs": full, "summary": summary(full)},
        "incremental": {"runs": incremental, "summary": summary(incremental)},
        "verify": seconds_summary(verify),
        "delete": {
            "locked_refused_s": refusals,
            "locked_refused_median_s": statistics.median(refusals),
            "unlocked_deleted_s": delete_s,
            "unlocked_deleted_versions": deleted,
        },
        "peak_rss_mib": peak_rss_mib(),
    }


def _brief(runs: dict[str, dict[str, Any]]) -> str:
    lo, un = runs["locked"], runs["unlocked"]
    return (
        f"locked {lo['seconds']:.2f} s (listing {lo['listing_versions_s']:.2f}, locks "
        f"{lo['lock_objects_s']:.2f}: {lo['retention_heads']} HEAD, {lo['retention_puts']} PUT), "
        f"unlocked {un['seconds']:.2f} s, ratio {lo['seconds'] / un['seconds']:.2f}"
    )


# the report --------------------------------------------------------------------


def verdict(payload: dict[str, Any]) -> dict[str, Any]:
    ratio = payload["incremental"]["summary"]["ratio_of_medians"]
    return {"goal": f"locked incremental <= {GOAL}x unlocked", "ratio": ratio, "met": ratio <= GOAL}


def report(payload: dict[str, Any]) -> None:
    n, size = payload["objects"], payload["object_bytes"]
    table = Table(
        title=f"Locked ({payload['lock']} {payload['retain']}) vs unlocked backups, both to vault "
        f"buckets on moto; {n} objects of {size / MIB:.2f} MiB, "
        f"+{payload['new_objects_per_increment']} per increment; medians of {payload['repeats']}, "
        "interleaved"
    )
    for column in (
        "case", "locked s", "unlocked s", "ratio", "pair ratio", "CPU locked", "CPU unlocked",
        "CPU ratio", "copied/ref", "listing s", "locking s (HEAD/PUT)", "manifest+marker s",
    ):  # fmt: skip
        table.add_column(column, justify="left" if column == "case" else "right")
    for case in ("full", "incremental"):
        s = payload[case]["summary"]
        lo, un = s["locked"], s["unlocked"]
        table.add_row(
            f"{case} backup",
            f"{lo['seconds']:.2f}",
            f"{un['seconds']:.2f}",
            f"{s['ratio_of_medians']:.2f}",
            f"{s['median_pair_ratio']:.2f}",
            f"{lo['cpu_s']:.2f}",
            f"{un['cpu_s']:.2f}",
            f"{s['cpu_ratio_of_medians']:.2f}",
            f"{lo['copied_objects']:.0f} / {lo['referenced_objects']:.0f}",
            f"{lo['listing_versions_s']:.2f} ({lo['version_listings']:.0f})",
            f"{lo['lock_objects_s']:.2f} ({lo['retention_heads']:.0f}/{lo['retention_puts']:.0f})",
            f"{lo['lock_manifest_s']:.3f}",
        )
    v = payload["verify"]
    table.add_row(
        "verify (newest)",
        f"{v['locked']['seconds']:.2f}",
        f"{v['unlocked']['seconds']:.2f}",
        f"{v['ratio_of_medians']:.2f}",
        "",
        f"{v['locked']['cpu_s']:.2f}",
        f"{v['unlocked']['cpu_s']:.2f}",
        f"{v['cpu_ratio_of_medians']:.2f}",
        "", "", "", "",
    )  # fmt: skip
    d = payload["delete"]
    table.add_row(
        "delete (refused / done once)",
        f"{d['locked_refused_median_s']:.3f}",
        f"{d['unlocked_deleted_s']:.3f}",
        "", "", "", "", "", "", "", "", "",
    )  # fmt: skip
    console.print(table)
    goal = payload["verdict"]
    console.print(
        f"goal ({goal['goal']}): {'met' if goal['met'] else 'NOT met'}, {goal['ratio']:.2f}x"
    )


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="bench_vault", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="40 objects of 256 KiB")
    parser.add_argument("--objects", type=int, help="objects at the first backup (200; quick 40)")
    parser.add_argument("--object-kib", type=int, help="KiB an object (1024; quick 256)")
    parser.add_argument("--new", type=int, help="new objects before each increment (10%%)")
    parser.add_argument("--repeats", type=int, default=6, help="repetitions a case (>= 3)")
    parser.add_argument(
        "--moto-as-is",
        action="store_true",
        help="keep moto's listing, which copies every version's bytes "
        "(see moto_listing_without_bytes)",
    )
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--name", help="result file name (default from the options)")
    args = parser.parse_args(argv)
    objects = args.objects or (40 if args.quick else 200)
    kib = args.object_kib or (256 if args.quick else 1024)
    new = args.new or max(1, objects // 10)
    started = time.perf_counter()
    payload: dict[str, Any] = {"quick": args.quick, "load_average_at_start": load_average()}
    payload |= run(objects, kib * 1024, new, args.repeats, args.seed, moto_as_is=args.moto_as_is)
    payload["verdict"] = verdict(payload)
    custom = args.objects or args.object_kib or args.new
    name = args.name or (
        (f"{NAME}_custom" if custom else f"{NAME}_quick" if args.quick else NAME)
        + ("_moto_as_is" if args.moto_as_is else "")
    )
    return finish_run(payload, name=name, started=started, console=console, report=report)


if __name__ == "__main__":
    main()
