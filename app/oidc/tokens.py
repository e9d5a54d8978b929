"""What a login yields, and when to refresh it."""

import json
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime, timedelta
from typing import Any

from app import formats
from app.errors import StoreError

MIN_MARGIN = timedelta(seconds=60)
FORMAT = 1
"""A token set's format in the keyring (app/formats.py): 0.1.0's, without a number. A
provider's ``state`` is a field of it written only when there is one: OIDC token sets stay
byte for byte what 0.1.0 wrote (it read them strictly), and the others are items (``google/``,
...) of identities no earlier kubetray knows, so none ever reads them."""


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
    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """Fields of a newer kubetray, kept as they were (through refreshes too)."""

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
            extra={**self.extra, **newer.extra},
        )

    def to_bytes(self) -> bytes:
        """Format 1 is exactly what 0.1.0 wrote (it read it strictly), plus kept fields."""
        doc = asdict(self)
        doc.pop("extra")
        doc["expires_at"] = self.expires_at.isoformat()
        doc["issued_at"] = self.issued_at.isoformat()
        if not self.state:
            del doc["state"]
        return json.dumps({**self.extra, **doc}).encode()

    @classmethod
    def from_bytes(cls, data: bytes, what: str = "the tokens") -> "TokenSet":
        """The tokens; NewerFormat for a newer kubetray's; StoreError when damaged."""
        try:
            doc = json.loads(data)
        except (ValueError, RecursionError):
            doc = None
        if not isinstance(doc, dict):
            raise StoreError(f"{what} in the keyring are damaged", "log in again")
        formats.check(doc, what, FORMAT)
        known = {f.name for f in fields(cls) if f.name != "extra"}
        values = {k: v for k, v in doc.items() if k in known}
        try:
            values["expires_at"] = datetime.fromisoformat(values["expires_at"])
            values["issued_at"] = datetime.fromisoformat(values["issued_at"])
            return cls(**values, extra=formats.unknown(doc, known))
        except (KeyError, TypeError, ValueError):
            raise StoreError(f"{what} in the keyring are damaged", "log in again") from None


@dataclass(frozen=True)
class Revocation:
    """What became of a refresh token at logout: revoked at the provider, or why not."""

    revoked: bool
    reason: str
