"""Tokens from Microsoft Entra ID through Microsoft's MSAL for Python.

Imported only when an Entra identity needs tokens: msal (with requests, which it always
imports) costs ≈100 ms and ≈20 MB, which an agent that serves no Entra identity never pays.

* One PublicClientApplication per identity (authority host + tenant + client, for one server
  application), with its own SerializableTokenCache that travels with the tokens into the
  secret store (``TokenSet.state``, under CACHE). MSAL speaks HTTP through kubetray's own
  (app.providers.entra.http: the system's trust plus extra CAs, proxies from the environment).
* A person's login is kubetray's: the browser (authorization code + PKCE, answered with
  ``response_mode=form_post`` on kubetray's loopback listener; through the OS broker on Windows
  and macOS) or a device code with Entra's own ``message``. Renewal is MSAL's silent refresh.
* Machine modes need nobody: a service principal's secret or certificate, a workload
  identity's federated token (read anew each time: it rotates), ROPC, the managed identity.
* MSAL pitfalls handled here: it caches identical HTTP 400 answers for 60 s (kubetray owns
  that cache, ``http_cache``, and empties it before a person's login); it keeps a refresh
  token Entra refused (kubetray removes the account itself); a refusal that needs the person
  (``interaction_required``, a claims challenge) ends renewal at once, and the next login
  carries the challenge (``claims=``), once: never a loop of refreshes.
"""

import base64
import json
import secrets
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msal

from app.providers.base import Check, LoginError, LoginUI, RefreshRefused, Revocation, TokenSet
from app.providers.entra import errors, os_broker
from app.providers.entra import options as o
from app.providers.entra.http import MsalHttp
from app.providers.entra.settings import EntraSettings

BROWSER = "browser"
DEVICE = "device"
WORKLOAD_AUDIENCE = "api://AzureADTokenExchange"
"""The audience of a token Entra takes as a workload identity's federated credential."""
CLOCK_SKEW = 300.0
"""Seconds of clock difference Entra tolerates in what it is sent (client assertions)."""
MANAGED_IDENTITY_ENDPOINT = (
    "this machine's managed identity endpoint (--login msi: an Azure VM, App Service or Arc server)"
)
"""What --login msi talks to, in errors: MSAL picks the endpoint (IMDS, or one the platform's
variables name); elsewhere something else may answer there (a proxy), or nothing."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


BROKER_HELD = "held-by-the-os-broker"
"""TokenSet.refresh_token of a login through the OS broker, which holds the real one (UNRUN)."""
CACHE = "msal_cache"
"""TokenSet.state: MSAL's SerializableTokenCache (JSON text) holding a person's refresh token:
one cache per identity, so two identities (or two agents) never write one keyring item."""
ACCOUNT = "home_account_id"
"""TokenSet.state: MSAL's account (``<oid>.<tid>``) that logged in."""


def _refresh_token(cache_text: str, home: str | None) -> str | None:
    """The account's refresh token in MSAL's cache (also TokenSet.refresh_token, which the
    broker reads: renewable or not, lost answers)."""
    try:
        section = json.loads(cache_text).get("RefreshToken") or {}
    except (ValueError, AttributeError):
        return None
    for item in section.values():
        if isinstance(item, dict) and item.get("home_account_id") == home and item.get("secret"):
            return str(item["secret"])
    return None


def _home_account(result: dict[str, Any]) -> str | None:
    """MSAL's account id (``<uid>.<utid>``) from Entra's ``client_info``."""
    info = result.get("client_info")
    if not isinstance(info, str):
        return None
    try:
        doc = json.loads(base64.urlsafe_b64decode(info + "=" * (-len(info) % 4)))
        return f"{doc['uid']}.{doc['utid']}"
    except (ValueError, KeyError, TypeError):
        return None


