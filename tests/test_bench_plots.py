"""The benchmark pictures: each plot draws a PNG from a result shaped like the
benchmark's JSON, a missing matplotlib costs only the picture, and every PNG
the README shows is in the repository with the JSON it is drawn from."""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchmarks import plots
from tests.helpers.paths import ROOT

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+\.png)\)")


def _run(**figures: Any) -> dict[str, Any]:
    """What write_result puts around every benchmark's figures."""
    return {
        "benchmark": "bench_test",
        "timestamp": "2026-01-02T03:04:05+00:00",
        "machine": {"cores": 2, "git_commit": "abc1234"},
        "load_average_at_start": [1.0, 1.0, 1.0],
        "load_average_at_end": [2.0, 1.5, 1.0],
        **figures,
    }


def straddle_result() -> dict[str, Any]:
    points = [
        {
            "fraction_asked": asked,
            "straddle_fraction": asked * 0.9,
            "tenant_bytes": 5_000_000 - int(asked * 1_000_000),
            "straddle_bytes": int(asked * 4_000_000),
            "physical_s": 0.02 + 3 * asked,
            "logical_s": 6.0 + asked,
        }
        for asked in (0.0, 0.05, 0.5, 1.0)
    ]
    spec = {"tables": 4, "objects": 40, "total_bytes": 5_000_000, "straddle_fraction": 0.05}
    return _run(straddle_sweep={"backend": "file", "spec": spec, "repeats": 2, "points": points})


def executors_result() -> dict[str, Any]:
    sizes = [
        {
            "straddle_bytes": mb * 1_000_000,
            "straddle_objects": 1 if mb < 1 else 8,
            "local_mb_per_s": 30.0 + mb / 2,
            "spark_mb_per_s": 4.0 + mb / 2,
        }
        for mb in (0.8, 8, 34, 134)
    ]
    return _run(
        executors={"backend": "file", "repeats": 2, "spark_first_job_s": 3.3, "sizes": sizes}
    )


def usable_result() -> dict[str, Any]:
    """bench_instant_restore's part 1: 10 GB measured for instant only."""

    def case(backend: str, gb: float) -> dict[str, Any]:
        out: dict[str, Any] = {
            "backend": backend,
            "tenant": {"straddle_bytes": int(gb * 1e9)},
            "instant": {"usable_best_s": 0.01 if backend == "file" else 0.5},
        }
        if gb < 5:
            out |= {"physical": {"usable_s": 20 * gb}, "logical": {"usable_s": 100 * gb}}
        return out

    cases = [case(b, gb) for b in ("file", "moto") for gb in (1, 3, 10) if b == "file" or gb != 3]
    guess = {"extrapolated": [{"straddle_bytes": int(10e9), "usable_s": 200.0}]}
    return _run(
        cases=cases,
        extrapolation={b: {"physical": guess, "logical": guess} for b in ("file", "moto")},
        goals={"usable": {"goal_s": 0.2}},
    )


def diff_result() -> dict[str, Any]:
    """bench_diff: two sizes on file://, one on moto, the change curve at the larger."""

    def case(layout: str, change: int, rows: int) -> dict[str, Any]:
        diff = change / 2_000 * (1 if layout == "clustered" else 10) + rows / 1e9
        return {"layout": layout, "change_rows": change, "diff_s": diff, "revert_s": 2 * diff}

    def run(backend: str, rows: int, changes: tuple[int, ...]) -> dict[str, Any]:
        return {
            "backend": backend,
            "rows": rows,
            "bare": {"seconds": rows / 1e6},
            "cases": [case(lay, c, rows) for c in changes for lay in ("clustered", "random")],
        }

    small = run("file", 10**7, (100, 1_000, 10_000)) | {"row_group_rows": 16_384}
    small["cases"] = [c for c in small["cases"] if c["layout"] == "random"]
    return _run(
        curve_change=1_000,
        goals_asked={"diff_s": 1.0},
        runs=[
            run("file", 10**6, (1_000,)),
            run("file", 10**7, (100, 1_000, 10_000)),
            run("moto", 10**6, (1_000,)),
        ],
        small_groups=small,
    )


def gc_scale_result(label: str | None = None) -> dict[str, Any]:
    """bench_gc_scale: both warehouses at two sizes, the deep pass on moto only."""

    def row(backend: str, live: int) -> dict[str, Any]:
        out: dict[str, Any] = {"backend": backend, "catalog": "sqlite", "live": live}
        out["default"] = {"seconds": 2.0 + live / 1e6, "peak_rss_mib": 150.0}
        if backend == "moto":
            out["deep"] = {"seconds": 3.0 + live / 1e3, "peak_rss_mib": 180.0}
        return out

    rows = [row(b, n) for b in ("file", "moto") for n in (10_000, 100_000)]
    return _run(results=rows, sizes=[10_000, 100_000]) | ({"label": label} if label else {})


