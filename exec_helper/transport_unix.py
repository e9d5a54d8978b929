"""AF_UNIX transport: a private directory, and the peer's uid checked on both ends.

Uses only the builtin ``_socket`` and ``posix`` modules (``import socket`` costs ≈7 ms).
"""

import _socket
import posix
import sys

from exec_helper import paths
from exec_helper.errors import AgentUnavailable, HelperError, UnsafeRuntimeDir

assert sys.platform != "win32"  # tells mypy the rest is Unix-only

_S_IFMT = 0o170000
_S_IFDIR = 0o040000
_S_IFLNK = 0o120000
_S_IFSOCK = 0o140000
_S_ISVTX = 0o1000
BUSY_RETRIES = 100
"""Tries 10 ms apart while the agent's connection queue is full (EAGAIN) before giving up."""


def check_private_dir(path: str) -> None:
    """Refuse a directory that is a symlink, not ours, or open to group or others."""
    try:
        st = posix.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise AgentUnavailable(f"no kubetray agent: {path} does not exist") from None
    kind = st.st_mode & _S_IFMT
    if kind == _S_IFLNK:
        raise UnsafeRuntimeDir(f"refusing the kubetray socket directory {path}: it is a symlink")
    if kind != _S_IFDIR:
        raise UnsafeRuntimeDir(f"refusing {path}: it is not a directory")
    if st.st_uid != posix.getuid():
        raise UnsafeRuntimeDir(
            f"refusing the kubetray socket directory {path}: it belongs to uid {st.st_uid}, "
            f"not to you (uid {posix.getuid()})"
        )
    if st.st_mode & 0o077:
        raise UnsafeRuntimeDir(
            f"refusing the kubetray socket directory {path}: mode {st.st_mode & 0o777:o} lets "
            "others in (it must be 700)"
        )


def check_forwarded_socket(path: str) -> None:
    """Refuse a forwarded socket (``KUBETRAY_AGENT_SOCK``) that is not this user's own.

    sshd creates it as this user, mode 600 (``StreamLocalBindMask``); like ssh-agent's
    socket it must be ours, a socket, closed to others, in a directory where nobody else can
    swap it (not writable by others unless sticky, as /tmp is). Nothing there: the forward is
    gone, and no local agent is started in its place.
    """
    env = paths.FORWARD_ENV
    try:
        st = posix.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise HelperError(
            f"{env}={path} does not exist: the SSH session that forwarded the kubetray agent "
            f"is gone (connect again with: kubetray ssh HOST), or unset {env} to use an agent "
            "on this machine"
        ) from None
    except OSError as e:
        raise HelperError(f"cannot use {env}={path}: {e.strerror}") from None
    if st.st_mode & _S_IFMT != _S_IFSOCK:
        raise UnsafeRuntimeDir(f"refusing {env}={path}: it is not a socket")
    if st.st_uid != posix.getuid():
        raise UnsafeRuntimeDir(
            f"refusing {env}={path}: it belongs to uid {st.st_uid}, not to you "
            f"(uid {posix.getuid()}); another user may have taken the path"
        )
    if st.st_mode & 0o077:
        raise UnsafeRuntimeDir(
            f"refusing {env}={path}: mode {st.st_mode & 0o777:o} lets others in (it must be 600)"
        )
    parent = path.rpartition("/")[0] or "."
    try:
        dst = posix.stat(parent)
    except OSError as e:
        raise HelperError(f"cannot use {env}={path}: {parent}: {e.strerror}") from None
    swappable = dst.st_mode & 0o022 and not dst.st_mode & _S_ISVTX
    if swappable or dst.st_uid not in (0, posix.getuid()):
        raise UnsafeRuntimeDir(
            f"refusing {env}={path}: others can replace it in {parent} (the directory must be "
            "yours, or sticky like /tmp)"
        )


def peer_credentials(sock: "_socket.socket") -> tuple[int | None, int]:
    """Return (pid, uid) of the process at the other end of a connected Unix socket."""
    if sys.platform == "linux":
        raw = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
        pid = int.from_bytes(raw[0:4], sys.byteorder, signed=True)
        uid = int.from_bytes(raw[4:8], sys.byteorder)
        return pid, uid
    if sys.platform == "darwin":
        # struct xucred { u_int cr_version; uid_t cr_uid; ... } at SOL_LOCAL(0)/LOCAL_PEERCRED(1)
        raw = sock.getsockopt(0, 0x001, 76)
        uid = int.from_bytes(raw[4:8], sys.byteorder)
        pid = int.from_bytes(sock.getsockopt(0, 0x002, 4), sys.byteorder)  # LOCAL_PEERPID
        return pid, uid
    raise UnsafeRuntimeDir(f"cannot check the peer of a Unix socket on {sys.platform}")


def connect(timeout: float) -> "_socket.socket":
    """Connect to the agent of this user (or the one forwarded to it) and check it runs as
    this user."""
    forwarded = paths.forwarded_socket()
    if forwarded is not None:
        check_forwarded_socket(forwarded)
        address = forwarded
    else:
        directory = paths.runtime_dir()
        check_private_dir(directory)
        address = directory + "/" + paths.SOCKET_NAME
    busy = 0
    while True:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(address)
            break
        except (FileNotFoundError, ConnectionRefusedError) as e:
            sock.close()
            if forwarded is not None:
                raise HelperError(
                    f"nothing answers on {paths.FORWARD_ENV}={address}: the SSH session that "
                    "forwarded the kubetray agent has ended, or kubetray is not running on your "
                    "desktop (start it there, then connect again with: kubetray ssh HOST)"
                ) from None
            raise AgentUnavailable(f"no kubetray agent is listening ({e.strerror})") from None
        except BlockingIOError:
            # EAGAIN: the agent's queue of connections is full; it drains in milliseconds.
            sock.close()
            busy += 1
            if busy > BUSY_RETRIES:
                raise HelperError(
                    f"the kubetray agent at {address} is not taking connections (its queue is "
                    "full): try again; kubetray status shows what it is doing"
                ) from None
            import time

            time.sleep(0.01)
        except OSError as e:
            sock.close()
            raise HelperError(
                f"cannot connect to the kubetray agent at {address}: {e.strerror or e}"
            ) from None
        except BaseException:
            sock.close()
            raise
    _pid, uid = peer_credentials(sock)
    if uid != posix.getuid():
        sock.close()
        raise UnsafeRuntimeDir(f"refusing the kubetray agent: it runs as uid {uid}, not as you")
    return sock
