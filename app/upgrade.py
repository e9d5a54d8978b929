"""Noticing that kubetray was upgraded, or removed, under a running agent or app.

A package carries a build file (exec_helper/version.py) whose build id is new for every build.
The running process read its own at start; it looks at the installed one again when a request
arrives (a stat, about a microsecond, and a read only when the file changed) and every
CHECK_EVERY seconds. Another build id there means the installation was replaced: the process
restarts into it once idle (app/restart.py). A build file that stays missing means kubetray was
removed: the process stops once idle. A development install has no build file and never
restarts on its own (``kubetray restart`` still restarts it).
"""

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from exec_helper import version

log = logging.getLogger(__name__)

CHECK_EVERY = 15.0
"""Between two looks at the build file when no request comes (a package's own scripts also ask
every running kubetray to restart at once: see packaging/linux)."""
SETTLED_FOR = 2.0
"""A new build file is acted on once it has been there this long: dpkg renames a package's
files into place one after another (within a second), so the rest may still be the old ones."""
GONE_FOR = 5.0
"""A missing build file is taken for an uninstall only when it stays missing this long:
install.sh swaps the old directory for the new one in two steps."""

REPLACED = "replaced"
REMOVED = "removed"


@dataclass(frozen=True)
class Change:
    """What became of this process's installation."""

    kind: str
    """REPLACED (by another build) or REMOVED."""
    version: str | None = None
    build: str | None = None


class Installation:
    """The build file of the installation this process was started from."""

    def __init__(
        self,
        path: str | None = None,
        own_build: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path if path is not None else version.build_file()
        self.own_build = own_build if own_build is not None else version.BUILD
        self._clock = clock
        self._lock = threading.Lock()
        self._stamp: tuple[int, ...] | None = None
        self._seen_at = 0.0
        self._replaced: Change | None = None
        self._missing_since: float | None = None

    @property
    def watched(self) -> bool:
        """False for a development install (nothing to compare with)."""
        return self.path is not None and self.own_build is not None

    def check(self) -> Change | None:
        """What changed since this process started, if anything (cheap: a stat)."""
        if not self.watched:
            return None
        assert self.path is not None
        with self._lock:
            try:
                st = os.stat(self.path)
            except OSError:
                now = self._clock()
                if self._missing_since is None:
                    self._missing_since = now
                return Change(REMOVED) if now - self._missing_since >= GONE_FOR else None
            self._missing_since = None
            stamp = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
            if stamp != self._stamp:
                found = version.read_build(self.path)
                if found is None:
                    return None  # being written, or damaged: look again next time
                self._stamp, self._seen_at = stamp, self._clock()
                installed, build = found
                same = build == self.own_build
                self._replaced = None if same else Change(REPLACED, installed, build)
            if self._replaced is not None and self._clock() - self._seen_at < SETTLED_FOR:
                return None
            return self._replaced


class Watch:
    """Calls ``on_change`` when the installation changes: at requests (``poke``) and now and
    then (a thread). ``on_change`` may be called more than once for one change."""

    def __init__(
        self,
        installation: Installation,
        on_change: Callable[[Change], None],
        every: float = CHECK_EVERY,
    ) -> None:
        self.installation = installation
        self._on_change = on_change
        self._every = every
        self._stop = threading.Event()
        self.seen: Change | None = None

    def poke(self) -> None:
        """Look now (a request arrived)."""
        change = self.installation.check()
        if change is not None:
            if change != self.seen:
                log.info(
                    "kubetray %s",
                    f"was upgraded to {change.version} (build {change.build})"
                    if change.kind == REPLACED
                    else "was removed from this machine",
                )
            self.seen = change
            self._on_change(change)

    def start(self) -> None:
        if not self.installation.watched:
            return

        def loop() -> None:
            while not self._stop.wait(self._every):
                try:
                    self.poke()
                except Exception:  # the watch must not end the agent
                    log.exception("checking the installation failed")

        threading.Thread(target=loop, name="upgrade-watch", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
