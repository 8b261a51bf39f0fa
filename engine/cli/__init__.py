"""The ``rewind`` command line (typer + rich).

``app`` builds the root command and owns the one place where a ``RewindError``
becomes a message and an exit code; the ``*_cmds`` modules hold the commands,
``context`` turns options into a store and ``render`` turns results into
tables or JSON. Importing this package stays cheap: nothing here starts Spark
or opens a catalog until a command runs.
"""
