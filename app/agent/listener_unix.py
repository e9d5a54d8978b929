"""The agent's end of the Unix socket: a private directory, one agent per user, peer uids.

The directory is created 0700 and re-checked (owner, mode, no symlink) with the same check
kubetray-exec applies; a lock file held for the agent's lifetime makes a second agent fail
fast; a leftover socket is removed only after a probe finds nobody listening.

A restart in place (app/restart.py) hands both over across exec: the socket keeps listening,
so callers that connect meanwhile wait in its backlog instead of being refused, and the lock is
never free for a second agent to take.
"""

import contextlib
import errno
import fcntl
import os
import select
import socket
import stat
import sys
import threading

assert sys.platform != "win32"  # tells mypy the rest is Unix-only

from app.agent.server import Interrupted, Peer
from app.errors import AgentRunning, AppError
from exec_helper import paths
from exec_helper.errors import UnsafeRuntimeDir
from exec_helper.transport_unix import check_private_dir, peer_credentials

HANDOVER_ENV, HANDOVER_PID_ENV = paths.HANDOVER_ENV, paths.HANDOVER_PID_ENV
"""Like systemd's LISTEN_FDS and LISTEN_PID."""


def handed_over(address: str) -> tuple[socket.socket, int] | None:
    """The listening socket and lock a restarted agent left to this process, checked: a
    listening Unix socket bound to ``address``, and a file. The variables go either way."""
    fds, pid = os.environ.pop(HANDOVER_ENV, None), os.environ.pop(HANDOVER_PID_ENV, None)
    if not fds or pid != str(os.getpid()):
        return None
    try:
        sock_fd, lock_fd = (int(x) for x in fds.split(","))
        sock = socket.socket(fileno=sock_fd)
    except (ValueError, OSError):
        return None
    os.set_inheritable(sock_fd, False)
    os.set_inheritable(lock_fd, False)
    try:  # the lock handed over is the lock file of this directory
        lock = os.fstat(lock_fd)
        named = os.stat(os.path.join(os.path.dirname(address), paths.LOCK_NAME))
        same_lock = (lock.st_dev, lock.st_ino) == (named.st_dev, named.st_ino)
    except OSError:
        same_lock = False
    if (
        sock.family != socket.AF_UNIX
        or sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) != 1
        or sock.getsockname() != address
        or not same_lock
    ):
        sock.close()
        with contextlib.suppress(OSError):
            os.close(lock_fd)  # else its flock would keep this very process from the lock
        return None
    return sock, lock_fd


def ensure_private_dir(path: str) -> None:
    """Create ``path`` 0700 (parents too), or accept it if it is ours and private.

    Ownership is checked on the name first: a directory another user made (a squatted
    /tmp/kubetray-<uid>) is refused with the reason, as kubetray-exec refuses it, rather than
    with whatever error opening it gives.
    """
    parent = os.path.dirname(path)
    try:
        if parent:
            os.makedirs(parent, mode=0o700, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
        st = os.lstat(path)
    except OSError as e:
        raise AppError(
            f"cannot create the socket directory {path}: {e.strerror}",
            "check XDG_RUNTIME_DIR (or KUBETRAY_RUNTIME_DIR): it must name a directory you own",
        ) from None
    if stat.S_ISDIR(st.st_mode) and st.st_uid != os.getuid():
        raise AppError(
            f"refusing the kubetray socket directory {path}: it belongs to uid {st.st_uid}, "
            f"not to you (uid {os.getuid()})",
            "someone else created it: remove it (or set KUBETRAY_RUNTIME_DIR elsewhere)",
        )
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise AppError(
                f"refusing the socket directory {path}: it is a symlink or not a directory",
                "remove it, then start kubetray again",
            ) from None
        raise AppError(f"cannot open the socket directory {path}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid():
            raise AppError(
                f"refusing the kubetray socket directory {path}: it belongs to uid "
                f"{st.st_uid}, not to you (uid {os.getuid()})",
                "someone else created it: remove it (or set KUBETRAY_RUNTIME_DIR elsewhere)",
            )
        if st.st_mode & 0o077:
            os.fchmod(fd, 0o700)  # ours, but too open: tighten rather than refuse
    finally:
        os.close(fd)
    try:
        check_private_dir(path)
    except UnsafeRuntimeDir as e:
        raise AppError(str(e)) from None


class UnixListener:
    """Owns the lock file and the listening socket."""

    def __init__(self, directory: str | None = None) -> None:
        self.directory = directory or paths.runtime_dir()
        self.address = os.path.join(self.directory, paths.SOCKET_NAME)
        self._lock_fd: int | None = None
        self._sock: socket.socket | None = None
        self._closing = threading.Lock()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self.adopted = False
        """The socket was handed over by the agent this process replaced (a restart)."""

    def open(self) -> None:
        """Take the per-user lock, clear a stale socket, bind and listen (or take over what a
        restarting agent handed to this process)."""
        ensure_private_dir(self.directory)
        adopted = handed_over(self.address)
        if adopted is not None:
            self._sock, self._lock_fd = adopted
            self.adopted = True
            return
        lock_path = os.path.join(self.directory, paths.LOCK_NAME)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise AgentRunning(
                f"a kubetray agent is already running for this user (pid {pid})",
                "kubetray status shows what it serves",
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd
        if os.path.lexists(self.address):
            self._remove_stale()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)
        try:
            sock.bind(self.address)
        finally:
            os.umask(old_umask)
        sock.listen(socket.SOMAXCONN)  # the kernel's cap (4096 on current Linux)
        self._sock = sock

    def _remove_stale(self) -> None:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.settimeout(1.0)
        try:
            probe.connect(self.address)
        except OSError:
            os.unlink(self.address)  # nobody answers: a killed agent's leftover
            return
        finally:
            probe.close()
        raise AgentRunning(f"something already answers on {self.address}")

    def accept(self) -> tuple[socket.socket, Peer]:
        """The next connection, with its peer's pid and whether it runs as us; Interrupted when
        wake() was called first."""
        sock = self._sock
        assert sock is not None, "open() first"
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        if any(fd == self._wake_r for fd, _ in poller.poll()):
            with contextlib.suppress(BlockingIOError):
                os.read(self._wake_r, 512)
            raise Interrupted
        conn, _ = sock.accept()
        pid, uid = peer_credentials(conn)  # type: ignore[arg-type]
        return conn, Peer(pid=pid, same_user=uid == os.getuid(), who=f"uid {uid}")

    def wake(self) -> None:
        """Make a blocked (or the next) accept() raise Interrupted."""
        with contextlib.suppress(OSError):  # full (a wake is pending anyway), or closed
            os.write(self._wake_w, b"w")

    def hand_over(self) -> tuple[int, int]:
        """The listening socket and the lock as inheritable descriptors, for the process this
        one execs into; close() then leaves both alone (the socket keeps listening)."""
        with self._closing:
            assert self._sock is not None and self._lock_fd is not None, "open() first"
            sock_fd, lock_fd = self._sock.detach(), self._lock_fd
            self._sock, self._lock_fd = None, None
        os.set_inheritable(sock_fd, True)
        os.set_inheritable(lock_fd, True)
        return sock_fd, lock_fd

    def close(self) -> None:
        """Stop listening, remove the socket, release the lock.

        A signal's thread and serve_forever's caller may both close: the second waits until the
        first is done, so nobody exits with the socket file still there.
        """
        with self._closing:
            if self._sock is not None:
                with contextlib.suppress(OSError):
                    self._sock.shutdown(socket.SHUT_RDWR)
                self._sock.close()
                self._sock = None
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.address)
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None
            self.wake()  # a thread still in accept() leaves it
