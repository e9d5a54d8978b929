"""Login sessions: every identity's tokens, served from memory, refreshed ahead, or from a login.

Provider-neutral: what a provider does (its grants, its refresh, which token kubectl gets) is
its Client's and its Provider's (app.providers.base); this module decides when.

* Logins owns each login identity's session (tokens, provider clients, refresh figures) under
  the session's lock, and its login in flight through Flights (app.broker.flight).
* ``token()``: fresh tokens from memory (no lock); else, under the session's lock, the secret
  store, the token still valid while a refresh runs behind, a refresh it waits for once the
  token has expired, or the identity's one login.
* A refresh runs on the scheduler's workers (app.broker.refresh), one at a time per identity,
  with a long deadline and no lock held while the provider thinks: a caller with a valid token
  never waits on it, and an answer that is slow to come is still taken, with the refresh token
  it rotated. Two refreshes never race: a strict provider revokes the whole grant when a
  rotated token is presented again.
* Memory first, then the store: what the provider answered is the identity's the moment it
  arrives; a store that fails is tried again with backoff and said in status, never a reason
  to drop tokens. Stopping waits (a while) for a refresh in flight and for unsaved tokens.
* A refresh that fails is tried again after a backoff with jitter (never sooner), and callers
  whose token has expired meanwhile hear why at once; a refresh token the provider refused is
  dropped once, and the identity needs a login (with that reason).
* A machine identity (client credentials, say) has no login and no refresh token: its token
  is fetched again (Client.fetch) whenever a refresh would be due. No person is involved, so
  nothing about it is ever refused for want of one.
"""

import contextlib
import hashlib
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from app.broker.changes import Changes
from app.broker.flight import KEEPALIVE, Conversation, Flights, Login, LoginRequired, Silent
from app.broker.refresh import RefreshScheduler
from app.broker.registry import Entry, Registry
from app.demo import known as demo
from app.errors import AppError, RenewalFailed, SecretLost
from app.model import OIDC, Identity
from app.oidc.browser import Browser
from app.oidc.tokens import MIN_MARGIN, Revocation, TokenSet
from app.providers import Providers
from app.providers import default as default_providers
from app.providers.base import (
    NOBODY,
    TERMINAL,
    Client,
    ProviderUnavailable,
    RefreshFailed,
    RefreshRefused,
    Settings,
)
from app.store.secret_store import Recorder, SecretStore

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

RETRY_FIRST = timedelta(seconds=2)
RETRY_MAX = timedelta(seconds=60)
"""Backoff of a failing refresh: 2 s, doubling to 60 s, each stretched by up to half again
(jitter, so identities of one provider do not come back together)."""
SAVE_FIRST = timedelta(seconds=1)
SAVE_MAX = timedelta(seconds=30)
"""Backoff of a failing store write (a locked or restarting keyring)."""
CALLER_WAIT = 30.0
"""Seconds a caller whose token has expired waits for the refresh in flight."""
STOP_WAIT = 10.0
"""Seconds stop() waits for refreshes in flight and for unsaved tokens."""
MAX_CLIENTS = 8
"""Provider clients kept per identity (one per way of reaching the provider)."""
PROBE_EVERY = 3.0
"""Seconds between two probes of one provider (see _Probe)."""
PROBE_WAIT = 10.0
"""Seconds a caller waits for a probe's answer (a provider that hangs is said to hang)."""


@dataclass(eq=False)
class _Session:
    """One login identity's tokens and provider clients. ``lock`` guards every field (held
    briefly: never while the provider or the store is asked, but for the first store read);
    ``tokens`` is read without it on the hot path."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    clients: dict[Settings, Client] = field(default_factory=dict)
    """Provider clients by the settings they reach it with (CAs, proxy, listen addresses)."""
    tokens: TokenSet | None = None
    loaded: bool = False
    """``tokens`` reflects the secret store (read once, then kept in step)."""
    refreshes: int = 0
    refreshed_at: datetime | None = None
    # -- renewal ---------------------------------------------------------------------------
    generation: int = 0
    """Moves at every login and logout: a refresh that began before answers for nobody."""
    refreshing: bool = False
    wanted: bool = False
    """A caller asked for a renewal now (its token is stale, expired or refused by a cluster)."""
    renew_with: Settings | None = None
    """How that caller reaches the provider."""
    done: threading.Condition = field(default_factory=threading.Condition)
    attempts: int = 0
    """Renewals ended (callers wait for it to move; ``done`` is notified)."""
    failures: int = 0
    retry_at: datetime | None = None
    """No renewal before this (backoff after a failure)."""
    problem: AppError | None = None
    """Why the last renewal failed, until one works."""
    failed_at: datetime | None = None
    """When ``problem`` was seen."""
    probe: bool = False
    """The renewal asked for is a probe (see _Probe): it runs despite the backoff."""
    refused: str | None = None
    """The provider refused the refresh token: why, in a person's words; a login clears it."""
    unsure: tuple[str, datetime] | None = None
    """(refresh token, when) of a refresh whose answer never came: the provider may have
    rotated that token, and says invalid_grant for it next."""
    due: tuple[TokenSet, datetime] | None = None
    """When ``tokens`` are refreshed ahead (jittered once per token set)."""
    # -- the store ----------------------------------------------------------------------------
    saving: threading.Lock = field(default_factory=threading.Lock)
    """One store write at a time, each of the newest tokens."""
    unsaved: bool = False
    """Memory holds tokens the store does not (yet)."""
    store_error: AppError | None = None
    save_failures: int = 0
    save_at: datetime | None = None


