"""The ``rewind`` command line (typer + rich).

``app`` builds the root command and owns the one place where a ``RewindError``
becomes a message and an exit code; the ``*_cmds`` modules hold the commands,
``context`` turns options into a store and ``render`` turns results into
tables or JSON. Importing this package stays cheap: nothing here starts Spark
or opens a catalog until a command runs.

The root imports a command's module only when that command runs
(``command_index`` names each command's module and help line,
``lazy_commands`` builds a command on its first look-up), and ``rewind -h``
lists every command from the index. A command's module still imports a
heavy library (pyarrow, numpy, pyspark, boto3, duckdb...) or the engine's
work (engine.restore, engine.backup, ...) inside the function that uses it,
never at its top: a module holds several commands and the helpers others
import, so ``rewind tenant list`` and ``rewind snapshot list`` load none of
them (tests/engine/cli/test_cli_start.py, which also imports every command's
module; benchmarks/bench_cli_start.py times them).
A name a command's signature needs (an option's type, a default, a help
text) comes from a light module: engine.pipeline, engine.gc,
tenants.objects.sizes.
"""
