"""The dump manifest: what a portable dump holds, written last.

A dump is complete exactly when its ``manifest.json`` exists: every data
file is written before it, so a crash mid-dump leaves no loadable dump. The
manifest records the format version (any other than this Rewind's is
refused), the source tenant and time S, the DDL as of S (columns, key,
fingerprint), and per table the row count, the content hash of its rows and
every file with its size and sha256.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import pyarrow as pa

from tenants.errors import CorruptObject, InvalidArgument, ObjectMissing
from tenants.objects.reader import digest_of
from tenants.objects.record import ObjectRecord
from tenants.objects.row_hash import RowHasher
from tenants.objectstore import ObjectStore
from tenants.schema import TableSchema

FORMAT = "rewind-dump"
# 3: every table's hash is "row-parts" (tenants.objects.row_hash per file, streamed).
FORMAT_VERSION = 3
HashKind = Literal["row-parts"]
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class DumpFile:
    path: str  # relative to the dump's root
    bytes: int
    sha256: str
    rows: int


@dataclass(frozen=True)
class DumpTable:
    database: str
    name: str
    columns_json: str
    primary_key_json: str
    fingerprint: str
    rows: int
    content_hash: str
    files: tuple[DumpFile, ...]
    # "row-parts": chain_hash of each file's canonical row hash
    # (tenants.objects.row_hash), in file (= key) order: every writer, local or a Spark
    # executor, hashes its file's rows as it streams them, and no process needs
    # the whole table.
    hash_kind: HashKind = "row-parts"

    @property
    def qualified(self) -> str:
        return f"{self.database}.{self.name}"

    def hash_of(self, rows: pa.Table) -> str:
        """The hash this table's manifest entry would have for ``rows`` (all the
        table's rows, in key order): what a reload compares with :attr:`content_hash`."""
        check = TableCheck(self)
        check.update(rows)
        return check.digest()

    def schema(self) -> TableSchema:
        schema = TableSchema.from_json(self.columns_json, self.primary_key_json)
        if schema.fingerprint != self.fingerprint:
            raise CorruptObject(
                f"dump table {self.qualified}: schema fingerprint {self.fingerprint} does not match "
                f"its columns ({schema.fingerprint}); the manifest was altered"
            )
        return schema


@dataclass(frozen=True)
class DumpManifest:
    format: str
    format_version: int
    dump_id: str
    source_tenant: str
    source_tenant_id: str
    at_ts: int
    at_label: str
    created_ts: int
    tables: tuple[DumpTable, ...]
    # A backup's seal (engine.backup): the link to the tenant's previous backup and,
    # for a locked one, its lock and the version id and size of every file.
    previous: dict[str, Any] | None = None
    lock: dict[str, Any] | None = None
    versions: dict[str, list[Any]] | None = None

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables)

    @property
    def bytes(self) -> int:
        return sum(f.bytes for t in self.tables for f in t.files)

    def to_json(self) -> str:
        raw = asdict(self)
        for optional in ("previous", "lock", "versions"):  # a dump that is no backup lacks them
            if raw[optional] is None:
                del raw[optional]
        return json.dumps(raw, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, where: str) -> DumpManifest:
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as e:
            raise CorruptObject(f"dump manifest {where} is not JSON: {e}") from e
        if raw.get("format") != FORMAT:
            raise InvalidArgument(
                f"{where} is not a Rewind dump manifest (format {raw.get('format')!r})"
            )
        if raw.get("format_version") != FORMAT_VERSION:
            raise InvalidArgument(
                f"dump {where} has format version {raw.get('format_version')!r}; this Rewind reads "
                f"version {FORMAT_VERSION}: use a matching Rewind to load it"
            )
        tables = tuple(
            DumpTable(**{**t, "files": tuple(DumpFile(**f) for f in t["files"])})
            for t in raw["tables"]
        )
        return cls(**{**raw, "tables": tables})


