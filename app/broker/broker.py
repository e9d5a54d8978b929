"""The broker: which identity a request names, its credential, and every identity's status.

Qt-free and transport-free: the use cases call it. It owns each identity's usage (calls, last
use, clusters, last error, a stored credential's cached copy) under its lock; a login's session
is Logins' (whatever its provider), the names the Registry's. Two families of identity: stored
credentials, served here as ``kubetray store`` kept them, and logins, served by Logins with
their provider's client (app.providers).
"""

import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from app.broker.changes import Changes
from app.broker.consent import Consent
from app.broker.flight import Conversation
from app.broker.logins import Logins, SessionView, at
from app.broker.registry import Entry, Registry
from app.errors import AppError, CredentialError, UsageError
from app.model import (
    STORED,
    CallRecord,
    ContextUse,
    Credential,
    Identity,
    IdentityStatus,
    State,
)
from app.oidc.errors import clock_words
from app.oidc.tokens import MIN_MARGIN, TokenSet, handed_out_expiry
from app.providers.base import Settings, Token, TokensRefused, Wanted
from app.static_credentials import StoredCredential, StoredCredentials, StoredInfo
from exec_helper.options import HelperOptions

Request = Wanted | HelperOptions
"""What a call asks for: a provider's Wanted, or kubetray-exec's own flags (stored, OIDC)."""

MAX_RECORDS = 500
MAX_CLUSTERS = 64

log = logging.getLogger(__name__)


def utcnow() -> datetime:
    """The clock the broker uses unless a test gives it another."""
    return datetime.now(UTC)


@dataclass(eq=False)
class _Usage:
    """What the broker knows of one identity's use (guarded by the broker's lock, but
    ``credential``, which ``read`` guards: one store read for all concurrent callers)."""

    calls: int = 0
    last_used: datetime | None = None
    clusters: set[str] = field(default_factory=set)
    last_error: str | None = None
    last_error_at: datetime | None = None
    credential: StoredCredential | None = None
    """A stored credential as last read from the store."""
    read: threading.Lock = field(default_factory=threading.Lock)
    served: bool = False
    """A call got its credential (this run)."""
    active: int = 0
    """Calls in progress."""


def no_contexts(_kubeconfig: str | None = None) -> dict[str, list[ContextUse]]:
    """No kubeconfig view: identities are named from their settings alone."""
    return {}


