"""Small JSON files that other processes may rewrite: parse again only when they change."""

import json
import os
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
