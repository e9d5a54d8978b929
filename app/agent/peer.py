"""Who is calling: the helper's process and its parents, for the record of calls, and the SSH
host when the caller is the local ``ssh`` client relaying a forwarded socket (Linux /proc)."""

import sys

from app.model import Caller

MAX_PARENTS = 4
SSH_CLIENTS = frozenset({"ssh"})
"""A forwarded connection (``ssh -R``) reaches the agent from the ssh client itself."""
SSH_SERVERS = frozenset({"sshd", "sshd-session"})
"""A local forward made into this machine (``ssh -L`` to the agent's socket) from sshd."""
INCOMING = "an SSH client of this machine"
_SSH_OPTIONS_WITH_VALUE = frozenset("BbcDEeFIiJLlmOoPpQRSWw")


def _linux_name_and_parent(pid: int) -> tuple[str | None, int | None]:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None, None
    # "pid (comm) state ppid ..." where comm may itself contain spaces and parentheses
    start, end = stat.find("("), stat.rfind(")")
    if start < 0 or end < 0:
        return None, None
    rest = stat[end + 2 :].split()
    return stat[start + 1 : end], int(rest[1]) if len(rest) > 1 else None


def _darwin_name(pid: int) -> str | None:
    """The program's name from libproc (macOS has no /proc)."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.dylib")
        buf = ctypes.create_string_buffer(256)
        n = libc.proc_name(ctypes.c_int(pid), buf, ctypes.c_uint32(len(buf)))
    except (OSError, AttributeError):
        return None
    return buf.raw[:n].decode("utf-8", "replace") if n > 0 else None


def ssh_destination(argv: list[str]) -> str | None:
    """The host an ``ssh`` command line connects to, as the person typed it, without a user
    name or port (``ssh -p 2222 -i key me@bastion ls`` → ``bastion``)."""
    args = iter(argv[1:])
    for given in args:
        arg = next(args, "") if given == "--" else given
        if given != "--" and arg.startswith("-") and len(arg) > 1:
            flags = arg[1:]
            for i, flag in enumerate(flags):
                if flag in _SSH_OPTIONS_WITH_VALUE:
                    if i == len(flags) - 1:
                        next(args, None)  # its value is the next argument
                    break
            continue
        host = arg.removeprefix("ssh://").rpartition("@")[2]
        if host.startswith("["):  # [v6]:port
            return host[1:].partition("]")[0] or None
        if host.count(":") == 1:
            host = host.partition(":")[0]
        return host or None
    return None


def _cmdline(pid: int) -> list[str] | None:
    """A process's arguments (Linux /proc), None when it is gone or not ours to read."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return [a.decode("utf-8", "surrogateescape") for a in raw.rstrip(b"\0").split(b"\0")]


def _remote_of(pid: int, name: str | None) -> str | None:
    if name in SSH_SERVERS:
        return INCOMING
    if name not in SSH_CLIENTS:
        return None
    return ssh_destination(_cmdline(pid) or []) or "an SSH host"


def kubeconfig_flag(pid: int | None) -> str | None:
    """The file a running kubectl was given with ``--kubeconfig`` (Linux /proc), resolved
    against its working directory: kubectl does not put it in the helper's environment."""
    argv = _cmdline(pid) if pid is not None and sys.platform == "linux" else None
    if argv is None:
        return None
    value = None
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg.startswith("--kubeconfig="):
            value = arg.partition("=")[2]
        elif arg == "--kubeconfig" and i + 1 < len(argv):
            value = argv[i + 1]
    if not value:
        return None
    if not value.startswith("/"):
        import os

        try:
            value = os.path.join(os.readlink(f"/proc/{pid}/cwd"), value)
        except OSError:
            return None
    return value


def describe(pid: int | None, reported_parent: int | None = None) -> Caller:
    """The caller's name and its parents' names (Linux /proc; pid only elsewhere).

    A forwarded request's peer is the local ssh client: ``remote`` names its host, and
    ``reported_parent`` (the pid the remote helper says ran it) tells its kubectls apart.
    """
    if pid is None:
        return Caller(pid=pid)
    if sys.platform == "darwin":
        name = _darwin_name(pid)
        if name in SSH_CLIENTS or name in SSH_SERVERS:
            return Caller(pid=pid, name=name, parent_pid=reported_parent, remote="an SSH host")
        return Caller(pid=pid, name=name)
    if sys.platform != "linux":
        return Caller(pid=pid)
    name, parent = _linux_name_and_parent(pid)
    remote = _remote_of(pid, name)
    if remote is not None:
        return Caller(pid=pid, name=name, parent_pid=reported_parent, remote=remote)
    parent_pid = parent
    parents: list[str] = []
    while parent and parent > 1 and len(parents) < MAX_PARENTS:
        parent_name, parent = _linux_name_and_parent(parent)
        if parent_name is None:
            break
        parents.append(parent_name)
    return Caller(pid=pid, name=name, parents=tuple(parents), parent_pid=parent_pid)
