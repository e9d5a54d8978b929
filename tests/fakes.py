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
