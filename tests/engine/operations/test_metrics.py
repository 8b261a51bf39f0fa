"""``rewind metrics``: what the journals say, in Prometheus's format, read back by its parser.

Every figure is checked against what the operations themselves returned
(a backup's copied bytes, a restore's rewritten bytes, a tenant's objects),
after parsing the exposition with ``prometheus_client``'s own text parser;
``--serve`` is scraped over HTTP from a real ``rewind`` process; the textfile
is read by a thread while it is rewritten.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from wsgiref.util import setup_testing_defaults

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import make_wsgi_app
from prometheus_client.parser import text_string_to_metric_families

from engine.backup.api import create_backup
from engine.gc.run import run_gc
from engine.operations.exporter import guarded_app, write_textfile
from engine.operations.metrics import DURATION_BUCKETS, exposition, registry_for
from engine.operations.runs import journaled
from engine.restore.job import restore_tenant
from engine.restore.lease import Holder
from tenants.catalog import Catalog
from tenants.catalog.base import wall_clock_us
from tenants.catalog.engine.runs import RunEnd, RunStart, finish_run, insert_run
from tenants.errors import CatalogUnavailable, StorageError
from tenants.objectstore.embedded import free_port
from tenants.store import TableStore
from tests.helpers.backups import build_source
from tests.helpers.cli import fails, ok
from tests.helpers.metrics_seed import seed
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.usefixtures("s3_server")

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
ALLOWED_LABELS = {"tenant", "kind", "method", "outcome", "le"}


def parse(text: str) -> Samples:
    """Every sample of an exposition, keyed by (sample name, labels)."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scrape(catalog: Catalog) -> Samples:
    return parse(exposition(registry_for(catalog)).decode())


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def series(samples: Samples, name: str) -> dict[frozenset[tuple[str, str]], float]:
    return {labels: v for (n, labels), v in samples.items() if n == name}


