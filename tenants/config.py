"""Where the catalog and the warehouse live, and how each client reaches S3.

One settings object adapts to every client (boto3, pyarrow, Spark conf), so the
endpoint, region and addressing quirks live in exactly one place. Settings are
frozen and picklable: Spark tasks rebuild their clients from them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlparse

from tenants.errors import InvalidArgument
from tenants.redaction import redact

DEFAULT_HOME = ".rewind"


SECRET_FIELDS = ("access_key_id", "secret_access_key", "session_token")
BACKUP_ENV_PREFIX = "REWIND_BACKUP_"


@dataclass(frozen=True)
class S3Settings:
    """Endpoint, region and credentials; ``None`` fields fall back to the AWS chain.

    Credentials never travel: pickling drops them (a Spark task carries the
    endpoint and region only), and a process that unpickles the settings takes
    its credentials from its own chain (environment incl. ``AWS_SESSION_TOKEN``,
    ``profile`` or ``AWS_PROFILE``, instance or container role). They are never
    in ``repr``, so never in a log line.
    """

    endpoint_url: str | None = None
    region: str = "us-east-1"
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    profile: str | None = None
    # A Spark broadcast of credentials (tenants.spark.credentials): pickles as a
    # reference; its value reaches executors through Spark's block transfer.
    shared: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, *, backup: bool = False
    ) -> S3Settings:
        """Settings from the standard AWS variables: the one place Rewind reads them.

        Only the edges call this (the CLI, a job's entry point, the demo and the
        convenience defaults of ``TableStore.open`` and ``open_destination``);
        everything below them takes the settings it is given, so a caller with
        settings of its own passes them and no environment overrides them.

        Args:
            environ: the variables to read; default ``os.environ``.
            backup: a backup destination's settings: the ``REWIND_BACKUP_AWS_*``
                variables (``REWIND_BACKUP_AWS_PROFILE``, ``..._ENDPOINT_URL``,
                ``..._ACCESS_KEY_ID``, ...) when any is set, so a destination in
                another account or on another endpoint needs no change to the
                warehouse's; otherwise the warehouse's variables.
        """
        env = os.environ if environ is None else environ
        own = backup and any(k.startswith(BACKUP_ENV_PREFIX + "AWS_") for k in env)
        prefix = BACKUP_ENV_PREFIX if own else ""

        def get(name: str) -> str | None:
            return env.get(prefix + name) or None

        return cls(
            endpoint_url=get("AWS_ENDPOINT_URL_S3") or get("AWS_ENDPOINT_URL"),
            region=get("AWS_REGION") or get("AWS_DEFAULT_REGION") or "us-east-1",
            access_key_id=get("AWS_ACCESS_KEY_ID"),
            secret_access_key=get("AWS_SECRET_ACCESS_KEY"),
            session_token=get("AWS_SESSION_TOKEN"),
            # boto3 and pyarrow read AWS_PROFILE themselves; a prefixed one only we know.
            profile=get("AWS_PROFILE") if prefix else None,
        )

    @classmethod
    def for_backup(cls) -> S3Settings:
        """A backup destination's settings from the environment:
        ``from_env(backup=True)``."""
        return cls.from_env(backup=True)

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in SECRET_FIELDS}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name in SECRET_FIELDS:
            object.__setattr__(self, name, None)
        object.__setattr__(self, "shared", None)
        for name, value in state.items():
            object.__setattr__(self, name, value)

    def keys(self) -> tuple[str, str, str | None] | None:
        """(access key, secret, session token) given to these settings: their own
        fields, else the ``shared`` reference (a Spark broadcast of the Hadoop-style
        ``spark.hadoop.fs.s3a.*`` keys, :mod:`tenants.spark.credentials`); None
        means the AWS chain of the process that uses them."""
        if self.access_key_id and self.secret_access_key:
            return self.access_key_id, self.secret_access_key, self.session_token
        if self.shared is not None:
            value = self.shared.value
            return value["access_key_id"], value["secret_access_key"], value.get("session_token")
        return None

    def boto3_session(self) -> Any:
        """A boto3 session on ``profile`` (or the default chain)."""
        import boto3
        from botocore.exceptions import ProfileNotFound

        try:
            return boto3.Session(profile_name=self.profile) if self.profile else boto3.Session()
        except ProfileNotFound as e:
            raise InvalidArgument(
                f"AWS profile {self.profile!r} is not in the AWS config or credentials files "
                "(AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE, ~/.aws)"
            ) from e

    def to_boto3(self) -> dict[str, Any]:
        """Keyword arguments for ``boto3_session().client("s3", ...)``."""
        kwargs: dict[str, Any] = {"region_name": self.region}
        if self.endpoint_url:
            kwargs["endpoint_url"] = self.endpoint_url
        keys = self.keys()
        if keys:
            kwargs["aws_access_key_id"], kwargs["aws_secret_access_key"], token = keys
            if token:
                kwargs["aws_session_token"] = token
        return kwargs

    def to_pyarrow_fs(self) -> dict[str, Any]:
        """Keyword arguments for ``pyarrow.fs.S3FileSystem``.

        pyarrow's own AWS chain does not know a profile named here, so with a
        ``profile`` the credentials are resolved once through boto3 (a job that
        outlives temporary credentials opens a new object store)."""
        kwargs: dict[str, Any] = {"region": self.region}
        endpoint = self.endpoint_url
        keys = self.keys()
        if self.profile and not keys:
            session = self.boto3_session()
            endpoint = endpoint or session.client("s3").meta.endpoint_url
            credentials = session.get_credentials()
            if credentials is not None:
                frozen = credentials.get_frozen_credentials()
                keys = (frozen.access_key, frozen.secret_key, frozen.token)
        if endpoint:
            parsed = urlparse(endpoint)
            kwargs["endpoint_override"] = parsed.netloc or endpoint
            kwargs["scheme"] = parsed.scheme or "https"
        if keys:
            kwargs["access_key"], kwargs["secret_key"], token = keys
            if token:
                kwargs["session_token"] = token
        return kwargs

    def to_pyiceberg(self) -> dict[str, str]:
        """Properties for a pyiceberg catalog's FileIO (``s3.*``), so the Iceberg
        metadata an export commits reaches the same endpoint, with the same
        credentials, as the data files Rewind writes beside it."""
        props: dict[str, str] = {"s3.region": self.region}
        if self.endpoint_url:
            props["s3.endpoint"] = self.endpoint_url
        if self.profile:
            props["s3.profile-name"] = self.profile
        keys = self.keys()
        if keys:
            props["s3.access-key-id"], props["s3.secret-access-key"], token = keys
            if token:
                props["s3.session-token"] = token
        return props


@dataclass(frozen=True)
class Warehouse:
    """A parsed warehouse URI: ``s3://bucket/prefix`` or ``file:///path``."""

    scheme: str
    bucket: str
    prefix: str
    s3: S3Settings = field(default_factory=S3Settings)

    @classmethod
    def parse(cls, uri: str, s3: S3Settings | None = None, *, what: str = "warehouse") -> Warehouse:
        """Parse and check a warehouse (or backup destination) URI.

        ``s3`` reaches an ``s3://`` URI; without it, the bare defaults
        (:class:`S3Settings`), never the environment: the caller builds settings
        (``environment_settings()`` at an edge) and passes them. A ``file://``
        warehouse keeps them too: they are how its store reaches the ``s3://``
        places it opens for others (an export, an Iceberg table's location),
        so those honour ``AWS_ENDPOINT_URL`` as an ``s3://`` warehouse does.

        Accepted: ``s3://bucket[/prefix]``, ``file:///absolute/path`` (also
        ``file://localhost/absolute/path``) and a bare path. Anything that would
        silently mean something else is refused: ``file://relwh`` (``relwh`` is a
        host there, not a directory), ``file://..``, the filesystem root, ``.`` or
        ``..`` segments in an S3 prefix, and ``?query``/``#fragment`` parts,
        which would otherwise be dropped.

        Raises:
            InvalidArgument: naming what is wrong and what a valid URI looks like.
        """
        if not isinstance(uri, str) or any(ord(c) < 32 or ord(c) == 127 for c in uri):
            _refuse(what, str(uri), "a URI holds no control characters (NUL, newline, ...)")
        parsed = urlparse(uri)
        settings = s3 if s3 is not None else S3Settings()
        if "?" in uri or "#" in uri:
            _refuse(what, uri, "the URI takes no ?query or #fragment")
        if parsed.scheme == "s3":
            bucket, prefix = parsed.netloc, parsed.path.strip("/")
            if "@" in bucket:  # never echoed: what precedes the @ may be a password
                _refuse(what, uri, _NO_USERINFO)
            if not _BUCKET.fullmatch(bucket):
                _refuse(what, uri, f"{bucket!r} is not a bucket name")
            if any(part in ("", ".", "..") for part in prefix.split("/")) and prefix:
                _refuse(what, uri, "the prefix may not have empty, '.' or '..' segments")
            return cls("s3", bucket, prefix, settings)
        if parsed.scheme == "file":
            if parsed.netloc not in ("", "localhost"):
                _refuse(
                    what,
                    uri,
                    f"{parsed.netloc!r} is a host name there, not a directory; "
                    "a file URI takes an absolute path after three slashes",
                )
            if not parsed.path.startswith("/"):
                _refuse(what, uri, "a file URI takes an absolute path after three slashes")
            return cls("file", "", _directory(what, uri, parsed.path), settings)
        if parsed.scheme == "" and uri.strip():
            return cls("file", "", _directory(what, uri, uri), settings)
        _refuse(what, uri, f"unknown scheme {parsed.scheme!r}" if parsed.scheme else "empty")

    @property
    def uri(self) -> str:
        if self.scheme == "s3":
            return f"s3://{self.bucket}/{self.prefix}".rstrip("/")
        return f"file://{self.prefix}"

    def key(self, relative: str) -> str:
        """Full key (S3) or path (file) of a warehouse-relative key."""
        return f"{self.prefix}/{relative}" if self.prefix else relative

    def relative(self, full_key: str) -> str:
        """Inverse of :meth:`key`."""
        base = self.prefix
        if base and full_key.startswith(base + "/"):
            return full_key[len(base) + 1 :]
        return full_key


_BUCKET = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{1,254}")
_NO_USERINFO = (
    "an s3:// URI takes no user or password (credentials come from the AWS variables, "
    "a profile or a role)"
)
_VALID_WAREHOUSES = "s3://bucket/prefix, file:///absolute/path or a directory path"


def _refuse(what: str, uri: str, why: str) -> NoReturn:
    raise InvalidArgument(f"invalid {what} {redact(uri)!r}: {why}; use {_VALID_WAREHOUSES}")


def _directory(what: str, uri: str, path: str) -> str:
    """The absolute directory ``path`` names; never the filesystem root."""
    resolved = Path(path).resolve()
    if resolved == Path(resolved.anchor):
        _refuse(what, uri, f"it names the filesystem root {resolved}")
    return str(resolved)


def default_home() -> Path:
    return Path(os.environ.get("REWIND_HOME", DEFAULT_HOME))


def default_catalog_uri() -> str:
    return os.environ.get("REWIND_CATALOG") or f"sqlite:///{default_home() / 'catalog.db'}"


def default_warehouse_uri() -> str:
    return (
        os.environ.get("REWIND_WAREHOUSE") or f"file://{(default_home() / 'warehouse').resolve()}"
    )
