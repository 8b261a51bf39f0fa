"""One exception hierarchy for every user-facing failure.

Every error takes a single message argument so that it pickles unchanged
across Spark executors (``Exception.__reduce__`` replays ``self.args``).
``TransientError`` marks failures worth retrying; everything else is terminal.
"""

from __future__ import annotations

from typing import Any


class RewindError(Exception):
    """Root of every error Rewind raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(message)

    @property
    def message(self) -> str:
        return str(self.args[0])


class TransientError(RewindError):
    """A failure that may succeed if retried (throttling, 5xx, timeouts)."""


class InvalidName(ValueError, RewindError):
    """A tenant, database, table or column name breaks the naming rules."""


class InvalidArgument(ValueError, RewindError):
    """An argument is malformed (a time string, a size, a mode)."""


class NotFound(LookupError, RewindError):
    """A tenant, database, table, snapshot or object that does not exist."""


class MissingDependency(ImportError, RewindError):
    """An optional package a feature needs is not installed (or too old); the
    message says which and how to install it."""


class UnprotectedTime(InvalidArgument):
    """A time no snapshot, PITR window or "now" protects: its history may be gone."""


class AlreadyExists(RewindError):
    """Something with that name is already there."""


class RestoreInProgress(RewindError):
    """Another restore of the same tenant is not finished."""


class TableBeingRestored(RewindError):
    """A restore job holds the table (or its database): writes and DDL wait for it."""


class TenantDropped(RewindError):
    """The tenant id is no longer active (dropped or replaced by a restore)."""


class SchemaMismatch(ValueError, RewindError):
    """A batch does not match its table's schema."""


class KeyViolation(ValueError, RewindError):
    """A null or duplicate primary key inside one batch."""


class ConcurrentModification(TransientError):
    """Someone else changed what this commit was conditional on."""


class IntentRevoked(ConcurrentModification):
    """GC swept a writer's intent (it had run longer than the orphan grace): its
    uploads may be gone, so its commit must not land; a retry uploads anew."""


class CatalogBusy(TransientError):
    """Another process held the catalog's write lock for longer than the busy timeout."""


class CatalogUnavailable(TransientError):
    """The connection to a server catalog broke (server restart, network, a killed session).

    The transaction it was in is lost; the next one reconnects.
    """


class NotConfirmed(RewindError):
    """A destructive command was not confirmed: no terminal to ask and no ``--yes``,
    or the answer was no. Nothing was changed."""


class CopyMismatch(RewindError):
    """A catalog copy's rows do not match its source's."""


class CatalogVersionError(RewindError):
    """The catalog was written by a newer Rewind or its DDL was altered."""


class StorageError(RewindError):
    """The object store failed in a way retries did not fix."""


class ObjectMissing(StorageError):
    """An object the catalog records is not in the object store."""


class CorruptObject(StorageError):
    """An object exists but cannot be read or does not match its record."""


class ForeignWarehouse(RewindError):
    """The warehouse holds data this catalog did not write; it is used only if adopted."""


class WarehouseOwned(ForeignWarehouse):
    """The warehouse's owner marker names another catalog."""


class ClusterMisconfigured(RewindError):
    """A Spark worker cannot run Rewind's tasks: a missing module, another build of
    Rewind than the driver's, a Python that does not start."""


class TaskFailed(RewindError):
    """A Spark task failed for a reason that is not one of Rewind's own errors;
    the message names the job, the worker and the task's exception."""


class CatalogMoved(RewindError):
    """``rewind catalog copy`` moved this catalog to a successor: it refuses writes,
    restores and GC (reads still work); the message names the successor."""


class Locked(RewindError):
    """A backup (or one of its object versions) is under S3 Object Lock retention or
    a legal hold: deleting it is refused until its retain-until date (named in the
    message), or, for GOVERNANCE, without ``--bypass-governance``."""


class RevertConflict(RewindError):
    """A revert would overwrite later writes: some keys the reverted commit changed
    were written again after it. Nothing was written; ``keys`` holds them (an Arrow
    table of the key columns; None once pickled: one message argument, as every
    error here), the message names the first few."""

    def __init__(self, message: str, keys: Any = None) -> None:
        super().__init__(message)
        self.keys = keys
