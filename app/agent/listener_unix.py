"""The agent's end of the Unix socket: a private directory, one agent per user, peer uids.

The directory is created 0700 and re-checked (owner, mode, no symlink) with the same check
kubetray-exec applies; a lock file held for the agent's lifetime makes a second agent fail
fast; a leftover socket is removed only after a probe finds nobody listening.
"""

import contextlib
import errno
import fcntl
import os
import socket
import stat
import sys
import threading

assert sys.platform != "win32"  # tells mypy the rest is Unix-only

from app.agent.server import Peer
from app.errors import AgentRunning, AppError
from exec_helper import paths
from exec_helper.errors import UnsafeRuntimeDir
from exec_helper.transport_unix import check_private_dir, peer_credentials


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

    def open(self) -> None:
        """Take the per-user lock, clear a stale socket, bind and listen."""
        ensure_private_dir(self.directory)
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
        """The next connection, with its peer's pid and whether it runs as us."""
        assert self._sock is not None, "open() first"
        conn, _ = self._sock.accept()
        pid, uid = peer_credentials(conn)  # type: ignore[arg-type]
        return conn, Peer(pid=pid, same_user=uid == os.getuid(), who=f"uid {uid}")

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
