"""Google's installed-app login on kubetray's OIDC engine, and the take-over of gcloud's
application-default login (see app.providers.google)."""

import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from app.oidc.browser import remote_grant
from app.oidc.errors import LoginError, RefreshRefused
from app.oidc.settings import OIDCSettings
from app.providers.base import LoginUI, Revocation, TokenSet
from app.providers.google import GCLOUD_ADC_CLIENT, GoogleSettings, adc

if TYPE_CHECKING:
    from app.oidc.client import OIDCClient

ADC_FILE = "adc"
"""state: the ADC file a taken-over login came from (and its refresh token, to see a new one)."""


class _Consenting:
    """The person's login UI, asking Google for its consent screen too (``prompt=consent``):
    Google gives a refresh token again only then."""

    def __init__(self, ui: LoginUI) -> None:
        self._ui = ui

    def show(self, text: str) -> None:
        self._ui.show(text)

    def open_browser(self, url: str) -> bool:
        return self._ui.open_browser(url)

    def prompt(self, text: str, secret: bool) -> str | None:
        return self._ui.prompt(text, secret)

    def show_device_code(self, user_code: str, uri: str) -> None:
        self._ui.show_device_code(user_code, uri)

    @property
    def cancelled(self) -> threading.Event:
        return self._ui.cancelled

    @property
    def browser_available(self) -> bool:
        return self._ui.browser_available

    @property
    def auth_params(self) -> dict[str, str]:
        params = dict(self._ui.auth_params)
        prompts = [*params.get("prompt", "").split(), "consent"]
        params["prompt"] = " ".join(dict.fromkeys(prompts))
        return params


