"""The OIDC engine's HTTP (app.oidc.http, urllib): TLS with extra CAs, proxies, only http(s).

Real sockets: a TLS provider with a certificate from a private CA, and a forward proxy.
"""

import base64
import json
import ssl
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from app.oidc.client import OIDCClient
from app.oidc.loopback import LoginError
from app.oidc.settings import OIDCSettings
from tests.pki import CA


def _discovery(issuer: str) -> bytes:
    return json.dumps(
        {
            "issuer": issuer,
            "authorization_endpoint": issuer + "/auth",
            "token_endpoint": issuer + "/token",
            "jwks_uri": issuer + "/jwks",
        }
    ).encode()


class _Handler(BaseHTTPRequestHandler):
    seen: list[str]

    def do_GET(self) -> None:
        self.seen.append(self.path)
        # As a provider the path is relative; as a proxy it is the whole URL.
        issuer = self.path.split("/.well-known")[0] if "://" in self.path else self.server.issuer  # type: ignore[attr-defined]
        body = _discovery(issuer)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _serve(context: ssl.SSLContext | None = None) -> tuple[ThreadingHTTPServer, list[str]]:
    seen: list[str] = []
    handler = type("H", (_Handler,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    scheme = "https" if context else "http"
    server.issuer = f"{scheme}://localhost:{server.server_address[1]}"  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


@pytest.fixture
def tls_provider(tmp_path: Path) -> Iterator[tuple[str, CA]]:
    ca = CA("kubetray transport CA")
    issued = ca.issue("localhost", server=True)
    (tmp_path / "tls.crt").write_bytes(issued.cert_pem)
    (tmp_path / "tls.key").write_bytes(issued.key_pem)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    server, _ = _serve(context)
    yield server.issuer, ca  # type: ignore[attr-defined]
    server.shutdown()
    server.server_close()


def _client(issuer: str, **settings: object) -> OIDCClient:
    return OIDCClient(
        OIDCSettings(issuer=issuer, client_id="kubectl", **settings),  # type: ignore[arg-type]
        lambda: datetime.now(UTC),
    )


def test_tls_provider_with_an_extra_ca_and_not_without(tls_provider: tuple[str, CA]) -> None:
    issuer, ca = tls_provider
    data = base64.b64encode(ca.cert_pem).decode()
    assert _client(issuer, ca_data=(data,)).metadata().issuer == issuer
    with pytest.raises(LoginError, match=r"the provider.s CA is not trusted"):
        _client(issuer).metadata()  # the system trust alone does not know this CA
    assert _client(issuer, insecure=True).metadata().issuer == issuer


def test_proxy_from_the_environment_and_no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    proxy, seen = _serve()
    try:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.server_address[1]}")
        monkeypatch.setenv("NO_PROXY", "bypassed.invalid")
        issuer = "http://provider.invalid"  # resolvable only through the proxy
        assert _client(issuer).metadata().token_endpoint == issuer + "/token"
        assert seen == [issuer + "/.well-known/openid-configuration"]
        with pytest.raises(LoginError, match=r"cannot find the provider.s host bypassed\.invalid"):
            _client("http://bypassed.invalid").metadata()
        assert len(seen) == 1
    finally:
        proxy.shutdown()
        proxy.server_close()


def test_only_http_urls_are_fetched(tmp_path: Path) -> None:
    (tmp_path / ".well-known").mkdir()
    (tmp_path / ".well-known" / "openid-configuration").write_bytes(_discovery("file://x"))
    with pytest.raises(LoginError, match="not an http"):
        _client(f"file://{tmp_path}").metadata()
