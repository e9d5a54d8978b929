"""MSAL's HTTP client, on kubetray's own HTTP (app.oidc.http): the system's trust store with
extra CAs added (never instead), TLS always verified, proxies from the environment.

MSAL's default is a requests.Session, which trusts certifi's bundle rather than the system's,
and whose ``verify=`` loses to ``REQUESTS_CA_BUNDLE``/``CURL_CA_BUNDLE`` when either is set
(requests' ``merge_environment_settings``): a corporate CA added to the system store would not
be trusted, and a CA given to kubetray would be ignored on machines that set those variables.
This adapter speaks MSAL's documented interface (``msal.oauth2cli.http``: ``post``/``get``
returning ``status_code``, ``text``, ``headers``, ``raise_for_status``).
"""

import json
import ssl
import urllib.parse
from collections.abc import Mapping
from typing import Any

from app.oidc.http import TIMEOUT, Session, TransportError, ssl_context

TOKEN_TIMEOUT = 120.0
"""Seconds a POST (a token request) waits: Entra may already have rotated the refresh token it
sends back, and an answer given up on is lost (see app.oidc.client.REFRESH_TIMEOUT)."""


class Response:
    """What MSAL reads of an answer."""

    def __init__(self, status_code: int, text: str, headers: dict[str, str], url: str) -> None:
        self.status_code = status_code
        self.text = text
        self.headers = headers
        self.url = url

    def raise_for_status(self) -> None:
        if self.status_code >= 400:
            raise TransportError(
                f"HTTP {self.status_code} from {self.url}",
                status=self.status_code,
                body=self.text.encode(),
            )


class MsalHttp:
    """``http_client=`` for msal's applications."""

    def __init__(self, ca_files: tuple[str, ...] = (), context: ssl.SSLContext | None = None):
        self._session = Session(context or ssl_context(tuple(ca_files)))

    def _send(
        self,
        method: str,
        url: str,
        params: Mapping[str, Any] | None,
        data: Any,
        headers: Mapping[str, str] | None,
        timeout: float,
    ) -> Response:
        if params:
            url += ("&" if "?" in url else "?") + urllib.parse.urlencode(dict(params))
        head = {k: str(v) for k, v in (headers or {}).items() if v is not None}
        body: dict[str, str] | None = None
        raw = ""
        if isinstance(data, Mapping):  # MSAL gives some values (a client assertion) as bytes
            body = {k: _text(v) for k, v in data.items() if v is not None}
        elif isinstance(data, str | bytes) and data:
            raw = data.decode() if isinstance(data, bytes) else data
        elif data is not None and not isinstance(data, str | bytes):
            raw = json.dumps(data)
        if raw:
            answer = self._session.request(
                method, url, headers=head, auth=_Raw(raw), data={}, timeout=timeout
            )
        else:
            answer = self._session.request(method, url, data=body, headers=head, timeout=timeout)
        return Response(
            answer.status_code,
            answer.content.decode("utf-8", "replace"),
            {k: v for k, v in answer.headers.items()},
            url,
        )

    def post(
        self,
        url: str,
        params: Mapping[str, Any] | None = None,
        data: Any = None,
        headers: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> Response:
        return self._send(
            "POST", url, params, data, headers, float(kwargs.get("timeout") or TOKEN_TIMEOUT)
        )

    def get(
        self,
        url: str,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> Response:
        return self._send(
            "GET", url, params, None, headers, float(kwargs.get("timeout") or TIMEOUT)
        )

    def close(self) -> None:
        self._session.close()


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class _Raw:
    """Sends a body MSAL already encoded (a string) as it is (WS-Trust's XML, say)."""

    def __init__(self, body: str) -> None:
        self._body = body

    def prepare(
        self, method: str, uri: str, headers: dict[str, str], body: str
    ) -> tuple[str, dict[str, str], str]:
        return uri, headers, self._body