class GoogleLogin:
    """One Google identity's client: the engine for its OAuth client, made when needed."""

    def __init__(
        self,
        settings: GoogleSettings,
        clock: Callable[[], datetime],
        engine: "Callable[[OIDCSettings, Callable[[], datetime]], OIDCClient] | None" = None,
    ) -> None:
        self.settings = settings
        self._clock = clock
        self._factory = engine
        self._engines: dict[OIDCSettings, Any] = {}

    def _engine(self, client_id: str | None = None, secret: str | None = None) -> Any:
        """The OIDC engine for this identity's OAuth client, or another one's (a taken-over
        login refreshes with the client it was made with)."""
        s = self.settings.engine
        if client_id and (client_id, secret) != (s.client_id, s.client_secret):
            s = replace(s, client_id=client_id, client_secret=secret, extra_params=())
        engine = self._engines.get(s)
        if engine is None:
            if self._factory is not None:
                engine = self._factory(s, self._clock)
            else:
                from app.oidc.client import OIDCClient  # requests + authlib: only once used

                engine = OIDCClient(s, self._clock)
            self._engines[s] = engine
        return engine

    # -- the person's login -------------------------------------------------------------------

    def login(self, ui: LoginUI, held: TokenSet | None) -> TokenSet:
        if self.settings.adc:
            return self._take_over(held, None)
        kept = held if held and held.refresh_token else None
        tokens = self._browser(ui if kept else _Consenting(ui))
        if not tokens.refresh_token:
            if kept is not None and _same_person(kept, tokens):
                tokens = replace(tokens, refresh_token=kept.refresh_token)
            else:  # Google gives a refresh token again only with its consent screen
                ui.show(
                    "Google sent no refresh token (it sends one only with its consent screen): "
                    "logging in once more, with it"
                )
                tokens = self._browser(_Consenting(ui))
        if not tokens.refresh_token:
            raise LoginError(
                "Google sent no refresh token, even with its consent screen",
                "check that the OAuth client is a desktop client and the login asked for "
                "offline access",
            )
        self._check_account(tokens)
        return self._with_client(tokens)

    def _browser(self, ui: LoginUI) -> TokenSet:
        """Google's installed-app flow: the browser with a loopback redirect; where none can
        open (over SSH), the code typed back from Google's page (its device code login does
        not allow the cloud-platform scope)."""
        engine, s = self._engine(), self.settings.engine
        keyboard = s.grant_type == "authcode-keyboard"
        if s.grant_type == "auto" and not ui.browser_available and s.redirect_url_keyboard:
            remote = remote_grant(False)
            if remote is not None:
                ui.show(remote[1])
                keyboard = True
        return engine.authorization_code(ui, keyboard=keyboard)  # type: ignore[no-any-return]

    def _check_account(self, tokens: TokenSet) -> None:
        wanted = self.settings.account
        if wanted and tokens.who().lower() != wanted.lower():
            raise LoginError(
                f"logged in to Google as {tokens.who()}, but the kubeconfig asks for {wanted} "
                "(--account or CLOUDSDK_CORE_ACCOUNT)",
                f"log in as {wanted}",
            )

    def _with_client(self, tokens: TokenSet) -> TokenSet:
        """Keep the OAuth client with the tokens (in the keyring) when it is not gcloud's,
        whose secret the code holds: identities.json never holds a secret, and Google refuses
        a refresh without it."""
        s = self.settings.engine
        if s.client_id == GCLOUD_ADC_CLIENT[0]:
            return tokens
        client = {"client_id": s.client_id, "client_secret": s.client_secret}
        return replace(tokens, state={**tokens.state, **client})

    # -- gcloud's application-default login ----------------------------------------------------

    def _take_over(self, held: TokenSet | None, refused: str | None) -> TokenSet:
        """Copy the person's login from the ADC file into tokens of our own (refreshed at once:
        the access token proves the refresh token works). ``refused``: the refresh token
        Google refused, which a file still holding it cannot help with."""
        where = self.settings.adc
        assert where is not None
        found = adc.read(where)
        if refused is not None and found.refresh_token == refused:
            raise RefreshRefused(
                "Google refused gcloud's application-default login, which kubetray took over",
                "run: gcloud auth application-default login (kubetray takes the new one over)",
            )
        engine = self._engine(found.client_id, found.client_secret)
        now = self._clock()
        start = TokenSet(expires_at=now, issued_at=now, refresh_token=found.refresh_token)
        try:
            tokens: TokenSet = engine.refresh(start)
        except RefreshRefused as e:
            raise LoginError(
                f"Google refused gcloud's application-default login in {where} ({e.message})",
                "run: gcloud auth application-default login (kubetray takes the new one over)",
            ) from None
        state = {
            "client_id": found.client_id,
            "client_secret": found.client_secret,
            ADC_FILE: where,
        }
        if found.quota_project_id:
            state["quota_project_id"] = found.quota_project_id
        return replace(tokens, refresh_token=found.refresh_token, state=state)

    # -- renewal ------------------------------------------------------------------------------

    def fetch(self) -> TokenSet:
        raise LoginError("a Google login is a person's: there is no token to fetch without one")

    def renew(self, tokens: TokenSet) -> TokenSet:
        """A refresh, with the OAuth client the tokens were made with. A taken-over login
        follows gcloud: a new application-default login in the file is taken over instead."""
        if self.settings.adc:
            try:
                found = adc.read(self.settings.adc)
            except LoginError:
                found = None  # gone or unreadable: keep refreshing the copy in the keyring
            if found is not None and found.refresh_token != tokens.refresh_token:
                return self._take_over(tokens, None)
        state = tokens.state
        engine = self._engine(state.get("client_id"), state.get("client_secret"))
        try:
            fresh = engine.refresh(tokens)
        except RefreshRefused as e:
            if self.settings.adc:  # perhaps gcloud logged in again meanwhile: the file says
                return self._take_over(tokens, tokens.refresh_token)
            if "invalid_rapt" in e.message or "rapt_required" in e.message:
                raise RefreshRefused(
                    "Google asks you to sign in again: your organisation's session control "
                    "ended this login (reauth related error, invalid_rapt)",
                    "log in again",
                ) from None
            raise
        return fresh  # type: ignore[no-any-return]

    def revoke(self, tokens: TokenSet) -> Revocation:
        if self.settings.adc:
            return Revocation(
                False,
                "left to gcloud: it is gcloud's application-default login (gcloud auth "
                "application-default revoke ends it)",
            )
        state = tokens.state
        engine = self._engine(state.get("client_id"), state.get("client_secret"))
        return engine.revoke(tokens)  # type: ignore[no-any-return]

    def account_choice(self) -> dict[str, str]:
        return {} if self.settings.adc else {"prompt": "select_account"}


def _same_person(held: TokenSet, tokens: TokenSet) -> bool:
    sub = tokens.claims.get("sub")
    return bool(sub) and sub == held.claims.get("sub")
