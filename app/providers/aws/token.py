"""The EKS token: ``k8s-aws-v1.`` + base64url (no padding) of a presigned STS
GetCallerIdentity URL whose signature covers the header ``x-k8s-aws-id: CLUSTER``.

Made as ``aws eks get-token`` makes it (awscli ``customizations/eks/get_token.py``, eks.md A):
botocore's STS client for the region (its endpoint rules: regional by default, ``legacy``,
FIPS, dual-stack, partitions), the cluster ID moved from the call's parameters into the request
context and then into the signed headers, ``X-Amz-Expires=60``, GET. One difference, on
purpose: the client ignores configured endpoint URLs (``AWS_ENDPOINT_URL_STS``, ``[services]``),
which would put a host EKS refuses into the token (the CLI puts it there, and EKS refuses it).

``expirationTimestamp`` is the CLI's: the signing time (``X-Amz-Date``) + 14 minutes, because STS
honours a presigned GetCallerIdentity for 15 minutes whatever ``X-Amz-Expires`` says; kubetray
also never hands out a time past the signing credentials' own end.
"""

import base64
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from botocore.config import Config

PREFIX = "k8s-aws-v1."
HEADER = "x-k8s-aws-id"
URL_TIMEOUT = 60
TOKEN_LIFETIME = timedelta(minutes=14)
"""What the AWS CLI reports (``TOKEN_EXPIRATION_MINS``): a minute short of STS's 15."""
CREDENTIAL_MARGIN = timedelta(minutes=1)


@dataclass(frozen=True)
class EksToken:
    token: str
    signed_at: datetime
    expires_at: datetime
    """The expirationTimestamp to report."""
    host: str


def _move_cluster_id(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    if HEADER in params:
        context[HEADER] = params.pop(HEADER)


def _sign_cluster_id(request: Any, **_: Any) -> None:
    if HEADER in request.context:
        request.headers[HEADER] = request.context[HEADER]


def presign_client(session: Any, region: str | None) -> Any:
    """The STS client that signs tokens for ``region`` (None: the global endpoint, as the CLI
    without a region), with the two handlers that sign the cluster ID in."""
    client = session.create_client(
        "sts", region_name=region, config=Config(ignore_configured_endpoint_urls=True)
    )
    client.meta.events.register("provide-client-params.sts.GetCallerIdentity", _move_cluster_id)
    client.meta.events.register("before-sign.sts.GetCallerIdentity", _sign_cluster_id)
    return client


def sign(client: Any, cluster_id: str, credentials_end: datetime | None = None) -> EksToken:
    """A token for ``cluster_id`` (botocore may refresh the client's credentials first)."""
    url = client.generate_presigned_url(
        "get_caller_identity",
        Params={HEADER: cluster_id},
        ExpiresIn=URL_TIMEOUT,
        HttpMethod="GET",
    )
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    signed_at = datetime.strptime(query["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    expires = signed_at + TOKEN_LIFETIME
    if credentials_end is not None:
        expires = min(expires, credentials_end - CREDENTIAL_MARGIN)
    encoded = base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")
    return EksToken(PREFIX + encoded, signed_at, expires, parts.hostname or "")


def decode(token: str) -> str:
    """The presigned URL inside a token (ValueError if it is not one)."""
    if not token.startswith(PREFIX):
        raise ValueError("not a k8s-aws-v1 token")
    body = token[len(PREFIX) :]
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