class TableCheck:
    """A table's rows, fed in key order as a reload reads them back, hashed the
    way its manifest entry was: streamed, a hasher per file, cut at the files'
    row counts."""

    def __init__(self, table: DumpTable) -> None:
        self.table = table
        self.rows = 0
        self._sizes = [f.rows for f in table.files]
        self._done: list[str] = []
        self._schema: pa.Schema | None = None
        self._hasher: RowHasher | None = None
        self._in_part = 0

    def update(self, rows: pa.Table) -> None:
        self.rows += rows.num_rows
        self._schema = rows.schema
        while rows.num_rows:
            if self._hasher is None:
                self._hasher = RowHasher(rows.schema)
            size = self._sizes[len(self._done)] if len(self._done) < len(self._sizes) else None
            room = rows.num_rows if size is None else size - self._in_part
            self._hasher.update(rows.slice(0, room))
            self._in_part += min(room, rows.num_rows)
            rows = rows.slice(room)
            if size is not None and self._in_part == size:
                self._done.append(self._hasher.hexdigest())
                self._hasher, self._in_part = None, 0

    def digest(self) -> str:
        schema = TableSchema.from_json(self.table.columns_json, self.table.primary_key_json)
        parts = list(self._done)
        if self._hasher is not None:
            parts.append(self._hasher.hexdigest())
        while len(parts) < len(self._sizes):  # empty files (an empty table's one)
            parts.append(RowHasher(self._schema or schema.arrow()).hexdigest())
        return chain_hash(parts)


def chain_hash(part_hashes: Sequence[str]) -> str:
    """A table's hash: sha256 of its files' row hashes, in key order."""
    return hashlib.sha256("\n".join(part_hashes).encode()).hexdigest()


def read_manifest(objects: ObjectStore, root: str) -> DumpManifest:
    """The manifest of the dump at ``root``; a dump without one is incomplete.

    Raises:
        ObjectMissing: no manifest at ``root`` (an incomplete dump).
    """
    key = f"{root.rstrip('/')}/{MANIFEST}"
    try:
        text = objects.get(key).decode()
    except ObjectMissing as e:
        raise ObjectMissing(
            f"no complete dump at {objects.warehouse.uri}/{root}: {MANIFEST} is missing (a dump "
            "writes it last, so this one is incomplete or the path is wrong)"
        ) from e
    return DumpManifest.from_json(text, f"{objects.warehouse.uri}/{key}")


def check_file(objects: ObjectStore, root: str, entry: DumpFile) -> None:
    """Check a dump file's size and sha256, streaming its bytes.

    Raises:
        CorruptObject: the file's size or sha256 differs from the manifest.
    """
    where = f"{objects.warehouse.uri}/{root}/{entry.path}"
    size, sha = digest_of(objects, f"{root}/{entry.path}")
    if size != entry.bytes or sha != entry.sha256:
        raise CorruptObject(
            f"dump file {where} does not match the manifest ({size} bytes, expected {entry.bytes}, "
            "or its sha256 differs)"
        )


def part_record(root: str, entry: DumpFile) -> ObjectRecord:
    """A dump file described as an object, so ``open_object`` reads it batch by
    batch, its size and sha256 checked (its rows carry no ``__ts``: ts 0)."""
    return ObjectRecord(
        id=entry.path,
        key=f"{root}/{entry.path}",
        kind="data",
        fingerprint="",
        rows=entry.rows,
        bytes=entry.bytes,
        min_ts=0,
        max_ts=0,
        min_pk="",
        max_pk="",
        sorted=True,
        checksum=entry.sha256,
        created_ts=0,
    )


def verify_dump(objects: ObjectStore, root: str) -> DumpManifest:
    """Re-read every file of a dump and check sizes and hashes, loading nothing."""
    manifest = read_manifest(objects, root)
    for table in manifest.tables:
        table.schema()
        for entry in table.files:
            check_file(objects, root, entry)
    return manifest