def _variant(peak_mib: float, budget_mib: float | None = None) -> dict[str, Any]:
    return {
        "seconds": 1.0,
        "peak_rss_mib": peak_mib,
        "info": {"memory_budget_mib": budget_mib} if budget_mib else {},
    }


def memory_result(sizes_mb: tuple[float, ...] = (100, 300)) -> dict[str, Any]:
    def results(case_variants: Callable[[float], dict[str, Any]]) -> dict[str, Any]:
        return {
            "results": [
                {
                    "backend": "file",
                    "size_mb": mb,
                    "input_bytes": int(mb * 1_000_000),
                    "variants": case_variants(mb),
                }
                for mb in sizes_mb
            ]
        }

    return _run(
        cases={
            "rewrite": results(lambda mb: {"rewind": _variant(220), "bare_stream": _variant(210)}),
            "compaction": results(
                lambda mb: {
                    "rewind": _variant(550, 1024),
                    "rewind_512m": _variant(300, 512),
                    "bare_copy": _variant(200),
                }
            ),
            "load": results(lambda mb: {"rewind": _variant(290), "bare_csv": _variant(130)}),
        }
    )


def _assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[: len(PNG_MAGIC)] == PNG_MAGIC, path
    assert len(data) > 1_000, path


@pytest.mark.parametrize(
    ("draw", "result"),
    [
        (plots.plot_straddle, straddle_result),
        (plots.plot_executors, executors_result),
        (plots.plot_memory, memory_result),
        (plots.plot_usable, usable_result),
        (plots.plot_diff, diff_result),
        (plots.plot_gc_scale, gc_scale_result),
    ],
    ids=["straddle", "executors", "memory", "usable", "diff", "gc_scale"],
)
def test_each_plot_writes_a_png(
    draw: plots.Draw, result: Callable[[], dict[str, Any]], tmp_path: Path
) -> None:
    path = draw(result(), tmp_path / "picture.png")
    assert path == tmp_path / "picture.png"
    _assert_png(path)


def test_memory_plot_of_runs_combined_marks_single_sizes(tmp_path: Path) -> None:
    combined = plots.combine_runs([memory_result(), memory_result(sizes_mb=(10_000,))])
    assert [r["source"] for r in combined["runs"]] == ["bench_test.json"] * 2
    assert len(combined["cases"]["rewrite"]["results"]) == 3
    _assert_png(plots.plot_memory(combined, tmp_path / "rss.png"))


def test_gc_scale_runs_combined_are_told_apart_by_label_or_commit(tmp_path: Path) -> None:
    combined = plots.combine_results([gc_scale_result(), gc_scale_result("after")])
    assert {r["run"] for r in combined["results"]} == {"commit abc1234", "after"}
    assert len(combined["results"]) == 8 and len(combined["runs"]) == 2
    _assert_png(plots.plot_gc_scale(combined, tmp_path / "passes.png"))


def test_draw_beside_draws_each_picture_the_json_has_data_for(tmp_path: Path) -> None:
    result = tmp_path / "bench_x.json"
    result.write_text(json.dumps(straddle_result() | executors_result()))
    said: list[str] = []
    drawn = plots.draw_beside(result, say=said.append)
    assert drawn == [tmp_path / "bench_x_straddle.png", tmp_path / "bench_x_executors.png"]
    for path in drawn:
        _assert_png(path)
    assert len(said) == 2


def test_without_matplotlib_the_json_stays_and_one_line_says_no_plot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # None in sys.modules makes `import matplotlib` (and its submodules) raise ImportError.
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    result = tmp_path / "bench_x.json"
    result.write_text(json.dumps(straddle_result()))
    said: list[str] = []
    assert plots.draw_beside(result, say=said.append) == []
    assert len(said) == 1 and said[0].startswith("no plot drawn")
    assert result.exists()
    assert list(tmp_path.glob("*.png")) == []


def _images(readme: Path) -> list[Path]:
    return [readme.parent / ref for ref in IMAGE.findall(readme.read_text())]


def test_every_png_the_readmes_show_is_in_the_repository() -> None:
    shown = _images(ROOT / "README.md")
    assert len(shown) >= 3, "the README's benchmark section shows the plots"
    for path in [*shown, *_images(ROOT / "benchmarks" / "README.md")]:
        assert path.is_file(), f"{path.relative_to(ROOT)} is shown but missing"
        _assert_png(path)


def test_committed_figures_redraw_from_their_committed_json(tmp_path: Path) -> None:
    shown = {p.name for p in _images(ROOT / "README.md")}
    for figure in plots.FIGURES:
        assert figure.png in shown, f"{figure.png} is drawn but the README does not show it"
        for source in figure.sources:
            shutil.copy(plots.RESULTS_DIR / source, tmp_path / source)
        _assert_png(plots.redraw(figure, tmp_path))
