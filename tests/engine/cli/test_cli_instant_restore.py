"""``--instant``, ``--rewrite-first`` and ``--no-wait`` on the restore commands, as a user
runs them (real moto S3, each catalog backend).

An instant restore installs first: its tenant (or tables) is usable before a
byte is rewritten, reading each object that straddles the restore point
through a cut at it; the same command then rewrites and swaps them, or, with
``--no-wait``, leaves that for ``--resume`` (any host) or ``--cancel`` (only
the rewrite goes; the data stays correct). The command prints the plan as the
job starts, the moment the data is usable, then the outcome; ``--json`` keeps
stdout one object at the end.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

import engine.cli.options
from engine.cli import progress
from engine.cli.app import app
from engine.cli.options import restore_mode_help
from tenants.objectstore.embedded import EmbeddedS3
from tenants.progress import SILENT, Step
from tests.helpers.cli import as_json, catalog_and_bucket, fails, ok
from tests.helpers.paths import ROOT

# The CLI's words and flags; the catalog side runs on both backends in
# test_instant_restore.py, the fault tests and the models.
pytestmark = pytest.mark.one_catalog

Rewind = Callable[..., Result]
HINT = re.compile(r"`(rewind [^`]+)`")
TABLES = ("shop.items", "shop.users")


def rows_of(rewind: Rewind, tenant: str, table: str, *at: str) -> list[dict[str, Any]]:
    return as_json(rewind("--json", "query", tenant, table, *at))  # type: ignore[no-any-return]


@pytest.fixture
def straddling(rewind: Rewind, tmp_path: Path) -> dict[str, list[dict[str, Any]]]:
    """Tenant ``acme`` whose two tables each hold one object straddling snapshot
    ``mon`` (a load before it and one after, merged by a compaction); returns
    each table's rows at ``mon``."""
    ok(rewind("tenant", "create", "acme"))
    ok(rewind("pitr", "set", "acme", "72h"))
    for table in TABLES:
        ok(rewind("table", "create", "acme", table, "-c", "id:int64", "-c", "v:string", "-k", "id"))
        (tmp_path / "before.csv").write_text("id,v\n1,a\n2,b\n3,c\n")
        ok(rewind("load", "acme", table, tmp_path / "before.csv"))
    ok(rewind("snapshot", "create", "acme", "mon"))
    for table in TABLES:
        (tmp_path / "after.csv").write_text("id,v\n2,B\n4,d\n")
        ok(rewind("load", "acme", table, tmp_path / "after.csv"))
    ok(rewind("compact", "acme"))
    expected = {table: rows_of(rewind, "acme", table, "--as-of", "mon") for table in TABLES}
    assert all(len(rows) == 3 for rows in expected.values())
    plan = as_json(rewind("restore-tenant", "acme", "--snapshot", "mon", "--dry-run", "--json"))
    assert plan["totals"]["rewrite"]["objects"] == 2, plan["totals"]  # one straddler a table
    return expected


def hints(text: str) -> dict[str, list[str]]:
    """The ``rewind ...`` commands ``text`` prints, by their last option (--resume, --cancel)."""
    found = [shlex.split(h) for h in HINT.findall(" ".join(text.split()))]
    return {h[-2]: h for h in found if len(h) > 2}


def job_of(rewind: Rewind, tenant: str, job_id: str) -> dict[str, Any]:
    jobs = as_json(rewind("--json", "history", tenant))["jobs"]
    return next(j for j in jobs if j["job_id"] == job_id)  # type: ignore[no-any-return]


def test_instant_in_place_prints_the_plan_then_usable_then_the_outcome(
    rewind: Rewind, straddling: dict[str, list[dict[str, Any]]]
) -> None:
    out = ok(rewind("restore-tenant", "acme", "--snapshot", "mon", "--instant", "--yes")).stdout
    usable = re.search(
        r"^tenant acme@\w+ is usable \(installed at [^)]+\); rewriting 2 straddling object\(s\) "
        r"\([\d.]+ \w+\) in the background of this command$",
        out,
        re.MULTILINE,
    )
    assert usable is not None, out
    assert out.count("restore plan ") == 1, out  # at the start, not again at the end
    assert "instant (installed first" in out  # the plan's caption says how it runs
    done = re.search(r"^restore job (\w+) done \(physical\): tenant acme@\w+ at mon", out, re.M)
    assert done is not None, out
    assert out.index("restore plan ") < usable.start() < done.start()
    assert re.search(r"installed first, usable after \d+\.\d\ds; then rewrote", out)
    for table in TABLES:
        assert rows_of(rewind, "acme", table) == straddling[table]
    job = job_of(rewind, "acme", done.group(1))
    assert (job["state"], job["phase"], job["instant"]) == ("done", "done", True)


