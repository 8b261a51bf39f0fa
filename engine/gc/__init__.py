"""Garbage collection: never delete what could still be needed; clean what nothing needs."""
