"""A real S3 endpoint on 127.0.0.1 for tests and the demo: moto's threaded server.

This is an HTTP server, not ``mock_aws`` patching, so every byte goes through
the same boto3 and pyarrow code paths as production S3.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tenants.config import S3Settings
from tenants.errors import MissingDependency

# moto accepts any credentials; these are placeholders, not secrets.
PLACEHOLDER_KEY = "rewind-local"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class EmbeddedS3:
    """A running moto server and the settings that reach it."""

    server: object
    settings: S3Settings

    @property
    def endpoint_url(self) -> str:
        assert self.settings.endpoint_url
        return self.settings.endpoint_url

    def create_bucket(self, name: str, *, object_lock: bool = False) -> None:
        """A new bucket; ``object_lock``: with S3 Object Lock (and so versioning)
        enabled, as a backup vault needs; S3 allows it only at creation."""
        import boto3

        client = boto3.client("s3", **self.settings.to_boto3())
        client.create_bucket(Bucket=name, ObjectLockEnabledForBucket=object_lock)

    def export_env(self) -> None:
        """Point the standard AWS environment variables at this server."""
        os.environ["AWS_ENDPOINT_URL"] = self.endpoint_url
        os.environ["AWS_ACCESS_KEY_ID"] = PLACEHOLDER_KEY
        os.environ["AWS_SECRET_ACCESS_KEY"] = PLACEHOLDER_KEY
        os.environ["AWS_REGION"] = self.settings.region

    def stop(self) -> None:
        self.server.stop()  # type: ignore[attr-defined]


def start_embedded_s3(port: int | None = None) -> EmbeddedS3:
    """Start moto's S3 server on 127.0.0.1 (a free port unless given).

    Raises:
        MissingDependency: moto is not installed (it is the ``local-s3`` extra, not a
            core dependency: production talks to a real S3).
    """
    try:
        from moto.server import ThreadedMotoServer
    except ImportError as error:
        raise MissingDependency(
            f"a local S3 server needs moto ({error.name or 'moto'} is not installed): "
            "pip install 'rewind-tables[local-s3]'"
        ) from None

    # werkzeug logs every request at INFO; a demo or a test run does not want that.
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = port or free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    settings = S3Settings(
        endpoint_url=f"http://127.0.0.1:{port}",
        region="us-east-1",
        access_key_id=PLACEHOLDER_KEY,
        secret_access_key=PLACEHOLDER_KEY,
    )
    return EmbeddedS3(server, settings)


@contextmanager
def embedded_s3() -> Iterator[EmbeddedS3]:
    s3 = start_embedded_s3()
    try:
        yield s3
    finally:
        s3.stop()
