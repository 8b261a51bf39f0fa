"""Progress on all long work (issue 17, part 5).

Each long step reports to the watcher of ``tenants.progress``: what it does,
its total bytes, and bytes done that add up to exactly that total. The CLI's
watcher draws rich bars on stderr only when a person watches: a terminal, not
``--json``; a pipe gets nothing. Spark's own start-up lines are hidden unless
``--verbose``.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.backup.api import create_backup, restore_backup
from engine.gc.run import run_gc
from engine.restore.job import restore_tenant
from tenants.load_files import read_batches
from tenants.objectstore.embedded import EmbeddedS3
from tenants.progress import Share, Step, watching
from tenants.spark.logs import NOISE, java_options, show_spark_logs
from tenants.store import TableStore
from tests.helpers.backups import build_source
from tests.helpers.paths import ROOT

# Not the catalog's behaviour: on SQLite alone (conftest.py, one_catalog).
pytestmark = pytest.mark.one_catalog

# Progress is the same on either catalog: SQLite alone keeps this module quick.
sqlite_only = pytest.mark.parametrize("new_catalog_uri", ["sqlite"], indirect=True)


@dataclass
class Recorded:
    what: str
    total: int | None
    done: int = 0
    ended: bool = False
    threads: set[int] = field(default_factory=set)

    def advance(self, amount: int) -> None:
        assert amount >= 0, f"{self.what}: advanced by {amount}"
        self.done += amount


class Recorder:
    def __init__(self) -> None:
        self.steps: list[Recorded] = []

    def begin(self, what: str, total: int | None) -> Recorded:
        self.steps.append(Recorded(what, total))
        return self.steps[-1]

    def end(self, step: Step) -> None:
        assert isinstance(step, Recorded), step  # what begin gave
        step.ended = True

    def named(self, prefix: str) -> list[Recorded]:
        return [s for s in self.steps if s.what.startswith(prefix)]


def assert_whole(steps: list[Recorded]) -> None:
    """Each step ended, with a positive total, and its bytes add up to it."""
    assert steps
    for s in steps:
        assert s.ended, s
        assert s.total and s.total > 0, s
        assert s.done == s.total, s


@sqlite_only
def test_compaction_reports_each_merge(store: TableStore):
    build_source(store, compact=False)
    seen = Recorder()
    with watching(seen):
        store.compact("acme", "shop.items")
    merges = seen.named("compacting shop.items")
    assert_whole(merges)
    assert "objects)" in merges[0].what


@sqlite_only
def test_physical_restore_reports_its_rewrite(store: TableStore):
    build_source(store)
    seen = Recorder()
    with watching(seen):
        restore_tenant(store, "acme", "mon", to="clone", executor="local")
    assert_whole(seen.named("rewriting"))


@sqlite_only
def test_logical_restore_reports_dump_and_reload(store: TableStore):
    build_source(store)
    seen = Recorder()
    with watching(seen):
        restore_tenant(store, "acme", "mon", to="clone", method="logical")
    assert_whole(seen.named("dumping acme"))
    assert_whole(seen.named("reloading acme"))


@sqlite_only
@pytest.mark.parametrize("kind", ["physical", "logical"])
def test_backup_create_and_restore_report(store: TableStore, s3_server: EmbeddedS3, kind: str):
    build_source(store)
    bucket = f"rewind-progress-{uuid.uuid4().hex[:12]}"
    s3_server.create_bucket(bucket)
    uri = f"s3://{bucket}/backups"
    seen = Recorder()
    with watching(seen):
        result = create_backup(store, "acme", "mon", uri, kind=kind)
        restore_backup(store, uri, result.backup_id, tenant="back")
    if kind == "physical":
        assert_whole(seen.named("backing up acme"))
        assert_whole(seen.named("restoring backup"))
    else:
        assert_whole(seen.named("dumping acme"))
        assert_whole(seen.named("reloading acme"))


@sqlite_only
def test_gc_reports_measuring_compacting_and_deleting(store: TableStore):
    build_source(store)
    seen = Recorder()
    with watching(seen):
        report = run_gc(store, dry_run=False, grace_us=0, allow_short_grace=True)
    assert_whole(seen.named("measuring what GC may reclaim"))
    assert report.collected.deleted_objects > 0
    assert_whole(seen.named("deleting"))


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_load_advances_by_the_bytes_of_its_file(tmp_path: Path, suffix: str):
    rows = pa.table({"id": pa.array(range(200_000), pa.int64()), "name": ["x" * 20] * 200_000})
    path = tmp_path / f"rows{suffix}"
    if suffix == ".csv":
        import pyarrow.csv as pa_csv

        pa_csv.write_csv(rows, path)
    else:
        pq.write_table(rows, path, row_group_size=20_000)
    seen = Recorded("loading", path.stat().st_size)
    batches = list(read_batches(path, rows.schema, block_bytes=256 * 1024, progress=seen))
    assert len(batches) > 1 and sum(b.num_rows for b in batches) == rows.num_rows
    assert seen.done == path.stat().st_size


def test_a_csv_load_counts_the_bytes_a_reading_ahead_thread_took_between_two_looks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The CSV reader reads ahead on a thread of its own: the stream's position
    moves between any two looks at it. Each look must count exactly once (a load
    once ended short of its file's size whenever the position moved between the
    look that advanced the bar and the one that remembered where it stood)."""
    import tenants.load_files as load_files

    path = tmp_path / "rows.csv"
    path.write_text("id,name\n" + "".join(f"{i},x\n" for i in range(1000)))
    size = path.stat().st_size
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])

    class AheadStream:
        """Every look finds the reader 7 bytes further on, up to the file's end."""

        position = 0

        def __enter__(self) -> AheadStream:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def tell(self) -> int:
            self.position = min(size, self.position + 7)
            return self.position

    class FiveBatches:
        schema = pa.schema([("id", pa.string()), ("name", pa.string())])

        def __iter__(self):
            for i in range(5):
                yield pa.record_batch({"id": [str(i)], "name": ["x"]}, schema=self.schema)

    monkeypatch.setattr(load_files.pa, "input_stream", lambda where: AheadStream())
    monkeypatch.setattr(load_files.pa_csv, "open_csv", lambda *a, **k: FiveBatches())
    seen = Recorded("loading", size)
    assert len(list(read_batches(path, schema, progress=seen))) == 5
    assert seen.done == size


