"""What EKS does with a bearer token: aws-iam-authenticator's server (``pkg/token/token.go``
``Verify``, eks.md C.2), step by step, then STS's part in process.

Steps 1 to 11 are the authenticator's checks (size, prefix, base64url without padding, https, the
host an STS endpoint of the partition, path ``/``, the query's keys, GetCallerIdentity,
``x-k8s-aws-id`` signed, ``X-Amz-Expires`` 0 to 900, ``X-Amz-Date`` no older than 15 min). Step 12,
where the authenticator GETs the URL from STS with ``x-k8s-aws-id: <its cluster>``, is done here
as STS would: the secret of the access key (moto issued it), the session token it issued, then
the signature recomputed with botocore's own SigV4 signer over the server's cluster ID; a token
signed for another cluster, or with another secret, does not match. Then moto's
GetCallerIdentity (header-signed with the same key) says who it is, and the ARN is
canonicalised as the authenticator does (``pkg/arn``).
"""

import base64
import binascii
import hmac
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

from tests.aws.moto_sts import MotoSTS

PREFIX = "k8s-aws-v1."
MAX_TOKEN = 4096
VALID_FOR = timedelta(minutes=15)
ALLOWED = {
    "action",
    "version",
    "x-amz-algorithm",
    "x-amz-credential",
    "x-amz-date",
    "x-amz-expires",
    "x-amz-security-token",
    "x-amz-signature",
    "x-amz-signedheaders",
}
DOMAINS = {"amazonaws.com": "aws", "api.aws": "aws"}
_REGION = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9\-]*[A-Za-z0-9])?$")


class Refused(Exception):
    """The token is not accepted; the message says at which step."""


@dataclass(frozen=True)
class Identity:
    arn: str
    canonical_arn: str
    account: str
    user_id: str
    session_name: str
    access_key_id: str


def canonicalize(arn: str) -> str:
    """``arn:P:sts::A:assumed-role/NAME/SESSION`` → ``arn:P:iam::A:role/NAME``; users, roots and
    IAM roles as they are (``pkg/arn/arn.go``)."""
    parts = arn.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn":
        raise Refused(f"arn {arn!r} is not an ARN")
    _, partition, service, _, account, resource = parts
    if service == "sts" and resource.startswith("assumed-role/"):
        pieces = resource.split("/")
        if len(pieces) < 3:
            raise Refused(f"assumed-role ARN {arn!r} lacks a session")
        return f"arn:{partition}:iam::{account}:role/{'/'.join(pieces[1:-1])}"
    return arn