class EntraClient:
    """Entra logins and tokens for one identity's settings."""

    def __init__(self, settings: EntraSettings, clock: Callable[[], datetime] = _utcnow) -> None:
        self.settings = settings
        self._clock = clock
        self._http = MsalHttp(settings.ca_files)
        self._http_cache: dict[str, Any] = {}
        """MSAL's throttling cache (its 60 s memory of HTTP 400 answers, 24 h of discovery)."""
        self._lock = threading.Lock()
        self._app: msal.PublicClientApplication | None = None
        self._cache = msal.SerializableTokenCache()
        self._cache_text: str | None = None
        self._broker = os_broker.enabled(settings.broker)
        self.claims: str | None = None
        """A claims challenge Entra sent with its last refusal: the next login carries it."""

    # --- MSAL applications --------------------------------------------------------------

    def _common(self) -> dict[str, Any]:
        return {
            "authority": self.settings.authority,
            "http_client": self._http,
            "http_cache": self._http_cache,
            # Microsoft's hosts: MSAL's instance discovery knows their aliases. Anything else
            # (Azure Stack, a test stand-in) has no discovery endpoint to ask.
            "instance_discovery": None if self.settings.instance_discovery else False,
        }

    @contextmanager
    def _talking(self, where: str | None = None) -> Iterator[None]:
        """Failures while talking to Entra (or ``where``) as kubetray's typed errors."""
        try:
            yield
        except LoginError:
            raise
        except Exception as e:  # MSAL raises ValueError, RuntimeError, ours
            raise errors.from_exception(e, where or self.settings.authority) from None

    def _new_app(self, cache: Any) -> msal.PublicClientApplication:
        extra = os_broker.application_options() if self._broker else {}
        with self._talking():  # MSAL reads the tenant's discovery document here (once: cached)
            return msal.PublicClientApplication(
                self.settings.client_id, token_cache=cache, **self._common(), **extra
            )

    def _public(self) -> msal.PublicClientApplication:
        if self._app is None:
            self._app = self._new_app(self._cache)
        return self._app

    def _load(self, tokens: TokenSet | None) -> None:
        """Make MSAL's cache hold what ``tokens`` carry (after a restart, a switch)."""
        text = tokens.state.get(CACHE) if tokens else None
        if text != self._cache_text:
            self._cache = msal.SerializableTokenCache()
            if text:
                self._cache.deserialize(text)
            self._cache_text = text
            if self._app is not None:
                self._app.token_cache = self._cache

    def _snapshot(self) -> str:
        self._cache_text = self._cache.serialize()
        return self._cache_text

    def _account(self, home_account_id: str | None) -> dict[str, Any] | None:
        app = self._public()
        for account in app.get_accounts():
            if account.get("home_account_id") == home_account_id:
                return dict(account)
        return None

    def _forget_account(self, home_account_id: str | None) -> None:
        """Remove the account and its refresh token from MSAL's cache (MSAL keeps a refresh
        token Entra refused)."""
        account = self._account(home_account_id) if self._app else None
        if account is not None:
            self._public().remove_account(account)
            self._snapshot()

    # --- a person's login -------------------------------------------------------------

    def login(self, ui: LoginUI, held: TokenSet | None = None, how: str | None = None) -> TokenSet:
        """A person's login: ``how`` is ``browser`` or ``device`` (default: the browser for
        interactive, a device code for devicecode; the device code where no browser can be
        opened). Carries the claims challenge of the last refusal, if any. ROPC and machine
        modes need nobody: their token."""
        s = self.settings
        self._http_cache.clear()  # no remembered refusal answers a person who acts
        if s.machine:
            return self.fetch()
        if how is None:
            how = BROWSER if s.mode == o.INTERACTIVE else DEVICE
            if how == BROWSER and not ui.browser_available and not self._broker:
                ui.show("No browser can be opened here: signing in with a device code.")
                how = DEVICE
        claims, self.claims = self.claims, None
        # A login starts clean (one identity, one account) in a cache of its own, and waits
        # for the person without the lock: a renewal meanwhile carries on with what is held.
        cache = msal.SerializableTokenCache()
        app = self._new_app(cache)
        with self._talking():
            if how == BROWSER and self._broker:
                result = self._broker_login(app, ui, claims)
            elif how == BROWSER:
                result = self._browser_login(app, ui, claims)
            else:
                result = self._device_login(app, ui, claims)
        if "access_token" not in result:
            error = errors.from_result(result, "login")
            if isinstance(error, errors.InteractionRequired):
                error = LoginError(error.message, None)  # a login did not satisfy it
            raise error
        with self._lock:
            self._cache, self._app, self._cache_text = cache, app, None
            return self._person_tokens(result, _home_account(result))

    def _browser_login(
        self, app: msal.PublicClientApplication, ui: LoginUI, claims: str | None
    ) -> dict[str, Any]:
        from app.oidc.loopback import LoopbackListener

        s = self.settings
        state = secrets.token_urlsafe(24)
        listener = LoopbackListener(
            state,
            addresses=() if s.redirect_url else ("127.0.0.1:0",),
            hostname="localhost",
            redirect_url=s.redirect_url,
            slash=False,
        )
        try:
            flow = app.initiate_auth_code_flow(
                [s.scope],
                redirect_uri=listener.redirect_uri,
                state=state,
                prompt=ui.auth_params.get("prompt"),
                login_hint=s.login_hint,
                claims_challenge=claims,
                response_mode="form_post",
            )
            url = flow["auth_uri"]
            if s.skip_open_browser or not ui.browser_available:
                ui.show(f"Open this URL in a browser on this machine and log in: {url}")
            elif ui.open_browser(url):
                ui.show(f"Waiting for the login in your browser. If it did not open, visit: {url}")
            # else the browser failed at once: the person was told why, with the URL (LoginUI)
            code = listener.wait(s.login_timeout, ui.cancelled)
        finally:
            listener.close()
        return dict(
            app.acquire_token_by_auth_code_flow(flow, {"code": code, "state": state}, [s.scope])
        )

    def _broker_login(
        self, app: msal.PublicClientApplication, ui: LoginUI, claims: str | None
    ) -> dict[str, Any]:
        """UNRUN (Windows, macOS): the OS broker shows its own sign-in window."""
        s = self.settings
        ui.show("Waiting for the sign-in window of your system's account broker.")
        return dict(
            app.acquire_token_interactive(
                [s.scope],
                prompt=ui.auth_params.get("prompt"),
                login_hint=s.login_hint,
                claims_challenge=claims,
                timeout=int(s.login_timeout),
                parent_window_handle=os_broker.window_handle(app),
            )
        )

    def _device_login(
        self, app: msal.PublicClientApplication, ui: LoginUI, claims: str | None
    ) -> dict[str, Any]:
        s = self.settings
        flow = app.initiate_device_flow([s.scope], claims_challenge=claims)
        if "user_code" not in flow:
            raise errors.from_result(flow, "device login")
        uri = str(flow.get("verification_uri") or "")
        ui.show(str(flow.get("message") or f"To sign in, open {uri} and enter {flow['user_code']}"))
        ui.show_device_code(str(flow["user_code"]), uri)
        if not s.skip_open_browser and uri and ui.browser_available:
            ui.open_browser(uri)
        deadline = min(
            float(flow.get("expires_at") or 0) or time.time() + 900, time.time() + s.login_timeout
        )

        def stop(_flow: dict[str, Any]) -> bool:
            return ui.cancelled.is_set() or time.time() > deadline

        result = dict(app.acquire_token_by_device_flow(flow, exit_condition=stop))
        if "access_token" not in result and result.get("error") in (
            "authorization_pending",
            "slow_down",
        ):
            if ui.cancelled.is_set():
                raise LoginError("the login was cancelled")
            raise LoginError("the device login was not completed in time")
        return result

    def _person_tokens(self, result: dict[str, Any], home: str | None) -> TokenSet:
        claims = result.get("id_token_claims") or {}
        account = self._account(home) or {}
        now = self._clock()
        cache = self._snapshot()
        home = home or account.get("home_account_id")
        who = claims.get("preferred_username") or account.get("username") or claims.get("oid")
        return TokenSet(
            expires_at=now + timedelta(seconds=int(result.get("expires_in") or 3600)),
            issued_at=now,
            access_token=str(result["access_token"]),
            # The OS broker keeps its own tokens (none in MSAL's cache): renewal goes through it.
            refresh_token=_refresh_token(cache, home) or (BROKER_HELD if self._broker else None),
            claims={
                "preferred_username": str(who or ""),
                "name": str(claims.get("name") or ""),
                "tid": str(claims.get("tid") or account.get("realm") or self.settings.tenant_id),
                "oid": str(claims.get("oid") or ""),
            },
            state={CACHE: cache, ACCOUNT: home},
        )

    # --- renewal ------------------------------------------------------------------

    def renew(self, tokens: TokenSet) -> TokenSet:
        """Fresh tokens without a person: a person's refresh token (which Entra rotates), or
        a machine identity's next token. Raises errors.InteractionRequired when only a login
        helps (its ``claims`` are then remembered for that login), RefreshRefused when the
        refresh token is refused, ProviderUnavailable when Entra did not answer."""
        s = self.settings
        if s.machine and s.mode != o.ROPC:
            return self.fetch()
        home = tokens.state.get(ACCOUNT)
        with self._lock:
            if not tokens.refresh_token:  # the broker dropped one Entra refused
                if s.mode == o.ROPC:
                    return self._ropc()
                raise RefreshRefused("there is no refresh token for this login", "log in again")
            self._load(tokens)
            app = self._public()
            account = self._account(home)
            if account is None:
                raise RefreshRefused("there is no refresh token for this login", "log in again")
            with self._talking():
                result = app.acquire_token_silent_with_error([s.scope], account, force_refresh=True)
            if result and "access_token" in result:
                return self._person_tokens(dict(result), home)
            error = (
                errors.from_result(dict(result), "refresh")
                if result
                else RefreshRefused("there is no refresh token for this login", "log in again")
            )
            if isinstance(error, RefreshRefused):
                self._forget_account(home)
                if isinstance(error, errors.InteractionRequired):
                    self.claims = error.claims
                if s.mode == o.ROPC and not isinstance(error, errors.InteractionRequired):
                    return self._ropc()
            raise error

    def account_choice(self) -> dict[str, str]:
        """Entra's account picker on the next browser login."""
        return {"prompt": "select_account"}

    # --- machine identities -------------------------------------------------------

    def fetch(self) -> TokenSet:
        """A machine identity's token, asked for anew (MSAL's own caching bypassed: kubetray
        decides when to renew)."""
        s = self.settings
        if s.mode == o.ROPC:
            with self._lock:
                return self._ropc()
        if s.mode == o.MSI:
            return self._managed_identity()
        if s.mode in (o.AZURECLI, o.AZD):
            from app.providers.entra import tools

            return tools.token(s, self._clock)
        credential: Any
        if s.mode == o.WORKLOADIDENTITY:
            credential = {"client_assertion": self._federated_token}
        elif s.client_certificate:
            credential = _certificate(s.client_certificate, s.client_certificate_password)
        else:
            credential = s.client_secret
        with self._talking():
            app = msal.ConfidentialClientApplication(
                s.client_id,
                client_credential=credential,
                token_cache=msal.TokenCache(),
                **self._common(),
            )
            result = app.acquire_token_for_client([s.scope])
        if "access_token" not in result:
            raise errors.from_result(result, "token request", machine=True)
        return self._app_tokens(result, str(s.client_id))

    def _app_tokens(self, result: dict[str, Any], who: str) -> TokenSet:
        now = self._clock()
        return TokenSet(
            expires_at=now + timedelta(seconds=int(result.get("expires_in") or 3600)),
            issued_at=now,
            access_token=str(result["access_token"]),
            claims={"client_id": who, "tid": str(self.settings.tenant_id or "")},
        )

    def _federated_token(self) -> str:
        """The workload identity's federated token, read at every use (it is rotated)."""
        s = self.settings
        if s.github_token_request:
            return self._github_token(*s.github_token_request)
        path = str(s.federated_token_file)
        try:
            token = Path(path).read_text(encoding="utf-8").strip()
        except OSError as e:
            raise errors.CredentialRefused(
                f"cannot read the federated token file {path}: {e.strerror or e}",
                "check --federated-token-file (or AZURE_FEDERATED_TOKEN_FILE)",
            ) from None
        if not token:
            raise errors.CredentialRefused(f"the federated token file {path} is empty", None)
        return token

    def _github_token(self, url: str, bearer: str) -> str:
        """GitHub Actions' OIDC token for Entra (what Azure kubelogin asks for in a job)."""
        from urllib.parse import quote

        with self._talking():
            answer = self._http.get(
                f"{url}&audience={quote(WORKLOAD_AUDIENCE)}",
                headers={"Authorization": f"bearer {bearer}", "Accept": "application/json"},
            )
        try:
            value = json.loads(answer.text).get("value") if answer.status_code == 200 else None
        except ValueError:
            value = None
        if not value:
            raise errors.CredentialRefused(
                f"GitHub Actions gave no ID token (HTTP {answer.status_code})",
                "give the job `permissions: id-token: write`",
            )
        return str(value)

    def _ropc(self) -> TokenSet:
        """The resource owner password grant (deprecated by Microsoft, fails under MFA; what
        --login ropc asks for). Caller holds the lock."""
        s = self.settings
        self._load(None)
        app = self._public()
        with self._talking(), warnings.catch_warnings():
            # MSAL warns that public clients should not use ROPC: the kubeconfig asked for it.
            warnings.simplefilter("ignore", DeprecationWarning)
            result = app.acquire_token_by_username_password(s.username, s.password, [s.scope])
        if "access_token" not in result:
            error = errors.from_result(result, "password login", machine=True)
            if isinstance(error, errors.CredentialRefused) and result.get("suberror"):
                error = errors.CredentialRefused(
                    error.message,
                    "the password login cannot do multi-factor authentication: use --login "
                    "devicecode or interactive",
                )
            raise error
        return self._person_tokens(dict(result), _home_account(result))

    def _managed_identity(self) -> TokenSet:
        """The managed identity of the Azure machine kubetray runs on (IMDS, App Service,
        Arc...): MSAL finds the endpoint. A user-assigned identity by client or resource id."""
        s = self.settings
        if s.client_id:
            identity: Any = msal.UserAssignedManagedIdentity(client_id=s.client_id)
        elif s.identity_resource_id:
            identity = msal.UserAssignedManagedIdentity(resource_id=s.identity_resource_id)
        else:
            identity = msal.SystemAssignedManagedIdentity()
        with self._talking(MANAGED_IDENTITY_ENDPOINT):
            client = msal.ManagedIdentityClient(
                identity, http_client=self._http, token_cache=msal.TokenCache()
            )
            result = client.acquire_token_for_client(resource=s.server_id.rstrip("/"))
        if "access_token" not in result:
            raise errors.from_result(result, "managed identity token request", machine=True)
        # The endpoint answers from its own cache until about 5 minutes before the token's end;
        # issued_at is now, so a renewal that got the same token back waits for that.
        return self._app_tokens(result, s.client_id or s.identity_resource_id or "system-assigned")

    # --- logout, status, doctor ---------------------------------------------------

    def revoke(self, tokens: TokenSet) -> Revocation:
        """Drop the person's account from MSAL's cache. Entra has no endpoint that revokes one
        refresh token (its v2.0 endpoints offer no RFC 7009 revocation)."""
        with self._lock:
            home = tokens.state.get(ACCOUNT)
            if home:
                self._load(tokens)
                self._forget_account(home)
            self._load(None)
        return Revocation(
            False,
            "Entra has no way to revoke one refresh token; it stays valid there until it "
            "expires or an admin revokes your sessions",
        )

    def checks(self) -> list[Check]:
        """Doctor: the login host answers, the tenant exists there, the clocks agree; for
        azurecli/azd: the tool is there and logged in."""
        s = self.settings
        if s.mode in (o.AZURECLI, o.AZD):
            return self._tool_checks()
        if s.mode == o.MSI:
            return [Check("managed identity", True, "asked at the first token request")]
        host = urlsplit(s.authority_host).netloc
        url = f"{s.authority}/v2.0/.well-known/openid-configuration"
        try:
            answer = self._http.get(url)
        except Exception as e:  # TransportError, or an unexpected one
            error = errors.from_exception(e, url)
            return [Check(f"Entra {host}", False, error.message, error.hint)]
        out = [Check(f"Entra {host}", True, f"answers ({s.cloud_name})")]
        if answer.status_code == 200:
            out.append(Check(f"tenant {s.tenant_id}", True, "exists there"))
        else:
            try:
                what = errors.describe(json.loads(answer.text))
            except ValueError:
                what = f"HTTP {answer.status_code}"
            out.append(
                Check(
                    f"tenant {s.tenant_id}",
                    False,
                    f"Entra does not know it ({what})",
                    "check --tenant-id, and --environment (the tenant may be in another cloud)",
                )
            )
        date = answer.headers.get("Date") or answer.headers.get("date")
        try:
            server = parsedate_to_datetime(date) if date else None
        except (TypeError, ValueError):
            server = None
        from app.providers.oidc import check_clock

        out.extend(check_clock(f"Entra {host}", server, self._clock, CLOCK_SKEW))
        return out

    def _tool_checks(self) -> list[Check]:
        from app.providers.entra import tools

        s = self.settings
        name = tools.command(s)[0]
        found = tools.find(name, s.tool_path)
        if found is None:
            return [
                Check(
                    name,
                    False,
                    "not installed here (not on PATH)",
                    "install it, or log in with kubetray: --login devicecode or interactive",
                )
            ]
        try:
            tokens = tools.token(s, self._clock)
        except LoginError as e:
            return [Check(name, True, found), Check(f"{name} login", False, e.message, e.hint)]
        return [Check(name, True, found), Check(f"{name} login", True, tokens.who())]


