"""OIDC against one provider: discovery, the grants, refresh, revocation, id_token checks.

Every grant goes through authlib's OAuth2Client (PKCE S256, state, nonce) over app.oidc.http
(urllib); id_tokens are verified against the provider's JWKS (app.oidc.idtoken: the signature,
through joserfc; here: iss, aud, exp, nonce).
"""

import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from http.client import HTTPException
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

from authlib.common.security import generate_token
from authlib.oauth2 import OAuth2Error as OAuthError
from authlib.oauth2.client import OAuth2Client

from app.identity import normalize_issuer
from app.oidc import explain
from app.oidc.errors import (
    ClockSkew,
    LoginError,
    ProviderUnavailable,
    RefreshFailed,
    RefreshRefused,
)
from app.oidc.http import TIMEOUT, Session, TransportError, insecure_context, ssl_context
from app.oidc.settings import Metadata, OIDCSettings
from app.oidc.tokens import Revocation, TokenSet
from app.providers.base import LoginUI  # what a login needs from the person

if TYPE_CHECKING:
    from joserfc.jwk import KeySet

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
CLOCK_SKEW = 30
"""Seconds of clock difference tolerated when checking an id_token's times."""
REFRESH_TIMEOUT = 120.0
"""Seconds a refresh waits for the provider's answer. Refreshes run ahead of expiry in the
background, so nobody waits on them; giving up early would lose an answer the provider may
already have sent, with the refresh token it rotated (and a strict provider then revokes the
grant when the old one is presented again)."""
KEPT_CLAIMS = (
    *("sub", "email", "name", "groups", "preferred_username", "iss", "client_id"),
    *("exp", "iat"),
)
"""Claims a token set keeps: who it is, and the id_token's times on the provider's clock
(app.broker says when its exp has passed here)."""
UNSURE_STATUS = (502, 504)
"""Gateway answers: the provider behind may have done the request."""


def _merge_params(base: dict[str, str], extra: dict[str, str]) -> dict[str, str]:
    """``base`` with ``extra`` over it; ``prompt`` values join (``consent`` stays)."""
    out = dict(base)
    for key, value in extra.items():
        if key == "prompt" and out.get("prompt"):
            out[key] = " ".join(dict.fromkeys([*value.split(), *out[key].split()]))
        else:
            out[key] = value
    return out


class _OAuth2(OAuth2Client):  # type: ignore[misc]  # authlib is untyped
    """authlib's transport-agnostic client on our urllib session."""

    SESSION_REQUEST_PARAMS = ("timeout",)

    def parse_response_token(self, resp: Any) -> Any:
        """The token response, or an OAuthError that says what the provider answered, also
        for providers that answer errors with an empty or non-JSON body."""
        try:
            doc = resp.json()
        except ValueError:
            doc = None
        if isinstance(doc, dict) and "error" in doc:
            raise OAuthError(error=str(doc["error"]), description=doc.get("error_description"))
        if resp.status_code >= 500:  # down or overloaded, not a refusal: said as such
            raise TransportError(
                f"HTTP {resp.status_code}", status=resp.status_code, body=resp.content
            )
        if resp.status_code >= 400 or not isinstance(doc, dict):
            what = "no OAuth error in its answer" if resp.status_code >= 400 else "not JSON"
            raise OAuthError(error=f"HTTP {resp.status_code}", description=what)
        return super().parse_response_token(resp)


def _unreachable(e: TransportError, url: str) -> LoginError:
    """A request to ``url`` that got no usable answer, in a person's words (app.oidc.explain):
    untrusted or wrong certificates are the user's to fix, the rest may pass."""
    message, hint = explain.failure(e, url)
    reason = e.reason
    if isinstance(reason, ssl.SSLCertVerificationError):
        return LoginError(message, hint)
    sent = isinstance(reason, TimeoutError | ConnectionError | HTTPException) and not isinstance(
        reason, ConnectionRefusedError
    )  # the request may have gone out before the connection failed
    return ProviderUnavailable(message, hint, unsure=e.status in UNSURE_STATUS or sent)


def _left(deadline: float | None) -> float:
    """Seconds a request may take: what is left of ``deadline`` (monotonic; a second at
    least, so the last request still gets its chance), or TIMEOUT without one."""
    return TIMEOUT if deadline is None else max(deadline - time.monotonic(), 1.0)


