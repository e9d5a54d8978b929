"""Refresh ahead: a few worker threads that run each identity's job when it is due, so in steady
state no caller waits on the provider.

* One entry per identity: ``schedule(key, when)`` sets when its job runs next (replacing any
  earlier plan), the job says whether there is anything to do then.
* Bounded concurrency: at most ``workers`` jobs at once, and at most ``per_group`` for one group
  (one provider), so N identities never stampede a provider and one slow provider, whose
  refreshes may take a long deadline, never holds up the others.
* Jitter is the caller's: Logins spreads due times over a window (app.broker.logins).
"""

import heapq
import logging
import threading
from collections import deque
from collections.abc import Callable
from datetime import datetime

log = logging.getLogger(__name__)

WORKERS = 4
PER_GROUP = 2


class RefreshScheduler:
    """Calls ``run(key)`` at the times given to ``schedule``, earliest first, on worker threads."""

    MAX_SLEEP = 60.0
    """Wake at least this often: the wall clock may jump (suspend, NTP)."""

    def __init__(
        self,
        clock: Callable[[], datetime],
        run: Callable[[str], None],
        workers: int = WORKERS,
        per_group: int = PER_GROUP,
    ) -> None:
        self._clock = clock
        self._run = run
        self._workers = max(1, workers)
        self._per_group = max(1, per_group)
        self._due: list[tuple[datetime, int, str]] = []
        self._plan: dict[str, tuple[int, str]] = {}
        """key → (seq of its live heap entry, group)."""
        self._seq = 0
        self._wake = threading.Condition()
        self._ready: deque[tuple[str, str]] = deque()
        """Jobs handed to the workers, (key, group)."""
        self._parked: dict[str, deque[str]] = {}
        """Due jobs waiting for their group to have room."""
        self._running: dict[str, int] = {}
        self._active: set[str] = set()
        self._stopped = False
        self._threads: list[threading.Thread] = []

    @property
    def running(self) -> bool:
        return bool(self._threads) and not self._stopped

    def start(self) -> None:
        """Start the threads (due times given before are kept)."""
        if self._threads:
            return
        self._threads.append(threading.Thread(target=self._loop, name="refresh", daemon=True))
        for i in range(self._workers):
            self._threads.append(
                threading.Thread(target=self._work, name=f"refresh-{i + 1}", daemon=True)
            )
        for thread in self._threads:
            thread.start()

    def schedule(self, key: str, when: datetime, group: str = "") -> None:
        """Run ``key``'s job at ``when``, instead of whenever it was planned."""
        with self._wake:
            self._seq += 1
            self._plan[key] = (self._seq, group)
            heapq.heappush(self._due, (when, self._seq, key))
            self._wake.notify_all()

    def cancel(self, key: str) -> None:
        """Forget ``key``'s plan (a job already running finishes)."""
        with self._wake:
            self._plan.pop(key, None)

    def busy(self) -> int:
        """Jobs running now."""
        with self._wake:
            return len(self._active)

    def _loop(self) -> None:
        with self._wake:
            while not self._stopped:
                now = self._clock()
                while self._due and self._due[0][0] <= now:
                    _, seq, key = heapq.heappop(self._due)
                    plan = self._plan.get(key)
                    if plan is None or plan[0] != seq:
                        continue  # planned again since, or cancelled
                    del self._plan[key]
                    self._hand_out(key, plan[1])
                wait = (self._due[0][0] - now).total_seconds() if self._due else self.MAX_SLEEP
                self._wake.wait(max(0.0, min(wait, self.MAX_SLEEP)))

    def _hand_out(self, key: str, group: str) -> None:
        """Give a due job to the workers, or park it until its group has room (lock held)."""
        if key in self._active or self._running.get(group, 0) >= self._per_group:
            parked = self._parked.setdefault(group, deque())
            if key not in parked:
                parked.append(key)
            return
        self._running[group] = self._running.get(group, 0) + 1
        self._active.add(key)
        self._ready.append((key, group))
        self._wake.notify_all()

    def _work(self) -> None:
        while True:
            with self._wake:
                while not self._ready and not self._stopped:
                    self._wake.wait()
                if self._stopped:
                    return
                key, group = self._ready.popleft()
            try:
                self._run(key)
            except Exception:  # one identity's bug must not end refreshes for all
                log.exception("refresh of %s failed", key)
            finally:
                with self._wake:
                    self._active.discard(key)
                    self._running[group] -= 1
                    if not self._running[group]:
                        del self._running[group]
                    parked = self._parked.get(group)
                    if parked:
                        for i, waiting in enumerate(parked):
                            if waiting not in self._active:  # else: after its own job ends
                                del parked[i]
                                self._hand_out(waiting, group)
                                break
                        if not parked:
                            del self._parked[group]

    def stop(self) -> None:
        """Stop handing out jobs; jobs running go on (Logins.stop waits for them)."""
        with self._wake:
            self._stopped = True
            self._wake.notify_all()
