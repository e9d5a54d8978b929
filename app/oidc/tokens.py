"""What a login yields, and when to refresh it."""

import json
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

MIN_MARGIN = timedelta(seconds=60)
FORMAT_WITH_STATE = 2
"""The format of a token set that carries a provider's ``state``: numbered, as app/formats.py
asks of a new format (kubetray 0.1.0 read token sets strictly, and could not read this one);
a token set without state is written as 0.1.0 wrote it."""


def margin(lifetime: timedelta | None, floor: timedelta = MIN_MARGIN) -> timedelta:
    """How long before its end a credential is treated as spent: the larger of ``floor`` (60 s
    unless the user set another) and 10 % of the lifetime, capped at half the lifetime so that
    a short-lived credential is not spent the moment it arrives. No known lifetime: ``floor``."""
    if lifetime is None:
        return floor
    return min(max(floor, lifetime / 10), lifetime / 2)


def handed_out_expiry(
    expires_at: datetime, lifetime: timedelta | None, now: datetime, floor: timedelta = MIN_MARGIN
) -> datetime:
    """The expirationTimestamp a client is given: the end less the margin, so that it asks
    again before the credential fails (a TLS alert, a 401); never in the past while valid."""
    return max(expires_at - margin(lifetime, floor), min(now + timedelta(seconds=1), expires_at))


@dataclass(frozen=True)
class TokenSet:
    """Tokens of one identity, whatever its provider (app.providers.base). ``expires_at`` is
    the expiry of the token kubectl is given."""

    expires_at: datetime
    issued_at: datetime
    id_token: str | None = None
    access_token: str | None = None
    refresh_token: str | None = None
    claims: dict[str, Any] = field(default_factory=dict)
    """Claims of the verified id_token: who this is (sub, email, groups, name)."""
    no_id_token_on_refresh: bool = False
    """The provider's last refresh carried no id_token (OIDC Core §12.2 allows that): the
    id_token kept is the login's, and a new one needs a login (or --oidc-use-access-token)."""
    state: dict[str, Any] = field(default_factory=dict, repr=False)
    """What the provider keeps with the tokens (JSON: an MSAL cache, a client registration,
    the client a taken-over login refreshes with); opaque to everyone else, and secret."""

    @property
    def lifetime(self) -> timedelta:
        return self.expires_at - self.issued_at

    def margin(self, floor: timedelta = MIN_MARGIN) -> timedelta:
        """Refresh this long before expiry (see the module's ``margin``)."""
        return margin(self.lifetime, floor)

    def fresh(self, now: datetime, floor: timedelta = MIN_MARGIN) -> bool:
        """Good to hand out without refreshing first."""
        return now < self.expires_at - self.margin(floor)

    def refresh_due(self, floor: timedelta = MIN_MARGIN) -> datetime:
        """When the agent refreshes ahead, before any caller would find the token stale."""
        return self.expires_at - self.margin(floor) * 1.5

    def handed_out_expiry(self, now: datetime, floor: timedelta = MIN_MARGIN) -> datetime:
        """The expirationTimestamp for kubectl: expiry less the margin, never in the past."""
        return handed_out_expiry(self.expires_at, self.lifetime, now, floor)

    def who(self) -> str:
        """A person's name for this identity: email, else preferred name, else subject; for a
        machine identity without an id_token, its client id."""
        for key in ("email", "preferred_username", "name", "sub", "client_id"):
            value = self.claims.get(key)
            if isinstance(value, str) and value:
                return value
        return "?"

    def with_refresh(self, newer: "TokenSet") -> "TokenSet":
        """A refreshed set, keeping what the refresh response left out."""
        return replace(
            newer,
            refresh_token=newer.refresh_token or self.refresh_token,
            id_token=newer.id_token or self.id_token,
            claims=newer.claims or self.claims,
            state=newer.state or self.state,
        )

    def to_bytes(self) -> bytes:
        doc = asdict(self)
        doc["expires_at"] = self.expires_at.isoformat()
        doc["issued_at"] = self.issued_at.isoformat()
        if self.state:
            doc["version"] = FORMAT_WITH_STATE
        else:
            del doc["state"]
        return json.dumps(doc).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> "TokenSet":
        doc = json.loads(data)
        doc.pop("version", None)
        doc["expires_at"] = datetime.fromisoformat(doc["expires_at"])
        doc["issued_at"] = datetime.fromisoformat(doc["issued_at"])
        return cls(**doc)


@dataclass(frozen=True)
class Revocation:
    """What became of a refresh token at logout: revoked at the provider, or why not."""

    revoked: bool
    reason: str
