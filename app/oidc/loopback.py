"""The loopback redirect listener for the browser login (RFC 8252 §7.3).

Binds the first free address of a list (kubelogin's --listen-address; by default its
127.0.0.1:8000 then 127.0.0.1:18000, redirect URI ``http://localhost:8000``), or 127.0.0.1 on a
random port when the list is empty, or exactly what
``--oidc-redirect-url`` names (then that URL, byte for byte, is the redirect URI and only its
path is served). With a certificate and key (``--local-server-cert/-key``) it serves HTTPS. A
callback whose ``state`` is not ours gets an error page and is otherwise ignored: only the real
redirect ends the wait. The answer may come in the query (``response_mode=query``) or as a form
the browser posts (``response_mode=form_post``, which Microsoft Entra uses: the code never
lands in the browser's history).
"""

import html
import ssl
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qs, urlsplit

from app.oidc.errors import LoginError

POLL = 0.05
MAX_FORM = 64 * 1024
"""The largest form_post answer read (a code, a state, Entra's client_info and session)."""
_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>kubetray</title>
<style>body{{font:16px system-ui,sans-serif;margin:4em auto;max-width:32em;color:#222}}
h1{{font-size:1.3em}}</style></head><body><h1>{title}</h1><p>{text}</p></body></html>"""


class Callback:
    """One redirect's outcome."""

    def __init__(self) -> None:
        self.code: str | None = None
        self.error: str | None = None
        self.done = threading.Event()


class LoopbackListener:
    """Serve one redirect on the loopback interface."""

    def __init__(
        self,
        state: str,
        addresses: tuple[str, ...] = (),
        hostname: str | None = None,
        success_url: str | None = None,
        redirect_url: str | None = None,
        tls: tuple[str, str] | None = None,
        slash: bool = True,
    ) -> None:
        """``slash=False``: a random port's redirect URI has no trailing slash
        (``http://localhost:PORT``, as MSAL sends it and Entra registers it)."""
        self._state = state
        self._result = Callback()
        self._success_url = success_url
        self._path: str | None = None
        scheme = "https" if tls else "http"
        if redirect_url:
            url = urlsplit(redirect_url)
            if url.scheme not in ("http", "https") or not url.hostname:
                raise LoginError(
                    f"--oidc-redirect-url {redirect_url!r} is not an http(s) URL with a host"
                )
            if (url.scheme == "https") != bool(tls):
                raise LoginError(
                    f"--oidc-redirect-url {redirect_url!r} is {url.scheme}, but "
                    + ("--local-server-cert is given" if tls else "no --local-server-cert is")
                )
            bind = "127.0.0.1" if url.hostname == "localhost" else url.hostname
            addresses = (f"{bind}:{url.port or (443 if url.scheme == 'https' else 80)}",)
            self._path = url.path or "/"
        self._server, bound = self._bind(addresses or ("127.0.0.1:0",))
        if tls:
            self._wrap(tls)
        host, port = self._server.server_address[:2]
        # kubelogin's form for a named port (http://localhost:8000, no slash); a random port
        # (":0") keeps the "/" of RFC 8252 registrations (http://127.0.0.1/, any port).
        end = "/" if bound.endswith(":0") and slash else ""
        self.redirect_uri = redirect_url or f"{scheme}://{hostname or str(host)}:{port}{end}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": POLL}, daemon=True
        )
        self._thread.start()

    def _bind(self, addresses: tuple[str, ...]) -> tuple[HTTPServer, str]:
        """The server on the first address that is free, and that address."""
        errors = []
        for address in addresses:
            host, _, port = address.rpartition(":")
            try:
                return HTTPServer((host or "127.0.0.1", int(port)), self._handler()), address
            except (OSError, ValueError) as e:
                errors.append(f"{address}: {e}")
        raise LoginError(
            "could not listen for the login redirect on " + "; ".join(errors),
            "free one of those ports, or give another with --listen-address",
        )

    def _wrap(self, tls: tuple[str, str]) -> None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            context.load_cert_chain(*tls)
        except (OSError, ssl.SSLError) as e:
            self._server.server_close()
            raise LoginError(
                f"cannot use --local-server-cert {tls[0]} with --local-server-key {tls[1]}: {e}"
            ) from None
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: object) -> None:
                pass

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                if outer._path is not None and url.path != outer._path:
                    self._page(404, "Not found", "kubetray waits for the login elsewhere.")
                    return
                self._answer(parse_qs(url.query))

            def do_POST(self) -> None:
                url = urlsplit(self.path)
                if outer._path is not None and url.path != outer._path:
                    self._page(404, "Not found", "kubetray waits for the login elsewhere.")
                    return
                try:
                    length = int(self.headers.get("Content-Length") or 0)
                except ValueError:
                    length = -1
                kind = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
                if not 0 <= length <= MAX_FORM or kind != "application/x-www-form-urlencoded":
                    self._page(400, "Login not accepted", "This is not a login answer.")
                    return
                form = self.rfile.read(length).decode("utf-8", "replace")
                self._answer(parse_qs(form))

            def _answer(self, query: dict[str, list[str]]) -> None:
                state = (query.get("state") or [""])[0]
                if state != outer._state:
                    self._page(
                        400,
                        "Login not accepted",
                        "This page does not belong to the "
                        "login kubetray is waiting for. Start the login again.",
                    )
                    return
                result = outer._result
                if "error" in query:
                    result.error = (query.get("error_description") or query["error"])[0]
                    self._page(200, "Login failed", html.escape(result.error))
                elif "code" in query:
                    result.code = query["code"][0]
                    if outer._success_url:
                        self.send_response(302)
                        self.send_header("Location", outer._success_url)
                        self.end_headers()
                    else:
                        self._page(
                            200,
                            "Logged in",
                            "kubetray has your login. You can close this tab: "
                            "whatever was waiting for it (kubectl, the tray) carries on.",
                        )
                else:
                    self._page(400, "Login not accepted", "The redirect carries no code.")
                    return
                result.done.set()

            def _page(self, status: int, title: str, text: str) -> None:
                body = _PAGE.format(title=title, text=text).encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

        return Handler

    def wait(self, timeout: float, cancelled: threading.Event | None = None) -> str:
        """The authorization code, once the browser comes back."""
        deadline = threading.Event()
        timer = threading.Timer(timeout, deadline.set)
        timer.start()
        try:
            while not self._result.done.wait(POLL):
                if deadline.is_set():
                    raise LoginError(f"the browser login was not completed within {timeout:.0f} s")
                if cancelled is not None and cancelled.is_set():
                    raise LoginError("the login was cancelled")
        finally:
            timer.cancel()
        if self._result.error:
            raise LoginError(f"the provider refused the login: {self._result.error}")
        assert self._result.code is not None
        return self._result.code

    def close(self) -> None:
        """Stop serving, off the caller's path: shutdown() waits out the server's poll."""

        def stop() -> None:
            self._server.shutdown()
            self._server.server_close()

        threading.Thread(target=stop, name="loopback-close", daemon=True).start()
