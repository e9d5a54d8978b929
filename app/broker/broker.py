"""The broker: which identity a request names, and its credential from memory or the store.

Qt-free and transport-free: the IPC service calls it, the tray will call it, tests call it.
One lock per identity makes concurrent callers of the same identity share one fetch (single
flight) while other identities go on.
"""

import threading
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from app.broker.logins import Conversation, Logins
from app.errors import CredentialError, UsageError
from app.model import (
    OIDC,
    CallRecord,
    Credential,
    Identity,
    IdentityState,
)
from app.oidc.settings import OIDCSettings
from app.stored import StoredCredentials
from exec_helper.options import HelperOptions

MAX_RECORDS = 500
MAX_UNSERVED = 32
"""Stored names that never served (typos, probes) stay listed with their error, the newest few."""
MAX_CLUSTERS = 64


def utcnow() -> datetime:
    """The clock the broker uses unless a test gives it another."""
    return datetime.now(UTC)


def identity_for(opts: HelperOptions) -> Identity:
    """The identity a request names: a stored credential, or an OIDC login."""
    if opts.stored:
        return Identity(key=f"stored:{opts.stored}", name=opts.stored, kind="stored")
    if opts.oidc_issuer_url and opts.oidc_client_id:
        scopes = ",".join(sorted(set(opts.oidc_extra_scope)))
        params = ",".join(f"{k}={v}" for k, v in sorted(opts.oidc_auth_request_extra_params))
        key = "|".join(
            ["oidc", opts.oidc_issuer_url, opts.oidc_client_id, scopes, params, opts.username or ""]
        )
        host = urlsplit(opts.oidc_issuer_url).netloc or opts.oidc_issuer_url
        user = f"{opts.username}/" if opts.username else ""
        return Identity(key=key, name=f"{user}{opts.oidc_client_id}@{host}", kind=OIDC)
    raise UsageError(
        "kubetray-exec was not told which credential to serve",
        "give --stored NAME, or --oidc-issuer-url and --oidc-client-id, in the exec args or in "
        "the cluster's client.authentication.k8s.io/exec extension",
    )