class Broker:
    """Identities, their credentials, and the record of calls."""

    def __init__(
        self,
        stored: StoredCredentials,
        registry: Registry,
        logins: Logins | None = None,
        clock: Callable[[], datetime] = utcnow,
        contexts: Callable[[str | None], dict[str, list[ContextUse]]] = no_contexts,
        consent: Consent | None = None,
    ) -> None:
        """``contexts(KUBECONFIG)`` maps identity keys to the kubeconfig contexts that use
        them (None: the agent's own view). ``consent``: which SSH hosts may have credentials
        through a forward (None: none may)."""
        self._stored = stored
        self.registry = registry
        self.logins = logins
        self.changes = logins.changes if logins else Changes()
        """Told when what status() says may have changed (changes.py)."""
        self.providers = logins.providers if logins else registry.providers
        self._clock = clock
        self._contexts = contexts
        self.consent = consent
        self._lock = threading.Lock()
        self._usage: dict[str, _Usage] = {}
        self._records: deque[CallRecord] = deque(maxlen=MAX_RECORDS)
        self.started = clock()
        self._declined: dict[tuple[str, str], str] = {}
        """(identity key, --name) not applied, and the line that says why (_decline_name)."""
        self._untold: set[tuple[str, str]] = set()
        """Of those, the ones no caller has heard yet."""

    # -- which identity ---------------------------------------------------------------------

    def wanted(self, request: Request) -> Wanted:
        """The provider-neutral form of ``request`` (UsageError when it names nothing)."""
        if isinstance(request, Wanted):
            return request
        return self.providers.from_options(request)

    def identity(
        self, request: Request, kubeconfig: str | Callable[[], str | None] | None = None
    ) -> Entry:
        """The identity a request names: a stored credential, or a login (any provider).

        ``kubeconfig``: the caller's kubeconfig (KUBECONFIG, or a function finding it), where a
        new identity's name is looked up; asked only for a new identity.
        """
        wanted = self.wanted(request)
        settings = wanted.settings
        known = self.registry.get(settings.key)
        before = known.identity.name if known else None
        chosen = wanted.name
        if known is not None and chosen and chosen != before:
            others = [] if known.chosen else self._users(settings.key, kubeconfig)
            if known.chosen or len(others) > 1:
                self._decline_name(known, chosen, others)
                chosen = None
        st = self.registry.identity(
            settings, chosen, lambda: self._kubeconfig_name(settings, kubeconfig)
        )
        if before is not None and before != st.identity.name:
            self._renamed(before, st.identity.name)
        return st

    def proposed_identity(
        self, request: Request, kubeconfig: str | Callable[[], str | None] | None = None
    ) -> tuple[Identity, bool]:
        """The identity identity(request) would return, ignoring a ``--name``, without
        creating, renaming or writing anything, and whether it does not exist yet."""
        settings = self.wanted(request).settings
        return self.registry.proposed(settings, lambda: self._kubeconfig_name(settings, kubeconfig))

    def _users(self, key: str, kubeconfig: str | Callable[[], str | None] | None) -> list[str]:
        """The kubeconfig users that run the identity ``key``, in the caller's kubeconfig and
        in the agent's own view (``user`` (file)), each once."""
        if callable(kubeconfig):
            kubeconfig = kubeconfig()
        users: dict[tuple[str, str], None] = {}
        for view in dict.fromkeys([kubeconfig, None]):
            for use in self._contexts(view).get(key) or []:
                users[(use.file, use.user)] = None
        return [f"{user} ({file})" if file else user for file, user in users]

    def _decline_name(self, st: Entry, name: str, others: list[str]) -> None:
        """``--name NAME`` is not applied to ``st``: its name was chosen already, or other
        kubeconfig users run it (renaming it would rename it for them). Said once per run, to
        the caller and in the log; the caller is served under its name."""
        with self._lock:
            if (st.identity.key, name) in self._declined:
                return
            if st.chosen:
                why = "its name was given with --name already"
            else:
                why = "kubeconfig users " + ", ".join(others) + " run it too"
            line = (
                f"--name {name} is not applied: this login is {st.identity.name}, and {why}; "
                f'give them all one --name, or run "kubetray forget {st.identity.name}" to '
                "start it afresh"
            )
            self._declined[(st.identity.key, name)] = line
            self._untold.add((st.identity.key, name))
        log.warning("%s", line, extra={"terminal": False})

    def known_identity(self, request: Request) -> Entry | None:
        """The identity identity(request) would return if it neither creates nor renames
        one, else None (nothing done): for a caller that wants an answer at once."""
        try:
            wanted = self.wanted(request)
        except UsageError:  # names nothing: the full request says so
            return None
        st = self.registry.get(wanted.settings.key)
        if st is None:
            return None
        if wanted.name and wanted.name != st.identity.name:
            with self._lock:  # a name declined and said: served as it is; else decided in full
                said = (st.identity.key, wanted.name) in self._declined and (
                    st.identity.key,
                    wanted.name,
                ) not in self._untold
            if not said:
                return None
        return st

    def _kubeconfig_name(
        self, settings: Settings, kubeconfig: str | Callable[[], str | None] | None
    ) -> str:
        """The kubeconfig user that runs this identity, else the context (per-cluster config),
        looked up in the caller's kubeconfig, then in the agent's own view."""
        if callable(kubeconfig):
            kubeconfig = kubeconfig()
        for view in dict.fromkeys([kubeconfig, None]):
            uses = self._contexts(view).get(settings.key) or []
            users = {u.user for u in uses}
            if len(users) == 1:
                return users.pop()
            if uses:
                return uses[0].context
        return settings.fallback_name

    def _use(self, st: Entry) -> _Usage:
        with self._lock:
            usage = self._usage.get(st.identity.key)
            if usage is None:
                usage = self._usage[st.identity.key] = _Usage()
            return usage

    # -- one call ---------------------------------------------------------------------------

    def get_credential(
        self,
        st: Entry,
        request: Request,
        conv: Conversation,
        cluster: str | None = None,
        skip_cache: bool = False,
    ) -> Credential:
        """The credential of ``st`` (which ``request`` named): from memory, the store, or a
        login. ``skip_cache``: the client got a 401 with the last one (or --force-refresh).
        """
        wanted = self.wanted(request)
        skip_cache = skip_cache or wanted.force_refresh
        if st.identity.kind == STORED:
            return self._serve(
                st, None, cluster, lambda usage: self._stored_credential(st, usage, skip_cache)
            )
        credential = self._serve(
            st,
            wanted.settings,
            cluster,
            lambda _: self._login_credential(st, wanted, conv, skip_cache, cluster),
        )
        return self._tell_declined(st, wanted, credential)

    def _tell_declined(self, st: Entry, wanted: Wanted, credential: Credential) -> Credential:
        """The credential, with the line that says its --name was not applied, once."""
        told = (st.identity.key, wanted.name or "")
        with self._lock:
            if told not in self._untold:
                return credential
            self._untold.discard(told)
            line = self._declined[told]
        warning = ". ".join(w for w in (line, credential.warning) if w)
        return replace(credential, warning=warning)

    def cached_credential(
        self, st: Entry, request: Request, cluster: str | None = None, skip_cache: bool = False
    ) -> Credential | None:
        """get_credential, if memory holds the credential (no store read, refresh, login or
        prompt); else None, and nothing is done or counted."""
        wanted = self.wanted(request)
        if skip_cache or wanted.force_refresh:
            return None
        if st.identity.kind != STORED:
            tokens = self.logins.cached(st) if self.logins else None
            if tokens is None:
                return None
            ready = getattr(self.providers.of(wanted.settings), "ready", None)  # base.Prepares
            if ready is not None and not ready(wanted.settings, tokens):
                return None
            try:
                return self._serve(
                    st,
                    wanted.settings,
                    cluster,
                    lambda _: self._login_answer(st, wanted, tokens, cluster),
                )
            except TokensRefused:
                return None  # the full path renews them
        with self._lock:
            usage = self._usage.get(st.identity.key)
        stored = usage.credential if usage else None  # read without `usage.read`: never waits
        if stored is None:
            return None
        return self._serve(st, None, cluster, lambda _: self._stored_answer(st, stored))

    def _serve(
        self,
        st: Entry,
        settings: Settings | None,
        cluster: str | None,
        fetch: Callable[[_Usage], Credential],
    ) -> Credential:
        """One call of ``st``: counted, its credential fetched, its error kept for status.
        ``settings``: the caller's, for a login identity (None: a stored credential)."""
        usage = self._note_use(st, cluster)
        try:
            credential = fetch(usage)
        except Exception as e:
            with self._lock:
                usage.last_error = getattr(e, "message", None) or str(e)
                usage.last_error_at = self._clock()
                usage.active -= 1
            self._take_back(st, settings)
            raise
        with self._lock:
            usage.last_error = None
            usage.served = True
            usage.active -= 1
        return credential

    def _note_use(self, st: Entry, cluster: str | None) -> _Usage:
        usage = self._use(st)
        with self._lock:
            usage.calls += 1
            usage.active += 1
            usage.last_used = self._clock()
            if cluster and len(usage.clusters) < MAX_CLUSTERS:
                usage.clusters.add(cluster)
        return usage

    def _take_back(self, st: Entry, settings: Settings | None) -> None:
        """A call failed: if it named an identity that exists nowhere else, forget it.

        A typo (``--stored nosuch``) or a cloud command line with nothing configured (no AWS
        credentials, no gcloud ADC file, no az) must not leave an identity in status and
        identities.json. It is taken back when a request of this run made it, it never
        served, no other call is on it, and no person has a part in it: a stored name the
        store does not hold, or a login that needs nobody with no tokens and no login in
        flight (Logins.discard). One that awaits a person's login (a browser, a device code)
        stays, as does every identity of the index or the store. The call stays in the
        record (Diagnostics).
        """
        key = st.identity.key
        if not st.new:
            return
        with self._lock:
            usage = self._usage.get(key)
            if usage is None or usage.served or usage.active:
                return
        if settings is None:
            if st.identity.kind != STORED or self._stored_holds(st.identity.name):
                return
        elif self.logins is None or not self.logins.discard(st, settings):
            return
        with self._lock:
            if self._usage.get(key) is not usage or usage.served or usage.active:
                return  # another call came meanwhile: it decides
            del self._usage[key]
        self.registry.discard(key)
        log.info(  # housekeeping: the log has it, the caller was told why it failed
            "%s: not kept (it never served, and nobody logs in to it)",
            st.identity.name,
            extra={"terminal": False},
        )

    def _stored_holds(self, name: str) -> bool:
        """Whether the store's index lists ``name`` (an unreadable index: as if it did)."""
        try:
            return any(info.name == name for info in self._stored.list())
        except AppError:
            return True

    def _login_credential(
        self,
        st: Entry,
        wanted: Wanted,
        conv: Conversation,
        skip_cache: bool,
        cluster: str | None,
    ) -> Credential:
        if self.logins is None:
            raise CredentialError(
                f"login required for {st.identity.name}", "logins are not enabled"
            )
        tokens = self.logins.token(
            st,
            conv,
            refresh=skip_cache,
            may_login=not wanted.no_login,
            settings=wanted.settings,
        )
        try:
            return self._login_answer(st, wanted, tokens, cluster)
        except TokensRefused as e:  # refused before their end: renew them, as after a 401
            log.info("%s: %s; renewing its tokens", st.identity.name, e.message)
            tokens = self.logins.token(
                st, conv, refresh=True, may_login=not wanted.no_login, settings=wanted.settings
            )
            return self._login_answer(st, wanted, tokens, cluster)

    def _login_answer(
        self, st: Entry, wanted: Wanted, tokens: TokenSet, cluster: str | None
    ) -> Credential:
        assert self.logins is not None
        settings = wanted.settings
        given = self.providers.of(settings).token(settings, tokens, cluster)
        token: str | None
        if isinstance(given, Token):  # a token with an end of its own (an EKS token)
            token, expires = given.value, given.expires_at
        else:
            token, expires = given, tokens.handed_out_expiry(self._clock(), self.logins.margin)
        if not token:
            raise CredentialError(f"the provider gave {st.identity.name} no token to send")
        return Credential(
            token=token,
            expires=expires,
            subject=tokens.who(),
            warning=self.logins.warning(st, tokens)
            or _behind(st.identity.name, tokens, token, self._clock()),
        )

    def _stored_credential(self, st: Entry, usage: _Usage, skip_cache: bool) -> Credential:
        with usage.read:  # one store read for all concurrent callers
            stored = usage.credential
            if stored is None or skip_cache:
                stored = usage.credential = self._stored.load(st.identity.name)
        return self._stored_answer(st, stored)

    def _stored_answer(self, st: Entry, stored: StoredCredential) -> Credential:
        now = self._clock()
        if stored.not_after is not None and stored.not_after <= now:
            raise CredentialError(
                f"the credential {st.identity.name} expired at "
                f"{stored.not_after:%Y-%m-%d %H:%M:%S}Z",
                f"store a new one: kubetray store {st.identity.name} ...",
            )
        if stored.not_before is not None and stored.not_before > now:
            raise CredentialError(
                f"the credential {st.identity.name} is not valid before "
                f"{stored.not_before:%Y-%m-%d %H:%M:%S}Z",
                "wait until then, or check this machine's clock",
            )
        expires = None
        if stored.not_after is not None:  # clients ask again before it fails, as for OIDC
            floor = self.logins.margin if self.logins else MIN_MARGIN
            expires = handed_out_expiry(stored.not_after, stored.lifetime, now, floor)
        return Credential(
            token=stored.token,
            certificate_pem=stored.certificate_pem,
            key_pem=stored.key_pem,
            expires=expires,
            subject=stored.subject,
        )

    def invalidate(self, name: str) -> None:
        """Forget a cached stored credential (it was stored again or removed)."""
        with self._lock:
            usage = self._usage.get(f"stored:{name}")
        if usage is not None:
            with usage.read:
                usage.credential = None

    # -- records and status -----------------------------------------------------------------

    def _renamed(self, old: str, new: str) -> None:
        """An identity got a name a person chose: its past calls show it too (Diagnostics)."""
        with self._lock:
            self._records = deque(
                (replace(r, identity=new) if r.identity == old else r for r in self._records),
                maxlen=MAX_RECORDS,
            )

    def record(self, rec: CallRecord) -> None:
        """Add a call to the record (most recent last)."""
        with self._lock:
            self._records.append(rec)

    def files(self) -> list[str]:
        """The files status() reads that another process may write (`kubetray store` writes
        stored.json without the agent): what a view watches besides ``changes``."""
        return [self._stored.index_path, self.registry.index_path]

    def calls(self, limit: int = 100) -> list[CallRecord]:
        """The most recent calls, newest first."""
        with self._lock:
            return list(self._records)[-limit:][::-1]

    def counts(self) -> tuple[int, int]:
        """Calls recorded: (succeeded, failed)."""
        with self._lock:
            ok = sum(1 for r in self._records if r.ok)
            return ok, len(self._records) - ok

    def status(self) -> list[IdentityStatus]:
        """Every identity known to this agent, its index or the store, with its state."""
        now = self._clock()
        contexts = self._contexts(None)
        # The index once per call, whatever the number of identities: the tray asks every
        # second, and one read per stored identity made that quadratic (issue 33).
        index = {info.name: info for info in self._stored.list()}
        out: list[IdentityStatus] = []
        seen: set[str] = set()
        for st in self.registry.known():
            seen.add(st.identity.name)
            uses = tuple(u.context for u in contexts.get(st.identity.key, ()))
            if st.identity.kind == STORED:
                out.append(self._stored_status(st, now, uses, index.get(st.identity.name)))
            else:
                out.append(self._login_status(st, now, uses))
        for info in index.values():
            if info.name not in seen:
                expires = datetime.fromisoformat(info.not_after) if info.not_after else None
                starts = datetime.fromisoformat(info.not_before) if info.not_before else None
                state = _stored_state(now, expires, starts, None)
                out.append(
                    IdentityStatus(
                        name=info.name,
                        kind=info.kind,
                        state=state,
                        expires=expires.isoformat() if expires else None,
                        subject=info.subject,
                        contexts=tuple(u.context for u in contexts.get(f"stored:{info.name}", ())),
                    )
                )
        return out

    def _stored_status(
        self, st: Entry, now: datetime, contexts: tuple[str, ...], info: StoredInfo | None
    ) -> IdentityStatus:
        """``info``: what the stored index says of it (None: not in the index)."""
        usage = self._use(st)
        with self._lock:
            cred, error, calls = usage.credential, usage.last_error, usage.calls
            last_used, clusters = usage.last_used, tuple(sorted(usage.clusters))
        expires = cred.not_after if cred else None
        starts = cred.not_before if cred else None
        kind = STORED
        if info is not None:
            kind = info.kind
            if expires is None and info.not_after:
                expires = datetime.fromisoformat(info.not_after)
            if starts is None and info.not_before:
                starts = datetime.fromisoformat(info.not_before)
        state = _stored_state(now, expires, starts, error)
        return IdentityStatus(
            name=st.identity.name,
            kind=kind,
            state=state,
            expires=expires.isoformat() if expires else None,
            subject=(cred.subject if cred else None) or (info.subject if info else None),
            calls=calls,
            last_used=last_used.isoformat() if last_used else None,
            clusters=clusters,
            contexts=contexts,
            error=error,
        )

    def _login_status(self, st: Entry, now: datetime, contexts: tuple[str, ...]) -> IdentityStatus:
        assert st.settings is not None
        provider = self.providers.of(st.settings)
        margin = self.logins.margin if self.logins else None
        session = (
            self.logins.view(st, now) if self.logins else SessionView(None, False, None, 0, None)
        )
        usage = self._use(st)
        with self._lock:
            error, error_at, calls = usage.last_error, usage.last_error_at, usage.calls
            last_used, clusters = usage.last_used, tuple(sorted(usage.clusters))
        tokens = session.tokens
        if tokens is not None and error_at is not None and tokens.issued_at >= error_at:
            error = None  # tokens came since (a refresh, a login): that failure is over
        if session.logging_in:
            state = State.LOGGING_IN
        elif session.refused is not None:
            state = State.NEEDS_LOGIN  # still valid for a while, but only a login renews it
        elif tokens is not None and tokens.expires_at > now:
            fresh = tokens.fresh(now, margin) if margin else True
            state = State.READY if fresh else State.EXPIRING
        else:
            state = State.NEEDS_LOGIN
        shown = provider.describe(st.settings, tokens)
        return IdentityStatus(
            name=st.identity.name,
            kind=st.identity.kind,
            state=state,
            expires=tokens.expires_at.isoformat() if tokens else None,
            who=shown.who,
            groups=shown.groups,
            issuer=shown.issuer,
            client_id=shown.client_id,
            details=shown.details,
            refreshable=bool(tokens and tokens.refresh_token),
            refreshes=session.refreshes,
            refreshed_at=session.refreshed_at.isoformat() if session.refreshed_at else None,
            calls=calls,
            last_used=last_used.isoformat() if last_used else None,
            clusters=clusters,
            contexts=contexts,
            error=session.refused
            or session.refresh_error
            or session.blocked
            or session.store_error
            or error,
            note=provider.note(st.settings, tokens),
            refresh_error=session.refused or session.refresh_error,
            store_error=session.store_error,
            retry_at=session.retry_at.isoformat() if session.retry_at else None,
        )


