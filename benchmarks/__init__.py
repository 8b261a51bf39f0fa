"""Reproducible benchmarks: each ``bench_*`` module has a ``main(argv)``.

Benchmarks print ratios measured within one run and write JSON to
``benchmarks/results/``. They are not tests and assert nothing about time.
"""
