"""Rewind's code as one zip that Spark ships to its executors (``--py-files``).

A cluster's workers need only a Python with pyarrow and boto3: the driver
adds this zip to the Spark context (``addPyFile``), and Spark puts it on every
Python worker's ``sys.path`` ahead of site-packages, so a worker runs exactly
the driver's code even if another Rewind is installed there. The zip holds the
``tenants`` and ``engine`` packages plus ``tenacity`` (pure Python; the S3 object
store imports it).

The *build id* is a digest of the packaged sources. The driver and each worker
compute it the same way from the code they actually imported, so a worker that
runs other code than the driver (an older zip, a stale install) is caught
before a task writes a byte (:mod:`tenants.spark.probe`).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import tempfile
import zipfile
from collections.abc import Iterator
from importlib.resources.abc import Traversable
from pathlib import Path

import tenants

PACKAGES = ("tenants", "engine")
# Third-party pure-Python packages a task imports that a bare worker may lack.
VENDORED = ("tenacity",)
SOURCE_SUFFIXES = (".py", ".typed")


def version() -> str:
    return tenants.__version__


def _files(root: Traversable, prefix: str) -> Iterator[tuple[str, Traversable]]:
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        name = f"{prefix}/{entry.name}"
        if entry.is_dir():
            if entry.name != "__pycache__":
                yield from _files(entry, name)
        elif entry.name.endswith(SOURCE_SUFFIXES):
            yield name, entry


def package_files(packages: tuple[str, ...] = PACKAGES) -> Iterator[tuple[str, Traversable]]:
    """(archive path, file) of every source file of ``packages``, in a fixed order.

    Read through :mod:`importlib.resources`, so it works the same from a source
    tree, site-packages or a zip on ``sys.path`` (as on a Spark worker).
    """
    from importlib.resources import files

    for package in packages:
        yield from _files(files(package), package)


def build_id() -> str:
    """A digest of the ``tenants`` and ``engine`` sources this process imports."""
    digest = hashlib.sha256()
    for name, entry in package_files():
        digest.update(name.encode())
        digest.update(b"\0")
        digest.update(entry.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def build_zip(dest: Path) -> Path:
    """Write the package zip to ``dest`` (a file path) and return it.

    Entries carry a fixed timestamp, so the same sources give the same bytes.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, entry in package_files((*PACKAGES, *_vendored())):
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, entry.read_bytes())
    os.replace(tmp, dest)
    return dest


def _vendored() -> tuple[str, ...]:
    for name in VENDORED:
        importlib.import_module(name)
    return VENDORED


def zip_name() -> str:
    return f"rewind-{version()}-{build_id()}.zip"


def cached_zip() -> Path:
    """The package zip of the running code, built once per build id per machine.

    Kept under the temp directory by build id: a driver that starts many jobs
    zips its code once, and a changed source tree gets a new file.
    """
    path = Path(tempfile.gettempdir()) / "rewind-spark" / zip_name()
    if not path.exists():
        build_zip(path)
    return path
