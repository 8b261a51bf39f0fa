"""Rewrite executors: one interface, a local and a Spark backend, and ``auto``."""

from engine.executors.base import RewriteExecutor, choose_executor

__all__ = ["RewriteExecutor", "choose_executor"]