def test_instant_to_a_clone_needs_no_yes(
    rewind: Rewind, straddling: dict[str, list[dict[str, Any]]]
) -> None:
    out = ok(rewind("restore-tenant", "acme", "--snapshot", "mon", "--to", "copy", "--instant"))
    assert re.search(r"^tenant copy@\w+ is usable", out.stdout, re.MULTILINE), out.stdout
    for table in TABLES:
        assert rows_of(rewind, "copy", table) == straddling[table]


def test_no_wait_then_resume_as_printed(
    rewind: Rewind, straddling: dict[str, list[dict[str, Any]]]
) -> None:
    args = ("restore-tenant", "acme", "--snapshot", "mon", "--instant", "--no-wait", "--yes")
    out = ok(rewind(*args)).stdout
    assert re.search(
        r"is usable \(installed at [^)]+\); its 2 straddling object\(s\) \([^)]+\) are read "
        r"through a cut at ts \d+ until rewritten$",
        out,
        re.MULTILINE,
    ), out
    head = re.search(r"^restore job (\w+) installed \(physical, instant\): tenant acme@", out, re.M)
    assert head is not None and "the rewrite of 2 straddling object(s)" in out, out
    job_id = head.group(1)
    told = hints(out)
    assert told["--resume"] == ["rewind", "restore-tenant", "acme", "--resume", job_id]
    assert told["--cancel"] == ["rewind", "restore-tenant", "acme", "--cancel", job_id]
    # usable now, through the cuts; history says the rewrite is pending
    for table in TABLES:
        assert rows_of(rewind, "acme", table) == straddling[table]
    job = job_of(rewind, "acme", job_id)
    assert (job["state"], job["phase"]) == ("rewriting", "installed; rewrite pending")
    shown = " ".join(ok(rewind("--wide", "history", "acme")).stdout.split())
    assert "installed; rewrite pending" in shown

    resumed = ok(rewind(*told["--resume"][1:])).stdout
    done = re.search(rf"^restore job {job_id} done \(physical\)", resumed, re.MULTILINE)
    assert done is not None, resumed
    # the plan first, once: what the resumed job does comes before what it did
    assert resumed.count(f"restore plan {job_id}") == 1, resumed
    assert resumed.index(f"restore plan {job_id}") < done.start(), resumed
    assert "installed first, usable before this command began" in resumed
    for table in TABLES:
        assert rows_of(rewind, "acme", table) == straddling[table]
    assert job_of(rewind, "acme", job_id)["phase"] == "done"


def test_no_wait_then_cancel_drops_only_the_rewrite(
    rewind: Rewind, straddling: dict[str, list[dict[str, Any]]]
) -> None:
    args = ("restore-tenant", "acme", "--snapshot", "mon", "--to", "copy", "--instant", "--no-wait")
    out = ok(rewind(*args)).stdout
    cancel = hints(out)["--cancel"]
    cancelled = ok(rewind(*cancel[1:])).stdout
    assert re.fullmatch(
        rf"restore job {cancel[-1]}: only its rewrite was cancelled; tenant copy@\w+ stays "
        r"installed and correct, reading the straddling objects not yet swapped through their "
        r"cut at ts \d+ \(the unused rewritten copies are deleted\)\n",
        cancelled,
    ), cancelled
    assert "outputs and pins are removed" not in cancelled
    for table in TABLES:  # still the tenant as of mon
        assert rows_of(rewind, "copy", table) == straddling[table]
    job = job_of(rewind, "copy", cancel[-1])
    assert (job["state"], job["phase"], job["instant"]) == (
        "cancelled",
        "installed; rewrite cancelled",
        True,
    )
    assert job["installed_ts"] is not None
    assert "installed; rewrite cancelled" in " ".join(
        ok(rewind("--wide", "history", "copy")).stdout.split()
    )
    # the job is over: the source restores again
    ok(rewind("restore-tenant", "acme", "--snapshot", "mon", "--to", "copy2", "--instant"))


