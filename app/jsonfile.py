"""Small JSON files kubetray keeps (settings, indexes, records): one reader, one writer.

Reads are cached and parsed again only when the file changes (other processes rewrite them).
Writes replace the file atomically and durably (app.atomic_file).
"""

import json
import os
import threading
from typing import Any

from app import atomic_file

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
    atomic_file.write(path, (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode(), mode)
