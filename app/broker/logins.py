"""OIDC tokens of every identity: served from memory, refreshed ahead, or from a shared login.

* ``token()`` is the story of one caller: fresh tokens from memory (no lock); else, under the
  identity's lock, the secret store, a refresh, or the identity's one login (app.broker.flight).
* Refreshes happen under the identity's lock, one at a time, and the rotated refresh token is
  in the store before anyone uses it. Two refreshes racing would present a rotated token, and a
  strict provider revokes the whole grant for that.
* The scheduler (app.broker.refresh) refreshes ahead of expiry, so in steady state no caller
  waits on the provider.
"""

import hashlib
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from app.broker import flight
from app.broker.flight import Conversation, Login, LoginRequired
from app.broker.refresh import RefreshScheduler
from app.broker.registry import IdentityState, Registry
from app.errors import AppError, SecretLost
from app.model import Identity
from app.oidc.browser import Browser, remote_grant
from app.oidc.errors import LoginError, RefreshFailed
from app.oidc.settings import OIDCSettings
from app.oidc.tokens import MIN_MARGIN, Revocation, TokenSet
from app.store.secret_store import SecretStore

if TYPE_CHECKING:
    from app.oidc.client import OIDCClient

__all__ = ["Conversation", "Login", "LoginObserver", "LoginRequired", "Logins"]

log = logging.getLogger(__name__)

RETRY_REFRESH = timedelta(seconds=30)
MAX_CLIENTS = 8
"""Provider clients kept per identity (one per way of reaching the provider)."""


class LoginObserver(Protocol):
    """Someone who wants to see every login (the tray). Called from worker threads."""

    def login_started(self, login: Login) -> None: ...
    def login_finished(self, name: str, error: AppError | None) -> None: ...
    def login_required(self, name: str, reason: str) -> None: ...


def store_key(identity: Identity) -> str:
    """Where an identity's tokens live in the secret store."""
    return _store_key(identity.key)


def _store_key(key: str) -> str:
    return "oidc/" + hashlib.sha256(key.encode()).hexdigest()[:32]


