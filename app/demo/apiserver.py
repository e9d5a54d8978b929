"""The demo API server: HTTPS on 127.0.0.1 (its own CA), just enough of Kubernetes for
`kubectl get namespaces`, and only for a bearer token the check accepts."""

import datetime as dt
import ipaddress
import json
import os
import socket
import ssl
import tempfile
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

NAMESPACES = ["default", "kube-system", "kubetray-demo"]


def discovery(path: str, namespaces: list[str]) -> dict[str, Any] | None:
    """The API documents kubectl reads for `get namespaces`, or None for anything else."""
    if path == "/version":
        return {
            "major": "1",
            "minor": "33",
            "gitVersion": "v1.33.0-kubetray-demo",
            "platform": "linux/amd64",
        }
    if path == "/api":
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
        }
    if path == "/apis":
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": []}
    if path == "/api/v1":
        return {
            "kind": "APIResourceList",
            "groupVersion": "v1",
            "resources": [
                {
                    "name": "namespaces",
                    "singularName": "namespace",
                    "namespaced": False,
                    "kind": "Namespace",
                    "verbs": ["get", "list"],
                    "shortNames": ["ns"],
                }
            ],
        }
    if path == "/api/v1/namespaces":
        return {
            "kind": "NamespaceList",
            "apiVersion": "v1",
            "metadata": {"resourceVersion": "1"},
            "items": [
                {
                    "metadata": {
                        "name": n,
                        "uid": f"uid-{n}",
                        "resourceVersion": "1",
                        "creationTimestamp": "2026-01-01T00:00:00Z",
                    },
                    "status": {"phase": "Active"},
                }
                for n in namespaces
            ],
        }
    return None


def self_signed(host: str = "127.0.0.1") -> tuple[bytes, bytes]:
    """A certificate (PEM) for ``host`` and its key (PEM), valid for a day."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubetray demo API server")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


class DemoAPIServer:
    """``url`` and ``ca_pem`` for the kubeconfig; ``check(token)`` decides who gets in."""

    def __init__(
        self,
        check: Callable[[str], bool],
        port: int = 0,
        tls: tuple[bytes, bytes] | None = None,
        listening: socket.socket | None = None,
    ) -> None:
        """A new server on ``port`` (another when it is taken), or, after a restart in place,
        the one before it again: its certificate and key (PEM) and its ``listening`` socket."""
        from app.demo.provider import serve_on

        self.check = check
        self.ca_pem, self.key_pem = tls or self_signed()
        with tempfile.TemporaryDirectory() as d:
            cert_path, key_path = os.path.join(d, "tls.crt"), os.path.join(d, "tls.key")
            with open(cert_path, "wb") as f:
                f.write(self.ca_pem)
            with open(os.open(key_path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
                f.write(self.key_pem)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert_path, key_path)
        if listening is not None:
            server = serve_on(listening, _Handler)
        else:
            try:
                server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
            except OSError:
                server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        server.daemon_threads = True
        server.api = self  # type: ignore[attr-defined]
        self._server = server
        self.url = f"https://127.0.0.1:{server.server_address[1]}"

    def start(self) -> "DemoAPIServer":
        threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="demo-api",
            daemon=True,
        ).start()
        return self

    def pause(self) -> None:
        """Stop serving, the socket kept listening (callers wait in its backlog)."""
        self._server.shutdown()

    def listening_fd(self) -> int:
        """The listening socket's descriptor (TLS is per connection: the new process wraps
        it again with the same certificate)."""
        return self._server.socket.fileno()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def answer(handler: BaseHTTPRequestHandler, authorized: bool, namespaces: list[str]) -> None:
    """Send what an API server would: 401 without a good credential, else the document or 404."""
    if not authorized:
        doc = {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": "Unauthorized",
            "reason": "Unauthorized",
            "code": 401,
        }
        code = 401
    else:
        found = discovery(handler.path.split("?")[0], namespaces)
        code, doc = (200, found) if found else (404, {"kind": "Status", "code": 404})
    body = json.dumps(doc).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *_args: object) -> None:
        pass

    def do_GET(self) -> None:
        api: DemoAPIServer = self.server.api  # type: ignore[attr-defined]
        auth = self.headers.get("Authorization", "")
        answer(self, auth.startswith("Bearer ") and api.check(auth[7:]), NAMESPACES)
