"""An S3 endpoint that really checks credentials: moto with IAM authentication on.

The shared test server (``tenants.objectstore.embedded``) accepts any key, so it cannot
show that temporary credentials travel with their session token all the way
to an executor. moto can check them: with ``INITIAL_NO_AUTH_ACTION_COUNT=n``
in its environment, every request after the first ``n`` authenticated actions
must carry a known access key and a valid SigV4 signature
(``moto/core/authorization.py``, ``moto/iam/access_control.py``):

* a key of an IAM user (``AKIA...``) is accepted without a token and refused
  with one (``InvalidToken``);
* a key from ``sts.assume_role`` (``ASIA...``) is accepted with its session
  token; with a wrong token it is refused as ``InvalidToken``; without any
  token moto looks it up among IAM users' keys, does not find it and refuses
  it as ``InvalidAccessKeyId``;
* ``sts.get_session_token`` returns fixed example credentials that moto never
  records, so they are refused even with their token: use ``assume_role``.

moto does not check expiry, key status or session policies, and the S3
``Resource`` of a policy only coarsely. The server runs in its own process
because moto's switch and its backends are process globals: enabling auth in
the test process would also lock out the shared, permissive server.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from tenants.objectstore.embedded import free_port

REGION = "us-east-1"
ACCOUNT_ID = "123456789012"  # moto's default account
ADMIN_USER = "rewind-admin"
S3_ROLE = "rewind-s3"
ALLOW_ALL = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
}
ALLOW_S3 = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
}
# The bootstrap below makes exactly this many authenticated actions while auth is
# still off: create_user, put_user_policy, create_access_key for the admin.
BOOTSTRAP_ACTIONS = 3
START_TIMEOUT_S = 30.0


class Keys(NamedTuple):
    """An IAM user's permanent key pair."""

    access_key: str
    secret_key: str


class TempKeys(NamedTuple):
    """Temporary credentials: useless without their session token."""

    access_key: str
    secret_key: str
    session_token: str


@dataclass
class MotoProcess:
    """``python -m moto.server`` in its own process group."""

    popen: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM the group (moto exits on it), SIGKILL after ``grace_s``, then reap."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.popen.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.popen.wait(timeout=grace_s)
                break
            except subprocess.TimeoutExpired:
                continue
        self.popen.wait()


@dataclass
class AuthMoto:
    """A moto server that authenticates every request, and an admin to set it up."""

    endpoint_url: str
    process: MotoProcess
    admin: Keys
    region: str = REGION
    _role_arn: str | None = field(default=None, repr=False)

    def client(
        self,
        service: str,
        access_key: str,
        secret_key: str,
        session_token: str | None = None,
        **config: Any,
    ) -> Any:
        """A boto3 client for this endpoint with exactly these credentials (no chain lookup)."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            service,
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            aws_access_key_id=access_key,
            aws_secret_access_key=secret_key,
            aws_session_token=session_token,
            config=Config(retries={"max_attempts": 1}, **config),
        )

    def admin_client(self, service: str) -> Any:
        return self.client(service, *self.admin)

    def create_bucket(self, name: str) -> None:
        self.admin_client("s3").create_bucket(Bucket=name)

    def create_s3_user(self, name: str | None = None) -> Keys:
        """A new IAM user allowed ``s3:*`` and nothing else; returns its permanent keys."""
        name = name or f"s3-user-{uuid.uuid4().hex[:8]}"
        iam = self.admin_client("iam")
        iam.create_user(UserName=name)
        iam.put_user_policy(UserName=name, PolicyName="s3-all", PolicyDocument=json.dumps(ALLOW_S3))
        key = iam.create_access_key(UserName=name)["AccessKey"]
        return Keys(key["AccessKeyId"], key["SecretAccessKey"])

    def temporary_credentials(self, *, duration_s: int = 3600, session: str = "rewind") -> TempKeys:
        """Credentials from ``sts.assume_role`` on a role allowed ``s3:*``.

        ``assume_role``, not ``get_session_token``: moto answers the latter with
        fixed example keys it never records, which it then refuses.
        """
        if self._role_arn is None:
            trust = {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT_ID}:user/{ADMIN_USER}"},
                        "Action": "sts:AssumeRole",
                    }
                ],
            }
            iam = self.admin_client("iam")
            role = iam.create_role(RoleName=S3_ROLE, AssumeRolePolicyDocument=json.dumps(trust))
            iam.put_role_policy(
                RoleName=S3_ROLE, PolicyName="s3-all", PolicyDocument=json.dumps(ALLOW_S3)
            )
            self._role_arn = str(role["Role"]["Arn"])
        creds = self.admin_client("sts").assume_role(
            RoleArn=self._role_arn, RoleSessionName=session, DurationSeconds=duration_s
        )["Credentials"]
        return TempKeys(creds["AccessKeyId"], creds["SecretAccessKey"], creds["SessionToken"])

    def stop(self) -> None:
        self.process.stop()


def _wait_listening(port: int, popen: subprocess.Popen[bytes], log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if popen.poll() is not None:
            break
        try:
            # A bare TCP connect, not an HTTP request: nothing may spend one of
            # the unauthenticated actions the bootstrap counts on.
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(
        f"moto server on port {port} did not start:\n{log.read_text(errors='replace')[-3000:]}"
    )


def start_authenticating_moto(workdir: Path, *, timeout_s: float = START_TIMEOUT_S) -> AuthMoto:
    """Start moto in a subprocess with IAM authentication on, and an admin user.

    The server lets exactly ``BOOTSTRAP_ACTIONS`` actions through unauthenticated
    (the admin's creation); after that every request must be signed by a known
    key. A probe with an unknown key proves it before this returns.

    Raises:
        RuntimeError: the server did not start, or accepted an unknown key.
    """
    from botocore.exceptions import ClientError

    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = workdir / f"moto-{port}.log"
    env = dict(os.environ)
    env["INITIAL_NO_AUTH_ACTION_COUNT"] = str(BOOTSTRAP_ACTIONS)
    with log.open("ab") as out:
        popen = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    process = MotoProcess(popen, log)
    try:
        _wait_listening(port, popen, log, timeout_s)
        endpoint = f"http://127.0.0.1:{port}"
        # Any key signs the bootstrap: moto does not look at it while auth is off.
        server = AuthMoto(endpoint, process, Keys("AKIABOOTSTRAP0000000", "bootstrap"))
        iam = server.admin_client("iam")
        iam.create_user(UserName=ADMIN_USER)
        iam.put_user_policy(
            UserName=ADMIN_USER, PolicyName="all", PolicyDocument=json.dumps(ALLOW_ALL)
        )
        key = iam.create_access_key(UserName=ADMIN_USER)["AccessKey"]
        server.admin = Keys(key["AccessKeyId"], key["SecretAccessKey"])
        try:
            server.client("s3", "AKIANOTAKEY000000000", "nope").list_buckets()
        except ClientError as e:
            if e.response["Error"]["Code"] != "InvalidAccessKeyId":
                raise
        else:
            raise RuntimeError("moto accepted an unknown access key: IAM authentication is not on")
        return server
    except BaseException:
        process.stop()
        raise


@contextmanager
def authenticating_moto(workdir: Path) -> Iterator[AuthMoto]:
    """A started authenticating moto server that is stopped on exit."""
    server = start_authenticating_moto(workdir)
    try:
        yield server
    finally:
        server.stop()
