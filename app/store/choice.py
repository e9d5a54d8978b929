"""Which store keeps the agent's login tokens: the OS keyring, or the agent's memory.

``auto`` (the default) takes the keyring when one is usable and memory otherwise, so logins
work on servers, in WSL and in containers. What must outlive the agent (stored credentials,
``secure``, secret-holding backups) always needs the keyring: see ``keyring_store.NoKeyring``.
"""

from dataclasses import dataclass

from app.errors import UsageError
from app.store.keyring_store import KeyringSecretStore, NoKeyring
from app.store.memory_store import MemorySecretStore
from app.store.secret_store import SecretStore

KINDS = ("auto", "keyring", "memory")
KEYRING, MEMORY = "keyring", "memory"
MEMORY_NOTICE = "no OS keyring here: tokens are kept in memory until the agent stops"
CHOSEN_NOTICE = "tokens are kept in memory until the agent stops (store: memory)"


@dataclass(frozen=True)
class StoreChoice:
    """The token store and why it was chosen."""

    store: SecretStore
    kind: str
    """``keyring`` or ``memory``."""
    notice: str | None
    """Said once to the person when tokens will not outlive the agent; None for the keyring."""
    reason: str = ""
    """Why there is no keyring (``auto`` only)."""


def check(kind: str) -> str:
    """``kind`` if it names a store, else a UsageError listing them."""
    if kind not in KINDS:
        raise UsageError(
            f"unknown secret store {kind!r}", "choose keyring, memory or auto (the default)"
        )
    return kind


def choose(kind: str, keyring: KeyringSecretStore) -> StoreChoice:
    """The store ``kind`` asks for; ``auto`` looks for a usable keyring once, now."""
    if check(kind) == MEMORY:
        return StoreChoice(MemorySecretStore(), MEMORY, CHOSEN_NOTICE)
    try:
        keyring.check_usable()
    except NoKeyring as e:
        if kind == KEYRING:  # asked for by name: refuse now, not at the first kubectl call
            raise NoKeyring(
                f"{e.message}, and the secret store is set to keyring",
                "use --store auto (tokens in memory when there is no keyring) or --store memory"
                ' (or "secret_store" in settings.json), or start a Secret Service: kubetray'
                " doctor says how",
                e.chosen,
            ) from None
        return StoreChoice(MemorySecretStore(), MEMORY, MEMORY_NOTICE, e.message)
    return StoreChoice(keyring, KEYRING, None)
