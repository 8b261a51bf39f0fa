"""Rewind's engine: backup and restore of tenants, and the ``rewind`` command line.

The tenant store it protects lives in :mod:`tenants`; everything here goes
through its public API (:class:`tenants.store.TableStore`).
"""

from tenants import allocator as _allocator  # first: before anything loads pyarrow

del _allocator