class EksVerifier:
    """``verify(token)`` → Identity, or Refused. ``check(token)`` → bool, for tests/apiserver.py."""

    def __init__(
        self,
        sts: MotoSTS,
        cluster_id: str,
        region: str = "us-east-1",
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.sts = sts
        self.cluster_id = cluster_id
        self.region = region
        self.now = now
        self.seen: list[Identity] = []
        self.refusals: list[str] = []
        self._hosts: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    def check(self, token: str) -> bool:
        try:
            identity = self.verify(token)
        except Refused as e:
            with self._lock:
                self.refusals.append(str(e))
            return False
        with self._lock:
            self.seen.append(identity)
        return True

    def _sts_hosts(self, region: str) -> set[str]:
        """The hosts botocore's STS endpoint rules give for ``region`` (every FIPS and dual-stack
        combination), as the authenticator runs the Go SDK's resolver."""
        with self._lock:
            if region in self._hosts:
                return self._hosts[region]
        import botocore.session
        from botocore.config import Config

        session = botocore.session.Session()
        hosts = set()
        for fips in (False, True):
            for dual in (False, True):
                try:
                    client = session.create_client(
                        "sts",
                        region_name=region,
                        aws_access_key_id="x",
                        aws_secret_access_key="x",
                        config=Config(
                            use_fips_endpoint=fips,
                            use_dualstack_endpoint=dual,
                            ignore_configured_endpoint_urls=True,
                        ),
                    )
                except Exception:
                    continue
                hosts.add(urlsplit(client.meta.endpoint_url).hostname or "")
        with self._lock:
            self._hosts[region] = hosts
        return hosts

    def _check_host(self, host: str, port: int | None) -> str:
        """The signing region the host stands for (global → us-east-1)."""
        if port is not None:
            raise Refused(f"host {host}:{port} is not an STS endpoint (a port)")
        labels = host.split(".")
        if len(labels) < 3:
            raise Refused(f"host {host!r} is not an STS endpoint")
        if host == "sts.amazonaws.com":
            return "us-east-1"
        region = labels[1]
        if not _REGION.match(region):
            raise Refused(f"host {host!r}: {region!r} is not a region")
        domain = ".".join(labels[2:])
        if domain not in DOMAINS:
            raise Refused(f"host {host!r} is not in the aws partition's STS domains")
        if host not in self._sts_hosts(region) and host not in (
            f"sts.{self.region}.amazonaws.com",
            f"sts.{self.region}.api.aws",
        ):
            raise Refused(f"host {host!r} is not an STS endpoint for {region}")
        return region

    def verify(self, token: str) -> Identity:
        if len(token) > MAX_TOKEN:
            raise Refused("token is too large")
        if not token.startswith(PREFIX):
            raise Refused("token is missing expected 'k8s-aws-v1.' prefix")
        body = token[len(PREFIX) :]
        if "=" in body:  # Go's RawURLEncoding refuses padding
            raise Refused("illegal base64 data (padding)")
        try:
            url = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError) as e:
            raise Refused(f"illegal base64 data: {e}") from None
        parts = urlsplit(url)
        if parts.scheme != "https":
            raise Refused(f"unexpected scheme {parts.scheme!r}")
        region = self._check_host(parts.hostname or "", parts.port)
        if parts.path != "/":
            raise Refused("unexpected path in pre-signed URL")
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        keys = [k.lower() for k, _ in pairs]
        if len(set(keys)) != len(keys):
            raise Refused("duplicate query parameter")
        for k in keys:
            if k not in ALLOWED:
                raise Refused(f"non-allowlisted query parameter {k!r}")
        q = {k.lower(): v for k, v in pairs}
        if q.get("action") != "GetCallerIdentity":
            raise Refused("unexpected action parameter in pre-signed URL")
        if "x-k8s-aws-id" not in [h.lower() for h in q.get("x-amz-signedheaders", "").split(";")]:
            raise Refused("client did not sign the x-k8s-aws-id header in the pre-signed URL")
        try:
            expires = int(q.get("x-amz-expires", ""))
        except ValueError:
            raise Refused("X-Amz-Expires is not an integer") from None
        if not 0 <= expires <= 900:
            raise Refused("X-Amz-Expires parameter out of range")
        try:
            signed = datetime.strptime(q.get("x-amz-date", ""), "%Y%m%dT%H%M%SZ").replace(
                tzinfo=UTC
            )
        except ValueError:
            raise Refused("error parsing X-Amz-Date parameter") from None
        if self.now() > signed + VALID_FOR:
            raise Refused("X-Amz-Date parameter is expired (15 minute expiration)")
        return self._sts(parts.hostname or "", region, pairs, q)

    def _sts(
        self, host: str, region: str, pairs: list[tuple[str, str]], q: dict[str, str]
    ) -> Identity:
        """What STS does with the GET the authenticator sends."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        akid, date, scope_region, service, term = (
            q.get("x-amz-credential", "").split("/") + [""] * 5
        )[:5]
        if service != "sts" or term != "aws4_request" or date != q["x-amz-date"][:8]:
            raise Refused("SignatureDoesNotMatch: bad credential scope")
        if scope_region != region:
            raise Refused("SignatureDoesNotMatch: credential scope region is not the host's")
        secret = self.sts.secret(akid)
        if secret is None:
            raise Refused(
                "InvalidClientTokenId: the security token included in the request is invalid"
            )
        if secret.session_token is not None:
            if not hmac.compare_digest(q.get("x-amz-security-token", ""), secret.session_token):
                raise Refused("InvalidToken: the security token included in the request is invalid")
            if secret.expires_at is not None and self.now().timestamp() > secret.expires_at:
                raise Refused("ExpiredToken: the security token included in the request is expired")
        rest = "&".join(
            f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}"
            for k, v in pairs
            if k != "X-Amz-Signature"
        )
        request = AWSRequest(
            method="GET", url=f"https://{host}/?{rest}", headers={"x-k8s-aws-id": self.cluster_id}
        )
        request.context["timestamp"] = q["x-amz-date"]
        signer = SigV4Auth(
            Credentials(akid, secret.secret_access_key, secret.session_token), "sts", scope_region
        )
        canonical = signer.canonical_request(request)
        expected = signer.signature(signer.string_to_sign(request, canonical), request)
        if not hmac.compare_digest(expected, q.get("x-amz-signature", "")):
            raise Refused(
                "SignatureDoesNotMatch: the request signature we calculated does not match the "
                "signature you provided"
            )
        client = self._moto_sts(akid, secret)
        answer = client.get_caller_identity()
        arn = answer["Arn"]
        user_id = answer["UserId"]
        session = user_id.split(":", 1)[1] if ":" in user_id else ""
        return Identity(arn, canonicalize(arn), answer["Account"], user_id, session, akid)

    def _moto_sts(self, akid: str, secret: Any) -> Any:
        import boto3

        return boto3.client(
            "sts",
            region_name="us-east-1",
            endpoint_url=self.sts.url,
            aws_access_key_id=akid,
            aws_secret_access_key=secret.secret_access_key,
            aws_session_token=secret.session_token,
        )
