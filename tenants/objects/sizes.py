"""The sizes the store's API and the CLI offer as defaults and bounds.

They are named here, apart from the code that uses them (tenants.objects.reader,
tenants.compaction, which re-export them), because that code needs pyarrow and
these numbers do not: ``TableStore``'s signatures and ``rewind compact --help``
show them without loading it, so a command that only lists tenants starts fast.
"""

from __future__ import annotations

import os

MIB = 1024 * 1024

BATCH_ROWS = int(os.environ.get("REWIND_BATCH_ROWS", 64 * 1024))
"""The most rows a read hands over in one batch (tenants.objects.reader)."""

DEFAULT_TARGET_BYTES = 64 * 1024 * 1024
"""The size of the objects compaction writes, by default (tenants.compaction)."""
# S3 takes 10,000 parts of tenants.objectstore.s3.PART_BYTES; 4 GiB keeps far inside it.
MAX_TARGET_BYTES = 4 * 1024 * 1024 * 1024
# The process and its allocator take 256 MiB before a merge holds a batch
# (tenants.compaction.PROCESS_BYTES, ALLOCATOR_BYTES): a smaller budget could not be kept.
MIN_MEMORY = 384 * MIB
