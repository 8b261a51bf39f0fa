"""Reproducible benchmarks: each ``bench_*`` module has a ``main(argv)``.

Benchmarks print ratios measured within one run and write JSON to
``benchmarks/results/``. They are not tests and assert nothing about time.
"""

# Before anything loads pyarrow, as the CLI and the engine do, so a benchmark's
# children allocate as Rewind does (tenants.allocator). Until 2026-11-25 they
# did not: bench_memory's figures before then kept mimalloc's 1 s purge delay.
from tenants import allocator as _allocator  # noqa: F401  (its import configures)
