"""Pictures of benchmark results, drawn from the JSON payloads the benchmarks write.

One function per picture; each takes a result payload (the dict a benchmark's
``main`` returns, or its JSON file read back) and a PNG path, and returns the
path. A benchmark calls :func:`draw_beside` after writing its JSON, so
``benchmarks/results/<name>.json`` gets ``<name>_<what>.png`` beside it:

- ``straddle`` (bench_restore, part 4): physical and logical restore seconds
  against the share of the tenant's bytes that straddles the snapshot;
- ``executors`` (bench_restore, part 2): MB/s of the local and the Spark
  executor's rewrite step against the straddling MB rewritten;
- ``rss`` (bench_memory): each case's peak RSS against its input MB, with the
  compaction's memory budgets when the payload records them;
- ``usable`` (bench_instant_restore, part 1): seconds from the restore call to
  the first rows in another process against the straddling bytes, instant,
  physical and logical, per warehouse, the extrapolated sizes hollow;
- ``curves`` (bench_diff): diff and revert seconds of one commit against the
  table's rows (left) and against the change's rows (right), both key layouts,
  with the bare full read the diff avoids and the run with smaller row groups;
- ``passes`` (bench_gc_scale): GC pass seconds against the live objects in the
  warehouse, the default pass and ``--deep``, per warehouse and run.

``python -m benchmarks.plots`` redraws the figures the README shows from the
committed JSON files (:data:`FIGURES`), without running a benchmark;
``python -m benchmarks.plots FILE.json ...`` draws every picture a file holds
data for, beside it.

matplotlib is imported inside the drawing functions: a benchmark must run,
and write its JSON, on an install without it (it is a ``dev`` extra). At
module level this imports only the standard library, so a benchmark loads it
for nothing. Figures are drawn on a ``Figure`` with an Agg canvas, not through
pyplot, so no global backend or figure registry changes in a benchmark's
process.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"
MB = 1_000_000
FIGSIZE = (7.0, 4.0)
DPI = 100  # 700 x 400 pixels: a README column, and PNGs of a few tens of KB

Payload = dict[str, Any]
Draw = Callable[[Payload, Path], Path]


# drawing --------------------------------------------------------------------------------


def _axes() -> tuple[Any, Any]:
    """A figure on an Agg canvas and its one axes."""
    import matplotlib  # noqa: F401  (fails first, and plainly, when it is not installed)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=FIGSIZE, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _stamp(fig: Any, payload: Payload, extra: str = "") -> None:
    """Which run the picture shows, in small print: figures without it cannot be checked."""
    machine = payload.get("machine", {})
    parts = [
        payload.get("source") or f"{payload.get('benchmark', '?')}.json",
        f"written {str(payload.get('timestamp', '?'))[:16].replace('T', ' ')} UTC",
        f"commit {machine.get('git_commit', '?')}",
        f"{machine.get('cores', '?')} cores",
    ]
    start, end = payload.get("load_average_at_start"), payload.get("load_average_at_end")
    if start and end:
        parts.append(f"load average {start[0]:.1f} at start, {end[0]:.1f} at end")
    # As the figure's x label, so the constrained layout keeps it clear of the axes'.
    fig.supxlabel(", ".join(parts) + extra, x=0.01, ha="left", fontsize=6, color="0.4")


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    # No "Software" entry: a redraw with another matplotlib leaves the file as it was.
    fig.savefig(path, dpi=DPI, metadata={"Software": None})
    return path


def plot_straddle(payload: Payload, path: Path) -> Path:
    """Restore seconds vs the measured straddling share, physical and logical on one axes.

    Shows where reusing objects stops paying: the physical restore rewrites
    only the straddlers, so it should climb toward the logical one as the
    share goes to 100%, while the logical restore rewrites everything always.
    """
    sweep = payload["straddle_sweep"]
    points = sorted(sweep["points"], key=lambda p: p["straddle_fraction"])
    xs = [100 * p["straddle_fraction"] for p in points]
    fig, ax = _axes()
    ax.plot(xs, [p["physical_s"] for p in points], "o-", color="tab:blue",
            label="physical: reuse objects, rewrite the straddlers")  # fmt: skip
    ax.plot(xs, [p["logical_s"] for p in points], "s--", color="tab:orange",
            label="logical: dump at S, reload every row")  # fmt: skip
    spec = sweep["spec"]
    # Compacting more of the tenant shrinks it (bigger objects encode better).
    low, high = (f(p["tenant_bytes"] for p in points) / MB for f in (min, max))
    size = f"{low:,.0f}" if round(low) == round(high) else f"{low:,.0f}-{high:,.0f}"
    ax.set_title(
        f"Restore (clone at S) vs bytes straddling S: {spec['tables']} tables, "
        f"{size} MB tenant, {sweep['backend']}://, best of {sweep.get('repeats', 1)}",
        fontsize=10,
    )
    ax.set_xlabel("bytes straddling the snapshot, % of the tenant (as planned)")
    ax.set_ylabel("seconds")
    ax.set_xlim(-3, 103)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    _stamp(fig, payload)
    return _save(fig, path)


def plot_executors(payload: Payload, path: Path) -> Path:
    """Rewrite-step MB/s of the local and the Spark executor vs straddling MB, log x.

    Why a picture: the table says "Spark wins at no size"; the curves show
    how far apart they start (Spark's fixed cost per job) and how they close.
    """
    sweep = payload["executors"]
    rows = sorted(sweep["sizes"], key=lambda r: r["straddle_bytes"])
    xs = [r["straddle_bytes"] / MB for r in rows]
    local = [r["local_mb_per_s"] for r in rows]
    fig, ax = _axes()
    ax.plot(xs, local, "o-", color="tab:blue", label="local executor")
    ax.plot(xs, [r["spark_mb_per_s"] for r in rows], "s--", color="tab:red",
            label="Spark executor (local Spark session)")  # fmt: skip
    for x, y, r in zip(xs, local, rows, strict=True):
        count = r["straddle_objects"]
        ax.annotate(f"{count} object{'s' if count != 1 else ''}", (x, y), xytext=(0, 7),
                    textcoords="offset points", ha="center", fontsize=7, color="0.3")  # fmt: skip
    ax.set_xscale("log")
    ax.set_ylim(bottom=0, top=max(local) * 1.2)
    ax.set_title(
        f"Rewrite step of a physical restore, {sweep['backend']}://, best of "
        f"{sweep['repeats']} (Spark's first job, {sweep['spark_first_job_s']:.1f} s, not counted)",
        fontsize=10,
    )
    ax.set_xlabel("straddling MB rewritten (log scale)")
    ax.set_ylabel("MB/s (straddling MB ÷ rewrite seconds)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    _stamp(fig, payload)
    return _save(fig, path)


USABLE_COLORS = {"instant": "tab:green", "physical": "tab:blue", "logical": "tab:orange"}
USABLE_LABELS = {
    "instant": "instant: install, rewrite after",
    "physical": "physical: rewrite first",
    "logical": "logical: dump and reload",
}


def plot_usable(payload: Payload, path: Path) -> Path:
    """Seconds to a usable tenant vs straddling GB, log-log: one line per method
    and warehouse (``file://`` solid, moto dashed), the goal as a line.

    Why a picture: the claim is a flat line for the instant restore against
    lines that climb with every byte straddling S. Sizes where the physical or
    logical restore was not run are drawn hollow, on a dotted line, at the
    time the run extrapolated (``extrapolation`` in the JSON).
    """
    fig, ax = _axes()
    cases = payload["cases"]
    for backend, style in (("file", "-"), ("moto", "--")):
        mine = sorted((c for c in cases if c["backend"] == backend),
                      key=lambda c: c["tenant"]["straddle_bytes"])  # fmt: skip
        if not mine:
            continue
        for method, color in USABLE_COLORS.items():
            measured = [
                (c["tenant"]["straddle_bytes"] / 1e9,
                 c["instant"]["usable_best_s"] if method == "instant" else c[method]["usable_s"])
                for c in mine if method == "instant" or method in c
            ]  # fmt: skip
            marker = "o" if backend == "file" else "s"
            if measured:
                xs, ys = zip(*measured, strict=True)
                ax.plot(xs, ys, marker=marker, linestyle=style, color=color,
                        label=f"{USABLE_LABELS[method]}, {backend}")  # fmt: skip
            fit = payload.get("extrapolation", {}).get(backend, {}).get(method) or {}
            guessed = [
                (p["straddle_bytes"] / 1e9, p["usable_s"]) for p in fit.get("extrapolated", [])
            ]
            if guessed:
                line = sorted(measured[-1:] + guessed)
                ax.plot(*zip(*line, strict=True), linestyle=":", color=color)
                gx, gy = zip(*guessed, strict=True)
                ax.plot(gx, gy, marker=marker, linestyle="none", color=color,
                        markerfacecolor="none")  # fmt: skip
    goal = payload.get("goals", {}).get("usable", {}).get("goal_s")
    if goal:
        ax.axhline(goal, color="0.5", linewidth=0.8, linestyle="-.")
        ax.annotate(f"goal for instant: {goal:g} s", (0.01, goal), xycoords=("axes fraction", "data"),
                    xytext=(0, 2), textcoords="offset points", ha="left", va="bottom",
                    fontsize=7, color="0.4")  # fmt: skip
    ax.plot([], [], "o", color="0.4", markerfacecolor="none", linestyle=":",
            label="hollow, dotted: extrapolated, not run")  # fmt: skip
    from matplotlib.ticker import FuncFormatter

    ax.set_xscale("log")
    ax.set_yscale("log")
    plain = FuncFormatter(lambda value, _: f"{value:g}")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(
        FuncFormatter(lambda v, _: f"{v:g}" if f"{v:g}"[0] in "25" else "")
    )
    low, high = ax.get_ylim()
    ax.set_ylim(low, high * 30)  # room for the legend above the lines
    ax.set_xlabel("bytes straddling the snapshot, GB (all of the tenant; log scale)")
    ax.set_ylabel("seconds to the first rows in another process (log)")
    ax.set_title("Time to a usable tenant after a restore call, every object straddling S",
                 fontsize=10)  # fmt: skip
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6.5, loc="upper left", ncol=2)
    _stamp(fig, payload)
    return _save(fig, path)


DIFF_COLORS = {"clustered": "tab:blue", "random": "tab:red"}


def _diff_series(
    run: Payload, layout: str, what: str, by: str, change: int | None = None
) -> list[tuple[float, float]]:
    """(x, seconds) of one run's cases of ``layout``: x is the change's rows
    (``by="change"``) or the run's rows (one point, at change size ``change``)."""
    return sorted(
        (float(c["change_rows"] if by == "change" else run["rows"]), float(c[what]))
        for c in run["cases"]
        if c["layout"] == layout and (change is None or c["change_rows"] == change)
    )


def plot_diff(payload: Payload, path: Path) -> Path:
    """bench_diff: seconds of a diff and a revert of one commit, log-log; left
    against the table's rows (at one change size), right against the change's
    rows (at the largest table).

    The claim is a flat line on the left (cost follows the change, not the
    table) and a slope of one on the right, both far below the bare full read.
    ``file://`` solid, moto hollow; diff solid, revert dashed; the run with
    smaller row groups (random layout) dash-dotted.
    """
    import matplotlib  # noqa: F401
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    fig = Figure(figsize=FIGSIZE, layout="constrained")
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2)
    change = payload["curve_change"]
    runs = payload["runs"]
    small = payload.get("small_groups")
    for backend in ("file", "moto"):
        mine = sorted((r for r in runs if r["backend"] == backend), key=lambda r: r["rows"])
        if not mine:
            continue
        face = None if backend == "file" else "none"
        for layout, color in DIFF_COLORS.items():
            for what, style in (("diff_s", "-"), ("revert_s", "--")):
                points = [p for r in mine for p in _diff_series(r, layout, what, "rows", change)]
                label = f"{what[:-2]} {layout}" if backend == "file" else None
                if points:
                    left.plot(*zip(*points, strict=True), marker="o" if what == "diff_s" else "s",
                              linestyle=style, color=color, markerfacecolor=face, markersize=4,
                              label=label)  # fmt: skip
                if backend == "file":
                    curve = _diff_series(mine[-1], layout, what, "change")
                    if curve:
                        right.plot(*zip(*curve, strict=True), marker="o" if what == "diff_s" else "s",
                                   linestyle=style, color=color, markersize=4)  # fmt: skip
        bare = [(float(r["rows"]), float(r["bare"]["seconds"])) for r in mine]
        left.plot(*zip(*bare, strict=True), marker="^", linestyle=":", color="0.35",
                  markerfacecolor=face, markersize=4,
                  label="bare full read" if backend == "file" else None)  # fmt: skip
        if backend == "file":
            right.axhline(bare[-1][1], color="0.35", linestyle=":", linewidth=1)
    if small:
        rows = (
            f"{small['row_group_rows'] // 1024} Ki"
            if small["row_group_rows"] >= 1024
            else str(small["row_group_rows"])
        )
        curve = _diff_series(small, "random", "diff_s", "change")
        if curve:
            right.plot(*zip(*curve, strict=True), marker="D", linestyle="-.", color="tab:purple",
                       markersize=4)  # fmt: skip
        point = _diff_series(small, "random", "diff_s", "rows", change)
        if point:
            left.plot(*zip(*point, strict=True), marker="D", linestyle="none", color="tab:purple",
                      markersize=5, label=f"diff random, {rows}-row groups")  # fmt: skip
    goal = payload.get("goals_asked", {}).get("diff_s")
    plain = FuncFormatter(lambda value, _: f"{value:g}")
    for ax in (left, right):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(plain)
        ax.grid(True, which="both", alpha=0.3)
        if goal:
            ax.axhline(goal, color="tab:green", linewidth=0.8, linestyle="-.")
    largest = max((r["rows"] for r in runs if r["backend"] == "file"), default=0)
    left.set_xlabel(f"table rows (change of {change:,} rows)", fontsize=8)
    right.set_xlabel(f"change rows (table of {largest:,} rows, file://)", fontsize=8)
    left.set_ylabel("seconds (median; moto hollow)", fontsize=8)
    for ax in (left, right):
        ax.tick_params(labelsize=7)
    fig.legend(fontsize=6.5, loc="outside upper center", ncol=4)
    _stamp(fig, payload, f"\ngreen: the diff's goal ({goal:g} s at 10^8 rows); dotted: a bare "
           "pyarrow read of every object")  # fmt: skip
    return _save(fig, path)


# What each bench_memory case runs as Rewind, and the bare job it is held against.
MEMORY_REWIND = {
    "rewrite": {"rewind": "Rewind"},
    "compaction": {"rewind": "Rewind, default budget", "rewind_512m": "Rewind, memory 512 MiB"},
    "load": {"rewind": "Rewind"},
    "query": {"rewind_limit10": "Rewind, --limit 10"},
}
MEMORY_BARE = {
    "rewrite": "bare_stream",
    "compaction": "bare_copy",
    "load": "bare_csv",
    "query": "bare_first_rows",
}
MEMORY_COLORS = {
    "rewrite": "tab:blue",
    "compaction": "tab:green",
    "load": "tab:purple",
    "query": "tab:brown",
}


def _memory_style(case: str, variant: str) -> dict[str, Any]:
    """Rewind solid (``--memory 512MiB`` dashed), the bare job dotted and paler."""
    if variant not in MEMORY_REWIND.get(case, {}):
        return {"linestyle": ":", "marker": "o", "alpha": 0.55}
    if variant == "rewind_512m":
        return {"linestyle": "--", "marker": "s", "alpha": 1.0}
    return {"linestyle": "-", "marker": "o", "alpha": 1.0}


def plot_memory(payload: Payload, path: Path) -> Path:
    """Peak RSS vs input MB per bench_memory case, log x; the budgets when recorded.

    Bounded memory is the claim, so the picture should be flat lines across a
    wide x. Points are grouped by case, variant, warehouse and run (``run`` is
    set by :func:`combine_runs`): a run of several sizes is a line, a run of
    one size a star; moto's points are hollow.
    """
    fig, ax = _axes()
    series: dict[tuple[str, str, str, str], list[tuple[float, float]]] = {}
    budgets: set[float] = set()
    for case, block in payload["cases"].items():
        for result in block.get("results", []):
            size = result.get("input_bytes") or result["size_mb"] * MB
            for variant, figures in result["variants"].items():
                if variant not in MEMORY_REWIND.get(case, {}) and variant != MEMORY_BARE.get(case):
                    continue
                key = (case, variant, result["backend"], result.get("run", ""))
                series.setdefault(key, []).append((size / MB, figures["peak_rss_mib"]))
                budget = figures.get("info", {}).get("memory_budget_mib")
                if budget:
                    budgets.add(float(budget))
    labelled: set[tuple[str, str]] = set()
    hollow = stars = False
    # Lines first, so a variant's legend entry shows its line, not a star.
    for (case, variant, backend, _run), pts in sorted(
        series.items(), key=lambda item: (len(item[1]) == 1, item[0])
    ):
        style = _memory_style(case, variant)
        label = None
        if (case, variant) not in labelled:
            labelled.add((case, variant))
            label = f"{case}: {MEMORY_REWIND.get(case, {}).get(variant, 'bare pyarrow')}"
        if len(pts) == 1:
            stars = True
            style |= {"marker": "*", "linestyle": "none", "markersize": 11}
        color = MEMORY_COLORS.get(case, "0.3")
        face = color
        if backend != "file":
            hollow = True
            face = "none"
        xs, ys = zip(*sorted(pts), strict=True)
        ax.plot(xs, ys, color=color, markerfacecolor=face, markeredgecolor=color,
                markersize=style.pop("markersize", 5), label=label, **style)  # fmt: skip
    if hollow:
        ax.plot([], [], "o", color="0.4", markerfacecolor="none", label="hollow: moto")
    for budget in sorted(budgets):
        ax.axhline(budget, color="0.5", linewidth=0.8, linestyle="-.")
        ax.annotate(f"compaction budget {budget:,.0f} MiB", (0.99, budget),
                    xycoords=("axes fraction", "data"), xytext=(0, 2), textcoords="offset points",
                    ha="right", va="bottom", fontsize=7, color="0.4")  # fmt: skip
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("input MB: object (rewrite), table (compaction, query), CSV (load)")
    ax.set_ylabel("peak RSS of the process, MiB")
    ax.set_title("Peak memory vs input size, each run in a fresh process", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6.5, loc="upper left", ncol=2)
    extra = ""
    if len(payload.get("runs", ())) > 1:  # a combined payload: name every source
        others = ", ".join(r["source"] for r in payload["runs"][1:])
        extra = f"\n{'stars' if stars else 'also'}: {others}"
    _stamp(fig, payload, extra)
    return _save(fig, path)


def run_label(payload: Payload) -> str:
    """How a picture names one run: its ``label`` if it has one, else its commit."""
    return str(
        payload.get("label") or f"commit {payload.get('machine', {}).get('git_commit', '?')}"
    )


def plot_gc_scale(payload: Payload, path: Path) -> Path:
    """GC pass seconds vs live objects in the warehouse (bench_gc_scale), log-log.

    The default pass solid, ``--deep`` dashed, one colour per warehouse and run
    (``run`` is set by :func:`combine_results`): runs before and after a change
    side by side. "Flat" is the claim for the default pass: the same garbage
    at every size.
    """
    fig, ax = _axes()
    lines: dict[tuple[str, str, str], list[tuple[int, float]]] = {}
    for row in payload["results"]:
        for kind in ("default", "deep"):
            if kind in row:
                key = (row["backend"], row.get("run") or run_label(payload), kind)
                lines.setdefault(key, []).append((row["live"], row[kind]["seconds"]))
    colours: dict[tuple[str, str], str] = {}
    for (backend, run, kind), points in sorted(lines.items()):
        colour = colours.setdefault((backend, run), f"C{len(colours)}")
        xs, ys = zip(*sorted(points), strict=True)
        ax.plot(xs, ys, color=colour, marker="o" if kind == "default" else "s",
                linestyle="-" if kind == "default" else "--",
                label=f"{'default' if kind == 'default' else '--deep'}, {backend}, {run}")  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("live objects in the warehouse")
    ax.set_ylabel("GC pass seconds")
    ax.set_title("A GC pass against warehouse size, same 1,000 garbage + 200 orphans", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    # Beside the axes: the lines fill the corners of a log-log picture.
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    extra = ""
    if len(payload.get("runs", ())) > 1:  # a combined payload: name every source
        extra = "\nalso: " + ", ".join(r["source"] for r in payload["runs"][1:])
    _stamp(fig, payload, extra)
    return _save(fig, path)


def combine_results(payloads: Sequence[Payload]) -> Payload:
    """Payloads with a flat ``results`` list (bench_gc_scale) as one, each result
    tagged with its run's :func:`run_label`; the first payload leads, as in
    :func:`combine_runs`."""
    first = payloads[0]
    return {
        **{k: v for k, v in first.items() if k != "results"},
        "results": [{**r, "run": run_label(p)} for p in payloads for r in p.get("results", [])],
        "runs": [
            {
                "source": p.get("source") or f"{p.get('benchmark', '?')}.json",
                "timestamp": str(p.get("timestamp", "?")),
            }
            for p in payloads
        ],
    }


def combine_runs(payloads: Sequence[Payload]) -> Payload:
    """bench_memory payloads as one, each result tagged with the run it came from.

    The first payload leads (its timestamp and machine label the picture);
    ``runs`` lists every source, so the small print can name them all.
    """
    first = payloads[0]
    cases: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for payload in payloads:
        run = f"{payload.get('benchmark')} {payload.get('timestamp')}"
        for case, block in payload.get("cases", {}).items():
            results = cases.setdefault(case, {"results": []})["results"]
            results.extend({**r, "run": run} for r in block.get("results", []))
    return {
        **{k: v for k, v in first.items() if k != "cases"},
        "cases": cases,
        "runs": [
            {
                "source": p.get("source") or f"{p.get('benchmark', '?')}.json",
                "timestamp": str(p.get("timestamp", "?")),
            }
            for p in payloads
        ],
    }


# beside a benchmark's JSON ------------------------------------------------------------------


def read_payload(path: Path) -> Payload:
    """A result file's payload, with ``source`` (its file name) for the small print.

    The name, not the payload's ``benchmark``: a run may be renamed after it
    was written (``--name`` of a scratch run, then ``git mv``).
    """
    payload: Payload = json.loads(path.read_text())
    payload.setdefault("source", path.name)
    return payload


def _has_straddle(payload: Payload) -> bool:
    return bool(payload.get("straddle_sweep", {}).get("points"))


def _has_executors(payload: Payload) -> bool:
    return bool(payload.get("executors", {}).get("sizes"))


def _has_usable(payload: Payload) -> bool:
    cases = payload.get("cases")
    return isinstance(cases, list) and any("instant" in c for c in cases)


def _has_diff(payload: Payload) -> bool:
    runs = payload.get("runs")
    return (
        isinstance(runs, list) and "curve_change" in payload and any(r.get("cases") for r in runs)
    )


def _has_gc_scale(payload: Payload) -> bool:
    results = payload.get("results")
    return isinstance(results, list) and any("live" in r and "default" in r for r in results)


def _has_memory(payload: Payload) -> bool:
    cases = payload.get("cases")
    return isinstance(cases, dict) and any(
        "variants" in r for block in cases.values() for r in block.get("results", [])
    )


PLOTS: tuple[tuple[str, Draw, Callable[[Payload], bool]], ...] = (
    ("straddle", plot_straddle, _has_straddle),
    ("executors", plot_executors, _has_executors),
    ("rss", plot_memory, _has_memory),
    ("usable", plot_usable, _has_usable),
    ("curves", plot_diff, _has_diff),
    ("passes", plot_gc_scale, _has_gc_scale),
)


def draw_beside(result: Path, *, say: Callable[[str], object] = print) -> list[Path]:
    """Every picture the JSON file ``result`` has data for, as ``<stem>_<what>.png`` beside it.

    Drawn from the file, not from the benchmark's dict in memory: the file has
    the run's timestamp and machine, and a later redraw then gives the same
    picture. Called after the JSON is written, so a missing matplotlib costs
    the pictures and one line of output, never the figures.
    """
    payload = read_payload(result)
    wanted = [(what, draw) for what, draw, has in PLOTS if has(payload)]
    if not wanted:
        return []
    try:
        paths = [
            draw(payload, result.with_name(f"{result.stem}_{what}.png")) for what, draw in wanted
        ]
    except ImportError as e:
        say(f"no plot drawn: matplotlib is not importable ({e}); pip install -e '.[dev]'")
        return []
    for path in paths:
        say(f"plot: {path}")
    return paths


# the committed figures ----------------------------------------------------------------------


@dataclass(frozen=True)
class CommittedFigure:
    """A PNG the README shows and the committed JSON files it is drawn from."""

    png: str
    draw: Draw
    sources: tuple[str, ...]
    combine: Callable[[Sequence[Payload]], Payload] = combine_runs
    """How several sources become one payload."""


FIGURES: tuple[CommittedFigure, ...] = (
    CommittedFigure(
        "bench_restore_sweep_straddle.png", plot_straddle, ("bench_restore_sweep.json",)
    ),
    CommittedFigure(
        "bench_restore_issue16_after_executors.png",
        plot_executors,
        ("bench_restore_issue16_after.json",),
    ),
    # The sizes run (one run, 100 MB to 1 GB) plus the newest single runs at
    # the sizes (2 GB rewrite, 10 GB compaction, 5 GB load, the query
    # of 10^8 rows), which a picture of "bounded" needs and a rerun cannot
    # afford.
    CommittedFigure(
        "bench_memory_sizes_rss.png",
        plot_memory,
        (
            "bench_memory_sizes.json",
            "bench_memory_rewrite_jemalloc.json",
            "bench_memory_compaction_jemalloc.json",
            "bench_memory_load.json",
        ),
    ),
    # Issue 37: the intent sweep before (4 requests per stale intent) and after
    # (1 per intent and table, 1 upload listing per page), and file:// to 10^6.
    CommittedFigure(
        "bench_gc_scale_passes.png",
        plot_gc_scale,
        (
            "bench_gc_scale_file_after.json",
            "bench_gc_scale.json",
            "bench_gc_scale_moto.json",
            "bench_gc_scale_moto_after.json",
        ),
        combine_results,
    ),
    # Issue 37, quiet and repeated (median of 5): the same garbage in the same 10
    # tables at every size, and spread one object per table.
    CommittedFigure(
        "bench_gc_scale_quiet_passes.png",
        plot_gc_scale,
        ("bench_gc_scale_file_same.json", "bench_gc_scale_file_all.json"),
        combine_results,
    ),
)


def redraw(figure: CommittedFigure, directory: Path = RESULTS_DIR) -> Path:
    """Draw one committed figure from its sources in ``directory``."""
    payloads = [read_payload(directory / source) for source in figure.sources]
    payload = payloads[0] if len(payloads) == 1 else figure.combine(payloads)
    return figure.draw(payload, directory / figure.png)


def main(argv: Sequence[str] | None = None) -> list[Path]:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.plots",
        description="Redraw the benchmark PNGs from result JSON files, running nothing.",
    )
    parser.add_argument(
        "files", nargs="*", type=Path,
        help="result JSON files: draw what each holds beside it (default: the README's figures)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if not args.files:
        paths = [redraw(figure) for figure in FIGURES]
        for path in paths:
            print(f"plot: {path}")
        return paths
    drawn: list[Path] = []
    for file in args.files:
        drawn += draw_beside(file)
    return drawn


if __name__ == "__main__":
    main()
