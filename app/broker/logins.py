"""OIDC identities: one login per identity for every caller, refresh ahead, tokens persisted.

* Every caller of an identity that needs a login waits on the *same* login, and sees its
  progress (device code, "waiting for the browser") on its own stderr.
* A login that fails, times out or is cancelled blocks the identity for a while: callers fail
  fast with a remedy instead of opening another browser tab (no browser storms).
* Refreshes happen under the identity's lock, one at a time, and the rotated refresh token is
  in the keyring before anyone uses it. Two refreshes racing would present a rotated token,
  and a strict provider revokes the whole grant for that.
* A scheduler refreshes ahead of expiry, so in steady state no caller waits on the provider.
"""

import hashlib
import heapq
import json
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from app import jsonfile
from app.errors import AppError, CredentialError
from app.model import Identity
from app.oidc.browser import Browser, remote_grant
from app.oidc.loopback import LoginError
from app.oidc.settings import OIDCSettings
from app.oidc.tokens import MIN_MARGIN, TokenSet
from app.store.secret_store import SecretStore

if TYPE_CHECKING:
    from app.oidc.client import OIDCClient

log = logging.getLogger(__name__)

BLOCK_AFTER_FAILURE = timedelta(minutes=2)
KEEPALIVE = 10.0
RETRY_REFRESH = timedelta(seconds=30)


class Conversation(Protocol):
    """A caller waiting for a credential: it can be told things and, if interactive, asked."""

    interactive: bool
    """Its user can answer prompts (spec.interactive and stdin a terminal)."""
    visible: bool
    """What it is told reaches a person (its stderr is a terminal, or it is the tray)."""

    def tell(self, text: str) -> None: ...
    def ask(self, text: str, secret: bool) -> str | None: ...
    def keepalive(self) -> None: ...
    def device_code(self, user_code: str, uri: str) -> None:
        """The device code and where to enter it (``tell`` has already said it in words)."""


class LoginObserver(Protocol):
    """Someone who wants to see every login (the tray). Called from worker threads."""

    def login_started(self, login: "Login") -> None: ...
    def login_finished(self, name: str, error: AppError | None) -> None: ...
    def login_required(self, name: str, reason: str) -> None: ...


class LoginRequired(CredentialError):
    """The identity needs a login and this caller cannot start or wait for one."""


class Login:
    """One login in flight; implements LoginUI for the OIDC engine."""

    def __init__(self, name: str, browser: Browser) -> None:
        self.name = name
        self._browser = browser
        self._lock = threading.Lock()
        self._history: list[str] = []
        self._listeners: list[Conversation] = []
        self.done = threading.Event()
        self.cancelled = threading.Event()
        self.result: TokenSet | None = None
        self.error: AppError | None = None
        self.browsers_opened = 0
        self.url: str | None = None
        self.device: tuple[str, str] | None = None
        self.browser_error: str | None = None
        """What the callers were told when the browser failed."""

    def abort(self, reason: str) -> None:
        """End the wait of every caller now with ``reason`` (kubetray is going away)."""
        self.error = LoginError(reason)
        self.cancelled.set()
        self.done.set()

    def join(self, conv: Conversation) -> None:
        with self._lock:
            self._listeners.append(conv)
            history = list(self._history)
        for text in history:
            conv.tell(text)

    def leave(self, conv: Conversation) -> None:
        with self._lock:
            if conv in self._listeners:
                self._listeners.remove(conv)

    def show(self, text: str) -> None:
        log.info("login %s: %s", self.name, text)
        with self._lock:
            self._history.append(text)
            listeners = list(self._listeners)
        for conv in listeners:
            conv.tell(text)

    @property
    def browser_available(self) -> bool:
        return self._browser.available()

    def open_browser(self, url: str) -> bool:
        self.url = url
        if not self._browser.available():
            return False
        self.browsers_opened += 1
        if self._browser.open(url, self._browser_failed):
            return True
        self._browser_failed("it could not be started")
        return False

    def _browser_failed(self, why: str) -> None:
        if self.done.is_set():
            return
        self.browser_error = (
            f"The browser did not open ({why}). Open this URL to log in: {self.url}"
        )
        self.show(self.browser_error)

    def show_device_code(self, user_code: str, uri: str) -> None:
        self.device = (user_code, uri)
        with self._lock:
            listeners = list(self._listeners)
        for conv in listeners:
            conv.device_code(user_code, uri)

    def prompt(self, text: str, secret: bool) -> str | None:
        with self._lock:
            asked = next((c for c in self._listeners if c.interactive), None)
        if asked is None:
            raise LoginError(
                f"the login to {self.name} needs an answer typed in a terminal",
                f'run "kubetray login {self.name}" in a terminal',
            )
        return asked.ask(text, secret)


