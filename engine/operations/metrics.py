"""Prometheus metrics read from the catalog at each scrape (docs/operations.md).

:class:`CatalogCollector` is a ``prometheus_client`` custom collector: every
``collect()`` opens one read transaction and builds the metric families from
the two journals (``restore_jobs``, ``runs``) and the per-tenant facts, in a
fixed number of statements (tenants/catalog/engine/metrics_queries.py). No
process keeps a counter in memory, so any host with the catalog exports the
same numbers, and a ``rewind metrics`` run from cron exports what a long-lived
``--serve`` does.

Counters are counts of journal rows, so they only grow while the rows stay: a
purge that deletes a tenant's restore jobs lowers them, which Prometheus reads
as a counter reset. A failed restore is not an end (it is resumed or
cancelled), so it is a gauge (``rewind_restores_failed``), not a counter
outcome that could go down.

Labels are bounded: ``tenant``, ``kind``, ``method``, ``outcome`` and nothing
else (never a job id, a URI or an error text). Only the job counts and the
per-tenant gauges carry ``tenant``: byte counters and histograms leave it out,
as a series (or a bucket) per tenant would multiply a scrape of 10^4 tenants.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import generate_latest
from prometheus_client.utils import floatToGoString

from engine.restore.lease import lease_live
from tenants.catalog import Catalog
from tenants.catalog.base import wall_clock_us
from tenants.catalog.engine import metrics_queries as q

# Fixed buckets (seconds) of every duration histogram: from a metadata-only
# restore (well under a second) to a day-long backup. Fixed, so a dashboard's
# quantiles compare across hosts and releases; changing them is a breaking change.
DURATION_BUCKETS: tuple[float, ...] = (
    0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400,
)  # fmt: skip
_BOUNDS_US = tuple(int(b * 1_000_000) for b in DURATION_BUCKETS)
# The job kinds the running and stale gauges always show (0 when none), so an
# alert sees the series; a kind journaled later shows up as it appears.
JOB_KINDS = ("restore", "backup", "gc", "drill")


def _seconds(us: int | None) -> float:
    return 0.0 if us is None else us / 1_000_000


def _histogram(
    name: str, documentation: str, labels: Sequence[str], rows: Iterable[q.Buckets]
) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, documentation, labels=list(labels))
    for row in rows:
        buckets = [
            (floatToGoString(bound), count)
            for bound, count in zip(DURATION_BUCKETS, row.at_or_below, strict=True)
        ]
        family.add_metric(list(row.labels), [*buckets, ("+Inf", row.count)], row.seconds)
    return family


class CatalogCollector:
    """Builds every ``rewind_*`` family from the catalog, afresh at each ``collect()``."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def describe(self) -> list[Metric]:
        # Registering must not read the catalog (the registry would collect once to
        # learn the names): the families are built only when a scrape asks.
        return []

    def collect(self) -> Iterator[Metric]:
        with self.catalog.snapshot() as tx:
            restores = q.restore_counts(tx)
            restore_durations = q.restore_durations(tx, _BOUNDS_US)
            usable = q.restore_usable_after(tx, _BOUNDS_US)
            rewritten = q.restore_rewritten(tx)
            runs = q.run_counts(tx)
            run_durations = q.run_durations(tx, _BOUNDS_US)
            leases = [*q.restore_leases(tx), *q.run_leases(tx)]
            snapshots = q.newest_snapshots(tx)
            backups = q.newest_backups(tx)
            totals = q.tenant_totals(tx)
            objectives = q.objectives(tx)
            windows = q.pitr_windows(tx)
            now_ts = tx.last_ts()
        yield from self._restores(restores, restore_durations, usable, rewritten)
        yield from self._runs(runs, run_durations)
        yield from self._jobs(leases, restores, runs)
        yield from self._tenants(snapshots, backups, totals, objectives, windows, now_ts)
        yield from self._drills(runs, {name for name, _ in snapshots})

    def _restores(
        self,
        counts: list[q.Ended],
        durations: list[q.Buckets],
        usable: list[q.Buckets],
        rewritten: list[q.Count],
    ) -> Iterator[Metric]:
        ended = CounterMetricFamily(
            "rewind_restores_total",
            "Restore jobs that ended, by tenant, kind (scope: tenant, database, table), "
            "method and outcome (done, cancelled).",
            labels=["tenant", "kind", "method", "outcome"],
        )
        failed = GaugeMetricFamily(
            "rewind_restores_failed",
            "Restore jobs failed and not yet resumed or cancelled (each holds its tenant).",
            labels=["tenant", "kind", "method"],
        )
        for row in counts:
            tenant, scope, method, state = row.labels
            if state == q.RESTORE_FAILED:
                failed.add_metric([tenant, scope, method], row.count)
            else:
                ended.add_metric([tenant, scope, method, state], row.count)
        yield ended
        yield failed
        yield _histogram(
            "rewind_restore_duration_seconds",
            "Seconds from a restore job's start to its end (done or cancelled), by kind "
            "(scope), method and outcome.",
            ["kind", "method", "outcome"],
            durations,
        )
        yield _histogram(
            "rewind_restore_usable_seconds",
            "Seconds from a restore job's start to its install, when the restored data "
            "became usable (an instant restore installs before it rewrites).",
            ["kind", "method"],
            usable,
        )
        size = CounterMetricFamily(
            "rewind_restore_bytes_rewritten_total",
            "Bytes restore jobs wrote rewriting objects that straddle the restore point, by "
            "kind (scope) and method.",
            labels=["kind", "method"],
        )
        objects = CounterMetricFamily(
            "rewind_restore_objects_rewritten_total",
            "Objects restore jobs rewrote (one per straddling object), by kind and method.",
            labels=["kind", "method"],
        )
        for tasks in rewritten:
            size.add_metric(list(tasks.labels), tasks.bytes)
            objects.add_metric(list(tasks.labels), tasks.objects)
        yield size
        yield objects

    def _runs(self, counts: list[q.Ended], durations: list[q.Buckets]) -> Iterator[Metric]:
        runs = CounterMetricFamily(
            "rewind_runs_total",
            "Backups, GC passes and restore drills that ended, by tenant (none for GC), "
            "kind (backup, gc, drill), method and outcome (done, failed).",
            labels=["tenant", "kind", "method", "outcome"],
        )
        size = CounterMetricFamily(
            "rewind_run_bytes_total",
            "Bytes moved by done runs, by kind and method: copied by a backup, deleted by "
            "a GC pass, restored by a drill.",
            labels=["kind", "method"],
        )
        objects = CounterMetricFamily(
            "rewind_run_objects_total",
            "Objects moved by done runs, by kind and method: copied by a backup, deleted "
            "by a GC pass, restored by a drill.",
            labels=["kind", "method"],
        )
        moved: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
        for row in counts:
            kind, tenant, method, state = row.labels
            runs.add_metric([tenant, kind, method, state], row.count)
            if state == "done":
                moved[(kind, method)][0] += row.bytes
                moved[(kind, method)][1] += row.objects
        for (kind, method), (total, count) in sorted(moved.items()):
            size.add_metric([kind, method], total)
            objects.add_metric([kind, method], count)
        yield runs
        yield size
        yield objects
        yield _histogram(
            "rewind_run_duration_seconds",
            "Seconds each backup, GC pass or drill took, by kind, method and outcome.",
            ["kind", "method", "outcome"],
            durations,
        )

    def _jobs(
        self, leases: list[q.Lease], restores: list[q.Ended], runs: list[q.Ended]
    ) -> Iterator[Metric]:
        running: dict[str, int] = dict.fromkeys(JOB_KINDS, 0)
        stale: dict[str, int] = dict.fromkeys(JOB_KINDS, 0)
        now = wall_clock_us()
        for lease in leases:
            running.setdefault(lease.kind, 0)
            stale.setdefault(lease.kind, 0)
            held = {"lease_holder": lease.lease_holder, "lease_expires_us": lease.lease_expires_us}
            (running if lease_live(held, now) else stale)[lease.kind] += 1
        gauge_running = GaugeMetricFamily(
            "rewind_jobs_running",
            "Jobs running now: unfinished, with a live lease, by kind (restore, backup, gc, "
            "drill).",
            labels=["kind"],
        )
        gauge_stale = GaugeMetricFamily(
            "rewind_jobs_stale",
            "Jobs unfinished with no live holder (its lease expired or its process is gone): "
            "killed, or waiting for a --resume; by kind.",
            labels=["kind"],
        )
        for kind in sorted(running):
            gauge_running.add_metric([kind], running[kind])
            gauge_stale.add_metric([kind], stale[kind])
        yield gauge_running
        yield gauge_stale
        newest: dict[str, int] = defaultdict(int)
        for row in restores:
            if row.labels[3] == "done":
                newest["restore"] = max(newest["restore"], row.last_us)
        for row in runs:
            if row.labels[3] == "done":
                newest[row.labels[0]] = max(newest[row.labels[0]], row.last_us)
        last = GaugeMetricFamily(
            "rewind_last_success_timestamp_seconds",
            "When the newest job of each kind ended done (Unix seconds), over every tenant.",
            labels=["kind"],
        )
        for kind in sorted(newest):
            last.add_metric([kind], _seconds(newest[kind]))
        yield last

    def _tenants(
        self,
        snapshots: list[tuple[str, int | None]],
        backups: dict[str, int],
        totals: list[tuple[str, str, int, int]],
        objectives: list[tuple[str, int]],
        windows: list[tuple[str, int, int]],
        now_ts: int,
    ) -> Iterator[Metric]:
        yield GaugeMetricFamily("rewind_tenants", "Active tenants.", value=len(snapshots))
        snapshot = GaugeMetricFamily(
            "rewind_tenant_last_snapshot_timestamp_seconds",
            "The time the tenant's newest snapshot protects (Unix seconds); 0 when it has "
            "none. Its age is time() minus this.",
            labels=["tenant"],
        )
        for name, ts in snapshots:
            snapshot.add_metric([name], _seconds(ts))
        yield snapshot
        backup = GaugeMetricFamily(
            "rewind_tenant_last_backup_timestamp_seconds",
            "The point in time the tenant's newest done backup holds (Unix seconds), any "
            "destination; 0 when it has none. Its age is time() minus this.",
            labels=["tenant"],
        )
        for name, _ in snapshots:  # every active tenant
            backup.add_metric([name], _seconds(backups.get(name)))
        yield backup
        objects = GaugeMetricFamily(
            "rewind_tenant_objects",
            "Objects the tenant's tables hold (a dropped one's too, while it can be "
            "undropped), by kind (data, tomb); an object two tables share counts in each.",
            labels=["tenant", "kind"],
        )
        size = GaugeMetricFamily(
            "rewind_tenant_bytes",
            "Bytes of the objects the tenant's tables hold, by kind (data, tomb), as "
            "rewind_tenant_objects counts them.",
            labels=["tenant", "kind"],
        )
        for name, kind, count, total in totals:
            objects.add_metric([name, kind], count)
            size.add_metric([name, kind], total)
        yield objects
        yield size
        rpo = GaugeMetricFamily(
            "rewind_tenant_rpo_seconds",
            "The tenant's recovery point objective (seconds), for the tenants that have one.",
            labels=["tenant"],
        )
        for name, rpo_us in objectives:
            rpo.add_metric([name], _seconds(rpo_us))
        yield rpo
        window = GaugeMetricFamily(
            "rewind_tenant_pitr_window_seconds",
            "The tenant's point-in-time recovery window (seconds), for the tenants with one.",
            labels=["tenant"],
        )
        start = GaugeMetricFamily(
            "rewind_tenant_pitr_start_timestamp_seconds",
            "The oldest time the PITR window protects now (Unix seconds): now minus the "
            "window, or when the window was set if that is later.",
            labels=["tenant"],
        )
        for name, window_us, since_ts in windows:
            window.add_metric([name], _seconds(window_us))
            start.add_metric([name], _seconds(max(now_ts - window_us, since_ts)))
        yield window
        yield start

    def _drills(self, counts: list[q.Ended], active: set[str]) -> Iterator[Metric]:
        """Each active tenant's newest drill, from the ended-run counts (no statement
        of its own): whether it passed, and when the newest that passed ended."""
        ends: dict[str, dict[str, int]] = defaultdict(dict)  # tenant -> outcome -> newest end
        for row in counts:
            kind, tenant, _, state = row.labels
            if kind == "drill" and tenant in active:
                ends[tenant][state] = max(ends[tenant].get(state, 0), row.last_us)
        passed = GaugeMetricFamily(
            "rewind_tenant_last_drill_passed",
            "1 when the tenant's newest ended restore drill passed, 0 when it failed; "
            "for the tenants with a drill.",
            labels=["tenant"],
        )
        last = GaugeMetricFamily(
            "rewind_tenant_last_drill_timestamp_seconds",
            "When the tenant's newest passing restore drill ended (Unix seconds); 0 when "
            "none passed. For the tenants with a drill; its age is time() minus this.",
            labels=["tenant"],
        )
        for tenant, by_outcome in sorted(ends.items()):
            done, failed = by_outcome.get("done", 0), by_outcome.get("failed", 0)
            passed.add_metric([tenant], 1.0 if done >= failed else 0.0)
            last.add_metric([tenant], _seconds(done or None))
        yield passed
        yield last


def registry_for(catalog: Catalog) -> CollectorRegistry:
    """A registry of its own (never the process-wide default, which would add this
    process's own metrics) holding only the catalog's collector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(CatalogCollector(catalog))
    return registry


def exposition(registry: CollectorRegistry) -> bytes:
    """The Prometheus text exposition format of one scrape."""
    return generate_latest(registry)
