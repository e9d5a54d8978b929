"""Which credential a request carries, as a keyed hash: never the secret, never guessable.

An identity a secret obtains (an Entra service principal's secret or certificate, a password
grant's password, an OIDC client's secret for client credentials) is that credential's: its
key holds ``cred:<fingerprint>``, so a request with another secret is another identity and is
never served the first one's token. The fingerprint is an HMAC-SHA256 with a per-install key
kept in the secret store (the agent hands ``use`` a way to read it), else one random key in
the agent's memory (then fingerprints, and the identities they name, last one run): what
identities.json holds of it lets nobody test guesses of the secret offline.
"""

import hashlib
import hmac
import logging
import secrets
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

STORE_KEY = "kubetray|fingerprint-key"
"""Where the per-install key lives in the secret store."""
MARK = "|cred:"
"""How a key names its credential (the last part of the key)."""


class _Key:
    """The per-install key, read once (``use`` says how)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.value: bytes | None = None
        self.source: Callable[[], bytes | None] | None = None

    def get(self) -> bytes:
        with self.lock:
            if self.value is None:
                found: bytes | None = None
                if self.source is not None:
                    try:
                        found = self.source()
                    except Exception as e:  # the store is down: this run's key, in memory
                        log.warning(
                            "cannot keep the key of credential fingerprints in the secret "
                            "store (%s): identities with a secret last this run",
                            type(e).__name__,
                        )
                self.value = found if found and len(found) >= 32 else secrets.token_bytes(32)
            return self.value


_KEY = _Key()


def use(source: Callable[[], bytes | None] | None) -> None:
    """Read the key with ``source`` when first needed (None: a key in memory only)."""
    with _KEY.lock:
        _KEY.source, _KEY.value = source, None


def store_source(
    get: Callable[[str], bytes | None], put: Callable[[str, bytes], None]
) -> Callable[[], bytes | None]:
    """A ``use`` source over a secret store's get/set: its key, or a new one it keeps."""

    def read() -> bytes | None:
        key = get(STORE_KEY)
        if key is None:
            key = secrets.token_bytes(32)
            put(STORE_KEY, key)
        return key

    return read


def of(*parts: str | bytes | None) -> str | None:
    """The fingerprint of a credential made of ``parts`` (None when it has none)."""
    if not any(parts):
        return None
    mac = hmac.new(_KEY.get(), b"kubetray credential v1", hashlib.sha256)
    for part in parts:
        raw = part.encode() if isinstance(part, str) else (part or b"")
        mac.update(len(raw).to_bytes(8, "big") + raw)
    return mac.hexdigest()[:32]


def base(key: str) -> str:
    """``key`` without its credential: who logs in, whichever secret they use."""
    head, mark, _ = key.rpartition(MARK)
    return head if mark else key
