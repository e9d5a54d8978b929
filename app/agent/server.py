"""The IPC server: one thread per connection, peer uid checked, frames bounded and timed.

Like ssh-agent and gpg-agent, it serves many clients of one user, some of them slow or stuck.
So a connection must deliver its hello and request within READ_TIMEOUT in all (a deadline per
frame, not per recv: a byte every few seconds does not keep it alive), and connections still
waiting for their request are capped per peer process and in all, the oldest one dropped
first: whoever connects and sends nothing can only push out its own kind, never a real call.
A client of another uid is dropped before a byte is read.
"""

import json
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Protocol

from app.agent.service import Service, bad_request
from exec_helper import protocol, version

HELLO = {
    "type": protocol.HELLO,
    "version": protocol.PROTOCOL_VERSION,
    protocol.KUBETRAY: version.VERSION,
    protocol.BUILD: version.BUILD,
}
"""The agent's first frame: the protocol, and which kubetray answers (a newer kubetray-exec
asks an agent without them to restart, see exec_helper.exchange)."""

log = logging.getLogger(__name__)

READ_TIMEOUT = 5.0
"""For the hello and the request together, from the moment the connection is accepted."""
SEND_TIMEOUT = 30.0
MAX_CONNECTIONS = 256
"""Threads serving connections, in all."""
MAX_WAITING = 64
"""Connections that have not delivered their request yet, in all."""
MAX_WAITING_PER_PEER = 8
"""The same, per peer process: a real caller sends its request at once."""
WARN_EVERY = 60.0


class Connection(Protocol):
    """What the server needs of an accepted connection."""

    def recv(self, size: int, /) -> bytes: ...
    def sendall(self, data: bytes, /) -> None: ...
    def settimeout(self, value: float | None, /) -> None: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class Peer:
    """Who connected: the process id, and whether it runs as the agent's own user."""

    pid: int | None
    same_user: bool
    who: str
    """For the log: "uid 1000" or the Windows account."""


class Listener(Protocol):
    """A Unix socket or a Windows named pipe that yields connections with peer facts."""

    address: str

    def open(self) -> None: ...
    def accept(self) -> tuple[Any, Peer]: ...
    def close(self) -> None: ...


class Interrupted(Exception):
    """Raised by a listener's accept() that was woken (see IPCServer.drain)."""


class PeerGone(Exception):
    """The client closed the connection or sent something unusable."""


class BadFrame(PeerGone):
    """A whole frame arrived but does not hold a JSON object (the caller can be told)."""


def read_frame(conn: Connection, deadline: float | None = None) -> dict[str, Any]:
    """Read one frame and decode its JSON object, all of it by ``deadline`` (monotonic)."""

    def read_exactly(n: int) -> bytearray:
        buf = bytearray(n)  # one allocation of the announced size, filled in place
        view, got = memoryview(buf), 0
        while got < n:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("the frame did not arrive in time")
                conn.settimeout(left)
            chunk = conn.recv(min(65536, n - got))
            if not chunk:
                raise PeerGone("connection closed")
            view[got : got + len(chunk)] = chunk
            got += len(chunk)
        return buf

    length = protocol.frame_length(bytes(read_exactly(protocol.HEADER_SIZE)))
    try:
        doc = json.loads(read_exactly(length))
    except ValueError as e:
        raise BadFrame(f"not JSON: {e}") from None
    except RecursionError:
        raise BadFrame("not JSON: nested too deeply") from None
    if not isinstance(doc, dict):
        raise BadFrame("a frame must hold a JSON object")
    return doc


def write_frame(conn: Connection, doc: dict[str, Any]) -> None:
    """Encode and send one frame."""
    conn.sendall(protocol.frame(json.dumps(doc).encode()))


def _hang_up(conn: Connection) -> None:
    """Wake the thread blocked reading ``conn`` (it then closes it); close() would race it."""
    shutdown = getattr(conn, "shutdown", None)
    try:
        if shutdown is not None:
            shutdown(2)  # SHUT_RDWR: the blocked recv returns b""
        else:
            conn.close()  # a Windows pipe: closing the handle fails the pending read
    except OSError:
        pass


