"""Which allocator Arrow uses, and how soon it gives memory back.

pyarrow allocates through mimalloc, which keeps freed pages committed for
``purge_delay`` (1,000 ms as pyarrow ships it) in case they are wanted again.
A streaming step frees a row group's worth of buffers every few milliseconds,
so a one-second delay holds a second's throughput (hundreds of MB) as RSS
that no live object uses: measured on a 300 MB rewrite, 238 MB of growth for
46 MB of live Arrow memory; with a 10 ms delay, 140 MB, at the same speed.

Even at 10 ms, a compaction in passes left mimalloc holding 190 MiB after its
last buffer was freed (pages threads had left behind), and a 10 GB compaction
under ``--memory 512MiB`` peaked at 577 MiB. jemalloc, which pyarrow's wheels
carry on Linux and macOS, peaked at 504 MiB on the same merge and ran 19%
faster, so Rewind chooses it there (docs/decisions.md); elsewhere mimalloc
keeps the 10 ms delay.

Both settings are read once, when pyarrow first allocates, so this must run
before pyarrow is imported: ``tenants``, ``engine`` and ``benchmarks`` import
it first, and Spark sessions Rewind starts pass it to executors
(``spark.executorEnv``). A value the user set is kept.
"""

from __future__ import annotations

import os
import sys

PURGE_DELAY_MS = "10"
ENVIRONMENT = {"MIMALLOC_PURGE_DELAY": PURGE_DELAY_MS}
# jemalloc where pyarrow's wheels carry it (see above).
if sys.platform.startswith("linux") or sys.platform == "darwin":
    ENVIRONMENT["ARROW_DEFAULT_MEMORY_POOL"] = "jemalloc"


def configure() -> None:
    for name, value in ENVIRONMENT.items():
        os.environ.setdefault(name, value)


configure()
