"""A backup destination reaches S3 with its own profile, endpoint and credentials.

The warehouse is on the shared test server (placeholder keys); the destination
is on a second, authenticating moto server that refuses those keys. A backup
there works only if the destination's own settings (``REWIND_BACKUP_AWS_*``,
here a named profile holding temporary credentials with their session token)
are the ones used for it, and the warehouse's are used for the warehouse.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from engine.backup.api import backups, create_backup, restore_backup
from tenants.errors import InvalidArgument, StorageError
from tenants.schema import TableSchema
from tenants.store import TableStore
from tests.helpers.moto_auth import authenticating_moto

SCHEMA = TableSchema.of([("id", "int64"), ("v", "string")], ["id"])


@pytest.mark.parametrize("kind", ["physical", "logical"])
def test_a_backup_destination_uses_its_own_profile_and_endpoint(
    store: TableStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    store.create_tenant("acme")
    store.create_table("acme", "db.t", SCHEMA)
    store.write("acme", "db.t", upserts=pa.table({"id": [1, 2], "v": ["a", "b"]}))
    store.create_snapshot("acme", "mon")
    with authenticating_moto(tmp_path / "moto") as other:
        keys = other.temporary_credentials()
        other.create_bucket("backups")
        (tmp_path / "credentials").write_text(
            "[backups]\n"
            f"aws_access_key_id = {keys.access_key}\n"
            f"aws_secret_access_key = {keys.secret_key}\n"
            f"aws_session_token = {keys.session_token}\n"
        )
        (tmp_path / "config").write_text("[profile backups]\nregion = us-east-1\n")
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
        monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
        monkeypatch.setenv("REWIND_BACKUP_AWS_ENDPOINT_URL", other.endpoint_url)
        uri = "s3://backups/rewind"

        # Without its profile, the destination gets the warehouse's keys: refused.
        with pytest.raises(StorageError, match="backups"):
            create_backup(store, "acme", "mon", uri, kind=kind)

        monkeypatch.setenv("REWIND_BACKUP_AWS_PROFILE", "backups")
        made = create_backup(store, "acme", "mon", uri, kind=kind)
        assert [b.backup_id for b in backups(uri) if b.complete] == [made.backup_id]
        tenant, _ = restore_backup(store, uri, made.backup_id, tenant="acme_back")
        assert store.read(tenant.name, "db.t").to_pydict() == {"id": [1, 2], "v": ["a", "b"]}

        monkeypatch.setenv("REWIND_BACKUP_AWS_PROFILE", "nobody")
        with pytest.raises(InvalidArgument, match="AWS profile 'nobody' is not in the AWS config"):
            backups(uri)
