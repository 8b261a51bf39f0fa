"""``rewind spark package`` and ``rewind spark check``: get ready for a cluster.

``package`` writes the zip a job ships to its executors (the driver adds it by
itself; the file is for ``--py-files`` or an image). ``check`` starts a Spark
session on the effective master and asks every worker what it has, the same
probe a job runs before its first task.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from engine.cli import render
from engine.cli.context import cli_state
from engine.cli.render_layout import human_bytes, titled, wrapping

app = typer.Typer(
    help="Package Rewind for a Spark cluster and check its workers.", no_args_is_help=True
)


@app.command("package")
def package(
    ctx: typer.Context,
    out: Annotated[
        Path,
        typer.Option(
            "--out", metavar="DIR", help="Directory to write the zip into.", show_default=True
        ),
    ] = Path("dist"),
) -> None:
    """Write rewind-VERSION-BUILD.zip: Rewind's code for the executors' Python path.

    For example `spark-submit --py-files dist/rewind-0.1.0-<build>.zip ...`. The
    workers need only Python with pyarrow and boto3. A job ships the same zip by
    itself, so this is for images and for `--py-files` in other jobs.
    """
    from tenants.spark import package as spark_package

    state = cli_state(ctx)
    path = spark_package.build_zip(out / spark_package.zip_name())
    if state.json:
        render.emit_json(
            {"path": str(path), "version": spark_package.version(), "build": spark_package.build_id(),
             "bytes": path.stat().st_size}
        )  # fmt: skip
    else:
        size = human_bytes(path.stat().st_size)
        render.say(f"{path} ({size}, build {spark_package.build_id()})")


@app.command("check")
def check(ctx: typer.Context) -> None:
    """Start Spark on the effective master and show what each worker's Python has.

    Fails (exit 1, one line) naming the first worker that lacks pyarrow or
    boto3 or runs another Rewind build than this one.
    """
    from tenants.spark import package as spark_package
    from tenants.spark import probe as spark_probe
    from tenants.spark.session import effective_master, get_spark, prepare

    state = cli_state(ctx)
    master = effective_master()
    spark = get_spark()  # probes the workers of a cluster and raises on a problem
    # A cluster's reports come from that probe; a local master's workers are asked here.
    reports = prepare(spark) or spark_probe.probe_cluster(spark)
    version, build = spark_package.version(), spark_package.build_id()
    if state.json:
        render.emit_json(
            {"master": master.master, "master_source": master.source,
             "cluster": master.is_cluster, "version": version, "build": build,
             "workers": reports}
        )  # fmt: skip
        return
    table = titled(f"Spark workers of {master.describe()}")
    for column in ("host", "python", "Rewind", "status"):
        wrapping(table, column)
    for report in reports:
        problem = spark_probe.problem(report, version, build)
        table.add_row(
            report["host"],
            f"{report['python_version']} {report['python']}",
            f"{report['version']} {report['build']}",
            "ok" if problem is None else problem,
        )
    render.show(table)
