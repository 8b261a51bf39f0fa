"""The dump manifest: what a portable dump holds, written last.

A dump is complete exactly when its ``manifest.json`` exists: every data
file is written before it, so a crash mid-dump leaves no loadable dump. The
manifest records the format version (an unknown one is refused), the source
tenant and time S, the DDL as of S (columns, key, fingerprint), and per table
the row count, the content hash of its rows and every file with its size and
sha256.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Literal

import pyarrow as pa

from tenants.errors import CorruptObject, InvalidArgument, ObjectMissing
from tenants.objectstore import ObjectStore
from tenants.parquet_codec import content_hash
from tenants.schema import TableSchema

FORMAT = "rewind-dump"
# 2: a table's hash may be "parts" (files written by Spark executors); 1 is still read.
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
HashKind = Literal["table", "parts"]
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
    # "table": content_hash of all rows in key order. "parts": a hash of the
    # files' own content hashes, in file (= key) order: Spark executors each
    # write and hash one key range, and no process sees the whole table.
    hash_kind: HashKind = "table"

    @property
    def qualified(self) -> str:
        return f"{self.database}.{self.name}"

    def hash_of(self, rows: pa.Table) -> str:
        """The hash this table's manifest entry would have for ``rows`` (all the
        table's rows): what a reload compares with :attr:`content_hash`."""
        keys = list(TableSchema.from_json(self.columns_json, self.primary_key_json).primary_key)
        if self.hash_kind == "table":
            return content_hash(rows, keys)
        rows = rows.sort_by([(k, "ascending") for k in keys]) if rows.num_rows else rows
        offsets, parts = 0, []
        for entry in self.files:
            parts.append(content_hash(rows.slice(offsets, entry.rows), keys))
            offsets += entry.rows
        return chain_hash(parts)

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

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables)

    @property
    def bytes(self) -> int:
        return sum(f.bytes for t in self.tables for f in t.files)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

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
        if raw.get("format_version") not in READABLE_VERSIONS:
            raise InvalidArgument(
                f"dump {where} has format version {raw.get('format_version')!r}; this Rewind reads "
                f"versions {', '.join(map(str, READABLE_VERSIONS))}: use a matching Rewind to load it"
            )
        tables = tuple(
            DumpTable(**{**t, "files": tuple(DumpFile(**f) for f in t["files"])})
            for t in raw["tables"]
        )
        return cls(**{**raw, "tables": tables})


def chain_hash(part_hashes: Sequence[str]) -> str:
    """A "parts" table hash: sha256 of the parts' content hashes, in key order."""
    return hashlib.sha256("\n".join(part_hashes).encode()).hexdigest()


def read_manifest(store: ObjectStore, root: str) -> DumpManifest:
    """The manifest of the dump at ``root``; a dump without one is incomplete."""
    key = f"{root.rstrip('/')}/{MANIFEST}"
    try:
        text = store.get(key).decode()
    except ObjectMissing as e:
        raise ObjectMissing(
            f"no complete dump at {store.warehouse.uri}/{root}: {MANIFEST} is missing (a dump "
            "writes it last, so this one is incomplete or the path is wrong)"
        ) from e
    return DumpManifest.from_json(text, f"{store.warehouse.uri}/{key}")


def check_file(store: ObjectStore, root: str, entry: DumpFile) -> bytes:
    """A dump file's bytes, after checking its size and sha256."""
    where = f"{store.warehouse.uri}/{root}/{entry.path}"
    data = store.get(f"{root}/{entry.path}")
    if len(data) != entry.bytes or hashlib.sha256(data).hexdigest() != entry.sha256:
        raise CorruptObject(
            f"dump file {where} does not match the manifest ({len(data)} bytes, expected {entry.bytes}, "
            "or its sha256 differs)"
        )
    return data


def verify_dump(store: ObjectStore, root: str) -> DumpManifest:
    """Re-read every file of a dump and check sizes and hashes, loading nothing."""
    manifest = read_manifest(store, root)
    for table in manifest.tables:
        table.schema()
        for entry in table.files:
            check_file(store, root, entry)
    return manifest