def _behind(name: str, tokens: TokenSet, token: str, now: datetime) -> str | None:
    """What kubectl hears when the id_token it is served has passed its exp on this machine's
    clock: the provider's clock is behind by more than the token's life, less the leeway its
    check allows. kubetray serves it all the same, for as long as the provider meant it to
    live, measured here (a cluster on the provider's time takes it); a cluster on this
    machine's time refuses it, and only the provider's clock set right helps."""
    exp, iat = tokens.claims.get("exp"), tokens.claims.get("iat")
    if token != tokens.id_token or not isinstance(exp, int | float) or exp > now.timestamp():
        return None
    offset = iat - tokens.issued_at.timestamp() if isinstance(iat, int | float) else 0.0
    behind = f"the provider's clock is {clock_words(offset)} this machine's, so " if offset else ""
    ended = datetime.fromtimestamp(exp, UTC)
    return (
        f"{behind}the id_token of {name} expired at {at(ended)} by this machine's clock; a "
        "cluster on this machine's time refuses it: have the provider's clock set right"
    )


def _stored_state(
    now: datetime, expires: datetime | None, starts: datetime | None, error: str | None
) -> State:
    if error:
        return State.ERROR
    if expires and expires <= now:
        return State.EXPIRED
    if starts and starts > now:
        return State.NOT_YET_VALID
    return State.READY