@dataclass(eq=False)
class _Probe:
    """What kubetray knows of one provider (a ``Settings.group``) while its identities back
    off: a kubectl call whose token is unusable does not wait for its identity's backoff but
    asks the provider at once (a probe: that identity's renewal), one probe at a time and one
    every PROBE_EVERY s for the whole provider; callers of its other identities wait for that
    probe's outcome instead of starting their own. A renewal that reaches the provider ends
    every backoff of its identities (they retry at once). Guarded by ``Logins._probing``."""

    running: str | None = None
    """The identity whose probe is in flight."""
    started: float = float("-inf")
    """When the last probe started (monotonic)."""
    started_at: datetime | None = None
    """The same, on the wall clock (what people are told)."""
    ended: int = 0
    """Probes ended (waiters wait for it to move)."""
    error: AppError | None = None
    """The newest failure of any renewal of this provider, until one reaches it."""
    error_at: datetime | None = None
    failing: bool = False
    """A renewal failed since the provider last answered: identities may be backing off."""


@dataclass(frozen=True)
class _Await:
    """What a caller whose token is unusable waits for: its identity's renewal after
    ``seen``, or first ``probe`` (another identity's probe of the provider) to end."""

    seen: int
    wait: float = 0.0
    """Seconds the caller waits for that renewal."""
    probe: tuple[_Probe, int] | None = None


@dataclass(frozen=True)
class SessionView:
    """What status shows of a login session, read at one moment."""

    tokens: TokenSet | None
    logging_in: bool
    blocked: str | None
    """Why a new login would not start now (a recent failure), or None."""
    refreshes: int
    refreshed_at: datetime | None
    refresh_error: str | None = None
    """Why renewing fails (one line with the remedy), while it does."""
    refused: str | None = None
    """The provider refused the refresh token: only a login helps (why)."""
    store_error: str | None = None
    """Why the newest tokens are not in the secret store yet (memory holds them)."""
    retry_at: datetime | None = None


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
    """Where an identity's tokens live in the secret store: ``KIND/`` and a hash of its key
    (``oidc/...`` for OIDC, as the first rounds wrote them)."""
    return _store_key(identity.key, identity.kind)


def _store_key(key: str, kind: str = OIDC) -> str:
    return f"{kind}/" + hashlib.sha256(key.encode()).hexdigest()[:32]


def _backoff(failures: int, first: timedelta, most: timedelta) -> timedelta:
    """The wait after the ``failures``-th failure in a row: doubling from ``first`` up to
    ``most``, stretched by up to half again (never shorter)."""
    base = min(most, first * (1 << min(max(failures - 1, 0), 16)))
    return base * (1 + random.random() / 2)  # noqa: S311 - jitter, not a secret


def at(when: datetime) -> str:
    """A time as the person's clock shows it."""
    return when.astimezone().strftime("%H:%M:%S")


