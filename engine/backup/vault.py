"""Locked backups: a backup destination on an S3 bucket with Object Lock (a vault).

A locked backup writes its objects and manifest as usual, then puts a
retention (``COMPLIANCE`` or ``GOVERNANCE``, until a date) on the exact
version of each it references, and records those version ids in its
manifest. From then on, the credentials that wrote it cannot destroy it:
S3 refuses to delete or overwrite a locked version, and a plain delete
only hides the key behind a delete marker.

Reading a vault therefore never trusts "the latest version of a key": a
manifest is read at the *first* version of its key (Rewind writes each
manifest once; a later version is someone else's), and a backup's objects
at the versions its manifest recorded (:class:`PinnedVersions`). The
disaster drill (docs/vault.md) restores from the vault alone, after every
key was hidden by delete markers.

Incremental backups share objects with earlier ones. A later backup's
retention must cover each object it references, so it *extends* that
version's retention (the later date, the stronger mode) and never
shortens anything: :func:`tenants.objectstore.object_lock.extend_retention`
reads the lock first and only lengthens it.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from tenants.errors import InvalidArgument, Locked
from tenants.objectstore import ObjectStore
from tenants.objectstore.object_lock import (
    Lock,
    LockMode,
    PinnedVersions,
    Version,
    extend_retention,
    lock_enabled,
    versions,
)
from tenants.times import format_ts, parse_duration

MODES = {"compliance": "COMPLIANCE", "governance": "GOVERNANCE"}
# S3 takes retain-until dates this far ahead; Rewind refuses longer (a typo of
# 3000d for 300d would lock the bytes, and pay for them, for a lifetime).
MAX_RETAIN_US = 100 * 365 * 86_400_000_000
LOCK_THREADS = 8


def wall_now_us() -> int:
    return time.time_ns() // 1000


@dataclass(frozen=True)
class LockPolicy:
    """How a backup is locked: a mode and how long from its creation."""

    mode: LockMode
    retain_us: int

    @classmethod
    def parse(cls, mode: str | None, retain: str | None) -> LockPolicy | None:
        """``--lock`` and ``--retain`` as a policy (None: not locked), checked.

        Raises:
            InvalidArgument: one without the other, an unknown mode, a retention
                that is not a positive duration of at most 100 years.
        """
        if mode is None and retain is None:
            return None
        if mode is None or retain is None:
            raise InvalidArgument(
                "a locked backup needs both --lock compliance|governance and --retain "
                "DURATION (e.g. --lock compliance --retain 30d)"
            )
        lowered = mode.strip().lower()
        if lowered not in MODES:
            raise InvalidArgument(f"invalid lock mode {mode!r}: use compliance or governance")
        retain_us = parse_duration(retain)
        if retain_us > MAX_RETAIN_US:
            raise InvalidArgument(
                f"invalid retention {retain!r}: at most 100 years (36500d); a lock cannot be "
                "shortened once set"
            )
        return cls(MODES[lowered], retain_us)  # type: ignore[arg-type]

    def until(self, now_us: int) -> int:
        return now_us + self.retain_us

    def to_json(self, now_us: int) -> dict[str, Any]:
        return {"mode": self.mode, "retain_until_us": self.until(now_us)}


def require_vault(dest: ObjectStore) -> None:
    """Refuse to lock a backup where S3 cannot: ``file://``, or a bucket created
    without Object Lock (it can only be enabled when the bucket is made)."""
    if not lock_enabled(dest):
        raise InvalidArgument(
            f"cannot lock backups at {dest.warehouse.uri}: the bucket does not have S3 Object "
            "Lock enabled (create it with Object Lock, e.g. `aws s3api create-bucket "
            "--object-lock-enabled-for-bucket`; file:// destinations cannot lock)"
        )


_VAULTS: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def is_vault(dest: ObjectStore) -> bool:
    """Whether ``dest`` is on a bucket with Object Lock (asked once per object store):
    then every read of it goes by version, never by the latest of a key."""
    try:
        return _VAULTS[dest]
    except (KeyError, TypeError):
        answer = lock_enabled(dest)
        try:
            _VAULTS[dest] = answer
        except TypeError:  # not weak-referenceable: ask again next time
            pass
        return answer


def first_version(dest: ObjectStore, key: str) -> Version | None:
    """The oldest surviving version of exactly ``key`` (None: no version left)."""
    return first_versions(dest, key).get(key)


def read_first(dest: ObjectStore, key: str) -> bytes | None:
    """The bytes of ``key``'s first version (None: it has none)."""
    version = first_version(dest, key)
    if version is None:
        return None
    return PinnedVersions(dest, {key: (version.version_id, version.size)}).get(key)


