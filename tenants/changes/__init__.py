"""Diff and revert: what changed in a table between two times, and undoing it
(docs/diff.md). Read from the change log (tenants.catalog.changes)."""
