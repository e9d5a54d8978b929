"""The demo OpenID provider: authlib's AuthorizationServer behind http.server, in memory."""

import html
import json
import os
import secrets
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from authlib.oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import ClientMixin, grants
from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload, OAuth2Request
from authlib.oauth2.rfc6750 import BearerTokenGenerator
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oidc.core import UserInfo
from authlib.oidc.core.grants import OpenIDCode, OpenIDToken
from joserfc.jwk import RSAKey

from app.demo.known import CLIENT_ID

USER: dict[str, Any] = {
    "sub": "demo",
    "email": "demo@kubetray.test",
    "name": "Demo User",
    "groups": ["demo", "viewers"],
}
SCOPES = ("openid", "email", "profile", "groups", "offline_access")
ID_TOKEN_TTL = 600
"""Ten minutes, so the demo shows refreshes happening."""

_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>kubetray demo provider</title>
<style>body{{font:16px system-ui,sans-serif;margin:4em auto;max-width:34em;color:#222}}
.demo{{background:#fff3cd;border:1px solid #e0c36a;padding:.6em 1em;border-radius:6px}}
button{{font-size:1em;padding:.6em 1.2em}}</style></head><body>
<p class="demo"><b>Demo identity provider.</b> It exists to try kubetray and signs anyone in as
<b>{email}</b>. Never point a real cluster at it.</p>
<h1>Sign in to the kubetray demo cluster</h1>
<form method="post" action="/authorize?{query}">
<button type="submit">Sign in as {email}</button></form>
</body></html>"""


class Client(ClientMixin):
    """The one public, native client: any loopback port, path "/"."""

    def get_client_id(self) -> str:
        return CLIENT_ID

    def get_default_redirect_uri(self) -> str:
        return "http://127.0.0.1/"

    def get_allowed_scope(self, scope: str) -> str:
        return " ".join(s for s in scope.split() if s in SCOPES)

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        parts = urlsplit(redirect_uri)
        return (
            parts.scheme == "http"
            and parts.hostname in ("127.0.0.1", "localhost")
            and parts.path in ("", "/")
        )

    def check_client_secret(self, client_secret: str) -> bool:
        return False

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method == "none"

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in ("authorization_code", "refresh_token", "password")


@dataclass
class Code:
    code: str
    redirect_uri: str
    scope: str
    nonce: str | None
    code_challenge: str | None
    code_challenge_method: str | None
    auth_time: int = field(default_factory=lambda: int(time.time()))

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope

    def get_nonce(self) -> str | None:
        return self.nonce

    def get_auth_time(self) -> int:
        return self.auth_time

    def get_acr(self) -> None:
        return None

    def get_amr(self) -> None:
        return None

    def is_expired(self) -> bool:
        return time.time() > self.auth_time + 300


@dataclass
class Refresh:
    token: str
    scope: str
    revoked: bool = False

    def check_client(self, client: Client) -> bool:
        return True

    def get_scope(self) -> str:
        return self.scope

    def get_expires_in(self) -> int:
        return 86400

    def is_revoked(self) -> bool:
        return self.revoked

    def is_expired(self) -> bool:
        return False


class _Request(OAuth2Request):
    """An http.server request as authlib sees it: query arguments and form fields."""

    def __init__(
        self,
        method: str,
        uri: str,
        headers: dict[str, str],
        args: dict[str, str],
        form: dict[str, str],
    ) -> None:
        super().__init__(method, uri, headers=headers)
        self._args, self._form = args, form
        self.payload = BasicOAuth2Payload({**args, **form})

    @property
    def args(self) -> dict[str, str]:
        return self._args

    @property
    def form(self) -> dict[str, str]:
        return self._form


class _Store:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.codes: dict[str, Code] = {}
        self.refresh: dict[str, Refresh] = {}


class _IdToken:
    """What the id_token extensions share: the key, the claims, the user's info."""

    issuer = ""
    key: RSAKey

    def resolve_client_private_key(self, client: Client) -> RSAKey:
        return self.key

    def get_client_algorithm(self, client: Client) -> str:
        return "RS256"

    def get_encode_header(self, client: Client) -> dict[str, str]:
        return {"alg": "RS256", "kid": str(self.key.kid)}

    def get_client_claims(self, client: Client) -> dict[str, Any]:
        return {"iss": self.issuer, "aud": [CLIENT_ID], "exp": int(time.time()) + ID_TOKEN_TTL}

    def generate_user_info(self, user: dict[str, Any], scope: str) -> UserInfo:
        info = UserInfo(sub=user["sub"])
        if "email" in scope.split():
            info.update(email=user["email"], email_verified=True)
        if "profile" in scope.split():
            info["name"] = user["name"]
        if "groups" in scope.split():
            info["groups"] = user["groups"]
        return info


class DemoProvider:
    """Start with ``start()``; ``issuer`` and ``public_jwks`` describe it."""

    def __init__(
        self,
        port: int = 0,
        key: dict[str, Any] | None = None,
        listening: socket.socket | None = None,
        refresh: dict[str, str] | None = None,
    ) -> None:
        """A new provider on ``port`` (another when it is taken), or, after a restart in
        place, the one before it again: its signing ``key`` (a private JWK), its ``listening``
        socket and the ``refresh`` tokens it issued (token: scope)."""
        self.key = (
            RSAKey.import_key(key)
            if key is not None
            else RSAKey.generate_key(
                2048, parameters={"kid": "kubetray-demo", "use": "sig", "alg": "RS256"}
            )
        )
        self.store = _Store()
        for token, scope in (refresh or {}).items():
            self.store.refresh[token] = Refresh(token, scope)
        self._http = serve_on(listening) if listening is not None else self._bind(port)
        self.issuer = f"http://127.0.0.1:{self._http.server_address[1]}"
        self.server = self._authorization_server()

    @staticmethod
    def _bind(port: int) -> ThreadingHTTPServer:
        try:
            return ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        except OSError:
            return ThreadingHTTPServer(("127.0.0.1", 0), _Handler)

    def listening_fd(self) -> int:
        return self._http.socket.fileno()

    def state(self) -> dict[str, Any]:
        """What a restart in place carries to the next process: the signing key and the
        refresh tokens still good (call once serving has stopped)."""
        with self.store.lock:
            refresh = {t: r.scope for t, r in self.store.refresh.items() if not r.revoked}
        return {"key": self.key.as_dict(private=True), "refresh": refresh}

    def pause(self) -> None:
        """Stop serving, the socket kept listening (callers wait in its backlog)."""
        self._http.shutdown()

    def _authorization_server(self) -> AuthorizationServer:
        provider, store = self, self.store

        class Server(AuthorizationServer):
            def query_client(self, client_id: str) -> Client | None:
                return Client() if client_id == CLIENT_ID else None

            def save_token(self, token: dict[str, Any], request: OAuth2Request) -> None:
                if token.get("refresh_token"):
                    with store.lock:
                        store.refresh[token["refresh_token"]] = Refresh(
                            token["refresh_token"], token.get("scope", "")
                        )

            def create_oauth2_request(self, request: OAuth2Request) -> OAuth2Request:
                return request

            def handle_response(
                self, status: int, body: Any, headers: list[tuple[str, str]]
            ) -> tuple[int, Any, list[tuple[str, str]]]:
                return status, body, headers

            def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
                pass

        class CodeGrant(grants.AuthorizationCodeGrant):
            TOKEN_ENDPOINT_AUTH_METHODS = ("none",)

            def save_authorization_code(self, code: str, request: OAuth2Request) -> Code:
                data = request.payload.data
                item = Code(
                    code,
                    data.get("redirect_uri", ""),
                    request.payload.scope or "",
                    data.get("nonce"),
                    data.get("code_challenge"),
                    data.get("code_challenge_method"),
                )
                with store.lock:
                    store.codes[code] = item
                return item

            def query_authorization_code(self, code: str, client: Client) -> Code | None:
                with store.lock:
                    item = store.codes.get(code)
                return item if item and not item.is_expired() else None

            def delete_authorization_code(self, authorization_code: Code) -> None:
                with store.lock:
                    store.codes.pop(authorization_code.code, None)

            def authenticate_user(self, authorization_code: Code) -> dict[str, Any]:
                return USER

        class RefreshGrant(grants.RefreshTokenGrant):
            TOKEN_ENDPOINT_AUTH_METHODS = ("none",)
            INCLUDE_NEW_REFRESH_TOKEN = True

            def authenticate_refresh_token(self, refresh_token: str) -> Refresh | None:
                with store.lock:
                    item = store.refresh.get(refresh_token)
                return item if item and not item.revoked else None

            def authenticate_user(self, refresh_token: Refresh) -> dict[str, Any]:
                return USER

            def revoke_old_credential(self, refresh_token: Refresh) -> None:
                refresh_token.revoked = True

        class PasswordGrant(grants.ResourceOwnerPasswordCredentialsGrant):
            """For a terminal with no browser: ANY username and password sign in (a demo)."""

            TOKEN_ENDPOINT_AUTH_METHODS = ("none",)

            def authenticate_user(self, username: str, password: str) -> dict[str, Any] | None:
                return USER if username and password else None

        class Challenge(CodeChallenge):
            def get_authorization_code_challenge(self, authorization_code: Code) -> str | None:
                return authorization_code.code_challenge

            def get_authorization_code_challenge_method(
                self, authorization_code: Code
            ) -> str | None:
                return authorization_code.code_challenge_method

        class Code_(_IdToken, OpenIDCode):
            def exists_nonce(self, nonce: str, request: OAuth2Request) -> bool:
                with store.lock:
                    return any(c.nonce == nonce for c in store.codes.values())

        class Refreshed(_IdToken, OpenIDToken):
            pass

        for ext in (Code_, Refreshed):
            ext.issuer = provider.issuer
            ext.key = provider.key
        server = Server(scopes_supported=list(SCOPES))
        server.register_token_generator(
            "default",
            BearerTokenGenerator(
                access_token_generator=lambda *a, **k: secrets.token_urlsafe(32),
                refresh_token_generator=lambda *a, **k: secrets.token_urlsafe(32),
                expires_generator=lambda *a, **k: ID_TOKEN_TTL,
            ),
        )
        server.register_grant(CodeGrant, [Challenge(required=True), Code_(require_nonce=True)])
        server.register_grant(RefreshGrant, [Refreshed()])
        server.register_grant(PasswordGrant, [Refreshed()])
        return server

    def discovery(self) -> dict[str, Any]:
        i = self.issuer
        return {
            "issuer": i,
            "authorization_endpoint": f"{i}/authorize",
            "token_endpoint": f"{i}/token",
            "jwks_uri": f"{i}/jwks",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token", "password"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "code_challenge_methods_supported": ["S256"],
            "scopes_supported": list(SCOPES),
            "token_endpoint_auth_methods_supported": ["none"],
            "claims_supported": ["sub", "email", "email_verified", "name", "groups"],
            "kubetray_demo_pid": os.getpid(),  # lets a second `kubetray demo` find this one
        }

    def public_jwks(self) -> dict[str, Any]:
        return {"keys": [self.key.as_dict(private=False)]}

    def start(self) -> "DemoProvider":
        self._http.provider = self  # type: ignore[attr-defined]
        threading.Thread(
            target=self._http.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="demo-idp",
            daemon=True,
        ).start()
        return self

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()


def serve_on(listening: socket.socket, handler: Any = None) -> ThreadingHTTPServer:
    """An HTTP server on a socket that already listens (handed over by a restart)."""
    host, port = listening.getsockname()[:2]
    server = ThreadingHTTPServer((host, port), handler or _Handler, bind_and_activate=False)
    server.socket.close()
    server.socket = listening
    server.server_name, server.server_port = str(host), int(port)  # as server_bind sets them
    return server


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *_args: object) -> None:
        pass

    @property
    def provider(self) -> DemoProvider:
        return self.server.provider  # type: ignore[attr-defined, no-any-return]

    def _request(self, args: dict[str, str], form: dict[str, str] | None = None) -> OAuth2Request:
        return _Request(
            self.command, self.provider.issuer + self.path, dict(self.headers), args, form or {}
        )

    def _send(
        self,
        status: int,
        body: Any,
        headers: list[tuple[str, str]] | None = None,
        content_type: str = "application/json",
    ) -> None:
        raw = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(status)
        for name, value in headers or []:
            self.send_header(name, value)
        if not any(n.lower() == "content-type" for n, _ in headers or []):
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(raw)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = dict(parse_qsl(url.query))
        if url.path == "/.well-known/openid-configuration":
            self._send(200, self.provider.discovery())
        elif url.path == "/jwks":
            self._send(200, self.provider.public_jwks())
        elif url.path == "/authorize":
            try:
                self.provider.server.get_consent_grant(self._request(query))
            except (
                Exception
            ) as e:  # authlib's OAuth2Error: show it, never redirect to an unchecked URI
                self._send(
                    400,
                    f"<p>Login request refused: {html.escape(str(e))}</p>",
                    content_type="text/html",
                )
                return
            page = _PAGE.format(email=html.escape(USER["email"]), query=html.escape(url.query))
            self._send(200, page, content_type="text/html; charset=utf-8")
        else:
            self._send(404, {"error": "not_found"})

    def do_POST(self) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        form = dict(parse_qsl(self.rfile.read(length).decode()))
        if url.path == "/authorize":  # the user clicked "Sign in"
            request = self._request(dict(parse_qsl(url.query)))
            try:
                grant = self.provider.server.get_consent_grant(request)
            except Exception as e:
                self._send(
                    400,
                    f"<p>Login request refused: {html.escape(str(e))}</p>",
                    content_type="text/html",
                )
                return
            status, body, headers = self.provider.server.create_authorization_response(
                request, grant_user=USER, grant=grant
            )
        elif url.path == "/token":
            status, body, headers = self.provider.server.create_token_response(
                self._request({}, form)
            )
        else:
            self._send(404, {"error": "not_found"})
            return
        self._send(status, body if body is not None else "", headers)