def test_backups_a_failed_backup_gc_and_a_restore_are_counted_with_their_sizes_and_times(
    store: TableStore, bucket: str
) -> None:
    source = build_source(store)
    physical = create_backup(store, "acme", "sun", f"s3://{bucket}/b1")
    logical = create_backup(store, "acme", "mon", f"s3://{bucket}/b2", kind="logical")
    restored = restore_tenant(store, "acme", "mon", to="copy", executor="local")
    gc = run_gc(store, dry_run=False)
    # A missing object fails the next physical backup loudly: a failed run.
    (_, record), *_ = store.objects_of("acme")
    store.objects.delete_many([record.key])
    with pytest.raises(StorageError):
        create_backup(store, "acme", "mon", f"s3://{bucket}/b3")

    samples = scrape(store.catalog)
    for name, labels in samples:
        assert {k for k, _ in labels} <= ALLOWED_LABELS, (name, labels)

    runs = "rewind_runs_total"
    assert (
        value(samples, runs, tenant="acme", kind="backup", method="physical", outcome="done") == 1
    )
    assert value(samples, runs, tenant="acme", kind="backup", method="logical", outcome="done") == 1
    assert (
        value(samples, runs, tenant="acme", kind="backup", method="physical", outcome="failed") == 1
    )
    assert value(samples, runs, tenant="", kind="gc", method="default", outcome="done") == 1
    size = "rewind_run_bytes_total"
    assert value(samples, size, kind="backup", method="physical") == physical.copied_bytes
    assert value(samples, size, kind="backup", method="logical") == logical.copied_bytes
    deleted = gc.collected.deleted_bytes + sum(
        o.size for o in (*gc.orphans.orphans, *gc.intents.orphans)
    )
    assert value(samples, size, kind="gc", method="default") == deleted

    histogram = "rewind_run_duration_seconds"
    done = {"kind": "backup", "method": "physical", "outcome": "done"}
    assert value(samples, f"{histogram}_count", **done) == 1
    assert value(samples, f"{histogram}_bucket", le="+Inf", **done) == 1
    cumulative = [
        value(samples, f"{histogram}_bucket", le=str(float(b)), **done) for b in DURATION_BUCKETS
    ]
    assert cumulative == sorted(cumulative)
    assert 0 < value(samples, f"{histogram}_sum", **done) < 600

    restores = {"tenant": "copy", "kind": "tenant", "method": "physical"}
    assert value(samples, "rewind_restores_total", outcome="done", **restores) == 1
    assert restored.rewritten > 0
    rewrites = {"kind": "tenant", "method": "physical"}
    assert value(samples, "rewind_restore_bytes_rewritten_total", **rewrites) == (
        restored.bytes_written
    )
    assert value(samples, "rewind_restore_objects_rewritten_total", **rewrites) == (
        restored.rewritten
    )
    ended = {"kind": "tenant", "method": "physical", "outcome": "done"}
    assert value(samples, "rewind_restore_duration_seconds_count", **ended) == 1
    assert (
        value(samples, "rewind_restore_usable_seconds_count", kind="tenant", method="physical") == 1
    )
    assert series(samples, "rewind_restores_failed") == {}

    for kind in ("restore", "backup", "gc", "drill"):
        assert value(samples, "rewind_jobs_running", kind=kind) == 0
        assert value(samples, "rewind_jobs_stale", kind=kind) == 0
    assert value(samples, "rewind_last_success_timestamp_seconds", kind="gc") <= time.time()

    # Per tenant: the newest snapshot, the newest backup's point, what the tables hold.
    assert value(samples, "rewind_tenants") == 2
    newest = max(s.ts for s in store.snapshots("acme"))
    assert value(samples, "rewind_tenant_last_snapshot_timestamp_seconds", tenant="acme") == (
        pytest.approx(newest / 1e6)
    )
    assert value(samples, "rewind_tenant_last_backup_timestamp_seconds", tenant="acme") == (
        pytest.approx(source.mon / 1e6)
    )
    assert value(samples, "rewind_tenant_last_backup_timestamp_seconds", tenant="copy") == 0
    for tenant in ("acme", "copy"):
        held: dict[str, list[int]] = {}
        for _, record in store.objects_of(tenant):
            held.setdefault(record.kind, []).append(record.bytes)
        for kind, sizes in held.items():
            assert value(samples, "rewind_tenant_objects", tenant=tenant, kind=kind) == len(sizes)
            assert value(samples, "rewind_tenant_bytes", tenant=tenant, kind=kind) == sum(sizes)


def test_no_job_id_uri_or_error_text_reaches_a_label(store: TableStore, bucket: str) -> None:
    build_source(store)
    result = create_backup(store, "acme", "mon", f"s3://{bucket}/secret-place")
    with pytest.raises(RuntimeError):
        with journaled(store.catalog, "backup", tenant="acme", method="physical"):
            raise RuntimeError("disk on fire at s3://elsewhere")
    text = exposition(registry_for(store.catalog)).decode()
    for leaked in (result.backup_id, "secret-place", bucket, "fire", "elsewhere"):
        assert leaked not in text


def _drill(store: TableStore, tenant: str, passes: bool) -> None:
    """A drill of ``tenant`` journaled as it ends: passed, or failed."""
    with (
        contextlib.suppress(RuntimeError),
        journaled(store.catalog, "drill", tenant=tenant, method="physical"),
    ):
        if not passes:
            raise RuntimeError("object does not match the manifest")


