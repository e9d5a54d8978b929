"""Ending an agent or app so nobody is stranded: callers told why, logins in flight respected."""

import logging
import threading
import time
from collections.abc import Callable

from app.broker.logins import Logins

log = logging.getLogger(__name__)

POLL = 0.1
SETTLE = 0.3
"""After the last login ends, time for its callers' result frames to leave."""


def in_flight(logins: Logins) -> list[str]:
    """Names of the identities with a login in progress."""
    return [login.name for login in logins.in_flight()]


def end_logins(logins: Logins, verb: str) -> None:
    """Fail every login in flight with one clear line, and give its callers time to hear it."""
    if logins.abort_all(f"kubetray was {verb}"):
        time.sleep(SETTLE)


def stop_when_idle(logins: Logins, stop: Callable[[], None], limit: float = 900.0) -> None:
    """Call ``stop`` once no login is in flight (a handover: they finish here first)."""

    def wait() -> None:
        deadline = time.monotonic() + limit
        waiting = in_flight(logins)
        if waiting:
            log.info("stopping once the login to %s ends", ", ".join(waiting))
        while waiting and time.monotonic() < deadline:
            time.sleep(POLL)
            waiting = in_flight(logins)
        if waiting:
            end_logins(logins, "stopped")
        time.sleep(SETTLE)  # the answers (to the callers, to `stop`) leave first
        stop()

    threading.Thread(target=wait, name="stop-when-idle", daemon=True).start()
