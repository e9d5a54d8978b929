"""The one way kubetray replaces a file: settings, indexes, sealed secrets, kubeconfigs, the
autostart entry. A crash or power loss at any point leaves the old file or the new one.

The content goes to a temporary file beside the target, is synced, renamed over it, and the
directory is synced too. Temporary names carry the writer's pid (temp_name), so the next write
in that directory removes what a killed kubetray left behind (remove_orphans).
"""

import contextlib
import os
import sys
import threading

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def write(
    path: str, content: bytes, mode: int = 0o600, owner: tuple[int, int] | None = None
) -> None:
    """Replace ``path`` with ``content``; the file gets ``mode`` whatever the umask.

    ``owner``: the (uid, gid) the file must carry (root rewriting a user's file). When the group
    cannot be given, the file keeps ours, minus the group's rights. A missing directory is made
    (0700). On any failure the temporary file is removed and the error propagates as OSError.
    """
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, mode=0o700, exist_ok=True)
    remove_orphans(directory)
    tmp = temp_name(path)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW, mode)
        try:
            if sys.platform != "win32":
                if owner is not None and owner != (os.geteuid(), os.getegid()):
                    try:
                        os.fchown(fd, *owner)
                    except PermissionError:
                        mode &= ~0o070  # a group we are not in: its members must not gain rights
                os.fchmod(fd, mode)  # the umask must not change it; after fchown (set-id bits)
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(directory)


def fsync_dir(directory: str) -> None:
    """Make a rename in ``directory`` durable (a no-op where directories cannot be synced)."""
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temp_name(path: str, tag: str = "") -> str:
    """This thread's temporary name beside ``path``: ``.NAME.kubetray-PID-TID[-TAG].tmp``.

    remove_orphans knows the form: a killed process's files are swept by the next write.
    """
    directory, name = os.path.split(path)
    suffix = f"-{tag}" if tag else ""
    return os.path.join(
        directory, f".{name}.kubetray-{os.getpid()}-{threading.get_ident()}{suffix}.tmp"
    )


def remove_orphans(directory: str) -> None:
    """Temporary files that a killed kubetray left in ``directory`` (``.NAME.kubetray-PID[-N].tmp``
    of a process that is gone)."""
    try:
        entries = os.listdir(directory)
    except OSError:
        return
    for entry in entries:
        if not (entry.startswith(".") and entry.endswith(".tmp") and ".kubetray-" in entry):
            continue
        pid = entry[entry.rindex(".kubetray-") + len(".kubetray-") : -len(".tmp")].split("-")[0]
        if pid.isdigit() and not process_alive(int(pid)):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(directory, entry))


def process_alive(pid: int) -> bool:
    """Whether ``pid`` runs (always True off POSIX: there os.kill(pid, 0) would end it)."""
    if os.name != "posix":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        pass
    return True
