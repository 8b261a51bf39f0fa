"""Garbage collection: never delete what could still be needed; clean what nothing needs.

GC's two defaults are named here, so that ``rewind gc --help`` shows them
without importing GC itself (engine.gc.collect and engine.gc.reclaim use them
and re-export them).
"""

from __future__ import annotations

from tenants.times import US

DEFAULT_GRACE_US = US["h"]
"""How long an object stays unreferenced before GC deletes it (engine.gc.collect)."""
DEFAULT_THRESHOLD = 0.2
"""The fraction of a table's stored rows no protected time needs at which GC compacts
it (engine.gc.reclaim)."""
