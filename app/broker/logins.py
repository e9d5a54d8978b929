"""OIDC sessions: every identity's tokens, served from memory, refreshed ahead, or from a login.

* Logins owns each OIDC identity's session (tokens, provider clients, refresh figures) under
  the session's lock, and its login in flight through Flights (app.broker.flight).
* ``token()``: fresh tokens from memory (no lock); else, under the session's lock, the secret
  store, a refresh, or the identity's one login.
* Refreshes happen under the identity's lock, one at a time, and the rotated refresh token is
  in the store before anyone uses it. Two refreshes racing would present a rotated token, and a
  strict provider revokes the whole grant for that.
* The scheduler (app.broker.refresh) refreshes ahead of expiry, so in steady state no caller
  waits on the provider.
* A machine identity (client credentials) has no login and no refresh token: its token is
  fetched again, under the same lock, whenever a refresh would be due. No person is involved,
  so nothing about it is ever refused for want of one.
"""

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from app.broker.flight import Conversation, Flights, Login, LoginRequired, Silent
from app.broker.refresh import RefreshScheduler
from app.broker.registry import Entry, Registry
from app.errors import AppError, SecretLost
from app.model import Identity
from app.oidc.browser import Browser, remote_grant
from app.oidc.errors import LoginError, RefreshFailed, RefreshRefused
from app.oidc.settings import OIDCSettings
from app.oidc.tokens import MIN_MARGIN, Revocation, TokenSet
from app.store.secret_store import SecretStore

if TYPE_CHECKING:
    from app.oidc.client import OIDCClient

__all__ = [
    "Conversation",
    "Login",
    "LoginObserver",
    "LoginRequired",
    "Logins",
    "SessionView",
    "Silent",
]

log = logging.getLogger(__name__)

RETRY_REFRESH = timedelta(seconds=30)
MAX_CLIENTS = 8
"""Provider clients kept per identity (one per way of reaching the provider)."""


@dataclass(eq=False)
class _Session:
    """One OIDC identity's tokens and provider clients. ``lock`` serialises reading the store,
    refreshing and starting a login; ``tokens`` is read without it on the hot path."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    clients: "dict[OIDCSettings, OIDCClient]" = field(default_factory=dict)
    """Provider clients by the settings they reach it with (CAs, proxy, listen addresses)."""
    tokens: TokenSet | None = None
    loaded: bool = False
    """``tokens`` reflects the secret store (read once, then kept in step)."""
    refreshes: int = 0
    refreshed_at: datetime | None = None


@dataclass(frozen=True)
class SessionView:
    """What status shows of an OIDC session, read at one moment."""

    tokens: TokenSet | None
    logging_in: bool
    blocked: str | None
    """Why a new login would not start now (a recent failure), or None."""
    refreshes: int
    refreshed_at: datetime | None


class LoginObserver(Protocol):
    """Someone who wants to see every login (the tray). Called from worker threads."""

    def login_started(self, login: Login) -> None: ...
    def login_finished(self, login: Login) -> None:
        """``login`` ended: ``login.error`` None when it worked; ``login.cancelled`` set when
        a person (or the app quitting) ended it."""

    def login_required(self, name: str, reason: str) -> None: ...
    def refresh_failed(self, name: str, reason: str, final: bool) -> None:
        """Refresh ahead failed; ``final``: the provider refused the grant, only a login helps."""


def store_key(identity: Identity) -> str:
    """Where an identity's tokens live in the secret store."""
    return _store_key(identity.key)


def _store_key(key: str) -> str:
    return "oidc/" + hashlib.sha256(key.encode()).hexdigest()[:32]


