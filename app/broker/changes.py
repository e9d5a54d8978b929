"""What the views show changed: the core says so, instead of being asked every second.

``tell`` is called where an identity's state can change: a token kept or dropped, a refresh
that failed, a login begun or ended, any request served (kubectl's call counts, a new identity,
a logout from the command line). Listeners run on the thread that changed it (a worker, the
IPC server's), so they only schedule a look (the tray: a Qt signal); a burst of changes costs
the view one status. What changes with time alone (minutes left, expired) the view works out
from the expiry itself.
"""

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class Changes:
    """Who wants to hear of changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []

    def listen(self, listener: Callable[[], None]) -> None:
        with self._lock:
            self._listeners.append(listener)

    def ignore(self, listener: Callable[[], None]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def tell(self) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener()
            except Exception as e:  # a view that is gone (its Qt object deleted): not ours
                log.debug("a listener of changes failed, dropped: %s", e)
                self.ignore(listener)
