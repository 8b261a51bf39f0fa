"""spark-submit entry point for the restore-tenant batch job.

    spark-submit --master spark://... engine/submit/restore_tenant.py \\
        --catalog sqlite:///... --warehouse s3://bucket/prefix acme --snapshot mon
    python -m engine.submit.restore_tenant acme --snapshot mon --to acme_copy
    python -m engine.submit.restore_tenant acme --snapshot mon --instant --yes

Runs exactly the CLI's ``restore-tenant`` command (same options, same errors,
same exit codes; an in-place restore, without ``--to``, needs ``--yes``, as
a batch job has nobody to ask). ``--instant`` prints the line saying the
tenant is usable as soon as it is installed, then rewrites on the cluster;
with ``--no-wait`` the job ends at the install, and ``--resume JOB`` (another
submit, or ``rewind`` on any host) runs the rewrite. Global options (``--catalog``, ``--warehouse``,
``--spark-master``, ``--log-format``, ``--verbose``) may come anywhere; the executor defaults to
Spark, since a cluster is why one submits a job. The job runs on the master
spark-submit gives it, ships Rewind's code to the executors and checks the
workers before it starts (docs/cluster.md). spark-submit runs this driver's
Python with its stderr joined to stdout, where ``--json`` errors are printed.

The driver's S3 settings are built where the CLI builds them
(:func:`engine.cli.context.warehouse_s3_settings`): the AWS variables,
completed from the job's ``spark.hadoop.fs.s3a.*`` keys; the executors get
the endpoint and region with their tasks and their credentials from their own
chain or a broadcast (tenants.spark.credentials), never from the pickle.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from engine.cli.app import main as cli_main

GLOBAL_WITH_VALUE = ("--catalog", "--warehouse", "--spark-master", "--log-format")
GLOBAL_FLAGS = ("--verbose", "-v")


def split_args(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Separate the root app's global options from the command's arguments."""
    root: list[str] = []
    rest: list[str] = []
    items = list(argv)
    i = 0
    while i < len(items):
        arg = items[i]
        name = arg.split("=", 1)[0]
        if name in GLOBAL_WITH_VALUE:
            if "=" in arg:
                root.append(arg)
            else:
                root.extend(items[i : i + 2])
                i += 1
        elif arg in GLOBAL_FLAGS:
            root.append(arg)
        else:
            rest.append(arg)
        i += 1
    return root, rest


def main(argv: Sequence[str] | None = None) -> None:
    root, rest = split_args(sys.argv[1:] if argv is None else argv)
    if not any(a.split("=", 1)[0] == "--executor" for a in rest):
        rest += ["--executor", "spark"]
    cli_main([*root, "restore-tenant", *rest])


if __name__ == "__main__":
    main()
