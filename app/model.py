"""The broker's nouns: identities, credentials, callers and the record of calls."""

from dataclasses import dataclass, field
from datetime import datetime

OIDC = "oidc"


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


@dataclass(frozen=True)
class Caller:
    """The process that ran kubetray-exec, from the socket's peer credentials."""

    pid: int | None
    name: str | None = None
    parents: tuple[str, ...] = ()
    """Names of the parent processes, nearest first (kubectl, then its shell, ...)."""


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


@dataclass
class IdentityState:
    """What the broker knows about one identity (mutable, guarded by the broker's lock)."""

    identity: Identity
    credential: Credential | None = None
    last_used: datetime | None = None
    last_error: str | None = None
    calls: int = 0
    clusters: set[str] = field(default_factory=set)