def test_each_tenants_newest_drill_says_whether_it_passed_and_when_one_last_did(
    store: TableStore,
) -> None:
    for name in ("acme", "beta", "gamma", "quiet"):
        store.create_tenant(name)
    _drill(store, "acme", passes=True)
    _drill(store, "acme", passes=False)  # the newest failed: a finding
    _drill(store, "beta", passes=False)
    _drill(store, "beta", passes=True)  # fixed since
    _drill(store, "gamma", passes=False)  # never passed
    with store.catalog.snapshot() as tx:
        ended = {
            (str(r[0]), str(r[1])): int(r[2])
            for r in tx.tuples(
                "SELECT tenant_name, state, MAX(ended_us) FROM runs GROUP BY tenant_name, state"
            )
        }
    samples = scrape(store.catalog)
    passed = "rewind_tenant_last_drill_passed"
    assert series(samples, passed) == {
        frozenset({("tenant", "acme")}): 0.0,
        frozenset({("tenant", "beta")}): 1.0,
        frozenset({("tenant", "gamma")}): 0.0,
    }  # a tenant never drilled has no series: nothing to alert on yet
    last = "rewind_tenant_last_drill_timestamp_seconds"
    assert value(samples, last, tenant="acme") == ended[("acme", "done")] / 1e6
    assert value(samples, last, tenant="beta") == ended[("beta", "done")] / 1e6
    assert value(samples, last, tenant="gamma") == 0.0


def _insert_running(catalog: Catalog, run_id: str, kind: str, holder: str, expires_us: int) -> None:
    with catalog.transaction() as tx:
        insert_run(
            tx, RunStart(run_id, kind, "acme", None, "physical", None, None), 1, holder, expires_us
        )


def test_a_running_run_counts_as_running_and_one_whose_holder_died_as_stale(
    store: TableStore,
) -> None:
    store.create_tenant("acme")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        host, far = socket.gethostname(), wall_clock_us() + 3_600_000_000
        dead = Holder(host, gone.pid, "", "deadbeef0000").text
        running = Holder(host, live.pid, "", "a1b2c3d4e5f6").text
        _insert_running(store.catalog, "r-dead", "backup", dead, far)  # killed: holder gone
        _insert_running(store.catalog, "r-expired", "gc", "elsewhere:1::abc", 1)  # ran out
        _insert_running(store.catalog, "r-live", "drill", running, far)  # another process
        samples = scrape(store.catalog)
    finally:
        live.kill()
        live.wait()
    assert value(samples, "rewind_jobs_running", kind="drill") == 1
    assert value(samples, "rewind_jobs_stale", kind="backup") == 1
    assert value(samples, "rewind_jobs_stale", kind="gc") == 1
    assert value(samples, "rewind_jobs_running", kind="backup") == 0
    # Its process gone, the drill's run is stale too, until someone ends it.
    samples = scrape(store.catalog)
    assert value(samples, "rewind_jobs_running", kind="drill") == 0
    assert value(samples, "rewind_jobs_stale", kind="drill") == 1
    with store.catalog.transaction() as tx:
        finish_run(tx, "r-dead", RunEnd("failed", wall_clock_us(), error="killed"))
    assert value(scrape(store.catalog), "rewind_jobs_stale", kind="backup") == 0


def _seed(catalog: Catalog, store: TableStore, names: list[str]) -> None:
    """Tenants with a snapshot, a PITR window, an objective and a done backup each."""
    for name in names:
        store.create_tenant(name)
        store.create_snapshot(name, "s")
        store.set_pitr(name, 3_600_000_000)
        with catalog.transaction() as tx:
            run_id = f"run-{name}"
            start = RunStart(run_id, "backup", name, "s3://b/p", "physical", 10, "b")
            insert_run(tx, start, 1, "h:1::t", 2)
            finish_run(tx, run_id, RunEnd("done", 5, bytes=7, objects=1))
            tx.execute(
                "INSERT INTO recovery_objectives (tenant_name, rpo_us, set_ts) VALUES (?, ?, ?)",
                (name, 3_600_000_000, 1),
            )


STATEMENT_METHODS = ("execute", "executemany", "insert_many", "all", "tuples", "scalar", "batches")


def statements_of(
    store: TableStore, monkeypatch: pytest.MonkeyPatch, run: Callable[[], Any]
) -> int:
    """How many statements ``run`` sends to the catalog."""
    seen = [0]
    tx_class = store.catalog.dialect.tx_class()
    with monkeypatch.context() as patch:
        for name in STATEMENT_METHODS:
            method = getattr(tx_class, name)

            def counted(self: Any, *args: Any, _method: Any = method, **kw: Any) -> Any:
                seen[0] += 1
                return _method(self, *args, **kw)

            patch.setattr(tx_class, name, counted)
        run()
    return seen[0]


