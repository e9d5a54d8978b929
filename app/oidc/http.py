"""HTTP for talking to the provider, on the standard library (urllib): system trust plus any extra
CAs, proxies from the environment.

Extra CAs (``--certificate-authority``, ``--certificate-authority-data``) are *added* to the
system's trust store, never used instead of it. ``HTTPS_PROXY``/``HTTP_PROXY``/``NO_PROXY`` are
honoured as urllib reads them. No requests/urllib3: the agent keeps its OIDC engine in memory
for as long as it runs, and those weigh several MB for a few small requests per hour.
"""

import base64
import binascii
import functools
import http.client
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from email.message import Message
from typing import Any, Protocol

from app.errors import UsageError

TIMEOUT = 15.0
USER_AGENT = "kubetray"


class TransportError(Exception):
    """The provider could not be reached (``reason``), or answered with an HTTP error
    (``status``, ``body``): app.oidc.explain says which in a person's words."""

    def __init__(
        self, text: str, reason: BaseException | None = None, status: int = 0, body: bytes = b""
    ) -> None:
        super().__init__(text)
        self.reason = reason
        self.status = status
        self.body = body


class _Auth(Protocol):
    def prepare(
        self, method: str, uri: str, headers: dict[str, str], body: str
    ) -> tuple[str, dict[str, str], str]: ...


class Response:
    """What the provider answered: status, headers and body."""

    def __init__(self, status_code: int, headers: Message, content: bytes, url: str) -> None:
        self.status_code = status_code
        self.headers = headers
        self.content = content
        self.url = url

    def json(self) -> Any:
        """The body as JSON (ValueError when it is not)."""
        return json.loads(self.content)

    def raise_for_status(self) -> None:
        if self.status_code >= 400:
            raise TransportError(
                f"HTTP {self.status_code} from {self.url}",
                status=self.status_code,
                body=self.content,
            )


class _KeepErrors(urllib.request.HTTPErrorProcessor):
    """Hand 4xx/5xx answers back as responses: an OAuth error is a JSON body to read."""

    def http_response(self, request: Any, response: Any) -> Any:
        return response

    https_response = http_response


@functools.lru_cache(maxsize=16)  # one system trust store in memory, not one per identity
def ssl_context(ca_files: tuple[str, ...] = (), ca_data: tuple[str, ...] = ()) -> ssl.SSLContext:
    """The system's trust with the given CAs added."""
    context = ssl.create_default_context()
    for path in ca_files:
        try:
            context.load_verify_locations(cafile=path)
        except (OSError, ssl.SSLError) as e:
            raise UsageError(f"cannot use the CA file {path}: {e}") from None
    for data in ca_data:
        try:
            context.load_verify_locations(cadata=base64.b64decode(data).decode())
        except (binascii.Error, UnicodeDecodeError, ssl.SSLError) as e:
            raise UsageError(f"--certificate-authority-data is not a base64 PEM CA: {e}") from None
    return context


def insecure_context() -> ssl.SSLContext:
    """TLS without verification (the user's --insecure-skip-tls-verify)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


class Session:
    """A requests-like session (what authlib's OAuth2Client calls) over urllib.

    Proxies come from the environment at each request, redirects are followed as urllib does.
    ``headers`` (--oidc-request-header) go on every request, over any the request set, as
    kubelogin's transport sets them.
    """

    def __init__(self, context: ssl.SSLContext, headers: tuple[tuple[str, str], ...] = ()) -> None:
        self._headers = headers
        # Only http and https: no file:, ftp: or data: from a provider's documents or redirects.
        self._opener = urllib.request.OpenerDirector()
        for handler in (
            urllib.request.ProxyHandler(),  # HTTPS_PROXY, NO_PROXY... from the environment
            urllib.request.HTTPHandler(),
            urllib.request.HTTPSHandler(context=context),
            urllib.request.HTTPRedirectHandler(),
            urllib.request.HTTPDefaultErrorHandler(),
            _KeepErrors(),
        ):
            self._opener.add_handler(handler)
        self._no_redirects = urllib.request.OpenerDirector()
        for handler in (
            urllib.request.ProxyHandler(),
            urllib.request.HTTPHandler(),
            urllib.request.HTTPSHandler(context=context),
            _KeepErrors(),
        ):
            self._no_redirects.add_handler(handler)

    def request(
        self,
        method: str,
        url: str,
        data: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        auth: _Auth | None = None,
        timeout: float = TIMEOUT,
    ) -> Response:
        """One request; ``data`` is sent form-encoded, ``auth`` prepares client authentication."""
        head = {"User-Agent": USER_AGENT, "Accept": "application/json", **(headers or {})}
        body = urllib.parse.urlencode(dict(data)) if data is not None else ""
        if data is not None:
            head.setdefault("Content-Type", "application/x-www-form-urlencoded")
        if auth is not None:
            url, head, body = auth.prepare(method, url, head, body)
        if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            raise TransportError(f"not an http(s) URL: {url}")
        req = urllib.request.Request(  # noqa: S310 - the scheme is checked above
            url,
            data=body.encode() if data is not None or body else None,
            headers=self._with_headers(head),
            method=method,
        )
        try:
            with self._opener.open(req, timeout=timeout) as answer:
                return Response(answer.status, answer.headers, answer.read(), url)
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as e:
            reason = getattr(e, "reason", e)
            raise TransportError(
                str(reason), reason if isinstance(reason, OSError) else e
            ) from None

    def status(self, url: str, timeout: float = TIMEOUT) -> int:
        """The HTTP status of a GET of ``url``, redirects not followed (the body is dropped)."""
        if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            raise TransportError(f"not an http(s) URL: {url}")
        req = urllib.request.Request(  # noqa: S310 - the scheme is checked above
            url, headers=self._with_headers({"User-Agent": USER_AGENT}), method="GET"
        )
        try:
            with self._no_redirects.open(req, timeout=timeout) as answer:
                return int(answer.status)
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise TransportError(str(getattr(e, "reason", e))) from None

    def _with_headers(self, head: dict[str, str]) -> dict[str, str]:
        # urllib keys headers as str.capitalize() spells them: one spelling, the last one wins
        out = {k.capitalize(): v for k, v in head.items()}
        out.update((k.capitalize(), v) for k, v in self._headers)
        return out

    def get(self, url: str, **kwargs: Any) -> Response:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> Response:
        return self.request("POST", url, **kwargs)

    def close(self) -> None:
        """Nothing to release: urllib opens a connection per request."""
