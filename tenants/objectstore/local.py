"""A ``file://`` warehouse: the embedded default for one machine."""

from __future__ import annotations

import builtins
import os
import re
import shutil
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from tenants.config import Warehouse
from tenants.errors import ObjectMissing, StorageError
from tenants.objectstore.base import ObjectInfo, ObjectStore, PartialWrite, PrefixSet, contained
from tenants.objectstore.batches import in_parallel

if TYPE_CHECKING:
    import pyarrow as pa

# ``.<name>.<tag>.tmp`` beside ``<name>``: what put/create write before the rename
# (tag = the writer's pid, plus a random suffix for create). A writer killed in
# between leaves one behind; GC finds them by this pattern.
TEMP_FILE = re.compile(r"\.(?P<name>.+)\.(?P<tag>[0-9A-Za-z_-]+)\.tmp")
DELETE_BATCH = 1000
DELETES_IN_FLIGHT = 4


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


def _sorted_names(path: str) -> list[str]:
    """The entries of directory ``path`` in key order, a subdirectory's name ending
    with ``/`` (which is how its keys sort among its siblings).

    Only the names: the sort needs the whole directory at once, and a table's
    directory may hold 10^6 objects, so each costs one short string and the keys
    and paths are built as they are yielded. Left out as ``os.walk`` leaves them
    out of a listing: temp files of writes in flight (``.``-names, see
    ``partial_writes``) and symbolic links to directories (not followed). A
    directory that vanished is empty.
    """
    names: list[str] = []
    try:
        with os.scandir(path) as scan:
            for entry in scan:
                if entry.is_dir():
                    if not entry.is_symlink():
                        names.append(entry.name + "/")
                elif not entry.name.startswith("."):
                    names.append(entry.name)
    except (FileNotFoundError, NotADirectoryError):
        return []
    names.sort()
    return names


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

    def _temp_files(self, prefix: str) -> Iterator[tuple[str, str]]:
        """(path, key directory) of every temp file under ``prefix``'s directory.

        One ``scandir`` per directory and nothing kept of the rest: only a name
        beginning with ``.`` can be a temp file, and a directory of 10^6 objects
        holds a handful at most (``gc --deep`` walks the whole warehouse for them).
        """
        # S3 semantics: "a" matches "a/1" and "ab/4"; walk from the prefix's directory.
        contained(prefix, self.warehouse.uri)
        directory = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        start = os.path.join(str(self.root), directory) if directory else str(self.root)
        stack = [(start, directory + "/" if directory else "")]
        while stack:
            path, key_dir = stack.pop()
            try:
                with os.scandir(path) as scan:
                    for entry in scan:
                        if entry.name.startswith("."):
                            if not entry.is_dir(follow_symlinks=False):
                                yield entry.path, key_dir
                        elif entry.is_dir(follow_symlinks=False):
                            stack.append((entry.path, key_dir + entry.name + "/"))
            except (FileNotFoundError, NotADirectoryError):
                continue

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        """Every object whose key starts with ``prefix``, in key (byte) order, as S3
        lists them (see :meth:`_keys`), each with one ``os.stat``."""
        for key, path in self._keys(prefix):
            try:
                stat = os.stat(path)
            except FileNotFoundError:
                continue  # deleted while we walked
            yield ObjectInfo(key, stat.st_size, stat.st_mtime_ns // 1000)

    def listing(self, prefix: str) -> Iterator[tuple[str, ObjectInfo | None]]:
        """The keys of :meth:`list` without their stat (the walk's one syscall per
        file): a key deleted while we walked may still be named; :meth:`head`
        then raises ``ObjectMissing``."""
        for key, _ in self._keys(prefix):
            yield key, None

    def _keys(self, prefix: str) -> Iterator[tuple[str, str]]:
        """(key, path) of every file whose key starts with ``prefix``, in key (byte)
        order, as S3 lists them: a directory's entries are visited sorted by name, a
        directory ``d`` as if it were named ``d/``, so all of ``d/...`` comes after
        ``d-x`` and ``d.x`` and before ``d0`` (the order of the keys, not of the names).

        An explicit stack of sorted directories, not ``os.walk``: the walk must go
        depth-first in name order to come out sorted, and one flat loop yields
        each key from a single frame (a recursive generator would pass every key
        up through each level). Plain strings, not pathlib: a listing of 10^6 keys
        (a restore's --verify objects, ``gc --deep``) spends its time here.
        """
        contained(prefix, self.warehouse.uri)
        # S3 semantics: "a" matches "a/1" and "ab/4"; walk from the prefix's directory.
        directory = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        start = os.path.join(str(self.root), directory) if directory else str(self.root)
        key_dir = directory + "/" if directory else ""
        # (directory's path, its keys' prefix, its names left): a subdirectory's keys
        # come before the rest of its parent's names.
        stack = [(os.path.join(start, ""), key_dir, iter(_sorted_names(start)))]
        while stack:
            path, key_dir, names = stack[-1]  # path ends with the separator
            for name in names:
                key = key_dir + name
                if name[-1] == "/":
                    if key.startswith(prefix) or prefix.startswith(key):
                        sub = path + name[:-1]
                        stack.append((path + name[:-1] + os.sep, key, iter(_sorted_names(sub))))
                        break
                    continue
                if key.startswith(prefix):
                    yield key, path + name
            else:
                stack.pop()

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
        """Unlink each key's file; a missing one is not an error. Batches of
        :data:`DELETE_BATCH` keys, :data:`DELETES_IN_FLIGHT` at once: an unlink
        waits on the filesystem's journal, and four threads delete 2-3x faster
        than one (50,000 files on ext4; benchmarks/README.md, bench_gc_collect)."""
        return in_parallel(
            keys,
            self._unlink_all,
            batch=DELETE_BATCH,
            in_flight=DELETES_IN_FLIGHT,
            name="file-delete",
        )

    def _unlink_all(self, keys: builtins.list[str]) -> int:
        deleted = 0
        for key in keys:
            try:
                os.unlink(self._path(key))
                deleted += 1
            except FileNotFoundError:
                pass
            except OSError as e:
                raise StorageError(f"cannot delete {self.warehouse.uri}/{key}: {e}") from e
        return deleted

    def partial_writes(self, prefix: str) -> Iterator[PartialWrite]:
        """Temp files of writers that never renamed them into place (killed mid-put)."""
        return self.partial_writes_under(PrefixSet([prefix]))

    def partial_writes_under(self, prefixes: PrefixSet) -> Iterator[PartialWrite]:
        """Temp files under any of ``prefixes``: each directory they start in
        walked once, however many of them share it (a table's intents do)."""
        by_directory: dict[str, list[str]] = {}
        for prefix in prefixes:
            by_directory.setdefault(prefix.rsplit("/", 1)[0] if "/" in prefix else "", []).append(
                prefix
            )
        for under in by_directory.values():
            wanted = PrefixSet(under)
            for path, key_dir in self._temp_files(under[0]):
                name = os.path.basename(path)
                match = TEMP_FILE.fullmatch(name)
                if match is None:
                    continue
                key = key_dir + match["name"]
                if wanted.match(key) is None:
                    continue
                try:
                    stat = os.stat(path)
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