def test_a_scrape_sends_as_many_statements_for_40_tenants_as_for_4(
    store: TableStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts = []
    samples: Samples = {}
    for names in ([f"t{i:02d}" for i in range(4)], [f"t{i:02d}" for i in range(4, 40)]):
        _seed(store.catalog, store, names)

        def once() -> None:
            samples.update(scrape(store.catalog))

        counts.append(statements_of(store, monkeypatch, once))
    assert counts[0] == counts[1], counts
    assert value(samples, "rewind_tenants") == 40
    assert len(series(samples, "rewind_tenant_last_backup_timestamp_seconds")) == 40
    assert value(samples, "rewind_tenant_rpo_seconds", tenant="t39") == 3600
    assert value(samples, "rewind_tenant_pitr_window_seconds", tenant="t39") == 3600
    assert value(samples, "rewind_run_bytes_total", kind="backup", method="physical") == 7 * 40
    done = {"kind": "backup", "method": "physical", "outcome": "done"}
    assert value(samples, "rewind_runs_total", tenant="t39", **done) == 1


def test_a_seeded_deployment_adds_up_every_run_restore_and_rewritten_byte(
    store: TableStore,
) -> None:
    """The aggregation at scale (the benchmark's seed): totals over the label sets
    equal what was journaled."""
    tenants, runs, restores = 60, 600, 60
    seed(store.catalog, tenants, runs, restores)
    samples = scrape(store.catalog)
    assert value(samples, "rewind_tenants") == tenants
    assert sum(series(samples, "rewind_runs_total").values()) == runs
    failed = sum(
        v for k, v in series(samples, "rewind_runs_total").items() if ("outcome", "failed") in k
    )
    assert failed == runs // 17
    counted = series(samples, "rewind_restores_total")
    assert sum(counted.values()) == restores
    assert sum(series(samples, "rewind_restore_bytes_rewritten_total").values()) == 100 * sum(
        range(1, restores + 1)
    )
    durations = series(samples, "rewind_run_duration_seconds_count")
    assert sum(durations.values()) == runs
    assert len(series(samples, "rewind_tenant_pitr_window_seconds")) == tenants // 2


# --- the command ----------------------------------------------------------------------------


def test_rewind_metrics_prints_the_exposition_and_json(
    store: TableStore, rewind: Callable[..., Any]
) -> None:
    ok(rewind("tenant", "create", "acme"))
    ok(rewind("snapshot", "create", "acme", "mon"))
    samples = parse(ok(rewind("metrics")).stdout)
    assert value(samples, "rewind_tenants") == 1
    document = ok(rewind("--json", "metrics")).stdout
    families = {f["name"]: f for f in json.loads(document)["metrics"]}
    (sample,) = families["rewind_tenant_last_snapshot_timestamp_seconds"]["samples"]
    assert sample["labels"] == {"tenant": "acme"} and sample["value"] > 0


def test_the_textfile_is_replaced_atomically_a_reader_never_sees_half_a_file(
    tmp_path: Path, store: TableStore
) -> None:
    store.create_tenant("acme")
    folder = tmp_path / "textfile"
    folder.mkdir()
    base = exposition(registry_for(store.catalog))
    # Payloads of many sizes (up to ~1 MiB), each a whole exposition ending in its own line.
    payloads = [
        base + b"# pad\n" * (i * 997 % 180_000) + f"# end {i}\n".encode() for i in range(120)
    ]
    whole = set(payloads)
    path = folder / "rewind.prom"
    write_textfile(path, payloads[0])
    stop = threading.Event()
    torn: list[bytes] = []
    reads = [0]

    def reader() -> None:
        while not stop.is_set():
            data = path.read_bytes()
            reads[0] += 1
            if data not in whole:
                torn.append(data[-40:])

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for payload in payloads:
            write_textfile(path, payload)
    finally:
        stop.set()
        thread.join()
    assert reads[0] > 10 and torn == []
    assert path.read_bytes() == payloads[-1]
    assert [p.name for p in folder.iterdir()] == ["rewind.prom"]  # no temporary left
    assert path.stat().st_mode & 0o777 == 0o644
    parse(path.read_text())


def test_rewind_metrics_textfile_and_its_refusals(
    tmp_path: Path, store: TableStore, rewind: Callable[..., Any]
) -> None:
    ok(rewind("tenant", "create", "acme"))
    tmp_path = tmp_path / "textfile"
    tmp_path.mkdir()
    target = tmp_path / "rewind.prom"
    assert ok(rewind("metrics", "--textfile", target)).stdout == ""
    assert value(parse(target.read_text()), "rewind_tenants") == 1
    (tmp_path / "file").write_text("x")
    fails(rewind("metrics", "--textfile", tmp_path), "is a directory")
    fails(rewind("metrics", "--textfile", tmp_path / "missing" / "x.prom"), "not found")
    fails(rewind("metrics", "--textfile", tmp_path / "file" / "x.prom"), "not found")
    fails(rewind("metrics", "--textfile", f"{tmp_path}/"), "give a file path")
    fails(rewind("metrics", "--textfile", target, "--serve", ":9464"), "not both")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "rewind.prom"]


