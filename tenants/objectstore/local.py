"""A ``file://`` warehouse: the embedded default for one machine."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from tenants.config import Warehouse
from tenants.errors import ObjectMissing, StorageError
from tenants.objectstore.base import ObjectInfo


class LocalObjectStore:
    """Objects as files under the warehouse directory.

    Writes go to a temporary name and are renamed into place, so a reader never
    sees a half-written object, as on S3.
    """

    def __init__(self, warehouse: Warehouse) -> None:
        self.warehouse = warehouse
        self.root = Path(warehouse.prefix)

    def _path(self, key: str) -> Path:
        return self.root / key

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_bytes(data)
            os.replace(tmp, path)
        except OSError as e:
            raise StorageError(f"cannot write {self.warehouse.uri}/{key}: {e}") from e

    def get(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError as e:
            raise ObjectMissing(f"object {self.warehouse.uri}/{key} is missing") from e
        except OSError as e:
            raise StorageError(f"cannot read {self.warehouse.uri}/{key}: {e}") from e

    def head(self, key: str) -> ObjectInfo:
        try:
            stat = self._path(key).stat()
        except FileNotFoundError as e:
            raise ObjectMissing(f"object {self.warehouse.uri}/{key} is missing") from e
        return ObjectInfo(key, stat.st_size, stat.st_mtime_ns // 1000)

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        # S3 semantics: "a" matches "a/1" and "ab/4"; walk from the prefix's directory.
        directory = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        start = self._path(directory) if directory else self.root
        if not start.is_dir():
            return
        for dirpath, _, files in os.walk(start):
            for name in sorted(files):
                if name.startswith("."):
                    continue
                full = Path(dirpath) / name
                key = full.relative_to(self.root).as_posix()
                if key.startswith(prefix):
                    stat = full.stat()
                    yield ObjectInfo(key, stat.st_size, stat.st_mtime_ns // 1000)

    def copy(self, source_key: str, dest_key: str) -> None:
        self.put(dest_key, self.get(source_key))

    def delete_many(self, keys: Iterable[str]) -> int:
        deleted = 0
        for key in keys:
            try:
                self._path(key).unlink()
                deleted += 1
            except FileNotFoundError:
                pass
        return deleted
