"""A real standalone Spark cluster (one master, one worker) on 127.0.0.1 for tests.

``local[2]`` runs tasks in the driver's JVM with the driver's Python, so it
cannot show what breaks on a real cluster: an executor whose Python lacks the
project (``import tenants`` fails there), lacks pyarrow, or never starts. This
module launches the installed pyspark's own Master and Worker daemons
(``bin/spark-class``; the pip wheel ships no ``sbin/start-*.sh``) as separate
process groups, and builds a worker Python that sees the venv's packages but
not Rewind itself.

It is a helper imported by tests, not a test module; fixtures live in the tests.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tenants.objectstore.embedded import free_port
from tests.helpers.paths import ROOT

# Environment variables that would make Spark's processes run, or import from,
# the driver's interpreter: a cluster test must not inherit them by accident.
DRIVER_PYTHON_VARS = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH", "VIRTUAL_ENV")
# The line Spark's Worker logs when the master asks it to start an executor.
EXECUTOR_LAUNCH_LINE = "Asked to launch executor"
START_TIMEOUT_S = 60.0


def spark_home() -> Path:
    """The installed pyspark package directory, which the pip wheel makes a SPARK_HOME."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def _path_without_venv(path: str) -> str:
    """PATH minus the venv's bin: Spark's default ``python3`` must not be the driver's venv."""
    if sys.prefix == sys.base_prefix:
        return path
    venv = Path(sys.prefix).resolve()
    kept = [p for p in path.split(os.pathsep) if p and not Path(p).resolve().is_relative_to(venv)]
    return os.pathsep.join(kept)


