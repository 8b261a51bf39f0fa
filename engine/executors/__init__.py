"""Rewrite executors: one interface, a local and a Spark backend, and ``auto``."""

from engine.executors.base import DEFAULT_EXECUTORS, choose_executor
from engine.pipeline import RewriteExecutor

__all__ = ["DEFAULT_EXECUTORS", "RewriteExecutor", "choose_executor"]