class Logins:
    """Every OIDC identity of this agent."""

    def __init__(
        self,
        store: SecretStore,
        registry: Registry,
        clock: Callable[[], datetime],
        browser: Callable[[str | None], Browser] = Browser,
        client: "Callable[[OIDCSettings, Callable[[], datetime]], OIDCClient] | None" = None,
    ) -> None:
        self._store = store
        self.registry = registry
        self._clock = clock
        self._browser = browser
        self._client_factory = client
        self.margin = MIN_MARGIN
        """The least time before expiry at which tokens are refreshed (a setting)."""
        self.observers: list[LoginObserver] = []
        self.desktop = False
        """A desktop app (the tray) hosts these logins: it can always show and ask."""
        self.notice: str | None = None
        """Said once, at the first login (that tokens are kept in memory only)."""
        self._scheduler = RefreshScheduler(clock, self._refresh_if_due)

    # -- identities -------------------------------------------------------------------------

    def identity(
        self,
        settings: OIDCSettings,
        chosen: str | None = None,
        default: Callable[[], str] | None = None,
    ) -> IdentityState:
        """The identity ``settings`` log in as (see Registry.oidc)."""
        return self.registry.oidc(settings, chosen, default)

    def find(self, name: str) -> IdentityState | None:
        """An OIDC identity by its name, from this run or from the index."""
        st = self.registry.find(name)
        return st if st is not None and st.settings is not None else None

    def known(self) -> list[IdentityState]:
        """OIDC identities of this run plus those remembered from earlier ones."""
        return [st for st in self.registry.known() if st.settings is not None]

    def load_known(self) -> None:
        """Read every known identity's tokens, so status is true before the first call and
        refresh-ahead resumes after a restart (run on a worker thread: keyrings can be slow)."""
        for st in self.known():
            with st.lock:
                try:
                    self._load(st)
                except AppError as e:
                    log.warning("cannot read the tokens of %s: %s", st.identity.name, e.message)

    def client(self, st: IdentityState, settings: OIDCSettings | None = None) -> "OIDCClient":
        """The provider client for ``settings`` (default: the identity's), made on first use."""
        settings = settings or st.settings
        assert settings is not None
        client = st.clients.get(settings)
        if client is None:
            if self._client_factory is not None:
                client = self._client_factory(settings, self._clock)
            else:
                from app.oidc.client import OIDCClient  # requests + authlib: only once used

                client = OIDCClient(settings, self._clock)
            if len(st.clients) >= MAX_CLIENTS:
                st.clients.pop(next(iter(st.clients)))
            st.clients[settings] = client
        return client

    # -- tokens -----------------------------------------------------------------------------

    def _load(self, st: IdentityState) -> None:
        if st.loaded:
            return
        try:
            data = self._store.get(_store_key(st.identity.key))
        except SecretLost as e:  # tokens can always be had again: a login, not a dead end
            log.warning("dropping unreadable tokens of %s: %s", st.identity.name, e.message)
            self._store.delete(_store_key(st.identity.key))
            data = None
        if data is None and st.legacy_key:  # written by an earlier kubetray under another key
            data = self._store.get(_store_key(st.legacy_key))
            if data is not None:
                self._store.set(_store_key(st.identity.key), data)
                self._store.delete(_store_key(st.legacy_key))
        st.tokens = TokenSet.from_bytes(data) if data else None
        st.loaded = True
        self._schedule(st)

    def _save(self, st: IdentityState, tokens: TokenSet) -> None:
        # In the store before anyone uses it: a rotated refresh token must never be lost.
        self._store.set(_store_key(st.identity.key), tokens.to_bytes())
        st.tokens = tokens
        st.loaded = True
        self._schedule(st)

    def _refresh(self, st: IdentityState, settings: OIDCSettings | None = None) -> TokenSet:
        assert st.tokens is not None
        settings = settings or st.settings
        assert settings is not None
        try:
            fresh = self.client(st, settings).refresh(st.tokens)
        except RefreshFailed as e:
            self._save(st, e.tokens)  # the rotated refresh token: the old one is spent
            raise
        self._save(st, fresh)
        self.registry.adopt(st, settings)
        st.refreshes += 1
        st.refreshed_at = self._clock()
        log.info("refreshed %s (valid until %s)", st.identity.name, fresh.expires_at)
        return fresh

    def token(
        self,
        st: IdentityState,
        conv: Conversation,
        refresh: bool = False,
        explicit: bool = False,
        relogin: bool = False,
        may_login: bool = True,
        auth_params: dict[str, str] | None = None,
        settings: OIDCSettings | None = None,
    ) -> TokenSet:
        """Valid tokens for ``st``: cached, refreshed, or from a login all callers share.

        ``refresh``: do not trust the cache (a 401 re-run). ``explicit``: the user asked for
        this login (kubetray login), so a recent failure does not block it. ``relogin``: log in
        again even with valid tokens. ``may_login``: False never starts or joins a login (the
        kubelet cannot wait for a person). ``auth_params``: added to a browser login's request.
        ``settings``: how this caller reaches the provider (default: what worked last).
        """
        name = st.identity.name
        settings = settings or st.settings
        assert settings is not None
        tokens = st.tokens
        if tokens and tokens.fresh(self._clock(), self.margin) and not (refresh or relogin):
            return tokens  # the hot path: no lock
        with st.lock:
            self._load(st)
            now = self._clock()
            tokens = st.tokens
            if tokens and tokens.fresh(now, self.margin) and not (refresh or relogin):
                return tokens
            if tokens and tokens.refresh_token and not relogin and _refresh_helps(tokens, settings):
                try:
                    tokens = self._refresh(st, settings)
                    if tokens.fresh(now, self.margin) or (tokens.expires_at > now and not refresh):
                        return tokens
                except LoginError as e:
                    log.warning("refresh of %s failed: %s", name, e.message)
                    if tokens.expires_at > now and not refresh:
                        return tokens  # still valid; the scheduler tries again
            elif tokens and tokens.expires_at > now and not (refresh or relogin):
                return tokens  # nothing renews it ahead of time: use it while it lasts
            if not may_login:
                raise LoginRequired(
                    f"login required for {name}",
                    f'this caller cannot wait for one; run "kubetray login {name}"',
                )
            login = st.login
            if login is None:
                login = self._start_login(st, settings, conv, now, explicit, auth_params or {})
            else:
                login.join(conv)
        return login.wait(conv)

    def switch_account(self, st: IdentityState, conv: Conversation) -> TokenSet:
        """Log in again, with ``prompt=select_account`` where the provider offers it."""
        params = {}
        try:
            if "select_account" in self.client(st).metadata().prompt_values_supported:
                params["prompt"] = "select_account"
        except AppError:
            pass  # the login reports the unreachable provider itself
        return self.token(st, conv, explicit=True, relogin=True, auth_params=params)

    def _start_login(
        self,
        st: IdentityState,
        settings: OIDCSettings,
        conv: Conversation,
        now: datetime,
        explicit: bool,
        auth_params: dict[str, str],
    ) -> Login:
        """Start the identity's login (caller holds its lock) with ``conv`` already joined."""
        name = st.identity.name
        blocked = flight.blocked_reason(st, now, settings)
        if blocked and not explicit:
            for observer in self.observers:
                observer.login_required(name, blocked)
            raise LoginRequired(
                f"login required for {name}",
                f'the last login {blocked}; run "kubetray login {name}"',
            )
        browser = self._browser(settings.browser_command)
        if not self.desktop:
            _check_reachable(name, settings, conv, browser)
        login = st.login = Login(name, browser)
        login.origin = getattr(conv, "origin", None)
        login.auth_params = auth_params
        for observer in self.observers:
            observer.login_started(login)
        login.join(conv)  # before the login runs: its first prompt must find this caller

        def finished(error: AppError | None) -> None:
            for observer in self.observers:
                observer.login_finished(name, error)

        def keep(tokens: TokenSet) -> None:
            self._save(st, tokens)
            self.registry.adopt(st, settings)

        flight.run(
            st,
            settings,
            login,
            lambda lg: self._interactive_login(st, settings, lg),
            keep,
            self._clock,
            finished,
        )
        return login

    def _interactive_login(
        self, st: IdentityState, settings: OIDCSettings, login: Login
    ) -> TokenSet:
        client = self.client(st, settings)
        grant = settings.grant_type
        if self.notice:
            login.show(self.notice)
            self.notice = None
        login.show(f"Logging in to {st.identity.name} ({settings.issuer})…")
        if grant == "password":
            return client.password(login)
        if grant == "authcode-keyboard":
            return client.authorization_code(login, keyboard=True)
        if grant == "device-code":
            return client.device_code(login)
        if grant == "auto" and not login.browser_available:
            device = bool(client.metadata().device_authorization_endpoint)
            remote = remote_grant(device)
            if remote is not None:
                login.show(remote[1])
                if remote[0] == "authcode-keyboard":
                    return client.authorization_code(login, keyboard=True)
            if device:
                return client.device_code(login)
        return client.authorization_code(login)

    def cancel(self, name: str) -> bool:
        """Cancel the login in flight for ``name``."""
        st = self.find(name)
        login = st.login if st else None
        if login is None:
            return False
        login.cancelled.set()
        return True

    def logout(self, name: str) -> Revocation | None:
        """Revoke the refresh token where possible and forget the tokens, whatever the
        provider said; what it said is returned (None: no identity of that name)."""
        st = self.find(name)
        if st is None:
            return None
        with st.lock:
            self._load(st)
            outcome = Revocation(False, "there were no tokens")
            if st.tokens is not None:
                try:
                    outcome = self.client(st).revoke(st.tokens)
                except AppError as e:
                    outcome = Revocation(False, e.message)
            if not outcome.revoked:
                log.warning("did not revoke %s: %s", name, outcome.reason)
            self._store.delete(_store_key(st.identity.key))
            st.tokens = None
            st.blocked_until = None
        return outcome

    def forget(self, name: str) -> bool:
        """Log out of ``name`` and remove the identity (it comes back if kubectl uses it)."""
        st = self.find(name)
        if st is None or self.logout(name) is None:
            return False
        if st.login is not None:
            st.login.cancelled.set()
        self.registry.remove(st.identity.key)
        return True

    # -- refresh ahead ----------------------------------------------------------------------

    def _schedule(self, st: IdentityState, when: datetime | None = None) -> None:
        if st.tokens is None or not st.tokens.refresh_token or st.settings is None:
            return
        if not _refresh_helps(st.tokens, st.settings):
            return  # a refresh would bring no id_token: ahead of time it only costs
        self._scheduler.schedule(st.identity.key, when or st.tokens.refresh_due(self.margin))

    def _refresh_if_due(self, key: str) -> None:
        st = self.registry.get(key)
        if st is None or st.settings is None:
            return  # forgotten meanwhile
        with st.lock:
            tokens = st.tokens
            if tokens is None or not tokens.refresh_token:
                return
            if not _refresh_helps(tokens, st.settings):
                return
            now = self._clock()
            if now < tokens.refresh_due(self.margin):
                return  # refreshed meanwhile: a newer entry is scheduled
            try:
                self._refresh(st)
            except AppError as e:
                log.warning("refresh ahead of %s failed: %s", st.identity.name, e.message)
                if tokens.expires_at > now:
                    self._schedule(st, now + RETRY_REFRESH)

    def stop(self) -> None:
        self._scheduler.stop()