@dataclass
class OIDCState:
    """An OIDC identity as the agent knows it."""

    identity: Identity
    settings: OIDCSettings
    client: "OIDCClient"
    lock: threading.Lock = field(default_factory=threading.Lock)
    tokens: TokenSet | None = None
    loaded: bool = False
    login: Login | None = None
    blocked_until: datetime | None = None
    blocked_reason: str | None = None
    refreshes: int = 0
    refreshed_at: datetime | None = None


def _store_key(identity: Identity) -> str:
    return "oidc/" + hashlib.sha256(identity.key.encode()).hexdigest()[:32]


class Logins:
    """Every OIDC identity of this agent."""

    def __init__(
        self,
        store: SecretStore,
        index_path: str,
        clock: Callable[[], datetime],
        browser: Callable[[str | None], Browser] = Browser,
        client: "Callable[[OIDCSettings, Callable[[], datetime]], OIDCClient] | None" = None,
    ) -> None:
        self._store = store
        self._index_path = index_path
        self._clock = clock
        self._browser = browser
        self._client_factory = client
        self._lock = threading.Lock()
        self._states: dict[str, OIDCState] = {}
        self._due: list[tuple[datetime, int, str]] = []
        self._seq = 0
        self._wake = threading.Condition(self._lock)
        self._stopped = False
        self.margin = MIN_MARGIN
        """The least time before expiry at which tokens are refreshed (a setting)."""
        self.observers: list[LoginObserver] = []
        self.desktop = False
        """A desktop app (the tray) hosts these logins: it can always show and ask."""
        self.notice: str | None = None
        """Said once, at the first login (that tokens are kept in memory only)."""
        self._scheduler = threading.Thread(target=self._refresh_ahead, name="refresh", daemon=True)
        self._scheduler.start()

    def _client(self, settings: OIDCSettings, clock: Callable[[], datetime]) -> "OIDCClient":
        if self._client_factory is not None:
            return self._client_factory(settings, clock)
        from app.oidc.client import OIDCClient  # requests + authlib: only once OIDC is used

        return OIDCClient(settings, clock)

    # -- identities -------------------------------------------------------------------------

    def state(self, identity: Identity, settings: OIDCSettings) -> OIDCState:
        """The identity's state, created on first sight (and remembered across restarts)."""
        with self._lock:
            st = self._states.get(identity.key)
            if st is None:
                st = OIDCState(identity, settings, self._client(settings, self._clock))
                self._states[identity.key] = st
                self._remember(st)
            elif st.settings != settings:
                st.settings = settings  # e.g. another browser command: same identity
                st.client = self._client(settings, self._clock)
            return st

    def find(self, name: str) -> OIDCState | None:
        """An identity by its display name, from this run or from the index."""
        with self._lock:
            for st in self._states.values():
                if st.identity.name == name:
                    return st
        entry = self._read_index().get(name)
        if entry is None:
            return None
        settings = OIDCSettings.from_dict(entry["settings"])
        identity = Identity(key=entry["key"], name=name, kind="oidc")
        return self.state(identity, settings)

    def _read_index(self) -> dict[str, Any]:
        doc = jsonfile.load(self._index_path)
        return dict(doc) if isinstance(doc, dict) else {}

    def _remember(self, st: OIDCState) -> None:
        """Record the identity's non-secret settings, so `kubetray login NAME` works later."""
        index = self._read_index()
        settings = asdict(st.settings)
        settings.pop("client_secret")
        settings.pop("password")
        index[st.identity.name] = {"key": st.identity.key, "settings": settings}
        os.makedirs(os.path.dirname(self._index_path), mode=0o700, exist_ok=True)
        tmp = f"{self._index_path}.{os.getpid()}.tmp"
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            json.dump(index, f, indent=2, sort_keys=True)
        os.replace(tmp, self._index_path)

    def known(self) -> list[OIDCState]:
        """Identities of this run plus those remembered from earlier ones."""
        for name in self._read_index():
            self.find(name)
        with self._lock:
            return list(self._states.values())

    # -- tokens -----------------------------------------------------------------------------

    def _load(self, st: OIDCState) -> None:
        if st.loaded:
            return
        data = self._store.get(_store_key(st.identity))
        st.tokens = TokenSet.from_bytes(data) if data else None
        st.loaded = True
        if st.tokens and st.tokens.refresh_token:
            self._schedule(st)

    def _save(self, st: OIDCState, tokens: TokenSet) -> None:
        # In the keyring before anyone uses it: a rotated refresh token must never be lost.
        self._store.set(_store_key(st.identity), tokens.to_bytes())
        st.tokens = tokens
        self._schedule(st)

    def _refresh(self, st: OIDCState) -> TokenSet:
        assert st.tokens is not None
        fresh = st.client.refresh(st.tokens)
        self._save(st, fresh)
        st.refreshes += 1
        st.refreshed_at = self._clock()
        log.info("refreshed %s (valid until %s)", st.identity.name, fresh.expires_at)
        return fresh

    def token(
        self,
        identity: Identity,
        settings: OIDCSettings,
        conv: Conversation,
        refresh: bool = False,
        explicit: bool = False,
        relogin: bool = False,
        may_login: bool = True,
    ) -> TokenSet:
        """Valid tokens for ``identity``: cached, refreshed, or from a login all callers share.

        ``refresh``: do not trust the cache (a 401 re-run). ``explicit``: the user asked for
        this login (kubetray login), so a recent failure does not block it. ``relogin``: log in
        again even with valid tokens. ``may_login``: False never starts or joins a login (the
        kubelet cannot wait for a person).
        """
        st = self.state(identity, settings)
        tokens = st.tokens
        if tokens and tokens.fresh(self._clock(), self.margin) and not (refresh or relogin):
            return tokens  # the hot path: no lock
        with st.lock:
            self._load(st)
            now = self._clock()
            tokens = st.tokens
            if tokens and tokens.fresh(now, self.margin) and not (refresh or relogin):
                return tokens
            if tokens and tokens.refresh_token and not relogin:
                try:
                    return self._refresh(st)
                except LoginError as e:
                    log.warning("refresh of %s failed: %s", identity.name, e.message)
                    if tokens.expires_at > now and not refresh:
                        return tokens  # still valid; the scheduler tries again
            if not may_login:
                raise LoginRequired(
                    f"login required for {identity.name}",
                    f'this caller cannot wait for one; run "kubetray login {identity.name}"',
                )
            login = st.login
            joined = False
            if login is None:
                if st.blocked_until and now < st.blocked_until and not explicit:
                    for observer in self.observers:
                        observer.login_required(identity.name, str(st.blocked_reason))
                    raise LoginRequired(
                        f"login required for {identity.name}",
                        f'the last login {st.blocked_reason}; run "kubetray login {identity.name}"',
                    )
                browser = self._browser(settings.browser_command)
                if not self.desktop:
                    self._check_reachable(identity, settings, conv, browser)
                login = st.login = Login(identity.name, browser)
                for observer in self.observers:
                    observer.login_started(login)
                # Join before the login runs: its first prompt must find this caller.
                login.join(conv)
                joined = True
                threading.Thread(
                    target=self._run_login,
                    args=(st, login),
                    name=f"login-{identity.name}",
                    daemon=True,
                ).start()
        if not joined:
            login.join(conv)
        try:
            while not login.done.wait(KEEPALIVE):
                conv.keepalive()
        finally:
            login.leave(conv)
        if login.error is not None:
            raise login.error
        assert login.result is not None
        return login.result

    @staticmethod
    def _check_reachable(
        identity: Identity, settings: OIDCSettings, conv: Conversation, browser: Browser
    ) -> None:
        """Start a login only if it can finish: never one that nobody can see or answer."""
        grant = settings.grant_type
        if grant == "password" and settings.username and settings.password:
            return  # needs nobody
        remedy = f'run "kubetray login {identity.name}" in a terminal'
        if grant in ("password", "authcode-keyboard"):
            if not conv.interactive:
                raise LoginRequired(
                    f"login required for {identity.name}",
                    f"its login needs an answer typed in a terminal; {remedy}",
                )
        elif not (conv.interactive or conv.visible or browser.available()):
            raise LoginRequired(
                f"login required for {identity.name}", f"nothing here can show a login; {remedy}"
            )

    def _run_login(self, st: OIDCState, login: Login) -> None:
        try:
            tokens = self._interactive_login(st, login)
            with st.lock:
                self._save(st, tokens)
                st.blocked_until = st.blocked_reason = None
            login.result = tokens
            login.show(f"Logged in to {st.identity.name} as {tokens.who()}.")
        except AppError as e:
            login.error = login.error or e  # abort() has told the callers already
            with st.lock:
                st.blocked_until = self._clock() + BLOCK_AFTER_FAILURE
                st.blocked_reason = f"failed: {e.message}"
        except Exception as e:
            log.exception("login of %s failed", st.identity.name)
            login.error = AppError(f"the login to {st.identity.name} failed: {type(e).__name__}")
            with st.lock:
                st.blocked_until = self._clock() + BLOCK_AFTER_FAILURE
                st.blocked_reason = "failed"
        finally:
            with st.lock:
                st.login = None
            login.done.set()
            for observer in self.observers:
                observer.login_finished(st.identity.name, login.error)

    def _interactive_login(self, st: OIDCState, login: Login) -> TokenSet:
        settings, client = st.settings, st.client
        grant = settings.grant_type
        login.show(f"Logging in to {st.identity.name} ({settings.issuer})…")
        if self.notice:
            login.show(self.notice)
            self.notice = None
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

    def logout(self, name: str) -> bool:
        """Revoke the refresh token where possible and forget the tokens."""
        st = self.find(name)
        if st is None:
            return False
        with st.lock:
            self._load(st)
            if st.tokens is not None:
                try:
                    st.client.revoke(st.tokens)
                except AppError as e:
                    log.warning("could not revoke %s: %s", name, e.message)
            self._store.delete(_store_key(st.identity))
            st.tokens = None
            st.blocked_until = None
        return True

    # -- refresh ahead ----------------------------------------------------------------------

    def _schedule(self, st: OIDCState, when: datetime | None = None) -> None:
        if st.tokens is None or not st.tokens.refresh_token:
            return
        with self._wake:
            self._seq += 1
            due = when or st.tokens.refresh_due(self.margin)
            heapq.heappush(self._due, (due, self._seq, st.identity.key))
            self._wake.notify()

    def _refresh_ahead(self) -> None:
        while True:
            with self._wake:
                while not self._stopped:
                    now = self._clock()
                    if self._due and self._due[0][0] <= now:
                        _, _, key = heapq.heappop(self._due)
                        st = self._states.get(key)
                        break
                    wait = (self._due[0][0] - now).total_seconds() if self._due else None
                    self._wake.wait(min(wait, 60.0) if wait is not None else None)
                else:
                    return
            if st is not None:
                self._refresh_if_due(st)

    def _refresh_if_due(self, st: OIDCState) -> None:
        with st.lock:
            tokens = st.tokens
            if tokens is None or not tokens.refresh_token:
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
        with self._wake:
            self._stopped = True
            self._wake.notify()