def pinned(dest: ObjectStore, recorded: Mapping[str, tuple[str, int]]) -> ObjectStore:
    """``dest`` read at the recorded (version id, size) of each key."""
    return PinnedVersions(dest, recorded)  # type: ignore[return-value]


def first_versions(dest: ObjectStore, prefix: str) -> dict[str, Version]:
    """The oldest surviving version of each key under ``prefix`` (delete markers
    skipped): the bytes Rewind wrote, whatever was put or hidden over them since."""
    return first_and_sole(dest, prefix)[0]


def first_and_sole(dest: ObjectStore, prefix: str) -> tuple[dict[str, Version], frozenset[str]]:
    """From one listing: :func:`first_versions`, and the keys with exactly one
    version and no delete marker (written once, by one writer)."""
    first: dict[str, Version] = {}
    counts: dict[str, int] = {}
    for version in versions(dest, prefix):
        counts[version.key] = counts.get(version.key, 0) + 1
        if not version.deleted:
            first[version.key] = version  # a key's versions come newest first
    return first, frozenset(key for key, n in counts.items() if n == 1)


def recorded_versions(raw: dict[str, Any]) -> dict[str, tuple[str, int]]:
    """key -> (version id, size) a backup's manifest recorded for its files: a
    physical one's objects, a logical one's dump files (the manifest aside);
    empty for a backup that recorded none (an unlocked one)."""
    if raw.get("kind", "logical") == "physical" and raw.get("format") != "rewind-dump":
        return {
            str(e["path"]): (str(e["version_id"]), int(e["record"]["bytes"]))
            for e in raw.get("objects", {}).values()
            if e.get("version_id")
        }
    return {str(k): (str(v[0]), int(v[1])) for k, v in (raw.get("versions") or {}).items()}


