"""Small JSON files kubetray keeps (settings, indexes, records): one reader, one writer.

Reads are cached and parsed again only when the file changes (other processes rewrite them).
Writes replace the file atomically and durably (app.atomic_file).

Nothing a person had is lost to a file kubetray cannot read. One whose bytes are not a JSON
object (cut short, overwritten with something else) is set aside as
``NAME.unreadable-YYYYmmddTHHMMSSZ`` and kubetray starts a new one; ``set_aside`` lists what
was, and status, doctor and kubectl say so until the person deletes it. One that cannot be read
at all (permissions, a directory in its place) raises ``Unreadable`` and is never written over.
"""

import json
import logging
import os
import threading
import time
from typing import Any

from app import atomic_file
from app.errors import AppError

log = logging.getLogger(__name__)

ASIDE = ".unreadable-"
"""What a set-aside file's name adds to the original's (then a UTC time)."""

_cache: dict[str, tuple[tuple[int, int], Any]] = {}
_lock = threading.Lock()


class Unreadable(AppError):
    """A file kubetray keeps exists but cannot be read: nothing is written over it."""


def load(path: str) -> Any:
    """The parsed file (a JSON object), or None when it is missing or was set aside as not
    JSON; Unreadable when it cannot be read. Reparsed when mtime or size move."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise unreadable(path, e) from None
    stamp = (st.st_mtime_ns, st.st_size)
    with _lock:
        cached = _cache.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise unreadable(path, e) from None
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, cut short
        doc = None
    if not isinstance(doc, dict):
        keep_aside(path)
        return None
    with _lock:
        _cache[path] = (stamp, doc)
    return doc


def save(path: str, doc: Any, mode: int = 0o600) -> None:
    """Replace ``path`` with ``doc`` as JSON, atomically and durably (directory made 0700)."""
    atomic_file.write(path, (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode(), mode)


def unreadable(path: str, e: OSError) -> Unreadable:
    """The one line for a file kubetray keeps that it cannot read."""
    if isinstance(e, NotADirectoryError):
        from exec_helper import paths

        kind = "state" if path.startswith(paths.state_dir()) else "config"
        return Unreadable(paths.unusable_dir(kind, os.path.dirname(path), e))
    if isinstance(e, IsADirectoryError):
        why, fix = "it is a directory", f"move the directory {path} away"
    elif isinstance(e, PermissionError):
        why, fix = "permission denied", f"make it yours and readable: chmod u+rw {path}"
    else:
        why, fix = e.strerror or str(e), f"check {path} and the disk it is on"
    return Unreadable(
        f"kubetray cannot read {path} ({why}) and leaves it as it is",
        f"{fix}, then try again",
    )


def keep_aside(path: str) -> str | None:
    """Rename the unreadable ``path`` to ``NAME.unreadable-TIME``, keeping every byte: the
    copy's path, None if another process did it first; Unreadable if it cannot be renamed
    (then it stays as it is and nothing is written over it)."""
    try:
        aside = rename_aside(path)
    except FileNotFoundError:
        return None  # another kubetray process set it aside first
    except OSError as e:
        raise unreadable(path, e) from None
    log.warning("%s is not a JSON object: kept it as %s and started a new one", path, aside)
    return aside


def rename_aside(path: str) -> str:
    """Rename ``path`` to ``NAME.unreadable-TIME`` (a name no earlier copy has) and return
    it; OSError as the rename raises it. Every file kubetray cannot read is kept this way."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = f"{path}{ASIDE}{stamp}"
    n = 1
    while os.path.lexists(aside):
        n += 1
        aside = f"{path}{ASIDE}{stamp}-{n}"
    os.rename(path, aside)
    return aside


def set_aside(paths: list[str]) -> list[tuple[str, str]]:
    """The set-aside copies of ``paths`` still there: (original, copy), oldest first."""
    out: list[tuple[str, str]] = []
    listed: dict[str, list[str]] = {}  # one listing per directory, not one per file
    for path in paths:
        where, name = os.path.split(path)
        if where not in listed:
            try:
                listed[where] = sorted(n for n in os.listdir(where) if ASIDE in n)
            except OSError:
                listed[where] = []
        prefix = name + ASIDE
        out.extend((path, os.path.join(where, n)) for n in listed[where] if n.startswith(prefix))
    return out


def aside_notice(path: str, aside: str) -> AppError:
    """A set-aside copy in words: the file, what happened, the remedy."""
    name = os.path.basename(path)
    return AppError(
        f"{name} could not be read (it is not JSON) and was kept as {aside}; kubetray started "
        f"a new {name}",
        "take back what you need from the copy, then delete it",
    )
