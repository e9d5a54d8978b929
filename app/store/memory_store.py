"""An in-memory SecretStore: the agent's token store where there is no OS keyring, and tests'.

Nothing is ever written anywhere: the secrets go when the process exits.
"""

import threading


class MemorySecretStore:
    """Secrets in a dict; gone when the process exits."""

    def __init__(self) -> None:
        self._items: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> bytes | None:
        with self._lock:
            return self._items.get(key)

    def set(self, key: str, value: bytes) -> None:
        with self._lock:
            self._items[key] = bytes(value)

    def delete(self, key: str) -> bool:
        with self._lock:
            return self._items.pop(key, None) is not None
