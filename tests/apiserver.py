"""A stand-in for the Kubernetes API server: HTTPS, and only one token or one client cert.

Answers just enough discovery for ``kubectl get ns`` and the Python client's
``list_namespace``. Everything else about Kubernetes is out of scope: this checks credentials.
"""

import ssl
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from app.demo.apiserver import answer
from tests.pki import CA

NAMESPACES = ["default", "kube-system", "kubetray-proof"]


def id_tokens_of(jwks: dict[str, Any], issuer: str, audience: str) -> Callable[[str], bool]:
    """What an API server configured for OIDC accepts: a JWT the provider signed (its JWKS),
    for ``audience``, not expired (joserfc: a second implementation beside kubetray's)."""
    from joserfc import jwt
    from joserfc.jwk import KeySet

    keys = KeySet.import_key_set(jwks)

    def check(token: str) -> bool:
        try:
            claims = jwt.decode(token, keys).claims
        except Exception:
            return False
        aud = claims.get("aud")
        return bool(
            claims.get("iss") == issuer
            and audience in (aud if isinstance(aud, list) else [aud])
            and claims["exp"] > time.time()
        )

    return check


def google_access_tokens(tokeninfo: str) -> Callable[[str], bool]:
    """What a GKE API server accepts of a person (cloud.google.com/kubernetes-engine/docs/
    how-to/api-server-authentication): a Google OAuth access token whose tokeninfo names an
    email, granted the userinfo.email scope; the username is that email. ``tokeninfo``: the
    Google stand-in's endpoint (tests/oidc/google.mjs)."""
    import json
    import urllib.error
    import urllib.parse
    import urllib.request

    def check(token: str) -> bool:
        url = f"{tokeninfo}?{urllib.parse.urlencode({'access_token': token})}"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                info = json.load(r)
        except (urllib.error.URLError, ValueError):
            return False
        scopes = str(info.get("scope", "")).split()
        return bool(
            info.get("email")
            and "https://www.googleapis.com/auth/userinfo.email" in scopes
            and int(info.get("expires_in", 0)) > 0
        )

    return check


class _Server(ThreadingHTTPServer):
    # A real API server listens with the kernel's backlog. socketserver's 5, with TLS handshakes
    # done one at a time in the accept loop, drops the SYNs of 8 clients connecting at once
    # (doctor checks clusters in parallel) and each dropped one waits 1 s to resend.
    request_queue_size = 128


class APIServer:
    """Run with ``with APIServer(...) as api:``; ``api.url``, ``api.ca_pem``, ``api.seen``."""

    def __init__(
        self,
        ca: CA,
        token: str | None = None,
        client_cn: str | None = None,
        check_token: "Callable[[str], bool] | None" = None,
    ) -> None:
        self.check_token = check_token
        """Accept any bearer token this says yes to (an OIDC id_token verifier)."""
        self.reject_next = 0
        """Answer this many requests 401 whatever they carry (a revoked-then-renewed token)."""
        self.ca = ca
        self.token = token
        self.client_cn = client_cn
        self.seen: list[tuple[str, str]] = []
        """(path, outcome) per request: "token", "cert", or "401"."""
        self._lock = threading.Lock()
        issued = ca.issue("127.0.0.1", server=True)
        self._dir = tempfile.TemporaryDirectory()
        d = Path(self._dir.name)
        (d / "tls.crt").write_bytes(issued.cert_pem)
        (d / "tls.key").write_bytes(issued.key_pem)
        (d / "ca.crt").write_bytes(ca.cert_pem)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(d / "tls.crt", d / "tls.key")
        ctx.load_verify_locations(d / "ca.crt")
        ctx.verify_mode = ssl.CERT_OPTIONAL  # a token-only client sends no certificate
        server = _Server(("127.0.0.1", 0), _handler(self))
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
        server.daemon_threads = True
        self._server = server
        self.url = f"https://127.0.0.1:{server.server_address[1]}"

    @property
    def ca_pem(self) -> bytes:
        return self.ca.cert_pem

    def outcomes(self) -> list[str]:
        with self._lock:
            return [o for _, o in self.seen]

    def authenticate(self, headers: Any, peer_cert: dict[str, Any] | None) -> str:
        with self._lock:
            if self.reject_next > 0:
                self.reject_next -= 1
                return "401"
        auth = headers.get("Authorization", "")
        if self.token and auth == f"Bearer {self.token}":
            return "token"
        if self.check_token and auth.startswith("Bearer ") and self.check_token(auth[7:]):
            return "token"
        if self.client_cn and peer_cert:
            subject = dict(x[0] for x in peer_cert.get("subject", ()))
            if subject.get("commonName") == self.client_cn and not auth:
                return "cert"
        return "401"

    def __enter__(self) -> "APIServer":
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._dir.cleanup()


def _handler(api: APIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args: object) -> None:
            pass

        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            peer = self.connection.getpeercert()  # type: ignore[attr-defined]
            outcome = api.authenticate(self.headers, peer)
            with api._lock:
                api.seen.append((path, outcome))
            answer(self, outcome != "401", NAMESPACES)

    return Handler
