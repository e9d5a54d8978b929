"""The IPC server: one thread per connection, peer uid checked, frames bounded and timed.

A client that connects and sends nothing holds only its own thread, and only until the read
timeout; a client of another uid is dropped before a byte is read.
"""

import json
import logging
import threading
from dataclasses import dataclass
from typing import Any, Protocol

from app.broker.service import Service
from exec_helper import protocol

log = logging.getLogger(__name__)

READ_TIMEOUT = 5.0
SEND_TIMEOUT = 30.0
MAX_CONNECTIONS = 64


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


class PeerGone(Exception):
    """The client closed the connection or sent something unusable."""


def read_frame(conn: Connection) -> dict[str, Any]:
    """Read one frame and decode its JSON object."""

    def read_exactly(n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = conn.recv(min(65536, n - len(buf)))
            if not chunk:
                raise PeerGone("connection closed")
            buf += chunk
        return bytes(buf)

    length = protocol.frame_length(read_exactly(protocol.HEADER_SIZE))
    try:
        doc = json.loads(read_exactly(length))
    except ValueError as e:
        raise PeerGone(f"not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise PeerGone("a frame must hold a JSON object")
    return doc


def write_frame(conn: Connection, doc: dict[str, Any]) -> None:
    """Encode and send one frame."""
    conn.sendall(protocol.frame(json.dumps(doc).encode()))


class IPCServer:
    """Serves a Service on a Listener."""

    def __init__(
        self,
        listener: Listener,
        service: Service,
        read_timeout: float = READ_TIMEOUT,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self.listener = listener
        self._service = service
        self._read_timeout = read_timeout
        self._slots = threading.BoundedSemaphore(max_connections)
        self._stopping = threading.Event()

    def serve_forever(self) -> None:
        """Accept until shutdown(); the listener must be open."""
        while not self._stopping.is_set():
            try:
                conn, peer = self.listener.accept()
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
            if not self._slots.acquire(blocking=False):
                log.warning("too many connections; dropped one from pid %s", pid)
                conn.close()
                continue
            threading.Thread(
                target=self._serve, args=(conn, pid), name=f"ipc-{pid}", daemon=True
            ).start()

    def shutdown(self) -> None:
        """Stop accepting and close the listener (a blocked accept() returns)."""
        self._stopping.set()
        self.listener.close()

    def _serve(self, conn: Connection, pid: int | None) -> None:
        try:
            conn.settimeout(self._read_timeout)
            hello = read_frame(conn)
            if hello.get("op") != protocol.HELLO:
                raise PeerGone("the first frame must be hello")
            version = hello.get("version")
            write_frame(conn, {"type": protocol.HELLO, "version": protocol.PROTOCOL_VERSION})
            if version != protocol.PROTOCOL_VERSION:
                write_frame(
                    conn,
                    {
                        "type": protocol.RESULT,
                        "exit": 1,
                        "stdout": "",
                        "stderr": f"kubetray-exec speaks IPC protocol {version} but the running "
                        f"agent speaks {protocol.PROTOCOL_VERSION}: restart the agent after an "
                        "upgrade (stop it, then run kubetray agent)",
                    },
                )
                return
            request = read_frame(conn)
            conn.settimeout(SEND_TIMEOUT)  # a caller that stops reading is dropped

            def receive(timeout: float) -> dict[str, Any]:
                conn.settimeout(timeout)
                try:
                    return read_frame(conn)
                finally:
                    conn.settimeout(SEND_TIMEOUT)

            self._service.handle(request, pid, lambda doc: write_frame(conn, doc), receive)
        except (PeerGone, protocol.ProtocolError, TimeoutError) as e:
            log.debug("dropped a connection from pid %s: %s", pid, e)
        except OSError as e:
            log.info("connection from pid %s failed: %s", pid, e)
        finally:
            conn.close()
            self._slots.release()