def _daemon_env(workdir: Path, extra: Mapping[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DRIVER_PYTHON_VARS}
    env["PATH"] = _path_without_venv(env.get("PATH", ""))
    env["SPARK_HOME"] = str(spark_home())
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["SPARK_LOG_DIR"] = str(workdir / "logs")
    env["SPARK_WORKER_DIR"] = str(workdir / "work")
    env.update(extra or {})
    return env


def _fetch_json(url: str, timeout: float = 2.0) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return dict(json.load(response))


@dataclass
class StandaloneCluster:
    """A running master and worker; ``stop()`` ends both process groups."""

    master_url: str
    master_webui: str
    workdir: Path
    master_log: Path
    worker_log: Path
    master_pid: int
    worker_pid: int
    _procs: list[subprocess.Popen[bytes]] = field(default_factory=list, repr=False)

    @property
    def work_dir(self) -> Path:
        """The worker's ``--work-dir``: one ``app-*/<executor id>/`` per executor."""
        return self.workdir / "work"

    def state(self) -> dict[str, Any]:
        """The master's JSON status page (workers, active and completed apps)."""
        return _fetch_json(f"{self.master_webui}/json/")

    def alive_workers(self) -> list[dict[str, Any]]:
        return [w for w in self.state().get("workers", []) if w.get("state") == "ALIVE"]

    def applications(self) -> list[dict[str, Any]]:
        """Active then completed applications as the master reports them (id, name, state, ...)."""
        state = self.state()
        return list(state.get("activeapps", [])) + list(state.get("completedapps", []))

    def executor_launched(self, app_id: str | None = None) -> bool:
        """Whether the worker was asked to launch an executor (for ``app_id``, if given).

        Read from the worker's log rather than the master's JSON because the log
        line is written before the executor JVM starts: it proves scheduling
        reached this worker even when the executor then dies at once.
        """
        for line in self.worker_log.read_text(errors="replace").splitlines():
            if EXECUTOR_LAUNCH_LINE in line and (app_id is None or app_id in line):
                return True
        return False

    def executor_logs(self) -> list[Path]:
        """The executors' stderr files, ``work/app-*/<n>/stderr``, oldest app first."""
        return sorted(self.work_dir.glob("app-*/*/stderr"))

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM both process groups, SIGKILL what is left after ``grace_s``, then reap.

        Process groups, not PIDs: the worker's executors are its children in its
        group (Java's ProcessBuilder does not start new sessions), so one signal
        ends them too. The worker goes first so it does not log reconnect noise.
        """
        for pid in (self.worker_pid, self.master_pid):
            try:
                os.killpg(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        for proc in self._procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for pid in (self.worker_pid, self.master_pid):
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for proc in self._procs:
            proc.wait()


def _launch(cmd: list[str], log: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        # A new session per daemon so stop() can signal the group (bash launcher,
        # JVM and, for the worker, executors) without touching the test process.
        return subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(env),
            start_new_session=True,
        )


def start_cluster(
    workdir: Path,
    *,
    worker_env: Mapping[str, str] | None = None,
    cores: int = 2,
    memory: str = "2g",
    timeout_s: float = START_TIMEOUT_S,
) -> StandaloneCluster:
    """Start a master and one worker on 127.0.0.1 and wait until the worker is ALIVE.

    Args:
        workdir: Holds ``logs/`` (daemon logs) and ``work/`` (executor dirs).
        worker_env: Added to the worker's environment, which executors inherit.
        cores, memory: What the worker offers to applications.
        timeout_s: How long to wait for the master to list the worker as ALIVE.

    Raises:
        RuntimeError: java is missing, a daemon exited, or the worker did not
            register in time; the message carries the tails of both logs.
    """
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        raise RuntimeError("java not found; run `bash .ci/ensure-java` (Spark needs Java 17+)")
    workdir = workdir.resolve()
    logs = workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (workdir / "work").mkdir(parents=True, exist_ok=True)
    spark_class = str(spark_home() / "bin" / "spark-class")
    port, master_ui, worker_ui = free_port(), free_port(), free_port()
    master_url = f"spark://127.0.0.1:{port}"
    master_webui = f"http://127.0.0.1:{master_ui}"
    master_log, worker_log = logs / "master.log", logs / "worker.log"

    master = _launch(
        [spark_class, "org.apache.spark.deploy.master.Master",
         "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(master_ui)],
        master_log,
        _daemon_env(workdir, None),
    )  # fmt: skip
    worker = _launch(
        [spark_class, "org.apache.spark.deploy.worker.Worker",
         "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory,
         "--work-dir", str(workdir / "work"), "--webui-port", str(worker_ui), master_url],
        worker_log,
        _daemon_env(workdir, worker_env),
    )  # fmt: skip
    cluster = StandaloneCluster(
        master_url, master_webui, workdir, master_log, worker_log,
        master.pid, worker.pid, [worker, master],
    )  # fmt: skip

    deadline = time.monotonic() + timeout_s
    problem = "timed out"
    # The worker retries registration by itself if it starts before the master,
    # so one poll on the master's view covers both start orders.
    while time.monotonic() < deadline:
        exited = [
            name for name, p in (("master", master), ("worker", worker)) if p.poll() is not None
        ]
        if exited:
            problem = f"{' and '.join(exited)} exited"
            break
        try:
            if cluster.alive_workers():
                return cluster
        except (urllib.error.URLError, OSError, ValueError):
            pass  # the master's UI is not up yet
        time.sleep(0.25)
    cluster.stop()
    raise RuntimeError(
        f"standalone Spark cluster did not start ({problem} after {timeout_s:.0f}s waiting for an "
        f"ALIVE worker at {master_webui}/json/)\n"
        f"--- {master_log} ---\n{_tail(master_log)}\n--- {worker_log} ---\n{_tail(worker_log)}"
    )


def spark_submit(
    cluster: StandaloneCluster,
    app: Path,
    *args: str,
    python: Path,
    driver_python: Path | None = None,
    conf: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 300.0,
) -> subprocess.CompletedProcess[str]:
    """Run ``app`` with ``bin/spark-submit`` on ``cluster``; executors use ``python``.

    ``driver_python`` defaults to this (the venv's) interpreter and is always
    passed, because spark-submit otherwise runs the driver with
    ``spark.pyspark.python`` too, and a driver without Rewind cannot run Rewind.
    ``SPARK_LOCAL_IP`` keeps the driver on 127.0.0.1: without it the driver
    advertises the host's first non-loopback address to the executors.
    """
    cmd = [str(spark_home() / "bin" / "spark-submit"), "--master", cluster.master_url]
    merged = {
        "spark.pyspark.python": str(python),
        "spark.pyspark.driver.python": str(driver_python or sys.executable),
        "spark.ui.enabled": "false",
        **(conf or {}),
    }
    for key, value in merged.items():
        cmd += ["--conf", f"{key}={value}"]
    run_env = {k: v for k, v in os.environ.items() if k not in DRIVER_PYTHON_VARS}
    run_env["SPARK_LOCAL_IP"] = "127.0.0.1"
    run_env.update(env or {})
    return subprocess.run(
        [*cmd, str(app), *args], env=run_env, capture_output=True, text=True, timeout=timeout_s
    )


@contextmanager
def cluster_session(
    workdir: Path,
    *,
    worker_env: Mapping[str, str] | None = None,
    cores: int = 2,
    memory: str = "2g",
) -> Iterator[StandaloneCluster]:
    """A started cluster that is stopped on exit, whatever the body raised."""
    cluster = start_cluster(workdir, worker_env=worker_env, cores=cores, memory=memory)
    try:
        yield cluster
    finally:
        cluster.stop()


# --- a worker Python without Rewind -------------------------------------------------

# The project's own editable install and packages: what the worker must NOT see.
PROJECT_ENTRIES = ("tenants", "engine")


def _normalized(name: str) -> str:
    return name.lower().replace("-", "_")


def _excluded(entry: str, exclude: Sequence[str]) -> bool:
    low = entry.lower()
    if entry == "__pycache__" or low.startswith("__editable__") or low.endswith(".pth"):
        return True
    if low.startswith("rewind") and (low.endswith(".dist-info") or low.endswith(".egg-link")):
        return True
    for name in (*PROJECT_ENTRIES, *exclude):
        top = _normalized(name)
        norm = _normalized(entry)
        # The package or module itself, its .libs, and its metadata
        # (``pyarrow-26.0.1.dist-info``): a half-removed package would import.
        if norm in (top, f"{top}.py", f"{top}.libs") or norm.split(".")[0] == top:
            return True
        if low.endswith((".dist-info", ".egg-info")) and _normalized(entry.split("-")[0]) == top:
            return True
    return False


def venv_site_packages() -> Path:
    """The driver venv's site-packages (where pyarrow, boto3 and pyspark live)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent.parent


def base_python() -> Path:
    """The interpreter the venv was made from (pyenv's), which lacks the project's packages."""
    return Path(getattr(sys, "_base_executable", sys.executable)).resolve()


def worker_python(dest: Path, *, exclude: Sequence[str] = ()) -> Path:
    """Write an executable script at ``dest`` that runs a Python without Rewind.

    It runs the venv's *base* interpreter with ``-S`` and a PYTHONPATH of
    whatever Spark set (pyspark.zip, py4j) plus a symlink farm of the venv's
    site-packages minus the project's editable install, ``tenants``/``engine``
    and every top-level name in ``exclude`` (``("pyarrow",)`` also drops
    ``pyarrow-*.dist-info``). ``-S`` because the base interpreter's own
    site-packages carry other versions of boto3, numpy and more: the worker
    must see exactly the venv's packages. ``PYTHONSAFEPATH`` because with
    ``-c``/``-m`` Python puts the current directory first on ``sys.path``, and
    a worker started from the repository root would import ``tenants`` from it.

    Both properties are checked by running the script before it is returned.

    Raises:
        RuntimeError: the script can import ``tenants`` or an excluded name,
            or cannot import pyspark.
    """
    dest = dest.resolve()
    farm = dest.with_name(dest.name + ".site-packages")
    farm.mkdir(parents=True, exist_ok=True)
    for entry in sorted(venv_site_packages().iterdir()):
        if not _excluded(entry.name, exclude):
            link = farm / entry.name
            if not link.is_symlink():
                link.symlink_to(entry)
    script = (
        "#!/bin/sh\n"
        "# Written by tests/helpers/spark_cluster.py: the venv's packages minus Rewind"
        + (f" and {', '.join(exclude)}" if exclude else "")
        + ".\n"
        "unset VIRTUAL_ENV PYTHONHOME\n"
        f'PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}"{shlex.quote(str(farm))}\n'
        "PYTHONNOUSERSITE=1\n"
        "PYTHONSAFEPATH=1\n"
        "export PYTHONPATH PYTHONNOUSERSITE PYTHONSAFEPATH\n"
        f'exec {shlex.quote(str(base_python()))} -S "$@"\n'
    )
    dest.write_text(script)
    dest.chmod(0o755)
    _check_worker_python(dest, exclude)
    return dest


def _check_worker_python(script: Path, exclude: Sequence[str]) -> None:
    must_fail = [*PROJECT_ENTRIES, *exclude]
    probe = (
        "import importlib, json\n"
        "def ok(n):\n"
        "    try:\n"
        "        importlib.import_module(n)\n"
        "        return True\n"
        "    except ImportError:\n"
        "        return False\n"
        f"print(json.dumps({{n: ok(n) for n in {[*must_fail, 'pyspark', 'boto3']!r}}}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in DRIVER_PYTHON_VARS}
    # Run from the repository root on purpose: the worst place, where cwd holds tenants/.
    repo_root = ROOT
    out = subprocess.run(
        [str(script), "-c", probe],
        cwd=repo_root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{script} failed: {out.stderr.strip()}")
    found: dict[str, bool] = json.loads(out.stdout.strip().splitlines()[-1])
    leaked = [n for n in must_fail if found[n]]
    missing = [n for n in ("pyspark", "boto3") if not found[n]]
    if leaked or missing:
        raise RuntimeError(f"{script}: imports {leaked} (must not), lacks {missing} (must have)")
