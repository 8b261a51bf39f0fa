"""Fixtures of the backup tests: a destination bucket on the test run's moto server."""

from __future__ import annotations

import pytest

from tenants.objectstore.embedded import EmbeddedS3
from tests.helpers.backups import new_bucket


@pytest.fixture
def dest_bucket(s3_server: EmbeddedS3) -> str:
    return new_bucket(s3_server, "rewind-backups")


@pytest.fixture
def uri(dest_bucket: str) -> str:
    """A backup destination: a prefix of a plain bucket (no Object Lock)."""
    return f"s3://{dest_bucket}/backups"
