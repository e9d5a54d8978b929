"""Refresh ahead: a thread that wakes when an identity's tokens are due and refreshes them, so
in steady state no caller waits on the provider."""

import heapq
import logging
import threading
from collections.abc import Callable
from datetime import datetime

log = logging.getLogger(__name__)


class RefreshScheduler:
    """Calls ``refresh(key)`` at the times given to ``schedule`` (earliest first)."""

    MAX_SLEEP = 60.0
    """Wake at least this often: the wall clock may jump (suspend, NTP)."""

    def __init__(self, clock: Callable[[], datetime], refresh: Callable[[str], None]) -> None:
        self._clock = clock
        self._refresh = refresh
        self._due: list[tuple[datetime, int, str]] = []
        self._seq = 0
        self._wake = threading.Condition()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread that calls ``refresh`` (due times given before are kept)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="refresh", daemon=True)
            self._thread.start()

    def schedule(self, key: str, when: datetime) -> None:
        """Refresh ``key`` at ``when`` (the callee checks whether it is still due then)."""
        with self._wake:
            self._seq += 1
            heapq.heappush(self._due, (when, self._seq, key))
            self._wake.notify()

    def _loop(self) -> None:
        while True:
            with self._wake:
                while not self._stopped:
                    now = self._clock()
                    if self._due and self._due[0][0] <= now:
                        _, _, key = heapq.heappop(self._due)
                        break
                    wait = (self._due[0][0] - now).total_seconds() if self._due else None
                    self._wake.wait(min(wait, self.MAX_SLEEP) if wait is not None else None)
                else:
                    return
            try:
                self._refresh(key)
            except Exception:  # one identity's bug must not end refreshes for all
                log.exception("refresh of %s failed", key)

    def stop(self) -> None:
        with self._wake:
            self._stopped = True
            self._wake.notify()