class Logins:
    """Every login identity of this agent: its session, its login, its refresh ahead."""

    def __init__(
        self,
        store: SecretStore,
        registry: Registry,
        clock: Callable[[], datetime],
        browser: Callable[[str | None], Browser] = Browser,
        client: Any = None,
        providers: Providers | None = None,
    ) -> None:
        """``providers``: the kinds of login (default: the registry's). ``client``: the OIDC
        engine's client factory for the providers built on it (tests give a fake's)."""
        self._store = store
        self.registry = registry
        self._clock = clock
        self._browser = browser
        self.providers = providers or (default_providers(client) if client else registry.providers)
        self.margin = MIN_MARGIN
        """The least time before expiry at which tokens are refreshed (a setting)."""
        self.observers: list[LoginObserver] = []
        self.changes = Changes()
        """Told when an identity's state may have changed (the tray listens)."""
        self.desktop = False
        """A desktop app (the tray) hosts these logins: it can always show and ask."""
        self.notice: str | None = None
        """Said once, at the first login (that tokens are kept in memory only)."""
        self._lock = threading.Lock()
        self._sessions: dict[str, _Session] = {}
        self._flights = Flights(clock)
        self._scheduler = RefreshScheduler(clock, self._renew_job)
        self._probing = threading.Condition()
        self._probes: dict[str, _Probe] = {}
        """By provider (Settings.group)."""

    def start(self) -> None:
        """Start refreshing ahead, and read every known identity's tokens on a worker thread
        (keyrings can be slow), so status is true before the first call."""
        self._scheduler.start()
        threading.Thread(target=self.load_known, name="load-identities", daemon=True).start()

    def stop(self, wait: float = STOP_WAIT) -> None:
        """Stop refreshing ahead. A refresh in flight is waited for (its answer holds the
        rotated refresh token), then tokens the store does not have yet get one more try to
        get there; ``wait`` seconds at most for both."""
        self._scheduler.stop()
        deadline = time.monotonic() + wait
        with self._lock:
            sessions = list(self._sessions.items())
        for _, session in sessions:
            with session.done:
                while session.refreshing and (left := deadline - time.monotonic()) > 0:
                    session.done.wait(left)
        unsaved = [(key, session) for key, session in sessions if session.unsaved]
        if not unsaved:
            return

        def flush() -> None:
            for key, session in unsaved:
                st = self.registry.get(key)
                if st is not None:
                    self._save_pending(st, session)

        saver = threading.Thread(target=flush, name="save-tokens", daemon=True)
        saver.start()
        saver.join(max(deadline - time.monotonic(), 1.0))
        for key, session in unsaved:
            if session.unsaved:
                log.warning("stopping with tokens of %s that the store does not have", key)

    # -- identities -------------------------------------------------------------------------

    def identity(
        self,
        settings: Settings,
        chosen: str | None = None,
        default: Callable[[], str] | None = None,
    ) -> Entry:
        """The identity ``settings`` log in as (see Registry.login)."""
        return self.registry.login(settings, chosen, default)

    def find(self, name: str) -> Entry | None:
        """A login identity by its name, from this run or from the index."""
        st = self.registry.find(name)
        return st if st is not None and st.settings is not None else None

    def known(self) -> list[Entry]:
        """Login identities of this run plus those remembered from earlier ones."""
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
        self.changes.tell()

    def _session(self, st: Entry) -> _Session:
        session = self._sessions.get(st.identity.key)
        if session is None:
            with self._lock:
                session = self._sessions.setdefault(st.identity.key, _Session())
        return session

    def client(self, st: Entry, settings: Settings | None = None) -> Client:
        """The provider client for ``settings`` (default: the identity's), made on first use."""
        settings = settings or st.settings
        assert settings is not None
        clients = self._session(st).clients
        client = clients.get(settings)
        if client is None:
            client = self.providers.of(settings).client(settings, self._clock)
            if len(clients) >= MAX_CLIENTS:
                clients.pop(next(iter(clients)))
            clients[settings] = client
        return client

    # -- what others may know ---------------------------------------------------------------

    def view(self, st: Entry, now: datetime) -> SessionView:
        """The session of ``st`` as status shows it."""
        session = self._session(st)
        key = st.identity.key
        with session.lock:
            problem, store_error = session.problem, session.store_error
            return SessionView(
                tokens=session.tokens,
                logging_in=self._flights.current(key) is not None,
                blocked=self._flights.blocked_reason(key, now),
                refreshes=session.refreshes,
                refreshed_at=session.refreshed_at,
                refresh_error=problem.one_line() if problem else None,
                refused=session.refused,
                store_error=store_error.one_line() if store_error else None,
                retry_at=session.retry_at if problem else None,
            )

    def expiring(self, now: datetime, within: timedelta) -> list[tuple[str, datetime]]:
        """(name, expiry) of tokens that expire within ``within`` and cannot be refreshed (not
        those whose refresh token the provider refused: they need a login, said already)."""
        out = []
        for st in self.known():
            session = self._session(st)
            tokens = session.tokens
            if st.settings and st.settings.machine:
                continue  # fetched again ahead of expiry: nobody needs to act
            if session.refused is not None:
                continue
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
        """Hold every identity still for the process to be replaced: none refreshing (its
        answer holds the rotated refresh token), none with tokens the store lacks, none being
        saved, and none can start to, until released. Returns the release, or None (nothing
        held) when an identity is not still within ``timeout`` seconds (a keyring that refuses
        the newest tokens keeps it so: they are in memory only)."""
        deadline = time.monotonic() + timeout
        held: list[threading.Lock] = []

        def release() -> None:
            for lock in reversed(held):
                lock.release()

        with self._lock:
            sessions = list(self._sessions.values())
        for session in sessions:
            for lock in (session.saving, session.lock):  # _save_pending's order
                if not lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
                    release()
                    return None
                held.append(lock)
            if session.refreshing or session.unsaved:
                release()
                return None
        return release

    # -- tokens -----------------------------------------------------------------------------

    def _load(self, st: Entry, session: _Session) -> None:
        if session.loaded:
            return
        try:
            data = self._store.get(store_key(st.identity))
        except SecretLost as e:  # tokens can always be had again: a login, not a dead end
            log.warning("dropping unreadable tokens of %s: %s", st.identity.name, e.message)
            self._store.delete(store_key(st.identity))
            data = None
        if data is None and st.legacy_key:  # written by an earlier kubetray under another key
            data = self._store.get(_store_key(st.legacy_key))
            if data is not None:
                self._store.set(store_key(st.identity), data)
                self._store.delete(_store_key(st.legacy_key))
        what = f"the tokens of {st.identity.name}"
        session.tokens = TokenSet.from_bytes(data, what) if data else None
        session.loaded = True
        said = st.login_needed  # by the agent before this one, of the tokens it then held
        tokens = session.tokens
        if said and tokens and not tokens.refresh_token and said[1] == tokens.issued_at.isoformat():
            session.refused = said[0]
        self._schedule(st, session)

    def _keep(self, st: Entry, session: _Session, tokens: TokenSet | None) -> None:
        """``tokens`` are the identity's from now on, in memory at once; _save_pending puts
        them in the store (caller holds the session's lock, and calls it once it is out).
        A store that journals gets them on disk first (a local fsync, no keyring): a kill
        before the store's write then loses no rotated refresh token."""
        if isinstance(self._store, Recorder):
            self._store.record(store_key(st.identity), tokens.to_bytes() if tokens else None)
        session.tokens = tokens
        session.loaded = True
        session.unsaved = True
        self._schedule(st, session)

    def _save_pending(self, st: Entry, session: _Session) -> None:
        """Write the newest tokens of ``st`` to the store if it lacks them; a store that fails
        is tried again with backoff (the tokens stay in memory meanwhile) and said in status."""
        key = store_key(st.identity)
        with session.saving:
            with session.lock:
                if not session.unsaved:
                    return
                tokens = session.tokens
            try:
                if tokens is None:
                    self._store.delete(key)
                else:
                    self._store.set(key, tokens.to_bytes())
            except Exception as e:  # the store's own errors, or whatever it raised
                error = e if isinstance(e, AppError) else AppError(f"the store failed: {e!r}")
                with session.lock:
                    session.save_failures += 1
                    session.store_error = error
                    wait = _backoff(session.save_failures, SAVE_FIRST, SAVE_MAX)
                    session.save_at = self._clock() + wait
                    self._schedule(st, session)
                log.warning(
                    "cannot save the tokens of %s (kept in memory; trying again in %.0f s): %s",
                    st.identity.name,
                    wait.total_seconds(),
                    error.one_line(),
                )
                return
            with session.lock:
                if session.tokens is tokens:
                    session.unsaved = False
                if session.store_error is not None:
                    log.info("saved the tokens of %s in the store again", st.identity.name)
                session.store_error, session.save_failures, session.save_at = None, 0, None
                self._schedule(st, session)

    def _fetch_machine(self, st: Entry, session: _Session, settings: Settings) -> TokenSet:
        """A machine identity's new token (caller holds the session's lock and saves after)."""
        renewed = session.tokens is not None
        fresh = self.client(st, settings).fetch()
        session.generation += 1
        self._fresh(session)
        self._keep(st, session, fresh)
        self._adopt(st, settings)
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

    def warning(self, st: Entry, tokens: TokenSet) -> str | None:
        """What a caller served ``tokens`` should hear: renewing fails and they are near their
        end (within the margin), or None."""
        session = self._sessions.get(st.identity.key)
        if session is None or tokens.fresh(self._clock(), self.margin):
            return None
        with session.lock:
            why = session.refused or (session.problem.one_line() if session.problem else None)
        if why is None or session.tokens is not tokens:
            return None
        return (
            f"cannot refresh {st.identity.name}: {why}; serving its token until "
            f"{at(tokens.expires_at)}, when it expires"
        )

    def token(
        self,
        st: Entry,
        conv: Conversation,
        refresh: bool = False,
        explicit: bool = False,
        relogin: bool = False,
        may_login: bool = True,
        auth_params: dict[str, str] | None = None,
        settings: Settings | None = None,
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
        why: str | None = None
        fetched: TokenSet | None = None
        waiting: _Await | None = None
        with session.lock:
            self._load(st, session)
            now = self._clock()
            tokens = session.tokens
            if tokens and tokens.fresh(now, self.margin) and not (refresh or relogin):
                return tokens
            if settings.machine and (tokens is None or relogin):
                fetched = self._fetch_machine(st, session, settings)
            elif tokens and not relogin and self._renews(session, tokens, settings):
                if tokens.expires_at > now and not refresh:
                    self._renew(st, session, settings, now, wait=False)
                    return tokens  # still valid: renewed behind the caller's back
                waiting = self._renew(st, session, settings, now, wait=True)
            elif tokens and tokens.expires_at > now and not (refresh or relogin):
                return tokens  # nothing renews it ahead of time: use it while it lasts
            else:
                why = session.refused
        if fetched is not None:
            self._save_pending(st, session)
            return fetched
        if waiting is not None:
            rejected = tokens if refresh else None
            renewed: TokenSet | _Await | None = waiting
            if waiting.probe is not None:  # another identity asks the provider: its outcome
                renewed = self._after_probe(st, session, settings, waiting.probe, conv, rejected)
            if isinstance(renewed, _Await):
                renewed = self._await_renewal(st, session, renewed, conv, rejected)
            if renewed is not None:
                return renewed
            why = session.refused  # refused meanwhile: only a login helps now
        with session.lock:
            now = self._clock()
            if not may_login:
                raise LoginRequired(
                    f"login required for {name}" + (f": {why}" if why else ""),
                    f'this caller cannot wait for one; run "kubetray login {name}"',
                )
            login = self._flights.current(st.identity.key)
            if login is None:
                login = self._start_login(st, settings, conv, now, explicit, auth_params or {}, why)
            else:
                login.join(conv)
        return login.wait(conv)

    # -- renewal (refresh, or a machine's new token) ----------------------------------------

    def _renews(self, session: _Session, tokens: TokenSet, settings: Settings) -> bool:
        """Whether ``tokens`` can be renewed with nobody there: a machine identity whose secret
        this caller gives, or a refresh token the provider has not refused."""
        if settings.machine:
            return settings.can_fetch
        return session.refused is None and self.providers.of(settings).renewable(settings, tokens)

    def _renew(
        self,
        st: Entry,
        session: _Session,
        settings: Settings,
        now: datetime,
        wait: bool,
        join: bool = True,
    ) -> _Await:
        """Have the tokens of ``st`` renewed now (caller holds the session's lock): joins the
        renewal in flight, else starts one. While a failure's backoff runs, a caller that must
        ``wait`` (its token is unusable) probes the provider instead (see _Probe), or waits
        for the probe another identity of the provider has in flight (``join``), or hears at
        once what the provider's last probe met. What to wait for is returned."""
        if session.refreshing:
            return _Await(session.attempts, PROBE_WAIT if session.probe else CALLER_WAIT)
        if session.retry_at is not None and now < session.retry_at:
            if not wait:
                return _Await(session.attempts)
            probe = self._claim_probe(settings.group, st.identity.key, now)
            if probe is None or (not join and probe is not True):
                raise self._failing(st, session, now)
            if isinstance(probe, tuple):
                return _Await(session.attempts, PROBE_WAIT, probe)
            session.probe = True
            log.info("%s: asking its provider now (a caller's token is unusable)", st.identity.name)
        session.wanted = True
        session.renew_with = settings
        self._run_soon(st.identity.key, settings.group)
        return _Await(session.attempts, PROBE_WAIT if session.probe else CALLER_WAIT)

    def _run_soon(self, key: str, group: str) -> None:
        """Run the renewal job of ``key`` now, on the scheduler's workers."""
        if self._scheduler.running:
            self._scheduler.schedule(key, self._clock(), group)
        else:  # a core nobody started (tests, one-shot commands): a thread of its own
            threading.Thread(target=self._renew_job, args=(key,), daemon=True).start()

    # -- probes: a provider that comes back is used at once (see _Probe) --------------------

    def _claim_probe(self, group: str, key: str, now: datetime) -> bool | tuple[_Probe, int] | None:
        """True: ``key`` probes ``group`` now. (probe, ended): another identity's probe is in
        flight, to wait past. None: a probe has just ended (its outcome is the news)."""
        with self._probing:
            probe = self._probes.setdefault(group, _Probe())
            if probe.running == key:
                return True
            if probe.running is not None:
                return probe, probe.ended
            if time.monotonic() - probe.started < PROBE_EVERY:
                return None
            probe.running, probe.started, probe.started_at = key, time.monotonic(), now
            return True

    def _await_probe(self, probe: _Probe, ended: int, conv: Conversation) -> None:
        """Wait (PROBE_WAIT at most, keeping the caller's connection alive) for ``probe`` to
        end after ``ended``."""
        deadline = time.monotonic() + PROBE_WAIT
        while True:
            with self._probing:
                left = deadline - time.monotonic()
                if probe.ended > ended or probe.running is None or left <= 0:
                    return
                self._probing.wait(min(left, KEEPALIVE))
                if probe.ended > ended:
                    return
            conv.keepalive()

    def _after_probe(
        self,
        st: Entry,
        session: _Session,
        settings: Settings,
        probe: tuple[_Probe, int],
        conv: Conversation,
        rejected: TokenSet | None,
    ) -> TokenSet | _Await | None:
        """Another identity's probe of the provider ended (or took too long): tokens renewed
        meanwhile, or the renewal to wait for (the probe reached the provider, so this one's
        backoff ended), or None when only a login helps; else why not (RenewalFailed)."""
        self._await_probe(*probe, conv)
        with session.lock:
            now = self._clock()
            tokens = session.tokens
            if tokens and tokens.expires_at > now and tokens is not rejected:
                return tokens
            if tokens is None or not self._renews(session, tokens, settings):
                return None
            return self._renew(st, session, settings, now, wait=True, join=False)

    def _provider_answered(
        self, group: str, key: str, reached: bool, error: AppError | None
    ) -> None:
        """A renewal of ``key`` ended: ``reached`` the provider (whatever it said), or failed
        with ``error`` before it could. A provider that answers again ends the backoff of
        every identity of it; a probe in flight by ``key`` has ended."""
        wake = False
        with self._probing:
            probe = self._probes.get(group)
            if probe is None:
                if reached or error is None:
                    return  # nothing failing to remember
                probe = self._probes[group] = _Probe()
            if reached:
                wake, probe.failing, probe.error, probe.error_at = probe.failing, False, None, None
            elif error is not None:
                probe.failing, probe.error, probe.error_at = True, error, self._clock()
            if probe.running == key:
                probe.running = None
                probe.ended += 1
                self._probing.notify_all()
        if wake:
            self._retry_group(group, key)

    def _retry_group(self, group: str, reached: str) -> None:
        """The provider of ``group`` answered (a renewal of ``reached``): every identity of it
        that backs off tries again now."""
        with self._lock:
            sessions = list(self._sessions.items())
        for key, session in sessions:
            st = self.registry.get(key)
            if key == reached or st is None or st.settings is None or st.settings.group != group:
                continue
            with session.lock:
                if session.retry_at is None or session.refreshing or session.tokens is None:
                    continue
                session.retry_at = None
                session.wanted = True
            log.info("%s: its provider answers again; refreshing now", st.identity.name)
            self._run_soon(key, group)

    def _await_renewal(
        self,
        st: Entry,
        session: _Session,
        waiting: _Await,
        conv: Conversation,
        rejected: TokenSet | None,
    ) -> TokenSet | None:
        """Wait (``waiting.wait`` s at most, keeping the caller's connection alive) for the
        renewal after ``waiting.seen``: its tokens, or None when the provider refused the
        refresh token (a login is next); else the reason it failed, as one line
        (RenewalFailed). ``rejected``: the tokens a cluster refused (a 401), which are no
        answer."""
        seen = waiting.seen
        deadline = time.monotonic() + waiting.wait
        while True:
            with session.done:
                left = deadline - time.monotonic()
                if session.attempts > seen or left <= 0:
                    break
                session.done.wait(min(left, KEEPALIVE))
                if session.attempts > seen:
                    break
            conv.keepalive()
        with session.lock:
            now = self._clock()
            tokens = session.tokens
            if session.refused is not None:
                return None
            if tokens and tokens.expires_at > now and tokens is not rejected:
                return tokens
            if session.attempts <= seen:  # still in flight
                raise RenewalFailed(
                    f"cannot refresh {st.identity.name}: the provider has not answered the "
                    f"refresh in {waiting.wait:.0f} s",
                    "kubetray keeps waiting for its answer: try again in a moment",
                    session.problem,
                )
            raise self._failing(st, session, now)

    def _failing(self, st: Entry, session: _Session, now: datetime) -> RenewalFailed:
        """Why ``st`` has no valid token now: the newest failure seen with its provider (this
        identity's, or a probe's by another of the provider's identities), or the probe still
        waiting for an answer, and when kubetray asks again."""
        tokens = session.tokens
        problem, seen_at = session.problem, session.failed_at
        group = st.settings.group if st.settings else ""
        with self._probing:
            probe = self._probes.get(group)
            asking = probe.started_at if probe and probe.running else None
            if (  # the provider's newer news, unless this identity's own problem is its own
                probe
                and probe.error
                and probe.error_at
                and (not seen_at or probe.error_at > seen_at)
                and (problem is None or isinstance(problem, ProviderUnavailable))
            ):
                problem = probe.error
            next_probe = (
                probe.started_at + timedelta(seconds=PROBE_EVERY)
                if probe and probe.started_at
                else None
            )
        if tokens is not None and tokens.expires_at <= now:
            state = f"its token expired at {at(tokens.expires_at)}"
        else:
            state = "its token was refused"
        if asking is not None:
            return RenewalFailed(
                f"cannot refresh {st.identity.name} ({state}): its provider has not answered "
                f"kubetray's request of {at(asking)} yet",
                "kubetray keeps waiting for the answer: try again in a moment",
                problem,
            )
        retry = min((t for t in (session.retry_at, next_probe) if t is not None), default=now)
        message = problem.message if problem else "the last refresh failed"
        hint = _without_retry(problem.hint if problem else None) or "see kubetray status"
        later = f"; kubetray tries again at {at(retry)}" if retry > now else ""
        return RenewalFailed(
            f"cannot refresh {st.identity.name} ({state}): {message}", hint + later, problem
        )

    def _adopt(self, st: Entry, settings: Settings) -> None:
        """Remember the settings that worked; a full disk costs that memory, not the tokens."""
        try:
            self.registry.adopt(st, settings)
        except OSError as e:
            log.warning("cannot remember the settings of %s: %s", st.identity.name, e)

    def _note_login_needed(self, st: Entry, session: _Session | None) -> None:
        """Remember in the index why ``st`` needs a login, as ``session`` says (None: it no
        longer does), so that an agent started later says it too."""
        why = None
        if session is not None:
            with session.lock:
                if session.refused is not None and session.tokens is not None:
                    why = (session.refused, session.tokens.issued_at.isoformat())
        try:
            self.registry.note_login_needed(st, why)
        except OSError as e:
            log.warning("cannot remember why %s needs a login: %s", st.identity.name, e)

    def _fresh(self, session: _Session) -> None:
        """A renewal or a login worked: no failure, backoff or refusal stands."""
        session.problem, session.failures, session.retry_at = None, 0, None
        session.failed_at = None
        session.refused, session.unsure = None, None

    def account_choice(self, st: Entry) -> dict[str, str]:
        """What a login of ``st`` adds to let the person pick another account ({}: the
        provider offers no choice); AppError when the provider cannot be asked."""
        return self.client(st).account_choice()

    def switch_account(self, st: Entry, conv: Conversation) -> TokenSet:
        """Log in again, letting the person pick another account where the provider can
        (``prompt=select_account`` for OIDC)."""
        params: dict[str, str] = {}
        with contextlib.suppress(AppError):  # the login reports an unreachable provider
            params = self.account_choice(st)
        return self.token(st, conv, explicit=True, relogin=True, auth_params=params)

    def _start_login(
        self,
        st: Entry,
        settings: Settings,
        conv: Conversation,
        now: datetime,
        explicit: bool,
        auth_params: dict[str, str],
        why: str | None = None,
    ) -> Login:
        """Start the identity's login (caller holds its session lock) with ``conv`` joined.
        ``why``: the reason a login is needed, when there is one to tell (a refused refresh)."""
        name = st.identity.name
        if demo.stopped(settings):
            raise LoginRequired("the kubetray demo is not running", demo.start_hint())
        blocked = self._flights.blocked_reason(st.identity.key, now, settings)
        if blocked and not explicit:
            for observer in self.observers:
                observer.login_required(name, f"the last login failed: {blocked}")
            raise LoginRequired(
                f"login required for {name}, whose last login failed: {blocked}",
                f'run "kubetray login {name}"',
            )
        browser = self._browser(settings.browser_command)
        if not self.desktop:
            _check_reachable(name, settings, conv, browser, why)
        login = Login(name, browser)
        login.browser_now = lambda: self._browser(settings.browser_command)
        login.origin = getattr(conv, "origin", None)
        login.auth_params = auth_params
        login.explicit = explicit
        login.asked_by = getattr(conv, "asked_by", None)
        self._flights.begin(st.identity.key, login)
        for observer in self.observers:
            observer.login_started(login)
        self.changes.tell()
        login.join(conv)  # before the login runs: its first prompt must find this caller
        if why:
            login.show(f"{name} needs a login: {why}")

        def finished(_error: AppError | None) -> None:
            for observer in self.observers:
                observer.login_finished(login)
            self.changes.tell()

        def keep(tokens: TokenSet) -> None:
            session = self._session(st)
            with session.lock:
                session.generation += 1  # a refresh in flight answers for the old grant
                self._fresh(session)
                self._keep(st, session, tokens)
            self._save_pending(st, session)
            self._adopt(st, settings)
            self._note_login_needed(st, None)

        self._flights.run(
            st.identity.key,
            settings,
            login,
            lambda lg: self._interactive_login(st, settings, lg),
            keep,
            finished,
        )
        return login

    def _interactive_login(self, st: Entry, settings: Settings, login: Login) -> TokenSet:
        client = self.client(st, settings)
        # A person's login is announced, after the notice that it will not outlive the agent.
        # One that needs nobody (gcloud's ADC taken over, a password grant) is not: it may fail
        # at once, and then its one line says what to do; the notice follows its success.
        person = settings.login_needs != NOBODY
        if person:
            self._tell_notice(login)
            login.show(f"Logging in to {st.identity.name} ({settings.where})…")
        tokens = client.login(login, self._session(st).tokens)
        if not person:
            self._tell_notice(login)
        return tokens

    def _tell_notice(self, login: Login) -> None:
        if self.notice:
            login.show(self.notice, terminal=False)  # the agent's terminal heard it at start
            self.notice = None

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
        with session.done:  # its answer holds the newest refresh token: the one to revoke
            deadline = time.monotonic() + STOP_WAIT
            while session.refreshing and (left := deadline - time.monotonic()) > 0:
                session.done.wait(left)
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
            session.generation += 1
            self._fresh(session)
            self._keep(st, session, None)
            self._flights.unblock(st.identity.key)
        self._note_login_needed(st, None)
        self._store.delete(store_key(st.identity))  # a failure is the caller's to hear
        with session.lock:
            if session.tokens is None:
                session.unsaved = False
        return outcome

    def forget(self, name: str) -> bool:
        """Log out of ``name`` and remove the identity (it comes back if kubectl uses it)."""
        st = self.find(name)
        if st is None or self.logout(name) is None:
            return False
        key = st.identity.key
        self._flights.forget(key)
        self.registry.remove(key)
        self._scheduler.cancel(key)
        with self._lock:
            self._sessions.pop(key, None)
        return True

    def discard(self, st: Entry, settings: Settings) -> bool:
        """Drop the session of ``st`` if no person has a part in it: ``settings`` need nobody
        to log in (a machine identity, a login read from a file or a tool), and it holds no
        tokens and no login in flight. True when dropped (the broker then takes the identity
        back: see Broker). A person's login (a browser, a device code) stays: it awaits them."""
        if not (settings.machine or settings.login_needs == NOBODY):
            return False
        key = st.identity.key
        session = self._sessions.get(key)
        if session is not None:
            with session.lock:
                if session.tokens is not None or session.refreshing or session.unsaved:
                    return False
        if self._flights.current(key) is not None:
            return False
        self._flights.forget(key)  # its block too: the next request tries afresh
        self._scheduler.cancel(key)
        with self._lock:
            self._sessions.pop(key, None)
        return True

    # -- refresh ahead ----------------------------------------------------------------------

    def _schedule(self, st: Entry, session: _Session) -> None:
        """Plan the next job of ``st`` (caller holds the session's lock): a store write that
        failed, a retry after a failure, or the refresh ahead of expiry, whichever comes first."""
        times = []
        if session.unsaved and session.save_at is not None:
            times.append(session.save_at)
        tokens, settings = session.tokens, st.settings
        if tokens is not None and settings is not None and self._renews(session, tokens, settings):
            times.append(session.retry_at or self._due(session, tokens))
            if session.wanted:  # a caller's renewal (a probe too) is not pushed back
                times.append(self._clock())
        if times:
            group = settings.group if settings else ""
            self._scheduler.schedule(st.identity.key, min(times), group)
        else:
            self._scheduler.cancel(st.identity.key)

    def _due(self, session: _Session, tokens: TokenSet) -> datetime:
        """When ``tokens`` are refreshed ahead: at 1.5 margins before expiry, less up to half a
        margin at random (never in the first half of what is left), so identities logged in
        together do not all come back at once."""
        if session.due is not None and session.due[0] is tokens:
            return session.due[1]
        when = tokens.refresh_due(self.margin) - _spread(tokens, self.margin) * random.random()  # noqa: S311
        session.due = (tokens, when)
        return when

    def _renew_job(self, key: str) -> None:
        """What the scheduler runs for ``key``: save what the store lacks, then renew the
        tokens if they are due (or a caller wants it), with nobody waiting on the lock."""
        st = self.registry.get(key)
        session = self._sessions.get(key)
        if st is None or st.settings is None or session is None:
            return  # forgotten meanwhile
        self._save_pending(st, session)
        with session.lock:
            tokens = session.tokens
            settings = session.renew_with or st.settings
            now = self._clock()
            wanted, session.wanted, session.renew_with = session.wanted, False, None
            probe = session.probe and not session.refreshing
            generation = session.generation
            if (
                tokens is None
                or session.refreshing
                or not self._renews(session, tokens, settings)
                or (session.retry_at is not None and now < session.retry_at and not probe)
                or (not wanted and session.retry_at is None and now < self._earliest(tokens))
            ):
                self._schedule(st, session)
                skipped = True
            else:
                session.refreshing, skipped = True, False
            session.probe = False
        if skipped or tokens is None:
            self._provider_answered(settings.group, key, False, None)  # a probe: not asked
            return  # nothing to do now (another plan holds)
        fresh: TokenSet | None = None
        error: AppError | None = None
        try:
            if settings.machine:
                fresh = self.client(st, settings).fetch()
            else:
                fresh = self.client(st, settings).renew(tokens)
        except AppError as e:
            error = e
        except Exception as e:  # whatever it was, callers hear of it and it is tried again
            log.exception("refresh of %s failed", st.identity.name)
            error = AppError(f"the refresh failed: {type(e).__name__}")
        told: tuple[str, bool] | None = None
        try:
            with session.lock:
                session.refreshing = False
                if session.generation != generation:
                    log.info("dropping a refresh of %s: logged in or out since", st.identity.name)
                elif fresh is not None:
                    self._fresh(session)
                    self._keep(st, session, fresh)
                    session.refreshes += 1
                    session.refreshed_at = self._clock()
                    log.info("refreshed %s (valid until %s)", st.identity.name, fresh.expires_at)
                else:
                    assert error is not None
                    told = self._failed(st, session, tokens, error)
            self._save_pending(st, session)  # the answer's refresh token, before anything else
            if fresh is not None and session.generation == generation:
                self._adopt(st, settings)
        finally:
            with session.done:
                session.attempts += 1
                session.done.notify_all()
        reached = fresh is not None or isinstance(error, RefreshFailed | RefreshRefused)
        self._provider_answered(settings.group, key, reached, None if reached else error)
        if told is not None:
            if told[1]:
                self._note_login_needed(st, session)
            for observer in self.observers:
                observer.refresh_failed(st.identity.name, *told)
        self.changes.tell()  # refreshed, or failed: either shows

    def _failed(
        self, st: Entry, session: _Session, sent: TokenSet, error: AppError
    ) -> tuple[str, bool]:
        """Take a failed renewal in (caller holds the session's lock): keep the refresh token
        the provider rotated, drop one it refused, else back off. (reason, final) for the
        observers."""
        name = st.identity.name
        now = self._clock()
        answered = isinstance(error, RefreshFailed)
        if isinstance(error, RefreshFailed):  # answered, rotated, but its answer is unusable
            self._keep(st, session, error.tokens)
            error = error.cause or error
        if isinstance(error, RefreshRefused):
            reason = error.message
            lost = session.unsure
            if lost is not None and lost[0] == sent.refresh_token:
                reason = (
                    "the provider rotated the refresh token but its answer was lost (the "
                    f"refresh at {at(lost[1])} got no answer), so it refused the old one"
                )
            log.warning("%s needs a login: %s", name, reason)
            current = session.tokens
            self._fresh(session)
            session.refused = reason
            if current is not None and current.refresh_token:
                self._keep(st, session, replace(current, refresh_token=None))
            return reason, True
        if isinstance(error, ProviderUnavailable) and error.unsure and not answered:
            session.unsure = (sent.refresh_token or "", now)
        session.failures += 1
        session.problem, session.failed_at = error, now
        session.retry_at = now + _backoff(session.failures, RETRY_FIRST, RETRY_MAX)
        self._schedule(st, session)
        log.warning(
            "refresh of %s failed (%d in a row; next try at %s): %s",
            name,
            session.failures,
            at(session.retry_at),
            error.one_line(),
        )
        return error.one_line(), False

    def _earliest(self, tokens: TokenSet) -> datetime:
        """The earliest refresh-ahead time ``_due`` can give ``tokens``."""
        return tokens.refresh_due(self.margin) - _spread(tokens, self.margin)


def _without_retry(hint: str | None) -> str | None:
    """``hint`` without its own "kubetray tries again" (the caller says when it does)."""
    if hint is None:
        return None
    for tail in ("; kubetray tries again meanwhile", "; kubetray tries again"):
        hint = hint.removesuffix(tail)
    return None if hint in ("kubetray tries again", "kubetray tries again meanwhile") else hint


def _spread(tokens: TokenSet, floor: timedelta) -> timedelta:
    """How far before its usual time a refresh ahead may be drawn: half a margin, but never
    into the first half of the time left before it."""
    margin = tokens.margin(floor)
    return max(timedelta(0), min(margin / 2, (tokens.lifetime - margin * 1.5) / 2))


def _check_reachable(
    name: str, settings: Settings, conv: Conversation, browser: Browser, why: str | None
) -> None:
    """Start a login only if it can finish: never one that nobody can see or answer.
    ``why``: the reason a login is needed (a refused refresh), said first."""
    needs = settings.login_needs
    if needs == NOBODY:
        return
    remedy = f'run "kubetray login {name}" in a terminal'
    needed = f"login required for {name}" + (f": {why}" if why else "")
    if needs == TERMINAL:
        if not conv.interactive:
            raise LoginRequired(needed, f"its login needs an answer typed in a terminal; {remedy}")
    elif not (conv.interactive or conv.visible or browser.available()):
        raise LoginRequired(needed, f"nothing here can show a login; {remedy}")
