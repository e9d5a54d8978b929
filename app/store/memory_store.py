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

    def items(self) -> list[tuple[str, bytes]]:
        """Everything held (to move it into the keyring once there is one)."""
        with self._lock:
            return list(self._items.items())