class Logins:
    """Every OIDC identity of this agent: its session, its login, its refresh ahead."""

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
        self._lock = threading.Lock()
        self._sessions: dict[str, _Session] = {}
        self._flights = Flights(clock)
        self._scheduler = RefreshScheduler(clock, self._refresh_if_due)

    def start(self) -> None:
        """Start refreshing ahead, and read every known identity's tokens on a worker thread
        (keyrings can be slow), so status is true before the first call."""
        self._scheduler.start()
        threading.Thread(target=self.load_known, name="load-identities", daemon=True).start()

    def stop(self) -> None:
        self._scheduler.stop()

    # -- identities -------------------------------------------------------------------------

    def identity(
        self,
        settings: OIDCSettings,
        chosen: str | None = None,
        default: Callable[[], str] | None = None,
    ) -> Entry:
        """The identity ``settings`` log in as (see Registry.oidc)."""
        return self.registry.oidc(settings, chosen, default)

    def find(self, name: str) -> Entry | None:
        """An OIDC identity by its name, from this run or from the index."""
        st = self.registry.find(name)
        return st if st is not None and st.settings is not None else None

    def known(self) -> list[Entry]:
        """OIDC identities of this run plus those remembered from earlier ones."""
        return [st for st in self.registry.known() if st.settings is not None]

    def load_known(self) -> None:
        """Read every known identity's tokens (see start)."""
        for st in self.known():
            session = self._session(st)
            with session.lock:
                try:
                    self._load(st, session)
                except AppError as e:
                    log.warning("cannot read the tokens of %s: %s", st.identity.name, e.message)

    def _session(self, st: Entry) -> _Session:
        session = self._sessions.get(st.identity.key)
        if session is None:
            with self._lock:
                session = self._sessions.setdefault(st.identity.key, _Session())
        return session

    def client(self, st: Entry, settings: OIDCSettings | None = None) -> "OIDCClient":
        """The provider client for ``settings`` (default: the identity's), made on first use."""
        settings = settings or st.settings
        assert settings is not None
        clients = self._session(st).clients
        client = clients.get(settings)
        if client is None:
            if self._client_factory is not None:
                client = self._client_factory(settings, self._clock)
            else:
                from app.oidc.client import OIDCClient  # requests + authlib: only once used

                client = OIDCClient(settings, self._clock)
            if len(clients) >= MAX_CLIENTS:
                clients.pop(next(iter(clients)))
            clients[settings] = client
        return client

    # -- what others may know ---------------------------------------------------------------

    def view(self, st: Entry, now: datetime) -> SessionView:
        """The session of ``st`` as status shows it."""
        session = self._session(st)
        key = st.identity.key
        return SessionView(
            tokens=session.tokens,
            logging_in=self._flights.current(key) is not None,
            blocked=self._flights.blocked_reason(key, now),
            refreshes=session.refreshes,
            refreshed_at=session.refreshed_at,
        )

    def expiring(self, now: datetime, within: timedelta) -> list[tuple[str, datetime]]:
        """(name, expiry) of tokens that expire within ``within`` and cannot be refreshed."""
        out = []
        for st in self.known():
            tokens = self._session(st).tokens
            if st.settings and st.settings.machine:
                continue  # fetched again ahead of expiry: nobody needs to act
            if tokens and not tokens.refresh_token and now < tokens.expires_at <= now + within:
                out.append((st.identity.name, tokens.expires_at))
        return out

    def stale(self, now: datetime) -> list[str]:
        """Names of the identities whose tokens are missing or due for renewal."""
        return [
            st.identity.name
            for st in self.known()
            if not ((t := self._session(st).tokens) and t.fresh(now, self.margin))
        ]

    def in_flight(self) -> list[Login]:
        """Every login in flight."""
        return self._flights.in_flight()

    def abort_all(self, reason: str) -> int:
        """End every login in flight; its callers hear ``reason`` (see Flights.abort_all)."""
        return self._flights.abort_all(reason)

    def hold(self, timeout: float) -> Callable[[], None] | None:
        """Take every identity's lock, so that no refresh or token write is halfway when the
        process is replaced (a rotated refresh token must reach the store); returns their
        release, or None (nothing held) if one stays busy for ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        held: list[threading.Lock] = []

        def release() -> None:
            for lock in reversed(held):
                lock.release()

        with self._lock:
            sessions = list(self._sessions.values())
        for session in sessions:
            if not session.lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
                release()
                return None
            held.append(session.lock)
        return release

    # -- tokens -----------------------------------------------------------------------------

    def _load(self, st: Entry, session: _Session) -> None:
        if session.loaded:
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
        what = f"the tokens of {st.identity.name}"
        session.tokens = TokenSet.from_bytes(data, what) if data else None
        session.loaded = True
        self._schedule(st, session)

    def _save(self, st: Entry, session: _Session, tokens: TokenSet) -> None:
        # In the store before anyone uses it: a rotated refresh token must never be lost.
        self._store.set(_store_key(st.identity.key), tokens.to_bytes())
        session.tokens = tokens
        session.loaded = True
        self._schedule(st, session)

    def _refresh(
        self, st: Entry, session: _Session, settings: OIDCSettings | None = None
    ) -> TokenSet:
        assert session.tokens is not None
        settings = settings or st.settings
        assert settings is not None
        try:
            fresh = self.client(st, settings).refresh(session.tokens)
        except RefreshFailed as e:
            self._save(st, session, e.tokens)  # the rotated refresh token: the old one is spent
            raise
        self._save(st, session, fresh)
        self.registry.adopt(st, settings)
        session.refreshes += 1
        session.refreshed_at = self._clock()
        log.info("refreshed %s (valid until %s)", st.identity.name, fresh.expires_at)
        return fresh

    def _fetch_machine(self, st: Entry, session: _Session, settings: OIDCSettings) -> TokenSet:
        """A machine identity's new token (caller holds the session's lock)."""
        if not settings.client_secret:  # remembered settings carry no secret
            raise LoginError(
                f"{st.identity.name} needs its client secret, which kubetray does not keep",
                "run kubectl with the kubeconfig that names it, or: kubetray login -- "
                "--oidc-issuer-url=... --oidc-client-id=... --oidc-client-secret=... "
                "--grant-type=client-credentials",
            )
        renewed = session.tokens is not None
        fresh = self.client(st, settings).client_credentials()
        self._save(st, session, fresh)
        self.registry.adopt(st, settings)
        if renewed:
            session.refreshes += 1
            session.refreshed_at = self._clock()
        log.info("fetched a token for %s (valid until %s)", st.identity.name, fresh.expires_at)
        return fresh

    def cached(self, st: Entry) -> TokenSet | None:
        """Fresh tokens of ``st`` if memory holds them (what token() serves without its lock),
        else None: nothing is read, refreshed or started."""
        session = self._sessions.get(st.identity.key)
        tokens = session.tokens if session else None
        return tokens if tokens and tokens.fresh(self._clock(), self.margin) else None

    def token(
        self,
        st: Entry,
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
        session = self._session(st)
        if not (refresh or relogin) and (tokens := self.cached(st)):
            return tokens  # the hot path: no lock
        with session.lock:
            self._load(st, session)
            now = self._clock()
            tokens = session.tokens
            if tokens and tokens.fresh(now, self.margin) and not (refresh or relogin):
                return tokens
            if settings.machine:
                try:
                    return self._fetch_machine(st, session, settings)
                except LoginError as e:
                    if not (tokens and tokens.expires_at > now) or refresh or relogin:
                        raise
                    log.warning("fetching a token for %s failed: %s", name, e.message)
                    return tokens  # still valid; the scheduler tries again
            if tokens and tokens.refresh_token and not relogin and _refresh_helps(tokens, settings):
                try:
                    tokens = self._refresh(st, session, settings)
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
            login = self._flights.current(st.identity.key)
            if login is None:
                login = self._start_login(st, settings, conv, now, explicit, auth_params or {})
            else:
                login.join(conv)
        return login.wait(conv)

    def switch_account(self, st: Entry, conv: Conversation) -> TokenSet:
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
        st: Entry,
        settings: OIDCSettings,
        conv: Conversation,
        now: datetime,
        explicit: bool,
        auth_params: dict[str, str],
    ) -> Login:
        """Start the identity's login (caller holds its session lock) with ``conv`` joined."""
        name = st.identity.name
        blocked = self._flights.blocked_reason(st.identity.key, now, settings)
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
        login = Login(name, browser)
        login.origin = getattr(conv, "origin", None)
        login.auth_params = auth_params
        login.explicit = explicit
        login.asked_by = getattr(conv, "asked_by", None)
        self._flights.begin(st.identity.key, login)
        for observer in self.observers:
            observer.login_started(login)
        login.join(conv)  # before the login runs: its first prompt must find this caller

        def finished(_error: AppError | None) -> None:
            for observer in self.observers:
                observer.login_finished(login)

        def keep(tokens: TokenSet) -> None:
            session = self._session(st)
            with session.lock:
                self._save(st, session, tokens)
            self.registry.adopt(st, settings)

        self._flights.run(
            st.identity.key,
            settings,
            login,
            lambda lg: self._interactive_login(st, settings, lg),
            keep,
            finished,
        )
        return login

    def _interactive_login(self, st: Entry, settings: OIDCSettings, login: Login) -> TokenSet:
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
        return st is not None and self._flights.cancel(st.identity.key)

    def logout(self, name: str) -> Revocation | None:
        """Revoke the refresh token where possible and forget the tokens, whatever the
        provider said; what it said is returned (None: no identity of that name)."""
        st = self.find(name)
        if st is None:
            return None
        session = self._session(st)
        with session.lock:
            self._load(st, session)
            outcome = Revocation(False, "there were no tokens")
            if session.tokens is not None:
                try:
                    outcome = self.client(st).revoke(session.tokens)
                except AppError as e:
                    outcome = Revocation(False, e.message)
            if not outcome.revoked:
                log.warning("did not revoke %s: %s", name, outcome.reason)
            self._store.delete(_store_key(st.identity.key))
            session.tokens = None
            self._flights.unblock(st.identity.key)
        return outcome

    def forget(self, name: str) -> bool:
        """Log out of ``name`` and remove the identity (it comes back if kubectl uses it)."""
        st = self.find(name)
        if st is None or self.logout(name) is None:
            return False
        key = st.identity.key
        self._flights.forget(key)
        self.registry.remove(key)
        with self._lock:
            self._sessions.pop(key, None)
        return True

    # -- refresh ahead ----------------------------------------------------------------------

    def _schedule(self, st: Entry, session: _Session, when: datetime | None = None) -> None:
        tokens = session.tokens
        if tokens is None or st.settings is None or not _renewable(tokens, st.settings):
            return
        self._scheduler.schedule(st.identity.key, when or tokens.refresh_due(self.margin))

    def _refresh_if_due(self, key: str) -> None:
        st = self.registry.get(key)
        session = self._sessions.get(key)
        if st is None or st.settings is None or session is None:
            return  # forgotten meanwhile
        with session.lock:
            tokens = session.tokens
            if tokens is None or not _renewable(tokens, st.settings):
                return
            now = self._clock()
            if now < tokens.refresh_due(self.margin):
                return  # refreshed meanwhile: a newer entry is scheduled
            try:
                if st.settings.machine:
                    self._fetch_machine(st, session, st.settings)
                else:
                    self._refresh(st, session)
            except AppError as e:
                log.warning("refresh ahead of %s failed: %s", st.identity.name, e.message)
                final = isinstance(e, RefreshRefused)  # asking again every 30 s will not help
                for observer in self.observers:
                    observer.refresh_failed(st.identity.name, e.message, final)
                if tokens.expires_at > now and not final:
                    self._schedule(st, session, now + RETRY_REFRESH)


def _renewable(tokens: TokenSet, settings: OIDCSettings) -> bool:
    """Whether the agent can renew these tokens ahead of time, with nobody there: a machine
    identity whose secret it has, or a refresh token that brings what kubectl is given."""
    if settings.machine:
        return bool(settings.client_secret)
    return bool(tokens.refresh_token) and _refresh_helps(tokens, settings)


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
