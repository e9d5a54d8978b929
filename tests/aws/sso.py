"""A stand-in for IAM Identity Center's OIDC service and access portal, built from AWS's API
references (SSO OIDC: RegisterClient, StartDeviceAuthorization, CreateToken; portal:
GetRoleCredentials, ListAccounts, ListAccountRoles, Logout) and driven by botocore's own
``sso-oidc``/``sso`` clients, so requests and answers are in AWS's wire format (rest-json;
errors carry ``x-amzn-ErrorType``, which is how botocore picks the modelled exception).

One HTTP server answers both services (their paths do not overlap); point the clients at it
with ``[services]`` endpoint URLs or ``AWS_ENDPOINT_URL_SSO_OIDC``/``AWS_ENDPOINT_URL_SSO``.
The person's part (opening the verification URI and approving) is ``approve(user_code)`` or a
POST to ``/approve`` (what the page's button does). GetRoleCredentials asks moto to assume
``role/aws-reserved/sso.amazonaws.com/REGION/AWSReservedSSO_ROLE_<hash>``, so the keys it hands
out are ones moto knows, with the ARN shape real SSO sessions have.
"""

import json
import secrets
import ssl
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.aws.moto_sts import ACCOUNT, MotoSTS

OIDC_NS = "http://internal.amazon.com/coral/com.amazonaws.sso.oidc/"
PORTAL_NS = "http://internal.amazon.com/coral/com.amazonaws.switchboard.portal/"
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"


@dataclass
class Device:
    client_id: str
    device_code: str
    user_code: str
    start_url: str
    expires: float
    interval: float
    state: str = "pending"  # approved, denied
    last_poll: float = 0.0


@dataclass
class Grant:
    client_id: str
    scopes: list[str]
    refresh_token: str | None


@dataclass
class Directory:
    """Who the person is and what the portal assigns them."""

    user: str = "jane@example.com"
    accounts: dict[str, tuple[str, list[str]]] = field(
        default_factory=lambda: {ACCOUNT: ("prod", ["AdministratorAccess", "ReadOnly"])}
    )