def slack_us(retain_us: int) -> int:
    """How much longer than asked an object's lock is set when it must be set or
    extended: a tenth of the retention, at most a week. Incremental backups
    share objects, and each asks for a later date than the last; without
    slack every backup would extend every shared object's lock, one request
    each, and the cost of a backup would follow the tenant's size instead of
    what changed. With it, the backups of the next days find the locks long
    enough and send nothing."""
    return min(retain_us // 10, 7 * 86_400_000_000)


def lock_all(
    dest: ObjectStore,
    pinned: Iterable[tuple[str, str]],
    mode: LockMode,
    until_us: int,
    *,
    fresh: frozenset[str] = frozenset(),
    known: Mapping[tuple[str, str], Lock] | None = None,
    slack: int = 0,
) -> dict[tuple[str, str], Lock]:
    """Lock each (key, version id) until at least ``until_us`` (extended, never
    shortened; set to ``until_us + slack`` when a retention is sent), several
    requests in flight; the lock each has afterwards.

    ``known``: locks the tenant's previous backup recorded for versions it
    locked. A COMPLIANCE lock can never be shortened, by anyone, so one
    recorded as lasting long enough still does and nothing is sent or read;
    a GOVERNANCE lock may have been shortened by someone allowed to bypass it,
    so it is read again. Versions of the keys in ``fresh`` were just written
    unlocked, by this caller alone: their lock is not read first. (Were
    another backup to lock one in between, real S3 would refuse a shorter
    retention: COMPLIANCE cannot be shortened, and GOVERNANCE only with the
    bypass header, which Rewind never sends with a retention.)"""
    items = list(pinned)
    recorded = known or {}

    def one(kv: tuple[str, str]) -> Lock:
        key, version = kv
        prior = recorded.get(kv)
        if prior is not None and prior.mode == "COMPLIANCE" and (prior.until_us or 0) >= until_us:
            return prior
        return extend_retention(
            dest, key, version, mode, until_us + slack, fresh=key in fresh, at_least_us=until_us
        )

    with ThreadPoolExecutor(LOCK_THREADS, thread_name_prefix="vault-lock") as pool:
        return dict(zip(items, pool.map(one, items), strict=True))


def lock_written(
    dest: ObjectStore, key: str, mode: LockMode, until_us: int, *, slack: int = 0
) -> str:
    """Lock the version of ``key`` just written (the one this store's write got
    back from S3, else the key's first version) until at least ``until_us``
    (``until_us + slack`` when a retention is sent); its version id."""
    mine = written_version(dest, key)
    if mine is not None:
        extend_retention(dest, key, mine, mode, until_us + slack, fresh=True, at_least_us=until_us)
        return mine
    version = first_version(dest, key)
    if version is None:  # written a moment ago: only a broken store loses it
        raise Locked(f"{dest.warehouse.uri}/{key} vanished before it could be locked")
    extend_retention(dest, key, version.version_id, mode, until_us + slack, at_least_us=until_us)
    return version.version_id


def track_versions(dest: ObjectStore) -> None:
    """Have ``dest`` keep the version id S3 gives each of its writes from now on
    (an S3 object store; others have no versions), for :func:`written_version`."""
    if getattr(dest, "written_versions", False) is None:
        dest.written_versions = {}  # type: ignore[attr-defined]


def written_version(dest: ObjectStore, key: str) -> str | None:
    """The version id S3 gave this object store's own write of ``key``, if kept."""
    return (getattr(dest, "written_versions", None) or {}).get(key)


def write_versioned(dest: ObjectStore, key: str, data: bytes) -> None:
    """Write ``key`` so that its version id is known without listing (one PUT)."""
    output = dest.open_output(key)
    try:
        output.write(data)
    except BaseException:
        output.abort()
        raise
    output.commit()


def refuse_delete(
    backup_id: str, lock: dict[str, Any] | None, *, bypass_governance: bool, now_us: int
) -> None:
    """Refuse deleting a backup its own lock still protects, naming the date.

    Raises:
        Locked: a COMPLIANCE backup before its retain-until; a GOVERNANCE one
            before it without ``bypass_governance``.
        InvalidArgument: ``bypass_governance`` on a COMPLIANCE backup (nothing
            can lift it: not Rewind, not the bucket's owner).
    """
    if not lock:
        if bypass_governance:
            raise InvalidArgument(
                f"backup {backup_id} is not locked: --bypass-governance applies to governance locks"
            )
        return
    mode, until = str(lock.get("mode")), int(lock.get("retain_until_us", 0))
    if mode == "COMPLIANCE" and bypass_governance:
        raise InvalidArgument(
            f"backup {backup_id} is locked in compliance mode until {format_ts(until)}: "
            "--bypass-governance lifts only governance locks; nothing was deleted"
        )
    if until <= now_us:
        return
    if mode == "GOVERNANCE" and bypass_governance:
        return
    hint = (
        "; pass --bypass-governance if your credentials and the bucket policy allow it"
        if mode == "GOVERNANCE"
        else ""
    )
    raise Locked(
        f"backup {backup_id} is locked ({mode.lower()}) until {format_ts(until)}: it cannot be "
        f"deleted before then{hint}; nothing was deleted"
    )