def _lifetime(claims: dict[str, Any], now: datetime) -> timedelta:
    """How long an id_token lives, from its own times (exp less iat, both on the provider's
    clock): its end is then measured on this machine's clock from the moment it arrived, so a
    provider whose clock is off never makes tokens look short-lived (refreshed nonstop) or
    long-lived. Without an iat: until its exp, as this machine's clock reads it."""
    exp, iat = float(claims["exp"]), claims.get("iat")
    if isinstance(iat, int | float) and exp > iat:
        return timedelta(seconds=exp - iat)
    return datetime.fromtimestamp(exp, UTC) - now


def _error_text(e: OAuthError) -> str:
    return f"{e.error}: {e.description}" if e.description else str(e.error)


def _token_error(e: OAuthError, grant: str, has_secret: bool) -> LoginError:
    """What the token endpoint's refusal means, and what to do about it."""
    hint = None
    if e.error == "invalid_client":
        hint = (
            "check --oidc-client-secret"
            if has_secret
            else f"this provider requires client authentication for the {grant} grant: "
            "give --oidc-client-secret, or register the client as public"
        )
    elif e.error == "unauthorized_client":
        hint = f"the provider does not allow this client the {grant} grant"
    elif e.error == "invalid_grant" and grant == "refresh_token":
        return RefreshRefused(
            f"the provider refused the refresh token ({_error_text(e)}): it expired or was revoked",
            "log in again",
        )
    elif e.error == "invalid_grant" and grant == "authorization_code":
        hint = "check that the provider registered the redirect URI kubetray sent"
    return LoginError(f"the provider refused the {grant} token request ({_error_text(e)})", hint)


