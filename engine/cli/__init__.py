"""The ``rewind`` command line (typer + rich).

``app`` builds the root command and owns the one place where a ``RewindError``
becomes a message and an exit code; the ``*_cmds`` modules hold the commands,
``context`` turns options into a store and ``render`` turns results into
tables or JSON. Importing this package stays cheap: nothing here starts Spark
or opens a catalog until a command runs.

Every command's module is imported whatever the command (typer builds the
whole tree before it parses the command line), so a module here imports a
heavy library (pyarrow, numpy, pyspark, boto3, duckdb...) or the engine's
work (engine.restore, engine.backup, ...) inside the function that uses it,
never at its top: ``rewind tenant list`` then loads none of them
(tests/engine/cli/test_cli_start.py; benchmarks/bench_cli_start.py times it).
A name a command's signature needs (an option's type, a default, a help
text) comes from a light module: engine.pipeline, engine.gc,
tenants.objects.sizes.
"""