class Broker:
    """Identities, their credentials, and the record of calls."""

    def __init__(
        self,
        stored: StoredCredentials,
        logins: Logins | None = None,
        clock: Callable[[], datetime] = utcnow,
        started: datetime | None = None,
    ) -> None:
        self._stored = stored
        self.logins = logins
        self._clock = clock
        self._lock = threading.Lock()
        self._states: dict[str, IdentityState] = {}
        self._flights: dict[str, threading.Lock] = {}
        self._records: deque[CallRecord] = deque(maxlen=MAX_RECORDS)
        self.started = started or clock()

    def _state(self, identity: Identity) -> tuple[IdentityState, threading.Lock]:
        with self._lock:
            state = self._states.get(identity.key)
            if state is None:
                state = self._states[identity.key] = IdentityState(identity)
            return state, self._flights.setdefault(identity.key, threading.Lock())

    def get_credential(
        self,
        opts: HelperOptions,
        cluster: str | None = None,
        skip_cache: bool = False,
        conv: Conversation | None = None,
    ) -> tuple[Identity, Credential]:
        """The credential for the identity ``opts`` names, fetched at most once at a time."""
        identity = identity_for(opts)
        if identity.kind == OIDC:
            return identity, self._oidc_credential(identity, opts, cluster, skip_cache, conv)
        state, flight = self._state(identity)
        with flight:
            now = self._clock()
            state.last_used = now
            state.calls += 1
            if cluster and len(state.clusters) < MAX_CLUSTERS:
                state.clusters.add(cluster)
            try:
                credential = state.credential
                if credential is None or skip_cache or opts.force_refresh:
                    credential = self._fetch(identity)
                if credential.expires is not None and credential.expires <= now:
                    raise CredentialError(
                        f"the credential {identity.name} expired at "
                        f"{credential.expires:%Y-%m-%d %H:%M:%S}Z",
                        f"store a new one: kubetray store {identity.name} ...",
                    )
            except Exception as e:
                state.last_error = getattr(e, "message", None) or str(e)
                self._forget_unserved()
                raise
            state.credential, state.last_error = credential, None
            return identity, credential

    def _oidc_credential(
        self,
        identity: Identity,
        opts: HelperOptions,
        cluster: str | None,
        skip_cache: bool,
        conv: Conversation | None,
    ) -> Credential:
        if self.logins is None or conv is None:
            raise CredentialError(f"login required for {identity.name}", "OIDC is not enabled")
        state, _ = self._state(identity)
        with self._lock:
            state.calls += 1
            state.last_used = self._clock()
            if cluster and len(state.clusters) < MAX_CLUSTERS:
                state.clusters.add(cluster)
        try:
            tokens = self.logins.token(
                identity,
                OIDCSettings.from_options(opts),
                conv,
                refresh=skip_cache or opts.force_refresh,
                may_login=not opts.no_login,
            )
        except Exception as e:
            state.last_error = getattr(e, "message", None) or str(e)
            raise
        state.last_error = None
        token = tokens.access_token if opts.oidc_use_access_token else tokens.id_token
        if not token:
            raise CredentialError(f"the provider gave {identity.name} no token to send")
        return Credential(
            token=token,
            expires=tokens.handed_out_expiry(self._clock(), self.logins.margin),
            subject=tokens.who(),
        )

    def _forget_unserved(self) -> None:
        """Keep the states of stored names that never served to the newest MAX_UNSERVED."""
        with self._lock:
            unserved = [
                key
                for key, st in self._states.items()
                if st.identity.kind != OIDC and st.credential is None and st.last_error
            ]
            for key in unserved[:-MAX_UNSERVED]:
                del self._states[key]
                self._flights.pop(key, None)

    def _fetch(self, identity: Identity) -> Credential:
        stored = self._stored.load(identity.name)
        return Credential(
            token=stored.token,
            certificate_pem=stored.certificate_pem,
            key_pem=stored.key_pem,
            expires=stored.not_after,
            subject=stored.subject,
        )

    def invalidate(self, name: str) -> None:
        """Forget a cached stored credential (it was stored again or removed)."""
        with self._lock:
            state = self._states.get(f"stored:{name}")
            if state is not None:
                state.credential = None

    def record(self, rec: CallRecord) -> None:
        """Add a call to the record (most recent last)."""
        with self._lock:
            self._records.append(rec)

    def calls(self, limit: int = 100) -> list[CallRecord]:
        """The most recent calls, newest first."""
        with self._lock:
            return list(self._records)[-limit:][::-1]

    def status(self) -> dict[str, Any]:
        """Every identity known to this agent or the store, with its state."""
        now = self._clock()
        with self._lock:
            states = dict(self._states)
            ok = sum(1 for r in self._records if r.ok)
            failed = len(self._records) - ok
        identities: dict[str, dict[str, Any]] = {}
        for info in self._stored.list():
            expires = datetime.fromisoformat(info.not_after) if info.not_after else None
            identities[f"stored:{info.name}"] = {
                "name": info.name,
                "kind": info.kind,
                "state": "expired" if expires and expires <= now else "ready",
                "expires": expires.isoformat() if expires else None,
                "subject": info.subject,
                "calls": 0,
                "last_used": None,
                "clusters": [],
                "error": None,
            }
        for key, state in states.items():
            entry = identities.setdefault(
                key,
                {
                    "name": state.identity.name,
                    "kind": state.identity.kind,
                    "state": "needs login" if state.identity.kind == OIDC else "unknown",
                    "expires": None,
                    "subject": None,
                },
            )
            cred = state.credential
            if cred is not None:
                entry["expires"] = cred.expires.isoformat() if cred.expires else None
                entry["state"] = "expired" if cred.expires and cred.expires <= now else "ready"
            if state.last_error:
                entry["state"] = "error" if state.identity.kind != OIDC else "needs login"
            entry.update(
                calls=state.calls,
                last_used=state.last_used.isoformat() if state.last_used else None,
                clusters=sorted(state.clusters),
                error=state.last_error,
            )
        if self.logins is not None:
            for st in self.logins.known():
                entry = identities.setdefault(st.identity.key, {"name": st.identity.name})
                tokens = st.tokens
                blocked = bool(st.blocked_until and now < st.blocked_until)
                if st.login is not None:
                    entry["state"] = "logging in"
                elif tokens is not None and tokens.expires_at > now:
                    fresh = tokens.fresh(now, self.logins.margin)
                    entry["state"] = "ready" if fresh else "expiring"
                else:
                    entry["state"] = "needs login"
                entry.update(
                    kind=OIDC,
                    issuer=st.settings.issuer,
                    client_id=st.settings.client_id,
                    who=tokens.who() if tokens else None,
                    groups=tokens.claims.get("groups") if tokens else None,
                    expires=tokens.expires_at.isoformat() if tokens else None,
                    refreshable=bool(tokens and tokens.refresh_token),
                    refreshes=st.refreshes,
                    error=st.blocked_reason if blocked else entry.get("error"),
                )
                entry.setdefault("calls", 0)
        return {
            "started": self.started.isoformat(),
            "identities": list(identities.values()),
            "calls": {"ok": ok, "failed": failed},
        }
