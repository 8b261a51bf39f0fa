"""Which clock each GC decision reads, and why.

The catalog has two clocks:

- the **commit clock** (``tx.last_ts()`` / ``tx.commit_ts()``): strictly
  increasing commit timestamps that order versions, memberships, snapshots
  and PITR windows. ``tx.observe_ts`` may push it far ahead of real time: a
  backup restored from a deployment whose clock ran ahead carries its
  timestamps, and every later commit is ``previous + 1`` until real time
  catches up.
- the **wall clock** (``catalog.clock()``: the system clock in production,
  injectable in tests): real time.

GC measures every *age* on the wall clock, never on the commit clock:

- keys the catalog does not know (orphans), temp files of killed writers and
  incomplete multipart uploads: the object store's last-modified / initiated time
  against the wall clock, i.e. the object's real age;
- unreferenced catalog objects (``removed_ts`` or ``created_ts``, commit
  timestamps) and the retention of dropped tenants (``retain_until`` =
  drop ts + retention): against the wall clock. A commit ts is never below the
  wall clock at its commit (``max(previous + 1, now)``), so ``wall - ts`` never
  overstates how long ago it really was: a commit clock pushed ahead delays
  collection and purges until real time passes it, and never hastens them.

The commit clock serves what is ordered with commits: the ts at which a purge
or a released table ends memberships, and which of a tenant's times are
protected (snapshots, the PITR window, "now").
"""

from __future__ import annotations

from tenants.catalog import Catalog


def real_now(catalog: Catalog) -> int:
    """The wall clock in µs: what every age GC checks is measured against."""
    return catalog.clock()


def aged(since_us: int, grace_us: int, now_us: int) -> bool:
    """Has ``since_us`` been at least ``grace_us`` ago? A zero grace (only with
    ``allow_short_grace``) asks for no age at all: the caller is sure nothing is
    in flight, so a commit ts or object store time a few µs ahead of the clock counts."""
    return grace_us <= 0 or since_us + grace_us <= now_us


def aged_cutoff(grace_us: int, now_us: int) -> int | None:
    """The newest ``since_us`` that :func:`aged` accepts at ``now_us`` (None: any),
    so that SQL can apply the same test to every candidate at once."""
    return None if grace_us <= 0 else now_us - grace_us