class OIDCClient:
    """One provider and client id."""

    def __init__(self, settings: OIDCSettings, clock: Callable[[], datetime]) -> None:
        self.settings = settings
        self._clock = clock
        self._lock = threading.Lock()
        self._metadata: Metadata | None = None
        self._keys: KeySet | None = None
        self._http: Session | None = None

    # -- HTTP, discovery, keys --------------------------------------------------------------

    def _transport(self) -> Session:
        if self._http is None:
            s = self.settings
            # loading the system CAs: ≈10 ms, once per set of extra CAs (ssl_context caches)
            tls: ssl.SSLContext = (
                insecure_context() if s.insecure else ssl_context(s.ca_files, s.ca_data)
            )
            self._http = Session(tls, s.request_headers)
        return self._http

    def _session(self, scope: bool = True, **kwargs: Any) -> _OAuth2:
        """authlib's client. ``scope`` False: none in token requests (a refresh: RFC 6749 §6,
        the grant's scope is the login's; asking it again makes providers that dropped one,
        such as oidc-provider's offline_access without prompt=consent, refuse the refresh)."""
        s = self.settings
        return _OAuth2(
            self._transport(),
            s.client_id,
            client_secret=s.client_secret,
            token_endpoint_auth_method="client_secret_basic" if s.client_secret else "none",
            scope=" ".join(s.scopes) if scope else None,
            code_challenge_method="S256",
            **kwargs,
        )

    def _get_json(self, url: str, deadline: float | None = None) -> dict[str, Any]:
        return self._get(url, deadline)[0]

    def _get(self, url: str, deadline: float | None = None) -> tuple[dict[str, Any], str | None]:
        """A provider's document (discovery, keys). ``deadline``: the one of the request it
        is part of (a refresh's), instead of a timeout of its own."""
        try:
            response = self._transport().get(url, timeout=_left(deadline))
            response.raise_for_status()
            doc = response.json()
        except TransportError as e:
            error = _unreachable(e, url)
            if isinstance(error, ProviderUnavailable):  # a GET: no refresh token went out
                error.unsure = False
            raise error from None
        except ValueError:
            raise LoginError(f"{url} did not return JSON", explain.NOT_JSON) from None
        if not isinstance(doc, dict):
            raise LoginError(f"{url} did not return a JSON object")
        return doc, response.headers.get("Date")

    def server_time(self) -> datetime | None:
        """The provider's clock, from its Date header (None when it sends none)."""
        import email.utils  # doctor's question only

        _, date = self._get(self.settings.issuer + "/.well-known/openid-configuration")
        try:
            return email.utils.parsedate_to_datetime(date) if date else None
        except (TypeError, ValueError):
            return None

    def metadata(self, deadline: float | None = None) -> Metadata:
        """The provider's discovery document (fetched once; ``deadline``: see _get)."""
        with self._lock:
            if self._metadata is not None:
                return self._metadata
        doc = self._get_json(self.settings.issuer + "/.well-known/openid-configuration", deadline)
        if normalize_issuer(str(doc.get("issuer", ""))) != self.settings.issuer:
            raise LoginError(
                f"the provider says its issuer is {doc.get('issuer')!r}, not "
                f"{self.settings.issuer!r}",
                "use the issuer URL exactly as the provider states it",
            )

        def tup(key: str) -> tuple[str, ...]:
            value = doc.get(key) or ()
            return tuple(value) if isinstance(value, list) else ()

        try:
            meta = Metadata(
                issuer=doc["issuer"],
                authorization_endpoint=doc["authorization_endpoint"],
                token_endpoint=doc["token_endpoint"],
                jwks_uri=doc["jwks_uri"],
                device_authorization_endpoint=doc.get("device_authorization_endpoint"),
                revocation_endpoint=doc.get("revocation_endpoint"),
                end_session_endpoint=doc.get("end_session_endpoint"),
                grant_types_supported=tup("grant_types_supported"),
                code_challenge_methods_supported=tup("code_challenge_methods_supported"),
                id_token_signing_alg_values_supported=tup("id_token_signing_alg_values_supported")
                or ("RS256",),
                scopes_supported=tup("scopes_supported"),
                prompt_values_supported=tup("prompt_values_supported"),
                revocation_endpoint_auth_methods_supported=tup(
                    "revocation_endpoint_auth_methods_supported"
                ),
            )
        except KeyError as e:
            raise LoginError(f"the provider's discovery document lacks {e.args[0]}") from None
        with self._lock:
            self._metadata = meta
        return meta

    def _oauth_metadata(self) -> dict[str, Any]:
        """What RFC 8414 metadata adds that OpenID discovery left out (django-oauth-toolkit
        names its revocation endpoint only there): endpoints on the issuer's own host. Asked
        only when needed (at logout), never on the way to a token."""
        issuer = urlsplit(self.settings.issuer)
        url = f"{issuer.scheme}://{issuer.netloc}/.well-known/oauth-authorization-server"
        try:
            doc = self._get_json(url + issuer.path)
        except LoginError:
            return {}
        own = f"{issuer.scheme}://{issuer.netloc}/"
        keys = ("revocation_endpoint", "revocation_endpoint_auth_methods_supported")
        endpoint = doc.get("revocation_endpoint")
        if not isinstance(endpoint, str) or not endpoint.startswith(own):
            return {}
        return {k: doc[k] for k in keys if k in doc}

    def _key_set(self, refetch: bool = False, deadline: float | None = None) -> "KeySet":
        from app.oidc import idtoken  # joserfc (≈2 MB): only once an id_token is verified

        with self._lock:
            if self._keys is not None and not refetch:
                return self._keys
        keys = idtoken.import_key_set(self._get_json(self.metadata(deadline).jwks_uri, deadline))
        with self._lock:
            self._keys = keys
        return keys

    # -- id_token ---------------------------------------------------------------------------

    def verify_id_token(
        self, id_token: str, nonce: str | None = None, deadline: float | None = None
    ) -> dict[str, Any]:
        """Claims of a valid id_token: signed by the provider, for us, current, our nonce.
        ``deadline``: the request's it is part of, for fetching the keys (see _get)."""
        from app.oidc import idtoken

        meta = self.metadata(deadline)
        algorithms = [a for a in meta.id_token_signing_alg_values_supported if a != "none"]
        try:
            try:
                claims = idtoken.verify(id_token, self._key_set(deadline=deadline), algorithms)
            except idtoken.IdTokenError:  # the provider may have rotated its keys: fetch once more
                keys = self._key_set(refetch=True, deadline=deadline)
                claims = idtoken.verify(id_token, keys, algorithms)
        except idtoken.IdTokenError as e:
            raise LoginError(f"the id_token's signature does not verify: {e}") from None
        now = self._clock().timestamp()
        aud = claims.get("aud")
        audiences = aud if isinstance(aud, list) else [aud]
        problems = []
        if claims.get("iss") != meta.issuer:
            problems.append(f"issuer {claims.get('iss')!r} is not {meta.issuer!r}")
        if self.settings.client_id not in audiences:
            problems.append(f"audience {aud!r} does not include {self.settings.client_id!r}")
        if len(audiences) > 1 and claims.get("azp") not in (None, self.settings.client_id):
            problems.append(f"authorized party {claims.get('azp')!r} is not us")
        exp = claims.get("exp")
        expired = not isinstance(exp, int | float) or exp + CLOCK_SKEW <= now
        iat = claims.get("iat")
        future = isinstance(iat, int | float) and iat - CLOCK_SKEW > now
        if nonce is not None and claims.get("nonce") != nonce:
            problems.append("its nonce is not the one this login sent")
        if (expired or future) and not problems and isinstance(iat, int | float):
            # A token the provider has just issued: its iat is the provider's clock, measured
            offset = iat - now
            if abs(offset) > CLOCK_SKEW:
                detail = "the id_token it just issued " + (
                    "is not valid yet here" if future else "has already expired here"
                )
                raise ClockSkew(offset, detail)
        if expired:
            problems.append("it has expired")
        if future:
            problems.append("it is issued in the future (check the clock)")
        if problems:
            raise LoginError("the provider's id_token is not acceptable: " + "; ".join(problems))
        return claims

    def _token_set(
        self, response: dict[str, Any], nonce: str | None, deadline: float | None = None
    ) -> TokenSet:
        now = self._clock()
        id_token = response.get("id_token")
        claims = self.verify_id_token(id_token, nonce, deadline) if id_token else {}
        if self.settings.machine:  # who it is: the client itself (RFC 9068's client_id claim)
            claims = {"client_id": self.settings.client_id, **claims}
        access = response.get("access_token")
        if self.settings.use_access_token:
            if not access:
                raise LoginError("the provider returned no access token")
            expires_in = response.get("expires_in")
            expires = now + timedelta(seconds=float(expires_in or 300))
        elif id_token:
            expires = now + _lifetime(claims, now)
        else:
            expires = now  # a refresh without an id_token: the caller keeps the old one
        return TokenSet(
            expires_at=expires,
            issued_at=now,
            id_token=id_token,
            access_token=access,
            refresh_token=response.get("refresh_token"),
            claims={k: v for k, v in claims.items() if k in KEPT_CLAIMS},
        )

    def _fetch(
        self, deadline: float | None = None, scope: bool = True, **kwargs: Any
    ) -> dict[str, Any]:
        """A token request; ``deadline`` (monotonic) for discovery and the request together,
        else TIMEOUT for each."""
        meta = self.metadata(deadline)
        session = self._session(scope, redirect_uri=kwargs.pop("redirect_uri", None))
        try:
            token = session.fetch_token(meta.token_endpoint, timeout=_left(deadline), **kwargs)
        except TransportError as e:
            raise _unreachable(e, meta.token_endpoint) from None
        except OAuthError as e:
            grant = str(kwargs.get("grant_type", "token"))
            raise _token_error(e, grant, bool(self.settings.client_secret)) from None
        except ValueError as e:
            raise LoginError(f"unreadable answer from the provider's token endpoint: {e}") from None
        return dict(token)

    # -- the grants -------------------------------------------------------------------------

    def authorization_code(self, ui: LoginUI, keyboard: bool = False) -> TokenSet:
        """Authorization code + PKCE in the browser (or typed back, for authcode-keyboard)."""
        s = self.settings
        meta = self.metadata()
        state, nonce, verifier = generate_token(32), generate_token(32), generate_token(64)
        listener = None
        if keyboard:
            redirect_uri = s.redirect_url_keyboard or "urn:ietf:wg:oauth:2.0:oob"
        else:
            tls = (
                (s.local_server_cert, s.local_server_key)
                if s.local_server_cert and s.local_server_key
                else None
            )
            from app.oidc.loopback import LoopbackListener  # http.server: browser logins only

            listener = LoopbackListener(
                state, s.listen_addresses, s.redirect_hostname, s.success_url, s.redirect_url, tls
            )
            redirect_uri = listener.redirect_uri
        try:
            url, _ = self._session(redirect_uri=redirect_uri).create_authorization_url(
                meta.authorization_endpoint,
                state=state,
                nonce=nonce,
                code_verifier=verifier,
                **_merge_params(dict(s.extra_params), ui.auth_params),
            )
            if listener is None:
                ui.show(f"Open this URL in a browser and log in: {url}")
                answer = ui.prompt("Enter the code (or the whole redirect URL): ", False)
                if not answer:
                    raise LoginError("no code was entered")
                code = _code_from_answer(answer.strip(), state)
            else:
                self._check_login_request(url, redirect_uri)
                if s.skip_open_browser or not ui.browser_available:
                    ui.show(f"Open this URL in a browser on this machine and log in: {url}")
                elif ui.open_browser(url):
                    ui.show(
                        f"Waiting for the login in your browser. If it did not open, visit: {url}"
                    )
                # else the browser failed at once: the person was told why, with the URL
                code = listener.wait(s.timeout, ui.cancelled)
        finally:
            if listener is not None:
                listener.close()
        response = self._fetch(
            code=code,
            code_verifier=verifier,
            redirect_uri=redirect_uri,
            grant_type="authorization_code",
        )
        return self._token_set(response, nonce)

    def _check_login_request(self, url: str, redirect_uri: str) -> None:
        """Fail at once when the provider refuses the authorization request itself (an
        unregistered redirect URI, an unknown client), instead of after the browser's timeout.

        One GET without following redirects: a provider that accepts the request answers
        with its login page or a redirect to it; one that refuses it answers 4xx (and must
        not redirect to an unregistered URI). What it cannot tell before its login page,
        it cannot tell here either.
        """
        try:
            status = self._transport().status(url)
        except TransportError:
            return  # the browser will show what is wrong with the network
        if 400 <= status < 500:
            raise LoginError(
                f"the provider refused the login request (HTTP {status}); kubetray sent the "
                f"redirect URI {redirect_uri} for client {self.settings.client_id}",
                f"register exactly {redirect_uri} for that client at the provider, or give "
                "kubetray the registered one with --oidc-redirect-url",
            )

    def device_code(self, ui: LoginUI) -> TokenSet:
        """The device authorization grant (RFC 8628)."""
        s = self.settings
        meta = self.metadata()
        if not meta.device_authorization_endpoint:
            raise LoginError("the provider offers no device authorization endpoint")
        try:
            answer = self._transport().post(
                meta.device_authorization_endpoint,
                data={"client_id": s.client_id, "scope": " ".join(s.scopes)},
                timeout=TIMEOUT,
            )
            doc = answer.json()
        except (TransportError, ValueError) as e:
            raise LoginError(f"the device authorization request failed: {e}") from None
        if "device_code" not in doc:
            raise LoginError(f"the provider refused the device login: {doc.get('error', doc)}")
        interval = float(doc.get("interval") or 5)
        complete = doc.get("verification_uri_complete")
        uri = complete or doc.get("verification_uri")
        ui.show(
            f"To log in, open {uri} and enter the code {doc['user_code']}"
            if not complete
            else f"To log in, open {complete} (code {doc['user_code']})"
        )
        ui.show_device_code(doc["user_code"], doc.get("verification_uri") or uri)
        if not s.skip_open_browser and uri:
            ui.open_browser(uri)
        deadline = time.monotonic() + min(float(doc.get("expires_in") or 600), s.timeout)
        while time.monotonic() < deadline:
            if ui.cancelled.wait(interval):
                raise LoginError("the login was cancelled")
            try:
                response = self._fetch_raw_device(meta.token_endpoint, doc["device_code"])
            except _Pending as pending:
                if pending.slow_down:
                    interval += 5
                continue
            return self._token_set(response, None)
        raise LoginError("the device login was not completed in time")

    def _fetch_raw_device(self, endpoint: str, device_code: str) -> dict[str, Any]:
        try:
            token = self._session().fetch_token(
                endpoint, grant_type=DEVICE_GRANT, device_code=device_code, timeout=TIMEOUT
            )
        except TransportError as e:
            raise _unreachable(e, endpoint) from None
        except OAuthError as e:
            if e.error in ("authorization_pending", "slow_down"):
                raise _Pending(e.error == "slow_down") from None
            raise LoginError(f"the device login failed ({_error_text(e)})") from None
        except ValueError as e:
            raise LoginError(f"unreadable answer from the provider's token endpoint: {e}") from None
        return dict(token)

    def password(self, ui: LoginUI) -> TokenSet:
        """The resource owner password grant, for providers configured for it."""
        s = self.settings
        self.metadata()  # a provider that is not there is said before anyone types a password
        username = s.username or ui.prompt("Username: ", False)
        password = s.password or (ui.prompt("Password: ", True) if username else None)
        if not username or not password:
            raise LoginError("the password login needs a username and a password")
        response = self._fetch(grant_type="password", username=username, password=password)
        return self._token_set(response, None)

    def client_credentials(self) -> TokenSet:
        """The client credentials grant (RFC 6749 §4.4): the client's own token, no person.

        As kubelogin: the client authenticates with its secret, asks for its scopes, and the
        extra parameters (--oidc-auth-request-extra-params, --audience) go to the token
        endpoint. The id_token is served if the provider sends one (verified); else the access
        token only with --oidc-use-access-token, as kubelogin has it.
        """
        s = self.settings
        response = self._fetch(
            grant_type="client_credentials", body=urlencode(dict(s.extra_params))
        )
        if not s.use_access_token and not response.get("id_token"):
            raise LoginError(
                "the provider answered the client-credentials grant with no id_token",
                "add --oidc-use-access-token to send its access token (the API server must "
                "accept the provider's access tokens)",
            )
        return self._token_set(response, None)

    def refresh(self, tokens: TokenSet, timeout: float = REFRESH_TIMEOUT) -> TokenSet:
        """New tokens from the refresh token (which the provider may rotate).

        No ``scope``: the grant's own (RFC 6749 §6; kubelogin sends none either). Once the
        provider has answered, its new refresh token is never lost: if anything after that
        fails, RefreshFailed carries it for the caller to keep. A refresh that brings no
        id_token keeps the login's id_token, its expiry and its claims. ``timeout``: long
        (REFRESH_TIMEOUT), for callers that do not wait on it, and for every request of the
        refresh together (discovery, the token, the keys its id_token is checked with).
        """
        if not tokens.refresh_token:
            raise LoginError("there is no refresh token")
        deadline = time.monotonic() + timeout
        response = self._fetch(
            deadline, False, grant_type="refresh_token", refresh_token=tokens.refresh_token
        )
        rotated = response.get("refresh_token")
        try:
            fresh = self._token_set(response, None, deadline)
        except LoginError as e:
            if rotated and rotated != tokens.refresh_token:
                kept = replace(tokens, refresh_token=rotated)
                raise RefreshFailed(e.message, e.hint, kept, e) from None
            raise
        if fresh.id_token or self.settings.use_access_token:
            return tokens.with_refresh(fresh)
        return replace(
            tokens.with_refresh(fresh),
            expires_at=tokens.expires_at,
            issued_at=tokens.issued_at,
            no_id_token_on_refresh=True,
        )

    def revoke(self, tokens: TokenSet) -> Revocation:
        """Revoke the refresh token (RFC 7009) and say what the provider answered.

        With a client secret the client authenticates as it does at the token endpoint.
        """
        meta = self.metadata()
        if not tokens.refresh_token:
            return Revocation(False, "there was no refresh token to revoke")
        endpoint = meta.revocation_endpoint or self._oauth_metadata().get("revocation_endpoint")
        if not endpoint:
            return Revocation(False, "the provider offers no revocation endpoint")
        try:
            response = self._session().revoke_token(
                endpoint,
                tokens.refresh_token,
                token_type_hint="refresh_token",  # noqa: S106 - a hint, not a secret
                timeout=TIMEOUT,
            )
        except (OAuthError, TransportError) as e:
            return Revocation(False, f"the provider could not be asked: {e}")
        if response.status_code < 400:
            return Revocation(True, "revoked at the provider")
        try:
            doc = response.json()
        except ValueError:
            doc = None
        said = (
            _error_text(OAuthError(error=doc["error"], description=doc.get("error_description")))
            if isinstance(doc, dict) and "error" in doc
            else f"HTTP {response.status_code}"
        )
        reason = f"the provider refused to revoke it ({said})"
        if response.status_code in (400, 401) and not self.settings.client_secret:
            reason += "; it requires client authentication, and this client has no secret"
        return Revocation(False, reason)


class _Pending(Exception):
    def __init__(self, slow_down: bool) -> None:
        self.slow_down = slow_down


def _code_from_answer(answer: str, state: str) -> str:
    """A pasted code, or the redirect URL the browser ended on (then its state must match)."""
    if "://" not in answer:
        return answer
    from urllib.parse import parse_qs, urlsplit

    query = parse_qs(urlsplit(answer).query)
    if (query.get("state") or [""])[0] != state:
        raise LoginError("the pasted URL belongs to another login (its state does not match)")
    if "code" not in query:
        raise LoginError("the pasted URL carries no code")
    return query["code"][0]
