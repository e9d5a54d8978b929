"""Restarting the agent or the app in place: the same program, the same pid, the socket kept.

After a package upgrade, or on ``kubetray restart``, the running kubetray waits until no login
is in flight (and, for the app, until no window of it is open), then:

1. stops accepting: callers that connect from now on wait in the listening socket's backlog
   (they are not refused, and kubetray-exec's fast path waits up to 2 s for its answer);
2. waits for the connections it is serving to end (a kubectl call takes milliseconds);
3. holds every identity still (Logins.hold): none refreshing, none saving, none with tokens
   the keyring has not taken, so a rotated refresh token is always in the keyring before the
   process goes (else it serves again and tries later: a locked keyring delays the restart);
4. execs its program, as installed now, with the listening socket and the agent lock handed
   over as inherited descriptors (app/agent/listener_unix.py): the new process serves the
   callers that waited, reads the tokens back from the keyring, and the lock is never free.

Tokens that live only in the agent's memory (no keyring) go across too, in an anonymous
memory file (memfd, Linux) the new process reads and closes: never a file on disk. Where there
is no memfd, such an agent waits until memory holds no tokens, and says so.
The new process learns where it came from (``KUBETRAY_RESTARTED_FROM``): the app then says
"kubetray was updated to VERSION" once, both log it with the time the restart took.

On Windows there is no exec that keeps the process: the listener (a named pipe) is closed and
the new process, started by os.execv's emulation, opens its own (not run here).
"""

import base64
import contextlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

from app.agent.server import IPCServer
from app.broker.logins import Logins
from app.upgrade import REPLACED, Change, Installation, Watch
from exec_helper import paths, version

if TYPE_CHECKING:
    from app.compose import Agent

log = logging.getLogger(__name__)

RESTARTED_ENV, MEMORY_ENV = paths.RESTART_ENV[0], paths.RESTART_ENV[1]
"""``VERSION BUILD TIME``: set for the process a restart execs, removed by it at start; and
``FD PID``: the memory store's items, handed to the restarted process (see the module)."""
MEMORY_FORMAT = 1
POLL = 0.25
DRAIN = 5.0
"""How long the connections being served may take to end before the restart tries later."""
HOLD = 2.0
"""How long a store write in progress may take before the restart tries later (the callers
wait meanwhile: it is short)."""
RETRY = 2.0

_carried: list[Callable[[], dict[str, str]]] = []


def carry(hand_over: Callable[[], dict[str, str]]) -> None:
    """Something else this process serves goes across its restarts too (the demo's provider
    and API server): ``hand_over`` runs once the main loop has ended, just before exec; it
    makes what it hands over inheritable and returns the environment variables that name it.
    Should it fail, the new process starts that thing afresh."""
    _carried.append(hand_over)


def restarting() -> bool:
    """This process is a restart in place (before restarted_from() takes the variable)."""
    return bool(os.environ.get(RESTARTED_ENV))


@dataclass(frozen=True)
class Restarted:
    """What a restarted process learns of the one it replaced."""

    version: str
    build: str | None
    since: float
    """When the old process decided to exec (time.time())."""

    def seconds(self) -> float:
        """Since then: taken once this process serves, the time the restart took."""
        return max(0.0, time.time() - self.since)

    @property
    def updated(self) -> bool:
        """It ran another build: the person is told kubetray was updated."""
        return self.build != version.BUILD or self.version != version.VERSION


def note(came_from: Restarted | None, facts: dict[str, object]) -> None:
    """Log a restart and put it in status (called as the process starts to serve)."""
    if came_from is None:
        return
    seconds = came_from.seconds()
    facts["restarted_from"] = {"version": came_from.version, "build": came_from.build}
    facts["restart_seconds"] = round(seconds, 3)
    change = f"was updated to {version.VERSION}" if came_from.updated else "restarted"
    log.info("kubetray %s (from %s): serving after %.3f s", change, came_from.version, seconds)


def restarted_from() -> Restarted | None:
    """The process this one replaced, if it is a restart (the variable is removed: children
    such as a browser must not inherit it)."""
    value = os.environ.pop(RESTARTED_ENV, None)
    if not value:
        return None
    parts = value.split(" ")
    try:
        since = float(parts[2])
    except (IndexError, ValueError):
        return None
    return Restarted(parts[0], parts[1] or None, since)


