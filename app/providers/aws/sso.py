"""IAM Identity Center (AWS SSO): the device-code login, refresh, and the portal's lists.

Through botocore's own ``sso-oidc`` and ``sso`` clients (unsigned, as botocore makes them), so
the wire format is AWS's and endpoints, CAs and partitions resolve as for the AWS CLI. The
device flow is the CLI v2's (``SSOTokenFetcher``; standalone botocore has none): register a
public client, start the device authorization, show the code, poll every ``interval`` (+5 s on
``SlowDownException``) until ``CreateToken`` answers.

The tokens are kept in the AWS CLI's cache shape (``SsoTokens.to_cli``), which is what botocore
reads for role credentials, but never in the CLI's plaintext files: kubetray's secret store
holds them (``to_bytes``), and botocore sees them through ``BotocoreTokenView``, which hides the
refresh token so that only kubetray refreshes (a second refresher would race the rotation).
"""

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from app.oidc.errors import LoginError, ProviderUnavailable, RefreshRefused
from app.providers.aws.profiles import SsoSession
from app.providers.aws.trust import untrusted

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
CLIENT_NAME = "kubetray"
CLIENT_TYPE = "public"
DEFAULT_INTERVAL = 5.0
SLOW_DOWN_STEP = 5.0
REGISTRATION_WINDOW = timedelta(minutes=15)
"""A client registration this close to its end is replaced before a login (the CLI v2's)."""
FORMAT = 1
"""Version of what ``to_bytes`` writes into the secret store."""


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(text: str) -> datetime:
    when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return when if when.tzinfo else when.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Registration:
    """kubetray's client registration at one portal's OIDC service (a secret: clientSecret)."""

    client_id: str
    client_secret: str
    expires_at: datetime

    def usable(self, now: datetime) -> bool:
        return now < self.expires_at - REGISTRATION_WINDOW


@dataclass(frozen=True)
class SsoTokens:
    """One IAM Identity Center login: the access token the portal takes, the refresh token, and
    the client registration they belong to."""

    start_url: str
    region: str
    access_token: str
    expires_at: datetime
    issued_at: datetime
    refresh_token: str | None = None
    registration: Registration | None = None

    def __repr__(self) -> str:  # secrets stay out of any log line
        return f"SsoTokens({self.start_url}, expires {_iso(self.expires_at)})"

    @property
    def refreshable(self) -> bool:
        return bool(self.refresh_token and self.registration)

    def to_cli(self) -> dict[str, Any]:
        """The AWS CLI's ``~/.aws/sso/cache`` entry for this login (what botocore reads)."""
        out: dict[str, Any] = {
            "startUrl": self.start_url,
            "region": self.region,
            "accessToken": self.access_token,
            "expiresAt": _iso(self.expires_at),
        }
        if self.registration:
            out["clientId"] = self.registration.client_id
            out["clientSecret"] = self.registration.client_secret
            out["registrationExpiresAt"] = _iso(self.registration.expires_at)
        if self.refresh_token:
            out["refreshToken"] = self.refresh_token
        return out

    @classmethod
    def from_cli(cls, doc: dict[str, Any], issued_at: datetime) -> "SsoTokens":
        """From an AWS CLI cache entry (KeyError/ValueError if it is not one)."""
        registration = None
        if doc.get("clientId") and doc.get("clientSecret") and doc.get("registrationExpiresAt"):
            registration = Registration(
                str(doc["clientId"]),
                str(doc["clientSecret"]),
                _parse(str(doc["registrationExpiresAt"])),
            )
        return cls(
            start_url=str(doc["startUrl"]),
            region=str(doc["region"]),
            access_token=str(doc["accessToken"]),
            expires_at=_parse(str(doc["expiresAt"])),
            issued_at=issued_at,
            refresh_token=doc.get("refreshToken") or None,
            registration=registration,
        )

    def to_bytes(self) -> bytes:
        """For kubetray's secret store (the keyring): never a plaintext file."""
        doc = {"format": FORMAT, "issuedAt": _iso(self.issued_at), **self.to_cli()}
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> "SsoTokens":
        doc = json.loads(data)
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ValueError("not a kubetray AWS SSO token record of a known format")
        return cls.from_cli(doc, _parse(doc["issuedAt"]))

    def with_refresh(self, newer: "SsoTokens") -> "SsoTokens":
        return replace(newer, refresh_token=newer.refresh_token or self.refresh_token)


@dataclass(frozen=True)
class DeviceCode:
    user_code: str
    verification_uri: str
    verification_uri_complete: str | None
    expires_in: float
    interval: float


