"""Rewrite executors: one interface, a local and a Spark backend, and ``auto``."""

from engine.executors.base import EXECUTORS_FACTORY, choose_executor
from engine.pipeline import RewriteExecutor

__all__ = ["EXECUTORS_FACTORY", "RewriteExecutor", "choose_executor"]