def test_a_share_never_overshoots_and_ends_exact():
    seen = Recorded("x", 1000)
    share = Share(seen, 1000, 10)
    share.rows(4)
    share.rows(100)  # more rows than estimated: capped at the total
    assert seen.done == 1000
    share.finish()
    assert seen.done == 1000
    empty = Recorded("y", 10)
    Share(empty, 10, 0).finish()
    assert empty.done == 10


def _run_cli(args: list[str], env: dict[str, str], *, terminal: bool) -> tuple[int, str, str]:
    """Run ``rewind ARGS`` in a new process, its stderr a terminal (a pty) or a pipe."""
    command = [sys.executable, "-m", "engine.cli.app", *args]
    if not terminal:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        return done.returncode, done.stdout, done.stderr
    leader, follower = pty.openpty()
    os.set_blocking(leader, True)
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=follower, text=True)
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the process ended
            break
        if not chunk:
            break
        seen += chunk
    stdout, _ = process.communicate(timeout=300)
    os.close(leader)
    return process.returncode, stdout, seen.decode("utf-8", "replace")


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "REWIND_"))}
    env["REWIND_HOME"] = str(tmp_path / "home")
    env["PYTHONPATH"] = str(ROOT)
    env["COLUMNS"] = "120"
    env.pop("NO_COLOR", None)
    env["TERM"] = "xterm"
    for args in (
        ["tenant", "create", "acme"],
        [
            "table",
            "create",
            "acme",
            "shop.orders",
            "-c",
            "id:int64",
            "-c",
            "name:string",
            "-k",
            "id",
        ],
    ):
        code, out, err = _run_cli(args, env, terminal=False)
        assert code == 0, err
    return env


def test_a_terminal_sees_a_load_bar_a_pipe_and_json_see_nothing(cli_env, tmp_path: Path):
    rows = pa.table({"id": pa.array(range(50_000), pa.int64()), "name": ["y" * 30] * 50_000})
    import pyarrow.csv as pa_csv

    path = tmp_path / "orders.csv"
    pa_csv.write_csv(rows, path)
    load = ["load", "acme", "shop.orders", str(path)]

    code, out, err = _run_cli(load, cli_env, terminal=True)
    assert code == 0, err
    assert "loading orders.csv" in err and "MiB" in err
    assert out.startswith("loaded 50,000 rows")

    code, out, err = _run_cli(load, cli_env, terminal=False)
    assert code == 0 and err == "", err

    code, out, err = _run_cli(["--json", *load], cli_env, terminal=True)
    assert code == 0
    assert "loading" not in err
    assert json.loads(out)["upserted"] == 50_000


def test_spark_start_up_lines_are_hidden_unless_verbose(tmp_path: Path):
    """A local Spark session started by Rewind prints nothing of its own; with
    ``show_spark_logs(True)`` (``--verbose``) Spark's lines are back."""
    script = (
        "import sys\n"
        "from tenants.spark.logs import show_spark_logs\n"
        "show_spark_logs(sys.argv[1] == 'verbose')\n"
        "from tenants.spark.session import get_spark\n"
        "print(get_spark().range(5).count())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for mode in ("quiet", "verbose"):
        done = subprocess.run(
            [sys.executable, "-c", script, mode],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "5"
        if mode == "quiet":
            assert done.stderr == "", done.stderr
        else:
            assert "log4j" in done.stderr or "WARN" in done.stderr, done.stderr


def test_the_noise_filter_passes_errors():
    assert NOISE.match("WARNING: Using incubator modules: jdk.incubator.vector")
    assert NOISE.match("26/11/25 20:45:10 WARN NativeCodeLoader: Unable to load native-hadoop")
    assert not NOISE.match("26/11/25 20:45:10 ERROR Executor: Exception in task 0.0")
    assert not NOISE.match("Traceback (most recent call last):")


def test_java_options_keep_the_users_own():
    show_spark_logs(False)
    ours = java_options(None)
    assert ours is not None and "log4j2.configurationFile=" in ours
    with_mine = java_options("-Xss4m")
    assert with_mine is not None and with_mine.startswith("-Xss4m -Dlog4j2.configurationFile=")
    assert java_options("-Dlog4j2.configurationFile=mine.properties") is None
    show_spark_logs(True)
    try:
        assert java_options(None) is None
    finally:
        show_spark_logs(False)
