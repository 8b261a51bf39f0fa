"""Batch entry points for spark-submit."""