class SsoStandIn:
    """``with SsoStandIn(moto) as sso:`` ``sso.url``, ``sso.approve(code)``, ``sso.calls``."""

    def __init__(
        self,
        sts: MotoSTS,
        region: str = "us-east-1",
        token_seconds: int = 3600,
        role_seconds: int = 3600,
        device_seconds: int = 600,
        interval: float = 1.0,
        rotate_refresh: bool = True,
        directory: Directory | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        """``tls``: serve https with that context's certificate (else plain http)."""
        self.sts = sts
        self.region = region
        self.token_seconds = token_seconds
        self.role_seconds = role_seconds
        self.device_seconds = device_seconds
        self.interval = interval
        self.rotate_refresh = rotate_refresh
        self.directory = directory or Directory()
        self.calls: Counter[str] = Counter()
        self.clients: dict[str, tuple[str, float, list[str]]] = {}
        self.devices: dict[str, Device] = {}
        self.access: dict[str, tuple[Grant, float]] = {}
        self.refresh: dict[str, Grant] = {}
        self.slow_down_next = 0
        """Answer this many device-code polls SlowDownException (a client polling too fast)."""
        self.auto_approve = False
        """Approve every device code as soon as it is issued (a person who is quick)."""
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> "SsoStandIn":
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # the person
    def approve(self, user_code: str, deny: bool = False) -> None:
        with self.lock:
            for d in self.devices.values():
                if d.user_code == user_code:
                    d.state = "denied" if deny else "approved"
                    return
        raise KeyError(user_code)

    def pending_codes(self) -> list[str]:
        with self.lock:
            return [d.user_code for d in self.devices.values() if d.state == "pending"]

    def end_access(self) -> None:
        """Access tokens stop working before their recorded end (aws-cli#7340); refresh
        tokens still work."""
        with self.lock:
            self.access.clear()

    def revoke_all(self) -> None:
        """The portal session ends (an admin, the session duration): every token is refused."""
        with self.lock:
            self.access.clear()
            self.refresh.clear()

    # the services
    def register_client(self, body: dict[str, Any]) -> tuple[int, dict[str, Any], str]:
        if not body.get("clientName") or body.get("clientType") != "public":
            return _oidc_error(400, "InvalidClientMetadataException", "invalid_client_metadata")
        client_id = "kt-" + secrets.token_hex(8)
        secret = secrets.token_urlsafe(48)
        now = int(time.time())
        with self.lock:
            self.clients[client_id] = (secret, now + 90 * 86400, list(body.get("scopes") or []))
        return (
            200,
            {
                "clientId": client_id,
                "clientSecret": secret,
                "clientIdIssuedAt": now,
                "clientSecretExpiresAt": now + 90 * 86400,
            },
            "",
        )

    def _client_ok(self, body: dict[str, Any]) -> bool:
        with self.lock:
            known = self.clients.get(str(body.get("clientId")))
        return bool(known and secrets.compare_digest(known[0], str(body.get("clientSecret"))))

    def start_device_authorization(self, body: dict[str, Any]) -> tuple[int, dict[str, Any], str]:
        if not self._client_ok(body):
            return _oidc_error(401, "InvalidClientException", "invalid_client")
        if not str(body.get("startUrl", "")).startswith("https://"):
            return _oidc_error(400, "InvalidRequestException", "invalid_request")
        code = "-".join(secrets.token_hex(2).upper() for _ in range(2))
        device = Device(
            client_id=body["clientId"],
            device_code=secrets.token_urlsafe(32),
            user_code=code,
            start_url=body["startUrl"],
            expires=time.time() + self.device_seconds,
            interval=self.interval,
            state="approved" if self.auto_approve else "pending",
        )
        with self.lock:
            self.devices[device.device_code] = device
        return (
            200,
            {
                "deviceCode": device.device_code,
                "userCode": code,
                "verificationUri": f"{self.url}/device",
                "verificationUriComplete": f"{self.url}/device?user_code={code}",
                "expiresIn": self.device_seconds,
                "interval": int(self.interval) or 1,
            },
            "",
        )

    def _issue(self, grant: Grant) -> dict[str, Any]:
        access = "aoa" + secrets.token_urlsafe(48)
        with self.lock:
            self.access[access] = (grant, time.time() + self.token_seconds)
        out = {"accessToken": access, "tokenType": "Bearer", "expiresIn": self.token_seconds}
        if grant.refresh_token:
            out["refreshToken"] = grant.refresh_token
        return out

    def create_token(self, body: dict[str, Any]) -> tuple[int, dict[str, Any], str]:
        if not self._client_ok(body):
            return _oidc_error(401, "InvalidClientException", "invalid_client")
        grant_type = body.get("grantType")
        with self.lock:
            scopes = self.clients[body["clientId"]][2]
        if grant_type == DEVICE_GRANT:
            with self.lock:
                device = self.devices.get(str(body.get("deviceCode")))
                if device is None or device.client_id != body["clientId"]:
                    return _oidc_error(400, "InvalidGrantException", "invalid_grant")
                now = time.time()
                too_fast = now - device.last_poll < device.interval * 0.5
                device.last_poll = now
                if now > device.expires:
                    return _oidc_error(400, "ExpiredTokenException", "expired_token")
                if device.state == "denied":
                    return _oidc_error(400, "AccessDeniedException", "access_denied")
                if self.slow_down_next > 0:
                    self.slow_down_next -= 1
                    return _oidc_error(400, "SlowDownException", "slow_down")
                if device.state == "pending":
                    if too_fast:
                        return _oidc_error(400, "SlowDownException", "slow_down")
                    return _oidc_error(
                        400,
                        "AuthorizationPendingException",
                        "authorization_pending",
                        "Authorization is still pending",
                    )
                del self.devices[device.device_code]
            refresh = "aor" + secrets.token_urlsafe(48) if scopes else None
            grant = Grant(body["clientId"], scopes, refresh)
            if refresh:
                with self.lock:
                    self.refresh[refresh] = grant
            return 200, self._issue(grant), ""
        if grant_type == "refresh_token":
            with self.lock:
                grant = self.refresh.get(str(body.get("refreshToken")))
                if grant is None or grant.client_id != body["clientId"]:
                    return _oidc_error(400, "InvalidGrantException", "invalid_grant")
                if self.rotate_refresh:
                    del self.refresh[grant.refresh_token or ""]
                    grant = Grant(grant.client_id, grant.scopes, "aor" + secrets.token_urlsafe(48))
                    self.refresh[grant.refresh_token or ""] = grant
            return 200, self._issue(grant), ""
        return _oidc_error(400, "UnsupportedGrantTypeException", "unsupported_grant_type")

    def _bearer(self, headers: Any) -> Grant | None:
        token = headers.get("x-amz-sso_bearer_token", "")
        with self.lock:
            found = self.access.get(token)
        if found is None or time.time() > found[1]:
            return None
        return found[0]

    def get_role_credentials(
        self, headers: Any, q: dict[str, str]
    ) -> tuple[int, dict[str, Any], str]:
        if self._bearer(headers) is None:
            return _portal_error(401, "UnauthorizedException", "Session token not found or invalid")
        account, role = q.get("account_id", ""), q.get("role_name", "")
        assigned = self.directory.accounts.get(account)
        if not assigned or role not in assigned[1]:
            return _portal_error(403, "ForbiddenException", "No access")
        arn = (
            f"arn:aws:iam::{account}:role/aws-reserved/sso.amazonaws.com/{self.region}/"
            f"AWSReservedSSO_{role}_0123456789abcdef"
        )
        creds = self.sts.assume(arn, self.directory.user, self.role_seconds)
        return (
            200,
            {
                "roleCredentials": {
                    "accessKeyId": creds["AccessKeyId"],
                    "secretAccessKey": creds["SecretAccessKey"],
                    "sessionToken": creds["SessionToken"],
                    "expiration": int(creds["Expiration"].timestamp() * 1000),
                }
            },
            "",
        )

    def list_accounts(self, headers: Any) -> tuple[int, dict[str, Any], str]:
        if self._bearer(headers) is None:
            return _portal_error(401, "UnauthorizedException", "Session token not found or invalid")
        return (
            200,
            {
                "accountList": [
                    {"accountId": a, "accountName": n, "emailAddress": f"{n}@example.com"}
                    for a, (n, _) in self.directory.accounts.items()
                ]
            },
            "",
        )

    def list_account_roles(
        self, headers: Any, q: dict[str, str]
    ) -> tuple[int, dict[str, Any], str]:
        if self._bearer(headers) is None:
            return _portal_error(401, "UnauthorizedException", "Session token not found or invalid")
        account = q.get("account_id", "")
        roles = self.directory.accounts.get(account, ("", []))[1]
        return 200, {"roleList": [{"roleName": r, "accountId": account} for r in roles]}, ""

    def logout(self, headers: Any) -> tuple[int, dict[str, Any], str]:
        token = headers.get("x-amz-sso_bearer_token", "")
        with self.lock:
            self.access.pop(token, None)
        return 200, {}, ""


def _oidc_error(
    status: int, kind: str, error: str, description: str | None = None
) -> tuple[int, dict[str, Any], str]:
    return status, {"error": error, "error_description": description or error}, f"{kind}:{OIDC_NS}"


def _portal_error(status: int, kind: str, message: str) -> tuple[int, dict[str, Any], str]:
    return status, {"message": message}, f"{kind}:{PORTAL_NS}"


def _handler(s: SsoStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args: object) -> None:
            pass

        def _send(self, answer: tuple[int, dict[str, Any], str]) -> None:
            status, doc, error_type = answer
            body = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("x-amzn-RequestId", secrets.token_hex(16))
            if error_type:
                self.send_header("x-amzn-ErrorType", error_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _page(self, text: str) -> None:
            body = text.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if parts.path == "/approve":  # the page's button (a form post)
                form = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
                s.approve(form.get("user_code", ""), deny=form.get("deny") == "1")
                self._page("<p>Request approved. You can close this window.</p>")
                return
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._send(_oidc_error(400, "InvalidRequestException", "invalid_request"))
                return
            routes = {
                "/client/register": ("RegisterClient", s.register_client),
                "/device_authorization": ("StartDeviceAuthorization", s.start_device_authorization),
                "/token": ("CreateToken", s.create_token),
            }
            if parts.path in routes:
                name, op = routes[parts.path]
                with s.lock:
                    s.calls[name] += 1
                self._send(op(body))
            elif parts.path == "/logout":
                with s.lock:
                    s.calls["Logout"] += 1
                self._send(s.logout(self.headers))
            else:
                self._send(_portal_error(404, "ResourceNotFoundException", "not found"))

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            q = {k: v[0] for k, v in parse_qs(parts.query).items()}
            if parts.path == "/device":
                code = q.get("user_code", "")
                self._page(
                    f"<form method=post action=/approve><p>Code {code}</p>"
                    f"<input type=hidden name=user_code value='{code}'>"
                    "<button>Allow</button></form>"
                )
                return
            routes = {
                "/federation/credentials": (
                    "GetRoleCredentials",
                    lambda: s.get_role_credentials(self.headers, q),
                ),
                "/assignment/accounts": ("ListAccounts", lambda: s.list_accounts(self.headers)),
                "/assignment/roles": (
                    "ListAccountRoles",
                    lambda: s.list_account_roles(self.headers, q),
                ),
            }
            if parts.path in routes:
                name, op = routes[parts.path]
                with s.lock:
                    s.calls[name] += 1
                self._send(op())
            else:
                self._send(_portal_error(404, "ResourceNotFoundException", "not found"))

    return Handler