class IPCServer:
    """Serves a Service on a Listener."""

    def __init__(
        self,
        listener: Listener,
        service: Service,
        read_timeout: float = READ_TIMEOUT,
        max_connections: int = MAX_CONNECTIONS,
        max_waiting: int = MAX_WAITING,
        max_waiting_per_peer: int = MAX_WAITING_PER_PEER,
    ) -> None:
        self.listener = listener
        self._service = service
        self._read_timeout = read_timeout
        self._max_connections = max_connections
        self._max_waiting = max_waiting
        self._max_per_peer = max_waiting_per_peer
        self._lock = threading.Lock()
        self._open = 0
        self._waiting: OrderedDict[Connection, int | None] = OrderedDict()
        """Connections still owing their request, oldest first, with their peer's pid."""
        self._dropped = 0
        self._warned = 0.0
        self._stopping = threading.Event()
        self._paused = False
        self._parked = False
        """serve_forever is waiting for resume(), in no accept()."""
        self._idle = threading.Condition(self._lock)
        """Notified when a connection ends or serving resumes (drain waits on it)."""

    def serve_forever(self) -> None:
        """Accept until shutdown(); the listener must be open."""
        while not self._stopping.is_set():
            with self._lock:
                while self._paused and not self._stopping.is_set():
                    self._parked = True
                    self._idle.notify_all()
                    self._idle.wait()
                self._parked = False
            if self._stopping.is_set():
                return
            try:
                conn, peer = self.listener.accept()
            except Interrupted:
                continue  # drain() or shutdown() woke it
            except OSError:
                if self._stopping.is_set():
                    return
                log.exception("accept failed")
                continue
            pid = peer.pid
            if not peer.same_user:
                log.warning("refused a connection from %s (pid %s)", peer.who, pid)
                conn.close()
                continue
            if not self._admit(conn, pid):
                conn.close()
                continue
            threading.Thread(
                target=self._serve, args=(conn, pid), name=f"ipc-{pid}", daemon=True
            ).start()

    def _admit(self, conn: Connection, pid: int | None) -> bool:
        """Count ``conn`` as waiting, dropping the oldest waiting ones over the caps."""
        drop: list[Connection] = []
        with self._lock:
            mine = [c for c, p in self._waiting.items() if p == pid]
            if len(mine) >= self._max_per_peer:
                drop.append(mine[0])
            elif len(self._waiting) >= self._max_waiting:
                drop.append(next(iter(self._waiting)))
            elif self._open >= self._max_connections:
                if not self._waiting:
                    self._note_drop(pid)
                    return False  # every slot serves a request: nothing idle to give way
                drop.append(next(iter(self._waiting)))
            for old in drop:
                del self._waiting[old]  # its thread finds it gone and ends
            self._waiting[conn] = pid
            self._open += 1
            for _ in drop:
                self._note_drop(pid)
        for old in drop:
            _hang_up(old)
        return True

    def _note_drop(self, pid: int | None) -> None:
        """Log drops at most once a minute: a flood of connections must not flood the log."""
        self._dropped += 1
        now = time.monotonic()
        if now - self._warned >= WARN_EVERY:
            log.warning(
                "too many connections waiting to send a request: dropped %d, oldest first "
                "(latest from pid %s)",
                self._dropped,
                pid,
            )
            self._warned, self._dropped = now, 0

    def _received(self, conn: Connection) -> bool:
        """The request is in: ``conn`` is no longer droppable (False if it was dropped)."""
        with self._lock:
            if conn not in self._waiting:
                return False
            del self._waiting[conn]
            return True

    def shutdown(self) -> None:
        """Stop accepting and close the listener (a blocked accept() returns). After a
        hand-over (restart) the listener has nothing left to close."""
        self._stopping.set()
        with self._lock:
            self._idle.notify_all()
        self.listener.close()

    def drain(self, timeout: float) -> bool:
        """Stop accepting (callers wait in the socket's backlog) and wait until no connection
        is open; False, serving again, if one still is after ``timeout`` seconds.

        A listener that cannot be woken (the Windows pipe) may still accept the one caller its
        accept() is waiting for: that call is served before the process goes only if it
        arrives before the connections being served have ended (not run here)."""
        wake = getattr(self.listener, "wake", None)
        deadline = time.monotonic() + timeout
        with self._lock:
            self._paused = True
        if wake is not None:
            wake()

        def busy() -> bool:
            return bool(self._open) or (wake is not None and not self._parked)

        with self._lock:
            while busy() and time.monotonic() < deadline:
                self._idle.wait(max(0.0, deadline - time.monotonic()))
            if busy():
                self._paused = False
                self._idle.notify_all()
                return False
        return True

    def resume(self) -> None:
        """Accept again after a drain that led nowhere."""
        with self._lock:
            self._paused = False
            self._idle.notify_all()

    def open_connections(self) -> int:
        with self._lock:
            return self._open

    def _serve(self, conn: Connection, pid: int | None) -> None:
        deadline = time.monotonic() + self._read_timeout
        try:
            hello = read_frame(conn, deadline)
            if hello.get("op") != protocol.HELLO:
                raise PeerGone("the first frame must be hello")
            version = hello.get("version")
            write_frame(conn, HELLO)
            if version != protocol.PROTOCOL_VERSION:
                write_frame(
                    conn,
                    {
                        "type": protocol.RESULT,
                        "exit": 1,
                        "stdout": "",
                        "stderr": f"kubetray-exec speaks IPC protocol {str(version)[:20]} but the "
                        f"running agent speaks {protocol.PROTOCOL_VERSION}: restart the agent "
                        "after an upgrade (stop it, then run kubetray agent)",
                    },
                )
                return
            try:
                request = read_frame(conn, deadline)
            except (BadFrame, protocol.ProtocolError) as e:
                if self._received(conn):
                    conn.settimeout(SEND_TIMEOUT)
                    write_frame(conn, bad_request(str(e)))
                raise
            if not self._received(conn):
                raise PeerGone("dropped: too many connections waiting")
            conn.settimeout(SEND_TIMEOUT)  # a caller that stops reading is dropped

            def receive(timeout: float) -> dict[str, Any]:
                try:
                    return read_frame(conn, time.monotonic() + timeout)
                finally:
                    conn.settimeout(SEND_TIMEOUT)

            self._service.handle(request, pid, lambda doc: write_frame(conn, doc), receive)
        except (PeerGone, protocol.ProtocolError, TimeoutError) as e:
            log.debug("dropped a connection from pid %s: %s", pid, e)
        except OSError as e:
            log.info("connection from pid %s failed: %s", pid, e)
        finally:
            with self._lock:
                self._waiting.pop(conn, None)
                self._open -= 1
                self._idle.notify_all()
            conn.close()