class DeviceUI(Protocol):
    """What the device login needs from the person (app.providers.base.LoginUI fits)."""

    def show(self, text: str) -> None: ...
    def show_device_code(self, user_code: str, uri: str) -> None: ...
    def open_browser(self, url: str) -> bool: ...

    @property
    def cancelled(self) -> threading.Event: ...


def error_code(e: Exception) -> str:
    response = getattr(e, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def said(e: Exception) -> str:
    """What the service said, for a person: its error and description, never a token."""
    response = getattr(e, "response", None) or {}
    err = response.get("Error", {})
    parts = [
        str(x)
        for x in (
            err.get("Code"),
            response.get("error"),
            response.get("error_description") or err.get("Message"),
        )
        if x
    ]
    return ": ".join(dict.fromkeys(parts)) or type(e).__name__


def _unreachable(e: Exception, what: str) -> LoginError:
    bad_certificate = untrusted(e, f"IAM Identity Center ({what})")
    if bad_certificate is not None:  # the person's to fix: no retry helps
        return bad_certificate
    return ProviderUnavailable(
        f"IAM Identity Center could not be reached for {what} ({type(e).__name__}: {e})",
        "check the network (and a proxy or AWS_CA_BUNDLE); kubetray tries again",
        unsure=True,
    )


class SsoClient:
    """The OIDC (login, refresh) and portal (roles) calls for one ``SsoSession``.

    ``clients(service, region)`` makes an unsigned botocore client (``session.Clients``)."""

    def __init__(
        self,
        sso: SsoSession,
        clients: Callable[[str, str], Any],
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[threading.Event, float], bool] = lambda ev, s: ev.wait(s),
    ) -> None:
        self.sso = sso
        self._clients = clients
        self._now = now
        self._wait = sleep

    def _oidc(self) -> Any:
        return self._clients("sso-oidc", self.sso.region)

    def _portal(self) -> Any:
        return self._clients("sso", self.sso.region)

    def register(self) -> Registration:
        """RegisterClient: a public client for the device grant and refresh."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            answer = self._oidc().register_client(
                clientName=CLIENT_NAME, clientType=CLIENT_TYPE, scopes=list(self.sso.scopes)
            )
        except ClientError as e:
            raise LoginError(
                f"IAM Identity Center refused to register kubetray ({said(e)})",
                f"check sso_region ({self.sso.region}) and sso_registration_scopes",
            ) from None
        except BotoCoreError as e:
            raise _unreachable(e, "the login") from None
        return Registration(
            answer["clientId"],
            answer["clientSecret"],
            datetime.fromtimestamp(int(answer["clientSecretExpiresAt"]), UTC),
        )

    def login(self, ui: DeviceUI, registration: Registration | None = None) -> SsoTokens:
        """The device-code login; ``registration`` is reused while it is good."""
        from botocore.exceptions import BotoCoreError, ClientError

        now = self._now()
        reg = registration if registration and registration.usable(now) else self.register()
        client = self._oidc()
        try:
            auth = client.start_device_authorization(
                clientId=reg.client_id, clientSecret=reg.client_secret, startUrl=self.sso.start_url
            )
        except ClientError as e:
            raise LoginError(
                f"IAM Identity Center refused the device login for {self.sso.start_url} "
                f"({said(e)})",
                "check sso_start_url in your AWS config",
            ) from None
        except BotoCoreError as e:
            raise _unreachable(e, "the login") from None
        code = DeviceCode(
            user_code=auth["userCode"],
            verification_uri=auth["verificationUri"],
            verification_uri_complete=auth.get("verificationUriComplete"),
            expires_in=float(auth.get("expiresIn") or 600),
            interval=float(auth.get("interval") or DEFAULT_INTERVAL),
        )
        uri = code.verification_uri_complete or code.verification_uri
        ui.show(
            f"To log in to AWS ({self.sso.start_url}), open {uri} and check that it shows the "
            f"code {code.user_code}"
        )
        ui.show_device_code(code.user_code, uri)
        ui.open_browser(uri)
        deadline = time.monotonic() + code.expires_in
        interval = code.interval
        while time.monotonic() < deadline:
            if self._wait(ui.cancelled, interval):
                raise LoginError("the login was cancelled")
            issued = self._now()
            try:
                answer = client.create_token(
                    grantType=DEVICE_GRANT,
                    deviceCode=auth["deviceCode"],
                    clientId=reg.client_id,
                    clientSecret=reg.client_secret,
                )
            except ClientError as e:
                code_name = error_code(e)
                if code_name == "AuthorizationPendingException":
                    continue
                if code_name == "SlowDownException":
                    interval += SLOW_DOWN_STEP
                    continue
                if code_name == "ExpiredTokenException":
                    raise LoginError(
                        "the AWS device code expired before the login was approved",
                        "log in again",
                    ) from None
                if code_name == "AccessDeniedException":
                    raise LoginError(
                        f"the AWS login was denied ({said(e)})", "log in again and approve it"
                    ) from None
                raise LoginError(f"the AWS login failed ({said(e)})") from None
            except BotoCoreError as e:
                raise _unreachable(e, "the login") from None
            return self._tokens(answer, issued, reg, None)
        raise LoginError("the AWS device login was not completed in time", "log in again")

    def refresh(self, tokens: SsoTokens) -> SsoTokens:
        """CreateToken with the refresh token (RefreshRefused: only a login helps)."""
        from botocore.exceptions import BotoCoreError, ClientError

        reg = tokens.registration
        if not tokens.refresh_token or reg is None:
            raise RefreshRefused(
                "this IAM Identity Center login cannot be refreshed (no refresh token)",
                "log in again; an sso-session with sso_registration_scopes gives refreshable "
                "logins",
            )
        if self._now() >= reg.expires_at:
            raise RefreshRefused(
                "kubetray's registration at IAM Identity Center expired", "log in again"
            )
        issued = self._now()
        try:
            answer = self._oidc().create_token(
                grantType="refresh_token",
                clientId=reg.client_id,
                clientSecret=reg.client_secret,
                refreshToken=tokens.refresh_token,
            )
        except ClientError as e:
            status = (getattr(e, "response", None) or {}).get("ResponseMetadata", {})
            http = int(status.get("HTTPStatusCode") or 0)
            if http >= 500 or error_code(e) in ("InternalServerException", "SlowDownException"):
                raise ProviderUnavailable(
                    f"IAM Identity Center could not refresh the login ({said(e)})",
                    "kubetray tries again",
                    unsure=http in (502, 504),
                ) from None
            raise RefreshRefused(
                f"IAM Identity Center refused to refresh the login ({said(e)})", "log in again"
            ) from None
        except BotoCoreError as e:
            raise _unreachable(e, "a refresh") from None
        return tokens.with_refresh(self._tokens(answer, issued, reg, tokens.refresh_token))

    def _tokens(
        self, answer: dict[str, Any], issued: datetime, reg: Registration, old: str | None
    ) -> SsoTokens:
        issued = issued.replace(microsecond=0)  # what the record keeps (the CLI's format)
        return SsoTokens(
            start_url=self.sso.start_url,
            region=self.sso.region,
            access_token=answer["accessToken"],
            expires_at=issued + timedelta(seconds=int(answer["expiresIn"])),
            issued_at=issued,
            refresh_token=answer.get("refreshToken") or old,
            registration=reg,
        )

    def roles(self, tokens: SsoTokens) -> Iterator[tuple[str, str, str]]:
        """(account id, account name, role name) the login may use (ListAccounts and
        ListAccountRoles, every page)."""
        portal = self._portal()
        for page in portal.get_paginator("list_accounts").paginate(accessToken=tokens.access_token):
            for account in page.get("accountList", []):
                pages = portal.get_paginator("list_account_roles").paginate(
                    accessToken=tokens.access_token, accountId=account["accountId"]
                )
                for roles in pages:
                    for role in roles.get("roleList", []):
                        yield account["accountId"], account.get("accountName", ""), role["roleName"]

    def logout(self, tokens: SsoTokens) -> None:
        """Logout at the portal (ends the access token there); failures are ignored."""
        from botocore.exceptions import BotoCoreError, ClientError

        with contextlib.suppress(BotoCoreError, ClientError):
            self._portal().logout(accessToken=tokens.access_token)


class BotocoreTokenView:
    """The SSO token cache botocore's SSO providers read (``key in``, ``[key]``, ``[key] =``):
    the current login's access token under the AWS CLI's key, without the refresh token and
    registration, so botocore never refreshes (kubetray does, ahead). Nothing is written."""

    def __init__(self, sso: SsoSession, current: Callable[[], SsoTokens | None]) -> None:
        self._key = sso.cache_key
        self._current = current

    def __contains__(self, key: object) -> bool:
        return key == self._key and self._current() is not None

    def __getitem__(self, key: str) -> dict[str, Any]:
        tokens = self._current() if key == self._key else None
        if tokens is None:
            raise KeyError(key)
        doc = tokens.to_cli()
        for hidden in ("refreshToken", "clientId", "clientSecret", "registrationExpiresAt"):
            doc.pop(hidden, None)
        return doc

    def __setitem__(self, key: str, value: dict[str, Any]) -> None:
        """botocore writes only after its own refresh, which the view prevents."""
