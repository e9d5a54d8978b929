"""Which store keeps the agent's login tokens: the OS keyring, or the agent's memory.

``auto`` (the default) takes the keyring when one is usable and memory otherwise, so logins
work on servers, in WSL and in containers. What must outlive the agent (stored credentials,
``secure``, secret-holding backups) always needs the keyring: see ``keyring_store.NoKeyring``.
"""

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from app.errors import StoreError, UsageError
from app.store import session_bus
from app.store.journal import TokenJournal
from app.store.keyring_store import KeyringSecretStore, NoKeyring
from app.store.memory_store import MemorySecretStore
from app.store.secret_store import SecretStore

log = logging.getLogger(__name__)

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
    source: str = ""
    """Where the session bus the choice was made on came from (Linux), for status."""


def describe(facts: Mapping[str, object]) -> str:
    """Where an agent keeps tokens, and the session bus it found them on (status, doctor)."""
    where = "the OS keyring" if facts.get("store") == KEYRING else "the agent's memory"
    source = facts.get("store_source")
    return f"{where} (session bus: {source})" if source else where


def check(kind: str) -> str:
    """``kind`` if it names a store, else a UsageError listing them."""
    if kind not in KINDS:
        raise UsageError(
            f"unknown secret store {kind!r}", "choose keyring, memory or auto (the default)"
        )
    return kind


def choose(kind: str, keyring: KeyringSecretStore) -> StoreChoice:
    """The store ``kind`` asks for; ``auto`` looks for a usable keyring now, on the session
    bus this process has or, started without one, on the user's (session_bus.find)."""
    if check(kind) == MEMORY:
        return StoreChoice(MemorySecretStore(), MEMORY, CHOSEN_NOTICE)
    bus = session_bus.find()
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
                e.why,
            ) from None
        return StoreChoice(MemorySecretStore(), MEMORY, MEMORY_NOTICE, e.why, bus)
    return StoreChoice(keyring, KEYRING, None, source=bus)


MAX_BUSES_TRIED = 16


class TokenStore:
    """The agent's token store as chosen, which moves from memory to the keyring when a caller
    brings a session bus that has one: the store is the user's, not the first caller's.

    Only an ``auto`` choice that found no keyring moves; what memory held goes into the keyring
    first, so no login is lost. The keyring instance is the one stored credentials use too.
    """

    def __init__(
        self,
        chosen: StoreChoice,
        keyring: KeyringSecretStore | None = None,
        movable: bool = False,
        journal: str | None = None,
    ) -> None:
        """``journal``: the token journal's path (app.store.journal), used while the tokens
        are in the keyring."""
        self.chosen = chosen
        self.journal = TokenJournal(journal, keyring) if journal and keyring else None
        self._keyring = keyring
        self._movable = movable and keyring is not None and chosen.kind == MEMORY
        self._lock = threading.Lock()
        self._tried: set[str] = set()
        self.on_move: list[Callable[[], None]] = []
        """Called once the tokens are in the keyring (whoever warned of memory stops)."""

    def _journal(self, chosen: StoreChoice | None = None) -> TokenJournal | None:
        """The journal, replayed, while the tokens are in the keyring (the keyring's errors
        propagate: nothing is read from it before what a killed agent left is replayed)."""
        journal = self.journal
        if journal is None or (chosen or self.chosen).kind != KEYRING:
            return None
        if not journal.opened:
            journal.open()
        return journal

    def get(self, key: str) -> bytes | None:
        chosen = self.chosen  # once: read during a move to the keyring, memory still holds them
        journal = self._journal(chosen)
        if journal is not None:
            unsaved, value = journal.pending(key)
            if unsaved:  # newer than the keyring's copy, which the provider may have revoked
                return value
        return chosen.store.get(key)

    def set(self, key: str, value: bytes) -> None:
        with self._lock:  # not while the store moves
            journal = self._journal()
            self.chosen.store.set(key, value)
        if journal is not None:
            journal.settled(key, value)

    def delete(self, key: str) -> bool:
        with self._lock:
            journal = self._journal()
            removed = self.chosen.store.delete(key)
        if journal is not None:
            journal.settled(key, None)
        return removed

    def record(self, key: str, value: bytes | None) -> None:
        """What a provider just answered (None: a logout), on disk before the store is
        asked (the token journal); nothing where there is no journal."""
        journal = self.journal
        if journal is not None and journal.opened and self.chosen.kind == KEYRING:
            journal.record(key, value)

    @property
    def notice(self) -> str | None:
        return self.chosen.notice

    def facts(self) -> dict[str, str | None]:
        """For status and doctor: which store, why, and where its session bus came from."""
        chosen = self.chosen
        return {
            "store": chosen.kind,
            "store_notice": chosen.notice,
            "store_source": chosen.source or None,
            "store_reason": chosen.reason or None,
            "store_journal": self.journal.state()
            if self.journal and chosen.kind == KEYRING
            else None,
        }

    def wants_bus(self, address: str) -> bool:
        """Whether offer_bus(address) would try that bus (and so do something)."""
        if not self._movable or not address or self._keyring is None:
            return False
        return (
            self.chosen.kind == MEMORY
            and address not in self._tried
            and len(self._tried) < MAX_BUSES_TRIED
        )

    def offer_bus(self, address: str) -> bool:
        """A local caller's session bus: where tokens are in memory for want of a keyring, use
        its keyring from now on. True when the store moved."""
        keyring = self._keyring
        if keyring is None or not self.wants_bus(address):
            return False
        with self._lock:
            if not self.wants_bus(address):
                return False
            self._tried.add(address)
            before = session_bus.use(address)
            keyring.recheck()
            try:
                keyring.check_usable()
                memory = self.chosen.store
                assert isinstance(memory, MemorySecretStore)
                for key, value in memory.items():
                    keyring.set(key, value)
            except (NoKeyring, StoreError) as e:
                session_bus.restore(before)
                keyring.recheck()
                log.info("a caller's session bus has no usable keyring either: %s", e.message)
                return False
            self.chosen = StoreChoice(keyring, KEYRING, None, source="a caller's session bus")
            self._movable = False
        log.info("tokens move to the keyring on the session bus a caller brought (%s)", address)
        for moved in self.on_move:
            moved()
        return True