def _refresh_helps(tokens: TokenSet, settings: OIDCSettings) -> bool:
    """Whether a refresh can renew what kubectl is given: not the id_token of a provider that
    sends none on refresh (then only a login or --oidc-use-access-token does)."""
    return settings.use_access_token or not tokens.no_id_token_on_refresh


def no_id_token_note(tokens: TokenSet | None, settings: OIDCSettings | None) -> str | None:
    """What to tell the user about a provider that sends no id_token on refresh, or None."""
    if tokens is None or settings is None or _refresh_helps(tokens, settings):
        return None
    return (
        "the provider sends no id_token on refresh, so each id_token lifetime needs a login; "
        "add --oidc-use-access-token if the API server accepts the provider's access tokens"
    )


def _check_reachable(
    name: str, settings: OIDCSettings, conv: Conversation, browser: Browser
) -> None:
    """Start a login only if it can finish: never one that nobody can see or answer."""
    grant = settings.grant_type
    if grant == "password" and settings.username and settings.password:
        return  # needs nobody
    remedy = f'run "kubetray login {name}" in a terminal'
    if grant in ("password", "authcode-keyboard"):
        if not conv.interactive:
            raise LoginRequired(
                f"login required for {name}",
                f"its login needs an answer typed in a terminal; {remedy}",
            )
    elif not (conv.interactive or conv.visible or browser.available()):
        raise LoginRequired(
            f"login required for {name}", f"nothing here can show a login; {remedy}"
        )
