"""The SecretStore capability: get, set, delete opaque secrets by key."""

from typing import Protocol, runtime_checkable


class SecretStore(Protocol):
    """A place for secrets. Implementations raise StoreError / StoreUnavailable."""

    def get(self, key: str) -> bytes | None:
        """The secret stored under ``key``, or None."""
        ...

    def set(self, key: str, value: bytes) -> None:
        """Store ``value`` under ``key``, replacing what was there."""
        ...

    def delete(self, key: str) -> bool:
        """Remove ``key``; False when there was nothing to remove."""
        ...


@runtime_checkable
class Recorder(Protocol):
    """A store that can put a value on disk before its own write is asked (the agent's token
    store with its journal: app.store.journal)."""

    def record(self, key: str, value: bytes | None) -> None:
        """Keep ``value`` (None: removed) durably at once; never raises."""
        ...
