"""A proxy between the agent and the real oidc-provider that fails the way networks and
providers do, on a word from the test (or the soak's schedule).

The provider runs with ``issuer`` = the proxy's URL (tests/oidc/provider.mjs), so everything the
agent learns from discovery points back here. Faults:

* ``down``: nothing listens (connection refused), until ``mode = "ok"`` listens again on the
  same port.
* ``5xx``: the token endpoint answers 503 without asking the provider.
* ``slow``: the token request reaches the provider at once (a refresh token rotates), its
  answer is held ``slow_seconds`` before it goes back.
* ``lost``: the provider answers, the proxy drops the connection: the answer never arrives.
* ``untrusted``: TLS with a certificate from a CA the agent does not trust.

Apart from the mode, ``slow_gets`` holds every GET (discovery, the keys) that many seconds
before it goes on (a provider slow to serve its documents).

``on_request(form)`` runs when a token request arrives, before it goes on; ``on_answer(form)``
right after the token answer left for the agent (the moments a test kills the agent).
``refreshes`` records each refresh request's monotonic time, ``forms`` every token request,
``refusals`` the monotonic time of each ``invalid_grant`` the provider answered.
"""

import contextlib
import http.client
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

from tests.pki import CA, server_context

MODES = ("ok", "down", "5xx", "slow", "lost", "untrusted")
TOKEN_PATH = "/token"


class FaultProxy:
    """``with FaultProxy(ca) as proxy:``; start the provider with ``issuer=proxy.url``, then set
    ``proxy.upstream`` to the provider's own URL. ``ca`` None: plain HTTP (no ``untrusted``)."""

    def __init__(self, ca: CA | None = None) -> None:
        self.ca = ca
        self._good = server_context(ca) if ca else None
        self._bad = server_context(CA("a CA nobody trusts")) if ca else None
        self.upstream = ""
        self._mode = "ok"
        self.slow_seconds = 20.0
        self.slow_gets = 0.0
        self.on_request: Callable[[dict[str, str]], None] | None = None
        self.on_answer: Callable[[dict[str, str]], None] | None = None
        self.forms: list[dict[str, str]] = []
        self.refreshes: list[float] = []
        self.refusals: list[float] = []
        """Monotonic times of the refresh requests that reached the proxy."""
        self.faulted: dict[str, int] = {}
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._stopping = False
        self._listen(0)
        assert self._listener is not None
        self.port = self._listener.getsockname()[1]
        self.url = f"{'https' if ca else 'http'}://127.0.0.1:{self.port}"

    # -- the fault, as a test sets it ---------------------------------------------------------

    @property
    def mode(self) -> str:
        return self._mode

    @mode.setter
    def mode(self, mode: str) -> None:
        assert mode in MODES, mode
        assert mode != "untrusted" or self.ca is not None, "untrusted needs TLS"
        with self._lock:
            before, self._mode = self._mode, mode
        if mode == "down" and before != "down":
            self._close_listener()
        elif mode != "down" and before == "down":
            self._listen(self.port)

    def refreshes_per_minute(self, since: float) -> float:
        """Refresh requests per minute that reached the proxy since the monotonic ``since``."""
        with self._lock:
            n = sum(1 for t in self.refreshes if t >= since)
        return n * 60.0 / max(time.monotonic() - since, 1e-6)

    # -- plumbing -----------------------------------------------------------------------------

    def _listen(self, port: int) -> None:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen(64)
        self._listener = s
        threading.Thread(target=self._accept, args=(s,), daemon=True).start()

    def _close_listener(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        conn: socket.socket = raw
        try:
            raw.settimeout(30)
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as providers answer
            if self.ca is not None:
                context = self._bad if self._mode == "untrusted" else self._good
                assert context is not None
                try:
                    conn = context.wrap_socket(raw, server_side=True)
                except (ssl.SSLError, OSError):
                    return  # the client refused our certificate: what "untrusted" is about
            request = _read_request(conn)
            if request is None:
                return
            self._answer(conn, *request)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                conn.close()

    def _count(self, what: str) -> None:
        with self._lock:
            self.faulted[what] = self.faulted.get(what, 0) + 1

    def _answer(
        self, conn: socket.socket, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> None:
        token = method == "POST" and path.split("?")[0] == TOKEN_PATH
        form = dict(urllib.parse.parse_qsl(body.decode("latin-1"))) if token else {}
        if token:
            with self._lock:
                self.forms.append(form)
                if form.get("grant_type") == "refresh_token":
                    self.refreshes.append(time.monotonic())
            if self.on_request is not None:
                self.on_request(form)
        mode = self._mode
        if method == "GET" and self.slow_gets:
            self._count("slow-get")
            time.sleep(self.slow_gets)
        if token and mode == "5xx":
            self._count("5xx")
            _write(conn, 503, [("Content-Type", "text/plain")], b"Service Unavailable")
            return
        status, answer_headers, answer = self._forward(method, path, headers, body)
        if token and status == 400 and b'"invalid_grant"' in answer:
            with self._lock:
                self.refusals.append(time.monotonic())
        if token and mode == "lost":
            self._count("lost")
            linger = b"\x01\x00\x00\x00\x00\x00\x00\x00"  # on, 0 s: close with a reset
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
            return  # the answer never leaves
        if token and mode == "slow":
            self._count("slow")
            time.sleep(self.slow_seconds)
        _write(conn, status, answer_headers, answer)
        if token and self.on_answer is not None:
            self.on_answer(form)

    def _forward(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        parts = urllib.parse.urlsplit(self.upstream)
        upstream = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)
        forwarded = {k: v for k, v in headers.items() if k not in ("connection", "keep-alive")}
        forwarded["x-forwarded-proto"] = "https" if self.ca else "http"
        forwarded["x-forwarded-host"] = headers.get("host", f"127.0.0.1:{self.port}")
        forwarded["connection"] = "close"
        try:
            upstream.request(method, path, body=body or None, headers=forwarded)
            response = upstream.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            upstream.close()

    def close(self) -> None:
        self._stopping = True
        self._close_listener()

    def __enter__(self) -> "FaultProxy":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_request(conn: socket.socket) -> tuple[str, str, dict[str, str], bytes] | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    length = int(headers.get("content-length") or 0)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        body += chunk
    return method, path, headers, body


HOP_BY_HOP = ("connection", "keep-alive", "transfer-encoding", "content-length")


def _write(conn: socket.socket, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
    lines = [f"HTTP/1.1 {status} {http.client.responses.get(status, '')}"]
    lines += [f"{k}: {v}" for k, v in headers if k.lower() not in HOP_BY_HOP]
    lines += [f"Content-Length: {len(body)}", "Connection: close", "", ""]
    conn.sendall("\r\n".join(lines).encode("latin-1") + body)


@contextlib.contextmanager
def provider_behind_proxy(tls: bool = True, **settings: Any) -> Iterator[tuple[Any, FaultProxy]]:
    """The real oidc-provider (tests/idp.run_idp with ``settings``) behind a FaultProxy; yields
    (idp, proxy). ``idp.issuer`` is the proxy's URL; the agent needs the proxy's CA
    (``proxy.ca``) when ``tls``."""
    from tests.idp import run_idp

    with (
        FaultProxy(CA("the provider's CA") if tls else None) as proxy,
        run_idp(issuer=proxy.url, **settings) as idp,
    ):
        proxy.upstream = idp.direct  # the provider's own address, which it announced
        yield idp, proxy
