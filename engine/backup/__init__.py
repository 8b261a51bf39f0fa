"""Backups that outlive the bucket: logical (a dump) or physical (the snapshot's objects)."""
