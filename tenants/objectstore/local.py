"""A ``file://`` warehouse: the embedded default for one machine."""

from __future__ import annotations

import os
import re
import shutil
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from tenants.config import Warehouse
from tenants.errors import ObjectMissing, StorageError
from tenants.objectstore.base import ObjectInfo, ObjectStore, PartialWrite, contained

if TYPE_CHECKING:
    import pyarrow as pa

# ``.<name>.<tag>.tmp`` beside ``<name>``: what put/create write before the rename
# (tag = the writer's pid, plus a random suffix for create). A writer killed in
# between leaves one behind; GC finds them by this pattern.
TEMP_FILE = re.compile(r"\.(?P<name>.+)\.(?P<tag>[0-9A-Za-z_-]+)\.tmp")


class LocalOutput:
    """A temp file beside the key, renamed into place by :meth:`commit`."""

    def __init__(self, file: BinaryIO, tmp: Path, path: Path, where: str) -> None:
        self._file, self._tmp, self._path, self._where = file, tmp, path, where

    def write(self, data: bytes | memoryview) -> int:
        try:
            return self._file.write(data)
        except OSError as e:
            self.abort()
            raise StorageError(f"cannot write {self._where}: {e}") from e

    def commit(self) -> None:
        try:
            self._file.close()
            os.replace(self._tmp, self._path)
        except OSError as e:
            self.abort()
            raise StorageError(f"cannot write {self._where}: {e}") from e

    def abort(self) -> None:
        self._file.close()
        self._tmp.unlink(missing_ok=True)