@pytest.mark.parametrize(
    "address", ["9464", ":0", ":65536", "host:", "[::1", "a b:1", ":１２", "::9464x"]
)
def test_a_malformed_listen_address_is_one_line(rewind: Callable[..., Any], address: str) -> None:
    fails(rewind("metrics", "--serve", address), "invalid --serve")


def test_a_port_in_use_is_one_line(rewind: Callable[..., Any]) -> None:
    ok(rewind("tenant", "create", "acme"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        fails(rewind("metrics", "--serve", f"127.0.0.1:{port}"), "cannot serve metrics .* in use")


@pytest.fixture
def served(uris: tuple[str, str]) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``rewind metrics --serve`` in a process of its own, on a free port of 127.0.0.1."""
    catalog, _ = uris
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engine.cli.app",
            "--catalog",
            catalog,
            "metrics",
            "--serve",
            f":{port}",
        ],
        cwd=ROOT,
        env=os.environ.copy(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert f"http://127.0.0.1:{port}/metrics" in line, line
        yield process, f"http://127.0.0.1:{port}/metrics"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_the_served_endpoint_is_scraped_over_http_each_scrape_reading_the_catalog_afresh(
    store: TableStore, uris: tuple[str, str], request: pytest.FixtureRequest
) -> None:
    store.create_tenant("acme")  # the catalog exists before the server opens it
    process, url = request.getfixturevalue("served")
    with urllib.request.urlopen(url, timeout=30) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        first = parse(response.read().decode())
    assert value(first, "rewind_tenants") == 1
    store.create_tenant("beta")
    with urllib.request.urlopen(url, timeout=30) as response:
        second = parse(response.read().decode())
    assert value(second, "rewind_tenants") == 2
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
    assert process.stderr is not None and process.stderr.read() == ""


class _Unreachable:
    def collect(self) -> Iterator[Any]:
        raise CatalogUnavailable("catalog postgresql://u:hunter2@db/x unreachable\nsecond line")


def test_a_scrape_that_cannot_read_the_catalog_answers_503_with_one_redacted_line() -> None:
    registry = CollectorRegistry()
    registry.register(_Unreachable())
    reported: list[str] = []
    app = guarded_app(make_wsgi_app(registry), reported.append)
    environ: dict[str, Any] = {}
    setup_testing_defaults(environ)
    statuses: list[str] = []
    body = b"".join(app(environ, lambda status, headers: statuses.append(status)))
    assert statuses == ["503 Service Unavailable"]
    assert reported == [body.decode().strip()]
    assert body.decode().count("\n") == 1 and "hunter2" not in body.decode()
    assert "unreachable" in reported[0]