def _certificate(path: str, password: str | None) -> dict[str, Any]:
    """MSAL's client credential for a certificate file as Azure kubelogin reads it: ``.pfx``
    is PKCS#12, anything else PEM with the certificate and its private key (RSA)."""
    if path.lower().endswith(".pfx"):
        if not Path(path).is_file():
            raise errors.CredentialRefused(f"cannot read the client certificate {path}", None)
        return {
            "private_key_pfx_path": path,
            "passphrase": password,
            "public_certificate": True,  # send the chain (x5c), as Azure kubelogin does
        }
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise errors.CredentialRefused(
            f"cannot read the client certificate {path}: {e}", None
        ) from None
    certs = _blocks(text, "CERTIFICATE")
    keys = [b for b in _blocks(text, "PRIVATE KEY") if "ENCRYPTED" not in b] or _blocks(
        text, "ENCRYPTED PRIVATE KEY"
    )
    if not certs or not keys:
        raise errors.CredentialRefused(
            f"{path} holds no certificate and private key in PEM",
            "give a PEM file with both, or a .pfx file",
        )
    return {"private_key": keys[0], "public_certificate": "".join(certs), "passphrase": password}


def _blocks(text: str, label: str) -> list[str]:
    """The PEM blocks of ``text`` whose label ends in ``label``."""
    import re

    pattern = re.compile(r"-----BEGIN ([A-Z ]*)-----.*?-----END \1-----\s*", re.S)
    return [m.group(0) for m in pattern.finditer(text) if m.group(1).endswith(label)]
