"""moto in server mode, in this process: the STS (and IAM) that issues keys and answers
GetCallerIdentity for them, and that tells the EKS stand-in the secret of a key it issued.

moto (5.x) does not check presigned URLs (its access control checks header signatures only,
eks.md E), so the signature of a token is checked by tests/aws/eks.py, with botocore's signer,
from the secret moto issued; moto then says who the key is.
"""

import contextlib
import datetime as dt
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

ACCOUNT = "123456789012"


@dataclass(frozen=True)
class Secret:
    access_key_id: str
    secret_access_key: str
    session_token: str | None
    expires_at: float | None


class MotoSTS:
    """``with MotoSTS() as sts:`` ``sts.url``, ``sts.user_keys(name)``, ``sts.secret(akid)``."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._lock = threading.Lock()
        self.url = ""

    def __enter__(self) -> "MotoSTS":
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.url = f"http://{host}:{port}"
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.stop()
        from moto.iam.models import iam_backends
        from moto.sts.models import sts_backends

        for backends in (iam_backends, sts_backends):  # moto's state is per process
            for account in list(backends.keys()):
                backends[account].reset()

    @contextlib.contextmanager
    def over_tls(self, context: ssl.SSLContext) -> Iterator[str]:
        """The same moto (one state per process) served over https with ``context``'s
        certificate: its URL, while the block runs."""
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        server = make_server(
            "127.0.0.1",
            0,
            DomainDispatcherApplication(create_backend_app),
            threaded=True,
            request_handler=MotoRequestHandler,
            ssl_context=context,
        )
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"https://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            thread.join()

    def client(self, service: str, region: str = "us-east-1") -> Any:
        import boto3

        return boto3.client(
            service,
            region_name=region,
            endpoint_url=self.url,
            aws_access_key_id="AKIAIOSFODNN7EXAMPLE",
            aws_secret_access_key="moto-admin-secret",
        )

    def user_keys(self, name: str) -> tuple[str, str]:
        """An IAM user and its access key (id, secret), as ``aws configure`` would hold."""
        iam = self.client("iam")
        iam.create_user(UserName=name)
        key = iam.create_access_key(UserName=name)["AccessKey"]
        return key["AccessKeyId"], key["SecretAccessKey"]

    def assume(self, role_arn: str, session: str, seconds: int = 3600) -> dict[str, Any]:
        """AssumeRole at moto (the role need not exist there): Credentials."""
        answer = self.client("sts").assume_role(
            RoleArn=role_arn, RoleSessionName=session, DurationSeconds=seconds
        )
        return dict(answer["Credentials"])

    def secret(self, access_key_id: str) -> Secret | None:
        """What moto issued for ``access_key_id`` (a user's key, or an assumed role's)."""
        from moto.iam.models import iam_backends
        from moto.sts.models import sts_backends

        for account in list(sts_backends.keys()):
            backend = sts_backends[account]["aws"]
            role = backend.get_assumed_role_from_access_key(access_key_id)
            if role is not None:
                return Secret(
                    role.access_key_id,
                    role.secret_access_key,
                    role.session_token,
                    role.expiration.replace(tzinfo=dt.UTC).timestamp(),
                )
        for account in list(iam_backends.keys()):
            iam = iam_backends[account]["global"]
            user = iam.get_user_from_access_key_id(access_key_id)
            if user is not None:
                for key in user.access_keys:
                    if key.access_key_id == access_key_id:
                        return Secret(access_key_id, key.secret_access_key, None, None)
        return None
