"""Small hand-written fakes: a clock to move, a store that counts and can be slow."""

import threading
import time
from datetime import UTC, datetime, timedelta

from app.store.memory_store import MemorySecretStore


class Clock:
    """A clock tests move by hand."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 11, 21, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


class CountingStore(MemorySecretStore):
    """A MemorySecretStore that counts reads and can take its time, like a real keyring."""

    def __init__(self, delay: float = 0.0) -> None:
        super().__init__()
        self.delay = delay
        self.gets = 0
        self._count_lock = threading.Lock()

    def get(self, key: str) -> bytes | None:
        with self._count_lock:
            self.gets += 1
        time.sleep(self.delay)
        return super().get(key)


class SilentCaller:
    """A caller nobody watches: kubectl in a CI job (not interactive, stderr not a terminal)."""

    interactive = False
    visible = False

    def __init__(self) -> None:
        self.told: list[str] = []

    def tell(self, text: str) -> None:
        self.told.append(text)

    def ask(self, text: str, secret: bool) -> str | None:
        raise AssertionError(f"a non-interactive caller was asked {text!r}")

    def keepalive(self) -> None:
        pass

    def device_code(self, user_code: str, uri: str) -> None:
        self.told.append(f"device code {user_code} at {uri}")


class NoBrowser:
    """A machine with no display and no browser command."""

    def __init__(self, command: str | None = None) -> None:
        self.command = command

    def available(self) -> bool:
        return False

    def open(self, url: str) -> bool:
        return False
