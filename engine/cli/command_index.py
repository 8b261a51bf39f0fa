"""Every command of the root ``rewind``: where it is defined and the line ``rewind -h``
shows for it.

The root command (engine.cli.app) imports a command's module only when that
command runs (engine.cli.lazy_commands): ``rewind tenant list`` builds the
``tenant`` group alone, and ``rewind -h`` lists every command from this table,
importing none of their modules. A new command is one more entry here;
tests/engine/cli/test_cli_lazy.py fails when an entry's help is not the first
paragraph of the command's own (its docstring, or its group's ``help=``), or
when ``rewind -h`` would list anything else with every module loaded.

The order is the one ``rewind -h`` lists them in: the commands that take a
tenant, then the groups.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    """A command of the root, not yet imported."""

    where: str
    """``module:attribute``: a ``typer.Typer`` (a group) or a command's function."""
    help: str
    """The first paragraph of the command's help: what ``rewind -h`` shows."""
    also: tuple[tuple[str, str], ...] = ()
    """A group's commands defined in another module: (name, ``module:function``),
    added after the group's own."""


INDEX: dict[str, Entry] = {
    "load": Entry(
        "engine.cli.data_cmds:load",
        "Upsert every row of FILE into the table, in one commit (streamed: any size).",
    ),
    "delete": Entry(
        "engine.cli.data_cmds:delete",
        "Delete the rows whose primary keys are listed in a file, in one commit.",
    ),
    "query": Entry(
        "engine.cli.data_cmds:query",
        "Print the table's visible rows, sorted by primary key, now or as of a time;\n"
        "or the result of a DuckDB query over the tenant's tables at that time.",
    ),
    "compact": Entry(
        "engine.cli.data_cmds:compact",
        "Merge each table's objects into few large objects sorted by (key, ts), streaming.",
    ),
    "objects": Entry(
        "engine.cli.data_cmds:objects", "List the live objects of every table of the tenant."
    ),
    "ddl": Entry(
        "engine.cli.ddl_cmds:ddl",
        "Show the databases, tables, columns and keys as of a protected time.",
    ),
    "restore-tenant": Entry(
        "engine.cli.restore_cmds:restore_tenant_cmd",
        "Restore a tenant to a snapshot or protected time.",
    ),
    "history": Entry(
        "engine.cli.restore_cmds:history_cmd",
        "Show a tenant's lineage (restores, retired ids) and its restore jobs, or its commits.",
    ),
    "restore-table": Entry(
        "engine.cli.table_restore_cmds:restore_table_cmd",
        "Restore one table to a snapshot or protected time.",
    ),
    "restore-database": Entry(
        "engine.cli.table_restore_cmds:restore_database_cmd",
        "Restore every table of one database to a snapshot or protected time.",
    ),
    "diff": Entry(
        "engine.cli.diff_cmds:diff_cmd",
        "Show the rows inserted, updated and deleted between two protected times.",
    ),
    "revert": Entry(
        "engine.cli.diff_cmds:revert_cmd",
        "Undo one commit (or the commits of a range) of a table, keeping every later write.",
    ),
    "gc": Entry(
        "engine.cli.gc_cmds:gc_cmd",
        "Collect garbage: expired tenants, versions no protected time needs, unreferenced "
        "objects, orphans.",
    ),
    "storage": Entry(
        "engine.cli.gc_cmds:storage_cmd",
        "Bytes a tenant holds: live, held only by snapshots/PITR, and shared with other tenants.",
    ),
    "status": Entry(
        "engine.cli.status_cmds:status_cmd",
        "Recovery point, objective, snapshots, PITR, backups and jobs of every tenant, "
        "worst first.",
    ),
    "export": Entry(
        "engine.cli.export_cmds:export",
        "Export tables as of a snapshot or protected time, as Parquet or an Iceberg table.",
    ),
    "metrics": Entry(
        "engine.cli.metrics_cmds:metrics_cmd",
        "Print Prometheus metrics of every tenant and job, read from the catalog.",
    ),
    "tenant": Entry(
        "engine.cli.tenant_cmds:app",
        "Create, list, drop, undrop and purge tenants; set their recovery point objective.",
    ),
    "backup": Entry(
        "engine.cli.backup_cmds:app",
        "Backups that outlive the bucket: logical dumps or physical object copies.",
        # `backup drill` restores into a scratch deployment and checks it (issue 38).
        also=(("drill", "engine.cli.drill_cmds:drill_cmd"),),
    ),
    "table": Entry(
        "engine.cli.table_cmds:app",
        "Create, list, alter, drop and undrop the tables of a tenant.",
        # `table undrop` is a restore job, with restore-table and restore-database.
        also=(("undrop", "engine.cli.table_restore_cmds:undrop_cmd"),),
    ),
    "snapshot": Entry(
        "engine.cli.snapshot_cmds:app", "Create, list, show and drop snapshots; schedule them."
    ),
    "pitr": Entry(
        "engine.cli.pitr_cmds:app", "Set and show point-in-time recovery (PITR) windows."
    ),
    "catalog": Entry("engine.cli.catalog_cmds:app", "Copy a catalog to another backend."),
    "spark": Entry(
        "engine.cli.spark_cmds:app", "Package Rewind for a Spark cluster and check its workers."
    ),
}
