"""Small JSON files kubetray keeps (settings, indexes, records): one reader, one atomic writer.

Reads are cached and parsed again only when the file changes (other processes rewrite them).
Writes go to a temporary file beside the target, are synced, renamed over it, and the directory
is synced too, so a crash or power loss at any point leaves the old file or the new one.
"""

import contextlib
import json
import os
import sys
import threading
from typing import Any

_cache: dict[str, tuple[tuple[int, int], Any]] = {}
_lock = threading.Lock()


def load(path: str) -> Any:
    """The parsed file, or None when it is missing or not JSON (reparsed when mtime/size move)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    stamp = (st.st_mtime_ns, st.st_size)
    with _lock:
        cached = _cache.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    with _lock:
        _cache[path] = (stamp, doc)
    return doc


def save(path: str, doc: Any, mode: int = 0o600) -> None:
    """Replace ``path`` with ``doc`` as JSON, atomically and durably (directory made 0700)."""
    write_atomic(path, (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode(), mode)


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


def write_atomic(path: str, content: bytes, mode: int = 0o600) -> None:
    """Write ``content`` to a synced temporary file, rename it over ``path``, sync the directory.

    The temporary file is removed on every failure path; the error propagates as OSError.
    """
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, mode=0o700, exist_ok=True)
    remove_orphans(directory)
    tmp = temp_name(path)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        try:
            if sys.platform != "win32":
                os.fchmod(fd, mode)  # the umask must not loosen or tighten it
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
