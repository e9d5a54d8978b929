"""Real sockets that fail the way providers do: nothing listening, a host that does not exist, a
TLS certificate nobody trusts, a server that never answers, an HTTP error with a description."""

import http.server
import json
import socket
import ssl
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.pki import CA

UNRESOLVABLE = "https://idp.kubetray-test.invalid"


def closed_port() -> str:
    """An issuer URL on a loopback port nobody listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@contextmanager
def silent_server() -> Iterator[str]:
    """A port that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield f"http://127.0.0.1:{s.getsockname()[1]}"


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps(self.server.doc).encode()  # type: ignore[attr-defined]
        self.send_response(self.server.status)  # type: ignore[attr-defined]
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def json_server(status: int, doc: dict[str, object], ca: CA | None = None) -> Iterator[str]:
    """An HTTP server answering every GET with ``status`` and ``doc``; HTTPS with a certificate
    from ``ca`` when given. ``{issuer}`` in the document's strings is its own URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    scheme = "http"
    if ca is not None:
        issued = ca.issue("localhost", server=True)
        with tempfile.TemporaryDirectory() as d:
            cert, key = Path(d) / "c.pem", Path(d) / "k.pem"
            cert.write_bytes(issued.cert_pem)
            key.write_bytes(issued.key_pem)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert, key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    url = f"{scheme}://127.0.0.1:{server.server_address[1]}"
    server.status = status  # type: ignore[attr-defined]
    server.doc = {  # type: ignore[attr-defined]
        k: v.replace("{issuer}", url) if isinstance(v, str) else v for k, v in doc.items()
    }
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()


DISCOVERY = {
    "issuer": "{issuer}",
    "authorization_endpoint": "{issuer}/auth",
    "token_endpoint": "{issuer}/token",
    "jwks_uri": "{issuer}/jwks",
    "response_types_supported": ["code"],
    "subject_types_supported": ["public"],
    "id_token_signing_alg_values_supported": ["RS256"],
}
REALM_MISSING = {"error": "invalid_request", "error_description": "Realm does not exist"}