class LocalObjectStore:
    """Objects as files under the warehouse directory.

    Writes go to a temporary name and are renamed into place, so a reader never
    sees a half-written object, as on S3.
    """

    def __init__(self, warehouse: Warehouse) -> None:
        self.warehouse = warehouse
        self.root = Path(warehouse.prefix)

    def _path(self, key: str) -> Path:
        return self.root / contained(key, self.warehouse.uri)

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_bytes(data)
            os.replace(tmp, path)
        except OSError as e:
            raise StorageError(f"cannot write {self.warehouse.uri}/{key}: {e}") from e

    def open_output(self, key: str) -> LocalOutput:
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
            return LocalOutput(open(tmp, "wb"), tmp, path, f"{self.warehouse.uri}/{key}")
        except OSError as e:
            raise StorageError(f"cannot write {self.warehouse.uri}/{key}: {e}") from e

    def open_input(self, key: str) -> pa.NativeFile:
        import pyarrow as pa

        try:
            return pa.OSFile(str(self._path(key)), "rb")
        except FileNotFoundError as e:
            raise ObjectMissing(f"object {self.warehouse.uri}/{key} is missing") from e
        except OSError as e:
            raise StorageError(f"cannot read {self.warehouse.uri}/{key}: {e}") from e

    def stream(self, key: str, chunk_bytes: int) -> Iterator[bytes]:
        try:
            with open(self._path(key), "rb") as f:
                while chunk := f.read(chunk_bytes):
                    yield chunk
        except FileNotFoundError as e:
            raise ObjectMissing(f"object {self.warehouse.uri}/{key} is missing") from e
        except OSError as e:
            raise StorageError(f"cannot read {self.warehouse.uri}/{key}: {e}") from e

    def local_file(self, key: str) -> str | None:
        return str(self._path(key))

    def create(self, key: str, data: bytes) -> bool:
        """Write ``key`` unless it exists: the bytes go to a temp file that is then
        hard-linked into place, which fails atomically if the name is taken, so a
        reader never sees a partial object and exactly one racing creator wins."""
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
        try:
            tmp.write_bytes(data)
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
            except OSError:
                # No hard links here (some network filesystems): O_EXCL still decides
                # the race, at the price of a reader possibly seeing a partial file.
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                except FileExistsError:
                    return False
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
            return True
        except OSError as e:
            raise StorageError(f"cannot create {self.warehouse.uri}/{key}: {e}") from e
        finally:
            tmp.unlink(missing_ok=True)

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

    def _walk(self, prefix: str) -> Iterator[tuple[str, str, list[str]]]:
        """(directory, its key prefix, sorted file names) under ``prefix``'s directory."""
        # S3 semantics: "a" matches "a/1" and "ab/4"; walk from the prefix's directory.
        contained(prefix, self.warehouse.uri)
        directory = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        start = self._path(directory) if directory else self.root
        if not start.is_dir():
            return
        root = str(self.root)
        for dirpath, _, files in os.walk(start):
            relative = os.path.relpath(dirpath, root)
            key_dir = "" if relative == "." else relative.replace(os.sep, "/") + "/"
            yield dirpath, key_dir, sorted(files)

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        # Plain strings and os.stat, not pathlib: a listing of 10^6 keys (a restore's
        # --verify objects) spends its time here, about 3x less this way.
        for dirpath, key_dir, files in self._walk(prefix):
            for name in files:
                if name.startswith("."):
                    continue  # temp files of writes in flight (see partial_writes)
                key = key_dir + name
                if key.startswith(prefix):
                    try:
                        stat = os.stat(os.path.join(dirpath, name))
                    except FileNotFoundError:
                        continue  # deleted while we walked
                    yield ObjectInfo(key, stat.st_size, stat.st_mtime_ns // 1000)

    def children(self, prefix: str) -> Iterator[str]:
        directory = self._path(prefix.rstrip("/")) if prefix.strip("/") else self.root
        if not directory.is_dir():
            return
        for entry in sorted(os.scandir(directory), key=lambda e: e.name):
            if entry.is_dir() and not entry.name.startswith("."):
                yield entry.name

    def copy(self, source_key: str, dest_key: str) -> None:
        self.put(dest_key, self.get(source_key))

    def copy_from(self, source: ObjectStore, source_key: str, dest_key: str) -> bool:
        """A file copy (the kernel's, ``copy_file_range``/``sendfile``) to a temp
        name renamed into place; only from another ``file://`` store."""
        if not isinstance(source, LocalObjectStore):
            return False
        path = self._path(dest_key)
        tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source._path(source_key), tmp)
            os.replace(tmp, path)
        except FileNotFoundError as e:
            tmp.unlink(missing_ok=True)
            if not source._path(source_key).exists():
                raise ObjectMissing(f"object {source.warehouse.uri}/{source_key} is missing") from e
            raise StorageError(f"cannot write {self.warehouse.uri}/{dest_key}: {e}") from e
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise StorageError(
                f"cannot copy {source.warehouse.uri}/{source_key} to {self.warehouse.uri}/{dest_key}: {e}"
            ) from e
        return True

    def delete_many(self, keys: Iterable[str]) -> int:
        deleted = 0
        for key in keys:
            try:
                self._path(key).unlink()
                deleted += 1
            except FileNotFoundError:
                pass
        return deleted

    def partial_writes(self, prefix: str) -> Iterator[PartialWrite]:
        """Temp files of writers that never renamed them into place (killed mid-put)."""
        for dirpath, key_dir, files in self._walk(prefix):
            for name in files:
                match = TEMP_FILE.fullmatch(name)
                if match is None:
                    continue
                key = key_dir + match["name"]
                if not key.startswith(prefix):
                    continue
                try:
                    stat = os.stat(os.path.join(dirpath, name))
                except FileNotFoundError:
                    continue  # its writer renamed it into place while we walked
                yield PartialWrite(key, stat.st_mtime_ns // 1000, key_dir + name, "temp")

    def discard_partial(self, writes: Iterable[PartialWrite]) -> int:
        removed = 0
        for write in writes:
            # Only ever a temp file of ours: never an object, whatever the caller passes.
            if write.kind != "temp" or not TEMP_FILE.fullmatch(Path(write.handle).name):
                raise StorageError(f"{write.handle!r} is not a temp file of this store")
            try:
                self._path(write.handle).unlink()
                removed += 1
            except FileNotFoundError:
                pass
            except OSError as e:
                raise StorageError(f"cannot remove {self.warehouse.uri}/{write.handle}: {e}") from e
        return removed
