"""Structured events (issue 38): each job step ends in one JSON line a log pipeline reads.

Under ``rewind --log-format json`` every line of stderr is one JSON object:
a step event for each step as it ends (tenant, job id, kind, step, outcome,
seconds, bytes...), and the command's error, if any, as an ``error`` object.
The API gets the same events through the ``rewind.events`` logger. The
restores run as a real ``rewind`` process on a moto bucket and each catalog
backend; a failed step is a real fault (an object's bytes flipped in the
bucket), and no secret of any URI reaches a line.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from engine.backup.api import create_backup
from engine.gc.run import run_gc
from engine.restore.job import STOPS, restore_tenant
from engine.restore.plan import plan_restore
from tenants.catalog import open_catalog
from tenants.catalog.engine.runs import recent_runs
from tenants.errors import StorageError
from tenants.observe import events
from tenants.observe.events import LOGGER, EventFormatter, StepEvent
from tenants.store import TableStore
from tests.helpers.backups import build_source, new_bucket
from tests.helpers.cli import fails, items_tenant, ok
from tests.helpers.paths import ROOT
from tests.helpers.restores import WrappedObjectStore, unique, with_objects

FIELDS = [
    "event", "ts", "kind", "tenant", "job_id", "step", "outcome", "seconds",
    "bytes", "rows", "objects", "table", "error", "error_type",
]  # fmt: skip
"""Every step event's keys, in this order, null where unknown: one schema per line."""
PASSWORD = "hunter2"
PHYSICAL = ["plan", "rewrite", "verify", "install"]
INSTANT = ["plan", "check", "install", "rewrite", "verify", "swap"]
GC_PHASES = ["compact", "collect", "flatten", "intents", "orphans"]


def json_lines(stderr: str) -> list[dict[str, Any]]:
    """Every line of ``stderr`` as the JSON object it must be."""
    parsed = []
    for line in stderr.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            pytest.fail(f"a stderr line is not JSON: {line!r}\n{stderr[-3000:]}")
        assert isinstance(value, dict), line
        parsed.append(value)
    return parsed


def step_lines(stderr: str) -> list[dict[str, Any]]:
    """The step events of ``stderr`` (every line JSON), each checked against the schema."""
    found = [line for line in json_lines(stderr) if line["event"] == "step"]
    for line in found:
        assert list(line) == FIELDS, line
        assert datetime.fromisoformat(line["ts"]).tzinfo == UTC, line
        assert line["ts"].endswith("Z"), line
        assert line["outcome"] in ("ok", "failed", "stopped"), line
        assert isinstance(line["seconds"], float) and line["seconds"] >= 0, line
        for count in ("bytes", "rows", "objects"):
            assert line[count] is None or (isinstance(line[count], int) and line[count] >= 0)
        if line["outcome"] == "ok":
            assert line["error"] is line["error_type"] is None, line
        if line["outcome"] == "failed":  # a stopped step has one if an error stopped it
            assert line["error"] and line["error_type"], line
    return found