class Restart:
    """Restart this process in place once idle (see the module)."""

    def __init__(
        self,
        server: IPCServer,
        logins: Logins,
        finish: Callable[[], None],
        busy: Callable[[], bool] = lambda: False,
        memory: Callable[[], dict[str, bytes]] = dict,
    ) -> None:
        """``finish`` ends the process's main loop (the agent's, Qt's); its caller then calls
        ``exec_if_due``. ``busy``: the app's windows are open. ``memory``: what the token
        store holds in memory only (nothing when it is the keyring)."""
        self._server = server
        self._accounts = logins
        self._finish = finish
        self._busy = busy
        self._memory = memory
        self._memory_fd: int | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.reason: str | None = None
        """Why a restart is pending (None: none is)."""
        self._fds: tuple[int, int] | None = None
        self._due = False
        self._since = 0.0
        self._unsettled = False
        """The last try found an identity busy (see Logins.hold)."""

    def request(self, reason: str) -> list[str]:
        """Restart once idle; returns the names of the logins it waits for."""
        with self._lock:
            if self._thread is None:
                self.reason = reason
                log.info("restarting %s", reason)
                self._thread = threading.Thread(target=self._run, name="restart", daemon=True)
                self._thread.start()
        return [login.name for login in self._accounts.in_flight()]

    def waits_for(self) -> str | None:
        """What the pending restart waits for, in the user's words (None: nothing)."""
        if self.reason is None:
            return None
        blocking = self._blocking()
        if blocking is None and self._unsettled:
            return "a refresh in progress, or tokens the keyring has not taken yet (locked?)"
        return blocking

    def _blocking(self) -> str | None:
        names = [login.name for login in self._accounts.in_flight()]
        if names:
            return f"the login to {', '.join(names)}"
        if sys.platform != "linux" and self._memory():
            return "the logins held in memory only (kubetray stop ends them)"
        if self._busy():
            return "kubetray's windows to close"
        return None

    def _run(self) -> None:
        while True:
            if self._blocking() is not None:
                time.sleep(POLL)
                continue
            if not self._server.drain(DRAIN):
                time.sleep(RETRY)
                continue
            release = self._accounts.hold(HOLD)
            if release is None:  # a refresh in flight, or tokens the keyring has not taken
                self._server.resume()
                self._unsettled = True
                time.sleep(RETRY)
                continue
            self._unsettled = False
            if self._accounts.in_flight():  # the app's own button started one meanwhile
                release()
                self._server.resume()
                continue
            self._since = time.time()
            self._memory_fd = _memory_file(self._memory())
            hand_over = getattr(self._server.listener, "hand_over", None)
            self._fds = hand_over() if hand_over is not None else None
            self._due = True
            log.info("restarting now")
            self._finish()
            return  # the identities' locks stay held until exec

    def exec_if_due(self) -> None:
        """Replace this process with its program as installed now, if a restart is due (the
        main loop has ended and cleaned up); returns only when none is."""
        if self._due:
            replace_process(self._fds, self._since, self._memory_fd)


def _memory_file(items: dict[str, bytes]) -> int | None:
    """An inheritable anonymous memory file holding ``items`` (None when there are none)."""
    if not items or sys.platform != "linux":
        return None
    doc = {
        "version": MEMORY_FORMAT,
        "items": {k: base64.b64encode(v).decode() for k, v in items.items()},
    }
    fd = os.memfd_create("kubetray-tokens")
    data = json.dumps(doc).encode()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def take_memory() -> dict[str, bytes]:
    """What the process this one replaced held in memory only; the file is closed, the
    variable removed. Nothing for a process that was not restarted."""
    value = os.environ.pop(MEMORY_ENV, None)
    if not value:
        return {}
    try:
        fd_text, pid = value.split(" ")
        fd = int(fd_text)
    except ValueError:
        return {}
    if pid != str(os.getpid()):
        return {}  # inherited by a child, not handed to it
    try:
        with open(fd, "rb") as f:
            doc = json.loads(f.read())
    except (OSError, ValueError):
        log.warning("the tokens a restart handed over in memory are unreadable: lost")
        return {}
    if not isinstance(doc, dict) or doc.get("version") != MEMORY_FORMAT:
        log.warning("the tokens a restart handed over are in another format: lost")
        return {}
    items = doc.get("items")
    return {str(k): base64.b64decode(v) for k, v in (items or {}).items() if isinstance(v, str)}


