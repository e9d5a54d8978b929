"""The broker's nouns: identities, credentials, callers and the record of calls."""

import threading
from dataclasses import dataclass, field, fields
from datetime import datetime
from enum import StrEnum
from typing import Any

OIDC = "oidc"
STORED = "stored"
STORED_KINDS = (STORED, "token", "client-certificate")
"""The kinds a stored credential shows in status (app.static_credentials): nothing to log in to.
Every other kind is a provider's login (app.providers)."""


class State(StrEnum):
    """An identity's state, from the core to the CLI, the tray and the icon."""

    READY = "ready"
    EXPIRING = "expiring"
    """Valid, but within the refresh margin and unable to refresh ahead."""
    LOGGING_IN = "logging in"
    NEEDS_LOGIN = "needs login"
    EXPIRED = "expired"
    NOT_YET_VALID = "not yet valid"
    """A stored certificate or token whose validity starts later (the clock, or too early)."""
    ERROR = "error"
    STORED = "stored"
    """An identity seen while no agent runs (a stored credential, or a login identity of
    identities.json): present; what it holds is the agent's to say."""

    @property
    def needs_person(self) -> bool:
        """Someone has to act before kubectl works with this identity again."""
        return self in (State.NEEDS_LOGIN, State.EXPIRED, State.LOGGING_IN)


@dataclass(frozen=True)
class Identity:
    """Who a credential belongs to; ``key`` is what single-flight and the cache key on."""

    key: str
    name: str
    kind: str


@dataclass(frozen=True)
class Credential:
    """What kubetray-exec hands to kubectl."""

    token: str | None = None
    certificate_pem: str | None = None
    key_pem: str | None = None
    expires: datetime | None = None
    subject: str | None = None
    warning: str | None = None
    """A line for the caller's stderr beside the credential (it ends soon and cannot be
    renewed, and why)."""


@dataclass(frozen=True)
class Caller:
    """The process that ran kubetray-exec, from the socket's peer credentials."""

    pid: int | None
    name: str | None = None
    parents: tuple[str, ...] = ()
    """Names of the parent processes, nearest first (kubectl, then its shell, ...)."""
    parent_pid: int | None = None
    """The process that ran the helper (kubectl): its retries are one command."""
    remote: str | None = None
    """The SSH host a forwarded request came from (the peer is the local ``ssh``)."""


@dataclass(frozen=True)
class CallRecord:
    """One get_credential request, as the diagnostics window shows it."""

    time: datetime
    identity: str | None
    cluster: str | None
    caller: Caller
    ok: bool
    error: str | None
    latency_ms: float


@dataclass(frozen=True)
class ContextUse:
    """A kubeconfig context whose user runs kubetray-exec for an identity."""

    context: str
    user: str
    cluster: str
    file: str


@dataclass(frozen=True)
class IdentityStatus:
    """One identity as ``kubetray status``, the tray and the icon show it (JSON on the wire)."""

    name: str
    kind: str
    state: State
    expires: str | None = None
    """ISO time the credential expires (UTC)."""
    who: str | None = None
    subject: str | None = None
    groups: tuple[str, ...] = ()
    issuer: str | None = None
    client_id: str | None = None
    details: tuple[tuple[str, str], ...] = ()
    """(label, value) pairs a person recognises a login by, per provider: tenant, account,
    project (app.providers.base.Shown)."""
    refreshable: bool = False
    refreshes: int = 0
    refreshed_at: str | None = None
    calls: int = 0
    last_used: str | None = None
    clusters: tuple[str, ...] = ()
    contexts: tuple[str, ...] = ()
    error: str | None = None
    """What stops kubectl, or soon will, with its remedy (the first of the fields below, a
    blocked login, or the last call's failure)."""
    note: str | None = None
    """Something the user should know that is not an error (e.g. a provider quirk)."""
    refresh_error: str | None = None
    """Why renewing the token fails, while it does (the provider down, a clock apart, ...)."""
    store_error: str | None = None
    """Why the newest tokens are held in memory only (a locked keyring, ...)."""
    retry_at: str | None = None
    """ISO time of the next renewal try after a failure."""

    @property
    def logs_in(self) -> bool:
        """A login (any provider's), not a stored credential: it can log in and out."""
        return self.kind not in STORED_KINDS

    def to_dict(self) -> dict[str, Any]:
        # Field by field, not dataclasses.asdict: its deep copy of every tuple cost 0.1 ms an
        # identity, most of a status at 400 identities (the values are immutable already).
        doc = {name: getattr(self, name) for name in _STATUS_FIELDS}
        doc["state"] = str(self.state)
        doc["groups"], doc["clusters"] = list(self.groups), list(self.clusters)
        doc["contexts"] = list(self.contexts)
        doc["details"] = [list(pair) for pair in self.details]
        return doc

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> "IdentityStatus":
        """Read back what to_dict wrote (unknown keys ignored, an unknown state is an error)."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in doc.items() if k in known}
        values["state"] = State(str(doc.get("state")))
        for key in ("groups", "clusters", "contexts"):
            values[key] = tuple(values.get(key) or ())
        values["details"] = tuple(
            (str(pair[0]), str(pair[1]))
            for pair in values.get("details") or ()
            if isinstance(pair, list | tuple) and len(pair) == 2
        )
        return cls(**values)


_STATUS_FIELDS = tuple(f.name for f in fields(IdentityStatus))


class Decision(StrEnum):
    """The person's answer to a host's first request."""

    ONCE = "once"
    SESSION = "session"
    ALWAYS = "always"
    DENY = "deny"


class Standing(StrEnum):
    """Where a host stands, as ``kubetray remote list`` shows it."""

    ALWAYS = "allowed always"
    SESSION = "allowed this session"
    DENIED = "denied"
    ASKS = "asks"
    OLD_ALLOW = "asks for each identity (an older kubetray allowed every identity)"


@dataclass
class Question:
    """One pending question, for one identity on one host: the app answers it, the requests
    waiting for that identity from that host read it."""

    host: str
    cluster: str | None
    identity: str
    new: bool = False
    """The identity does not exist yet: allowing it also lets the host's request make it."""
    decision: Decision | None = None
    answered: threading.Event = field(default_factory=threading.Event)
    """Set by the answer, or when nobody answered in time (``expired``)."""
    expired: bool = False
    host_denied: bool = False
    """Settled by a Deny of the whole host (another identity's question, or ``kubetray remote
    deny``), not by an answer to this question."""

    def answer(self, decision: Decision) -> None:
        """Called by the app (any thread); the first answer counts, a late one none."""
        if not self.answered.is_set():
            self.decision = decision
            self.answered.set()

    def deny_host(self) -> None:
        """The host was denied elsewhere: settle this question too (its dialog closes)."""
        if not self.answered.is_set():
            self.host_denied = True
            self.answer(Decision.DENY)

    @property
    def text(self) -> str:
        """The question as the person reads it."""
        cluster = f" for {self.cluster}" if self.cluster else ""
        new = " (a new identity)" if self.new else ""
        return f"{self.host} wants a token{cluster} as {self.identity}{new}, over SSH"


@dataclass(frozen=True)
class RemoteHost:
    """A host as ``kubetray remote list`` and Settings show it."""

    host: str
    standing: Standing
    last_used: str | None = None
    calls: int = 0
    identities: tuple[tuple[str, Standing], ...] = ()
    """The identities the host may have, and for how long (always, this session)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "standing": str(self.standing),
            "identities": {name: str(standing) for name, standing in self.identities},
            "last_used": self.last_used,
            "calls": self.calls,
        }