def rewind_process(
    catalog: str, warehouse: str, home: Path, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """``rewind --catalog CATALOG --warehouse WAREHOUSE ARGS`` as its own process (S3 from
    the environment the moto fixture exported)."""
    return subprocess.run(
        [
            sys.executable, "-m", "engine.cli.app",
            "--catalog", catalog, "--warehouse", warehouse, *args,
        ],
        cwd=home.parent,
        env=os.environ | {"PYTHONPATH": str(ROOT), "REWIND_HOME": str(home)} | env,
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip


@pytest.fixture
def source(store: TableStore) -> str:
    """A tenant with straddlers at ``mon`` (tests/helpers/backups.py), uniquely named."""
    name = unique("acme")
    build_source(store, name)
    return name


@pytest.mark.parametrize(
    ("mode", "expected"), [("--rewrite-first", PHYSICAL), ("--instant", INSTANT)]
)
def test_a_restore_under_log_format_json_prints_each_step_once_in_order_on_stderr(
    store: TableStore,
    source: str,
    default_catalog_uri: str,
    tmp_path: Path,
    mode: str,
    expected: list[str],
) -> None:
    done = rewind_process(
        default_catalog_uri, store.objects.warehouse.uri, tmp_path / "home",
        "--log-format", "json", "--json",
        "restore-tenant", source, "--snapshot", "mon", "--to", "copy", mode, "--executor", "local",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout)  # stdout is the command's result, untouched
    lines = step_lines(done.stderr)
    assert len(lines) == len(done.stderr.splitlines())  # nothing but the events
    assert [line["step"] for line in lines] == expected
    for line in lines:
        assert (line["kind"], line["tenant"], line["job_id"]) == (
            "restore",
            source,
            outcome["job_id"],
        )
        assert line["outcome"] == "ok"
    by_step = {line["step"]: line for line in lines}
    plan = plan_restore(store.catalog, source, "mon", to="other").totals()
    assert by_step["plan"]["objects"] == plan["reuse"][0] + plan["rewrite"][0]
    assert by_step["plan"]["bytes"] == plan["reuse"][1] + plan["rewrite"][1] > 0
    assert by_step["rewrite"]["objects"] == plan["rewrite"][0] > 0
    assert by_step["rewrite"]["objects"] == outcome["rewritten_objects"]
    assert by_step["rewrite"]["bytes"] == outcome["bytes_written"] > 0
    assert by_step["verify"]["objects"] == outcome["objects_verified"] > 0
    assert by_step["install"]["bytes"] == by_step["plan"]["bytes"]
    ends = [datetime.fromisoformat(line["ts"]) for line in lines]
    assert ends == sorted(ends)


def test_a_failed_step_is_one_failed_event_then_the_error_as_json_with_no_secret(
    store: TableStore, source: str, default_catalog_uri: str, tmp_path: Path
) -> None:
    """A straddler's bytes flipped in the bucket: the rewrite fails, its event says so
    (the error one redacted line), and the command's error is the last JSON line, after
    ``--verbose``'s traceback (one JSON line too). On PostgreSQL the catalog URI
    carries a password: it shows nowhere."""
    [task, *_] = plan_restore(store.catalog, source, "mon", to="other").tasks
    data = bytearray(store.objects.get(task.input.key))
    data[len(data) // 2] ^= 0xFF
    store.objects.put(task.input.key, bytes(data))
    catalog = default_catalog_uri.replace("postgres@", f"postgres:{PASSWORD}@", 1)
    done = rewind_process(
        catalog, store.objects.warehouse.uri, tmp_path / "home",
        "--log-format", "json", "--verbose",
        "restore-tenant", source, "--snapshot", "mon", "--to", "copy", "--rewrite-first",
        "--executor", "local",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-3000:]
    assert PASSWORD not in done.stdout + done.stderr
    lines = step_lines(done.stderr)
    assert [(line["step"], line["outcome"]) for line in lines] == [
        ("plan", "ok"),
        ("rewrite", "failed"),
    ]
    failed = lines[-1]
    assert failed["error_type"] == "CorruptObject"
    assert task.input.id in failed["error"] and "\n" not in failed["error"]
    *_, trace, error = json_lines(done.stderr)  # --verbose: the traceback, one JSON line
    assert trace["event"] == "traceback" and trace["error_type"] == "CorruptObject"
    assert "Traceback (most recent call last)" in trace["traceback"]
    assert error["event"] == "error" and error["error_type"] == "CorruptObject"
    assert f"--resume {failed['job_id']}" in error["error"]


@pytest.mark.one_catalog
def test_a_gc_pass_prints_one_line_per_phase_naming_its_run(
    rewind: Callable[..., Result], uris: tuple[str, str], tmp_path: Path
) -> None:
    items_tenant(rewind, tmp_path)
    ok(rewind("load", "acme", "shop.items", tmp_path / "rows.csv"))  # replaces both rows
    ok(rewind("snapshot", "drop", "acme", "mon", "--yes"))
    gc = ("--log-format", "json", "gc", "--grace", "0s", "--allow-short-grace", "--yes")
    cut = ok(rewind(*gc, "--max-seconds", "0.000001"))  # out of time before the first table
    [compact] = step_lines(cut.stderr)
    assert (compact["step"], compact["outcome"], compact["error"]) == ("compact", "stopped", None)
    result = ok(rewind(*gc))
    catalog = open_catalog(uris[0])
    with catalog.snapshot() as tx:
        newest, stopped_pass = recent_runs(tx, "gc")  # the runs journal's, newest first
    catalog.close()
    assert compact["job_id"] == stopped_pass["id"]
    lines = step_lines(result.stderr)
    assert [line["step"] for line in lines] == GC_PHASES
    assert {(line["kind"], line["tenant"], line["job_id"], line["outcome"]) for line in lines} == {
        ("gc", None, newest["id"], "ok")
    }
    by_step = {line["step"]: line for line in lines}
    assert by_step["compact"]["objects"] == 2  # the table's two loads, merged into one
    assert by_step["collect"]["objects"] == 2 and by_step["collect"]["bytes"] > 0  # then deleted


@pytest.mark.one_catalog
def test_loads_compactions_and_backups_print_their_steps(
    store: TableStore, source: str, default_catalog_uri: str, tmp_path: Path, s3_server: Any
) -> None:
    from typer.testing import CliRunner

    from engine.cli.app import app

    base = ["--catalog", default_catalog_uri, "--warehouse", store.objects.warehouse.uri]
    base += ["--log-format", "json"]
    runner = CliRunner()
    (tmp_path / "rows.csv").write_text("id,v,note\n100,a,\n101,b,x\n")
    loaded = ok(
        runner.invoke(app, [*base, "load", source, "shop.items", str(tmp_path / "rows.csv")])
    )
    [load] = step_lines(loaded.stderr)
    assert (load["kind"], load["step"], load["table"], load["rows"]) == (
        "load",
        "load",
        "shop.items",
        2,
    )
    assert load["objects"] == 1 and load["bytes"] > 0
    # A second object of the same columns: a compaction has two to merge.
    ok(runner.invoke(app, [*base, "load", source, "shop.items", str(tmp_path / "rows.csv")]))
    compacted = ok(runner.invoke(app, [*base, "compact", source, "shop.items"]))
    [compact] = step_lines(compacted.stderr)
    assert (compact["kind"], compact["step"], compact["table"]) == (
        "compaction",
        "compact",
        "shop.items",
    )
    assert compact["objects"] == 2 and compact["bytes"] > 0
    dest = f"s3://{new_bucket(s3_server, 'rewind-events')}/backups"
    created = ok(
        runner.invoke(
            app, [*base, "--json", "backup", "create", source, "--snapshot", "mon", "--to", dest]
        )
    )
    backup_id = json.loads(created.stdout)["backup_id"]
    lines = step_lines(created.stderr)
    assert [line["step"] for line in lines] == ["plan", "copy", "manifest"]
    assert {(line["kind"], line["tenant"], line["job_id"]) for line in lines} == {
        ("backup", source, backup_id)
    }
    restored = ok(
        runner.invoke(
            app,
            [*base, "backup", "restore", "--from", dest, "--backup", backup_id, "--tenant", "back"],
        )
    )
    lines = step_lines(restored.stderr)
    assert [line["step"] for line in lines] == ["verify", "copy", "install"]
    assert {(line["kind"], line["tenant"], line["job_id"]) for line in lines} == {
        ("backup_restore", "back", backup_id)
    }


@pytest.mark.one_catalog
def test_text_the_default_prints_no_event(rewind: Callable[..., Result], tmp_path: Path) -> None:
    items_tenant(rewind, tmp_path)
    result = ok(rewind("restore-tenant", "acme", "--snapshot", "mon", "--to", "copy"))
    assert result.stderr == ""
    assert logging.getLogger(LOGGER).handlers == []  # the json run's handler went with it


@pytest.mark.one_catalog
@pytest.mark.parametrize("given", [("--log-format", "yaml"), ("--log-format", ""), ("env", "JSON")])
def test_a_bad_log_format_is_one_error_line_exit_1(
    rewind: Callable[..., Result], given: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    option, word = given
    if option == "env":
        monkeypatch.setenv("REWIND_LOG_FORMAT", word)
        result = rewind("tenant", "list")
    else:
        result = rewind(option, word, "tenant", "list")
    fails(result, rf"unknown log format '{word}': use text or json")


@pytest.mark.one_catalog
def test_the_env_variable_picks_json(
    rewind: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    items_tenant(rewind, tmp_path)
    monkeypatch.setenv("REWIND_LOG_FORMAT", "json")
    result = ok(rewind("load", "acme", "shop.items", tmp_path / "rows.csv"))
    assert [line["step"] for line in step_lines(result.stderr)] == ["load"]
    refused = rewind("restore-tenant", "acme", "--snapshot", "nope", "--to", "copy")
    assert refused.exit_code == 1
    plan, error = json_lines(refused.stderr)
    assert (plan["step"], plan["outcome"], plan["tenant"], plan["job_id"]) == (
        "plan",
        "failed",
        "acme",
        None,
    )
    assert plan["error_type"] == error["error_type"] == "NotFound"
    assert error == {
        "event": "error", "ts": error["ts"], "error_type": "NotFound", "error": plan["error"]
    }  # fmt: skip


# --- the API: the same events through Python logging -------------------------------------


class Seen(logging.Handler):
    """The records of ``rewind.events``, kept; and each as EventFormatter prints it."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.lines.append(EventFormatter().format(record))

    @property
    def events(self) -> list[StepEvent]:
        return [getattr(r, "event") for r in self.records]  # noqa: B009 (an extra's name)


@pytest.fixture
def seen() -> Iterator[Seen]:
    handler = Seen()
    logger = logging.getLogger(LOGGER)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)


@pytest.mark.one_catalog
def test_the_api_hands_a_logging_handler_the_same_events(
    store: TableStore, source: str, seen: Seen
) -> None:
    outcome = restore_tenant(store, source, "mon", to="copy", executor="local", instant=False)
    assert [e.step for e in seen.events] == PHYSICAL
    assert {(e.kind, e.tenant, e.job_id, e.outcome) for e in seen.events} == {
        ("restore", source, outcome.job_id, "ok")
    }
    assert all(r.levelno == logging.INFO and r.name == LOGGER for r in seen.records)
    assert [json.loads(line) for line in seen.lines] == [e.to_dict() for e in seen.events]
    assert (
        seen.records[1]
        .getMessage()
        .startswith(f"restore {source} job {outcome.job_id}: rewrite ok in ")
    )
    seen.records.clear()
    run_gc(store, dry_run=True)
    assert [e.step for e in seen.events] == GC_PHASES
    assert {(e.kind, e.job_id) for e in seen.events} == {("gc", None)}  # a dry run journals no run


@pytest.mark.one_catalog
def test_a_failed_step_event_carries_the_error_redacted_on_one_line(
    store: TableStore, source: str, seen: Seen
) -> None:
    """A put that fails with a message quoting credentials (as a driver's may): the
    event's error, its message and its JSON line hold none of them."""
    secret_uri = f"s3://AKIAEXAMPLE:{PASSWORD}@bucket/key?X-Amz-Signature=deadbeef"

    def refused(key: str) -> BaseException:
        return StorageError(f"put {key} refused by {secret_uri}\nsecond line")

    faulty = with_objects(store, WrappedObjectStore(store.objects, fail_put_at=1, error=refused))
    with pytest.raises(StorageError, match="refused by"):
        restore_tenant(faulty, source, "mon", to="copy", executor="local", instant=False)
    plan, rewrite = seen.events
    assert (plan.step, plan.outcome, rewrite.step, rewrite.outcome) == (
        "plan",
        "ok",
        "rewrite",
        "failed",
    )
    assert rewrite.error_type == "StorageError"
    assert rewrite.error is not None and "refused by s3://AKIAEXAMPLE:***@bucket" in rewrite.error
    for said in (rewrite.error, seen.records[-1].getMessage(), seen.lines[-1]):
        assert PASSWORD not in said and "deadbeef" not in said and "second line" not in said


@pytest.mark.one_catalog
def test_a_backup_made_through_the_api_names_its_id_in_every_event(
    store: TableStore, source: str, seen: Seen, s3_server: Any
) -> None:
    dest = f"s3://{new_bucket(s3_server, 'rewind-events')}/backups"
    result = create_backup(store, source, "mon", dest, kind="logical")
    [dump] = seen.events
    assert (dump.kind, dump.tenant, dump.job_id, dump.step) == (
        "backup",
        source,
        result.backup_id,
        "dump",
    )
    assert dump.rows == result.rows and dump.bytes == result.copied_bytes


def test_a_step_stopped_on_request_is_stopped_not_failed(seen: Seen) -> None:
    from engine.restore.lease import StopRequested

    with events.job("restore", "acme", "j1"), pytest.raises(StopRequested):
        with events.step("rewrite", stops=STOPS):
            raise StopRequested("cancel requested")
    with events.job("gc"), events.step("collect") as measure:
        measure.stopped = True  # --max-seconds ran out between batches
    stopped, cut = seen.events
    assert (stopped.job_id, stopped.outcome, stopped.error_type) == (
        "j1",
        "stopped",
        "StopRequested",
    )
    assert (cut.kind, cut.outcome, cut.error) == ("gc", "stopped", None)


def test_the_api_prints_nothing_unless_asked(caplog: pytest.LogCaptureFixture) -> None:
    """An application that logs at WARNING (logging's default) sees no step: the
    events are INFO, on a logger nobody turned up."""
    with caplog.at_level(logging.WARNING):
        with events.job("load", "acme"), events.step("load"):
            pass
    assert caplog.records == []
    with caplog.at_level(logging.INFO, logger=LOGGER):
        with events.job("load", "acme"), events.step("load"):
            pass
    [record] = caplog.records
    assert getattr(record, "event").kind == "load"  # noqa: B009 (an extra's name)


def test_the_spark_submit_job_takes_log_format_anywhere() -> None:
    """engine/submit/restore_tenant.py hands the root its global options, wherever
    they come: a cluster job's driver log is where a pipeline reads its steps."""
    from engine.submit.restore_tenant import split_args

    root, rest = split_args(["acme", "--log-format", "json", "--snapshot", "mon"])
    assert (root, rest) == (["--log-format", "json"], ["acme", "--snapshot", "mon"])
    assert split_args(["--log-format=json", "acme"]) == (["--log-format=json"], ["acme"])
