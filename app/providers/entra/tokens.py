"""What an Entra login yields: the access token AKS takes, and what renews it.

For a person the refresh token lives in MSAL's own cache (``cache``: its
SerializableTokenCache, JSON), which travels with the tokens into the secret store (the OS
keyring, or a sealed file keyed from it; never a plaintext file). One cache per identity, so
two identities (or two agents) never write one item.
"""

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta


@dataclass(frozen=True)
class EntraTokens:
    """One identity's tokens. ``access_token`` is what kubectl is given (audience: the server
    application); ``expires_at`` its end."""

    access_token: str = field(repr=False)
    expires_at: datetime
    issued_at: datetime
    account: str = ""
    """Who: the person's user principal name, or the application (client) id."""
    tenant_id: str | None = None
    home_account_id: str | None = None
    """MSAL's account (``<oid>.<tid>``) whose refresh token renews a person's tokens."""
    cache: str | None = field(default=None, repr=False)
    """MSAL's token cache (JSON), holding the refresh token; None for machine identities."""
    refresh_after: datetime | None = None
    """Renewing before this gives the same token back (az and the managed identity endpoint
    answer from their own caches until the token is close to its end)."""

    @property
    def lifetime(self) -> timedelta:
        return self.expires_at - self.issued_at

    @property
    def renewable_silently(self) -> bool:
        """A refresh token is at hand (persons) or none is needed (machines)."""
        return self.home_account_id is None or bool(self.cache)

    def to_bytes(self) -> bytes:
        doc = asdict(self)
        for key in ("expires_at", "issued_at", "refresh_after"):
            value = doc[key]
            doc[key] = value.isoformat() if value else None
        return json.dumps(doc).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> "EntraTokens":
        doc = json.loads(data)
        for key in ("expires_at", "issued_at", "refresh_after"):
            if doc.get(key):
                doc[key] = datetime.fromisoformat(doc[key])
        return cls(**doc)
