"""The local executor: rewrite tasks in a thread pool (pyarrow releases the GIL)."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed

from engine.executors.task import run_task
from engine.pipeline import OnResult, RewriteResult, RewriteTask
from tenants.objectstore import ObjectStore

DEFAULT_THREADS = 4


class LocalExecutor:
    name = "local"

    def __init__(self, threads: int = DEFAULT_THREADS) -> None:
        self.threads = threads

    def rewrite(
        self, objects: ObjectStore, tasks: Sequence[RewriteTask], on_result: OnResult
    ) -> list[RewriteResult]:
        results: list[RewriteResult] = []
        with ThreadPoolExecutor(max_workers=self.threads) as pool:
            futures = [pool.submit(run_task, objects, task) for task in tasks]
            try:
                for future in as_completed(futures):
                    result = future.result()
                    on_result(result)
                    results.append(result)
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
        return results