def program() -> list[str]:
    """This process's command line, to run again."""
    if getattr(sys, "frozen", False):
        return [sys.executable, *sys.argv[1:]]
    return [sys.executable, *sys.orig_argv[1:]]


def replace_process(fds: tuple[int, int] | None, since: float, memory: int | None) -> NoReturn:
    """exec this program again, the listening socket and lock handed over as ``fds``, what
    memory held as the file ``memory``."""
    env = dict(os.environ)
    env[RESTARTED_ENV] = f"{version.VERSION} {version.BUILD or ''} {since:.6f}"
    if fds is not None:
        env[paths.HANDOVER_ENV] = f"{fds[0]},{fds[1]}"
        env[paths.HANDOVER_PID_ENV] = str(os.getpid())
    if memory is not None:
        os.set_inheritable(memory, True)
        env[MEMORY_ENV] = f"{memory} {os.getpid()}"
    for hand_over in _carried:
        try:
            env.update(hand_over())
        except Exception:  # that part starts afresh; the restart goes on
            log.exception("could not hand over %s", getattr(hand_over, "__qualname__", "?"))
    if getattr(sys, "frozen", False):
        # PyInstaller's bootloader set these for this process: the new one sets its own, and
        # must start as a first process does (PyInstaller's documented way to run itself).
        env = {k: v for k, v in env.items() if not k.startswith("_PYI_")}
        env["PYINSTALLER_RESET_ENVIRONMENT"] = "1"
        original = env.pop("LD_LIBRARY_PATH_ORIG", None)
        env.pop("LD_LIBRARY_PATH", None)
        if original is not None:
            env["LD_LIBRARY_PATH"] = original
    argv = program()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    logging.shutdown()
    try:
        os.execve(argv[0], argv, env)  # noqa: S606 - this very program, again
    except OSError as e:  # the program went between the check and now: stop, clearly
        sys.stderr.write(f"kubetray could not restart ({argv[0]}: {e.strerror}); it stops\n")
        os._exit(1)


def register_with_the_platform() -> None:
    """Where an installer restarts programs itself (Windows), say that this one may be."""
    if sys.platform == "win32":
        from app.restart_windows import register_for_restart

        register_for_restart()


def wire(
    agent: "Agent",
    finish: Callable[[], None],
    stop: Callable[[], None],
    busy: Callable[[], bool] = lambda: False,
) -> tuple[Restart, Watch]:
    """Restart ``agent`` when its installation is replaced or ``kubetray restart`` asks; stop
    it (once idle) when kubetray was removed. ``finish`` ends its main loop for a restart,
    ``stop`` for good. The agent's service answers ``restart`` and shows both in status."""
    from app import lifecycle
    from app.store.choice import MEMORY
    from app.store.memory_store import MemorySecretStore

    def memory() -> dict[str, bytes]:
        store = agent.store.chosen.store
        if agent.store.chosen.kind != MEMORY or not isinstance(store, MemorySecretStore):
            return {}
        return dict(store.items())

    restart = Restart(agent.server, agent.logins, finish, busy, memory)
    stopping = threading.Event()

    def changed(change: Change) -> None:
        if change.kind == REPLACED:
            restart.request(f"into kubetray {change.version} (build {change.build})")
        elif not stopping.is_set():
            stopping.set()
            log.info("kubetray was removed: stopping once no login is in flight")
            lifecycle.stop_when_idle(agent.logins, stop)

    register_with_the_platform()
    watch = Watch(Installation(), changed)
    service = agent.service
    service.on_request = watch.poke
    service.on_restart = lambda: restart.request("as asked (kubetray restart)")

    def facts() -> dict[str, object]:
        seen = watch.seen
        out: dict[str, object] = {}
        if seen is not None and seen.kind == REPLACED:
            out["update"] = {"version": seen.version, "build": seen.build}
        if restart.reason is not None:
            out["restart"] = {"reason": restart.reason, "waits_for": restart.waits_for()}
        return out

    service.restart_facts = facts
    return restart, watch


def restore_memory(agent: "Agent") -> int:
    """Put what a restart handed over in memory back into the token store (the keyring, if
    this process found one); returns how many items."""
    items = take_memory()
    for key, value in items.items():
        agent.store.set(key, value)
    return len(items)