def test_restore_table_and_database_instant(
    rewind: Rewind, straddling: dict[str, list[dict[str, Any]]]
) -> None:
    out = ok(
        rewind("restore-table", "acme", "shop.items", "--snapshot", "mon", "--instant", "--yes")
    ).stdout
    usable = re.search(r"^shop\.items of tenant acme@\w+ is usable .*; rewriting 1 ", out, re.M)
    assert usable is not None and out.index("restore plan ") < usable.start(), out
    assert re.search(r"^restore job \w+ done \(physical\): shop\.items of tenant", out, re.M)
    assert rows_of(rewind, "acme", "shop.items") == straddling["shop.items"]
    assert len(rows_of(rewind, "acme", "shop.users")) == 4  # its later writes kept

    ok(rewind("tenant", "create", "scratch"))
    out = ok(
        rewind(
            "restore-database", "acme", "shop", "--snapshot", "mon", "--to-tenant", "scratch",
            "--instant", "--no-wait",
        )
    ).stdout  # fmt: skip
    assert re.search(r"^shop\.items, shop\.users of tenant scratch@\w+ are usable", out, re.M)
    told = hints(out)
    assert told["--resume"][:3] == ["rewind", "restore-database", "scratch"], out
    for table in TABLES:
        assert rows_of(rewind, "scratch", table) == straddling[table]
    ok(rewind(*told["--resume"][1:]))
    for table in TABLES:
        assert rows_of(rewind, "scratch", table) == straddling[table]


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (
            ("restore-tenant", "acme", "--snapshot", "mon", "--instant", "--rewrite-first"),
            r"give either --instant or --rewrite-first, not both",
        ),
        (
            ("restore-table", "acme", "shop.items", "--snapshot", "mon", "--instant",
             "--rewrite-first", "--yes"),
            r"give either --instant or --rewrite-first, not both",
        ),
        (
            ("restore-database", "acme", "shop", "--snapshot", "mon", "--rewrite-first",
             "--instant", "--dry-run"),
            r"give either --instant or --rewrite-first, not both",
        ),
        (
            ("restore-tenant", "acme", "--snapshot", "mon", "--no-wait", "--yes"),
            r"--no-wait leaves an instant restore's rewrite for later; add --instant",
        ),
        (
            ("restore-tenant", "acme", "--snapshot", "mon", "--to", "c", "--rewrite-first",
             "--no-wait"),
            r"add --instant",
        ),
        (
            ("restore-table", "acme", "shop.items", "--snapshot", "mon", "--no-wait"),
            r"add --instant",
        ),
        (
            ("restore-database", "acme", "shop", "--snapshot", "mon", "--no-wait", "--yes"),
            r"add --instant",
        ),
        (
            ("restore-tenant", "acme", "--snapshot", "mon", "--to", "c", "--method", "logical",
             "--instant"),
            r"an instant restore is physical",
        ),
        (
            # in place, without --yes: refused before the question is asked
            ("restore-tenant", "acme", "--snapshot", "mon", "--method", "logical", "--instant"),
            r"an instant restore is physical",
        ),
        (
            ("restore-tenant", "acme", "--resume", "j1", "--instant"),
            r"--resume/--cancel take only a job id",
        ),
        (
            ("restore-table", "acme", "--cancel", "j1", "--no-wait"),
            r"--resume/--cancel take only a job id",
        ),
    ],
)  # fmt: skip
def test_conflicting_modes_are_one_line_and_change_nothing(
    rewind: Rewind,
    straddling: dict[str, list[dict[str, Any]]],
    uris: tuple[str, str],
    s3_server: EmbeddedS3,
    bucket: str,
    args: tuple[str, ...],
    match: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # --no-wait alone is refused while restores rewrite first by default (a flipped
    # default takes it: test_a_flipped_default_restores_instantly_unless_logical)
    monkeypatch.setattr(engine.cli.options, "INSTANT_BY_DEFAULT", False)
    before = catalog_and_bucket(uris[0], s3_server, bucket)
    result = rewind(*args)
    fails(result, match)
    assert result.stdout == ""
    assert catalog_and_bucket(uris[0], s3_server, bucket) == before


def timed(rewind: Rewind, *args: str) -> tuple[dict[str, Any], float]:
    """The command's one JSON object, and how long it took."""
    began = time.perf_counter()
    result = ok(rewind("--json", *args))
    took = time.perf_counter() - began
    assert result.stderr == ""
    return as_json(result), took


def test_json_is_one_object_saying_how_soon_the_tenant_was_usable(
    rewind: Rewind, straddling: dict[str, list[dict[str, Any]]]
) -> None:
    base = ("restore-tenant", "acme", "--snapshot", "mon")
    plan = as_json(rewind("--json", *base, "--to", "c0", "--dry-run", "--instant"))
    assert plan["instant"] is True and plan["method"] == "physical"
    plan = as_json(rewind("--json", *base, "--to", "c0", "--dry-run", "--rewrite-first"))
    assert plan["instant"] is False

    waited, took = timed(rewind, *base, "--to", "c1", "--instant")
    assert (waited["state"], waited["instant"], waited["rewrite_pending"]) == ("done", True, False)
    assert waited["rewritten_objects"] == 2 and waited["installed_ts"] > 0
    # usable at the install, before the rewrite the same command then ran
    assert (
        0 < waited["usable_after_s"]
        and waited["usable_after_s"] + waited["seconds"]["rewrite"] <= took
    )

    first, took = timed(rewind, *base, "--to", "c2", "--rewrite-first")
    assert (first["state"], first["instant"], first["rewrite_pending"]) == ("done", False, False)
    assert first["seconds"]["rewrite"] <= first["usable_after_s"] <= took  # usable at the end

    pending, _ = timed(rewind, *base, "--to", "c3", "--instant", "--no-wait")
    assert (pending["state"], pending["instant"], pending["rewrite_pending"]) == (
        "rewriting",
        True,
        True,
    )
    assert pending["rewritten_objects"] == 0 and pending["usable_after_s"] > 0
    resumed, _ = timed(rewind, "restore-tenant", "acme", "--resume", pending["job_id"])
    assert (resumed["state"], resumed["instant"], resumed["rewritten_objects"]) == ("done", True, 2)
    assert resumed["usable_after_s"] == 0  # usable before the resume began

    pending, _ = timed(rewind, *base, "--to", "c4", "--instant", "--no-wait")
    cancelled, _ = timed(rewind, "restore-tenant", "acme", "--cancel", pending["job_id"])
    assert (cancelled["state"], cancelled["phase"], cancelled["instant"]) == (
        "cancelled",
        "installed; rewrite cancelled",
        True,
    )
    for table in TABLES:
        assert rows_of(rewind, "c4", table) == straddling[table]


class StepLines:
    """Stands in for the progress bars: a ``[step] ...`` line on stderr as each
    step begins, so its place among the command's output (stdout and stderr
    interleaved in ``result.output``) shows when it ran."""

    open = 0

    def begin(self, what: str, total: int | None) -> Step:
        print(f"[step] {what}", file=sys.stderr, flush=True)
        return SILENT

    def end(self, step: Step) -> None:
        pass


@pytest.fixture
def watched(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI reports progress as at a terminal, to :class:`StepLines`."""
    monkeypatch.setattr(progress, "shown", lambda as_json: not as_json)
    monkeypatch.setattr(progress, "RichWatcher", lambda console: StepLines())


@pytest.mark.parametrize("mode", ["--instant", "--rewrite-first"])
def test_the_plan_is_printed_before_the_rewrite_runs(
    rewind: Rewind, straddling: dict[str, list[dict[str, Any]]], watched: None, mode: str
) -> None:
    out = ok(rewind("restore-tenant", "acme", "--snapshot", "mon", "--to", "copy", mode)).output
    plan = out.index("restore plan ")
    rewrite = out.index("[step] rewriting 2 objects")
    done = out.index(" done (physical): tenant copy@")
    assert plan < rewrite < done, out
    assert out.count("restore plan ") == 1
    if mode == "--instant":
        usable = out.index(" is usable (installed at ")
        swap = out.index("[step] swapping 2 rewritten object(s) in")
        assert plan < usable < rewrite < swap < done, out
    else:
        assert " is usable " not in out


def test_a_resumed_job_prints_its_plan_before_it_runs(
    rewind: Rewind, straddling: dict[str, list[dict[str, Any]]], watched: None
) -> None:
    out = ok(rewind("restore-tenant", "acme", "--snapshot", "mon", "--to", "copy", "--no-wait"))
    resume = hints(out.stdout)["--resume"]
    resumed = ok(rewind(*resume[1:])).output
    plan = resumed.index(f"restore plan {resume[-1]}")
    rewrite = resumed.index("[step] rewriting 2 objects")
    done = resumed.index(f"restore job {resume[-1]} done (physical)")
    assert plan < rewrite < done, resumed
    assert resumed.count("restore plan ") == 1, resumed


@pytest.mark.parametrize("default", [False, True])
def test_the_help_names_the_default_whichever_it_is(default: bool) -> None:
    instant, rewrite_first = restore_mode_help(default)
    assert ("The default" in instant) is default
    assert ("The default" in rewrite_first) is not default


@pytest.mark.parametrize("command", ["restore-tenant", "restore-table", "restore-database"])
def test_the_commands_help_shows_the_modes(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    shown = " ".join(ok(result).stdout.replace("│", " ").split())
    instant, rewrite_first = restore_mode_help(engine.cli.options.INSTANT_BY_DEFAULT)
    for flag, text in (("--instant", instant), ("--rewrite-first", rewrite_first)):
        assert f"{flag} {text}" in shown, shown
    assert "--no-wait With an instant restore" in shown


def test_a_flipped_default_restores_instantly_unless_logical(
    rewind: Rewind, straddling: dict[str, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``INSTANT_BY_DEFAULT`` is the one switch: flipped, a restore given neither
    flag installs first; a logical one never does, and --no-wait needs no --instant."""
    monkeypatch.setattr(engine.cli.options, "INSTANT_BY_DEFAULT", True)
    base = ("--json", "restore-tenant", "acme", "--snapshot", "mon")
    assert as_json(rewind(*base, "--to", "c1"))["instant"] is True
    assert as_json(rewind(*base, "--to", "c2", "--rewrite-first"))["instant"] is False
    logical = as_json(rewind(*base, "--to", "c3", "--method", "logical"))
    assert (logical["method"], logical["instant"]) == ("logical", False)
    table = as_json(
        rewind("--json", "restore-table", "acme", "shop.items", "--snapshot", "mon", "--to",
               "shop.items_mon")
    )  # fmt: skip
    assert table["instant"] is True
    pending = as_json(rewind(*base, "--to", "c4", "--no-wait"))
    assert pending["rewrite_pending"] is True
    for table_name in TABLES:
        assert rows_of(rewind, "c3", table_name) == straddling[table_name]
        assert rows_of(rewind, "c4", table_name) == straddling[table_name]


def test_the_spark_submit_job_takes_instant(
    uris: tuple[str, str], rewind: Rewind, straddling: dict[str, list[dict[str, Any]]]
) -> None:
    """engine/submit/restore_tenant.py runs the CLI's restore-tenant: its flags too."""
    catalog, warehouse = uris
    done = subprocess.run(
        [
            sys.executable, "-m", "engine.submit.restore_tenant", "acme", "--snapshot", "mon",
            "--to", "copy", "--instant", "--executor", "local",
            "--catalog", catalog, "--warehouse", warehouse,
        ],
        env=os.environ | {"PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    usable = re.search(r"^tenant copy@\w+ is usable .*; rewriting 2 straddling", out, re.M)
    assert usable is not None, out
    assert out.index("restore plan ") < usable.start() < out.index(" done (physical): tenant copy")
    for table in TABLES:
        assert rows_of(rewind, "copy", table) == straddling[table]
