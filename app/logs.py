"""Where kubetray's processes log: stderr, and for the desktop app a file it keeps.

Every module logs under its own name (``logging.getLogger(__name__)``). The tray app is often
started by the desktop, whose stderr nobody reads, so it also writes ``app.log`` in the state
directory (rotated at 1 MB, three kept, readable by this user only). The headless agent writes
to stderr only: kubetray-exec, which starts it, sends that to ``agent.log``.
"""

import logging
import logging.handlers
import os
import sys

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
MAX_BYTES = 1024 * 1024
KEEP = 3


def to_stderr() -> None:
    """Log INFO and above to stderr (the headless agent, and the app's terminal if any)."""
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format=FORMAT)


def to_file(directory: str, name: str) -> str | None:
    """Also log to ``directory/name``; its path, or None when it cannot be written."""
    path = os.path.join(directory, name)
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.close(fd)
        handler = logging.handlers.RotatingFileHandler(
            path, maxBytes=MAX_BYTES, backupCount=KEEP, encoding="utf-8"
        )
    except OSError as e:
        logging.getLogger(__name__).warning("cannot write the log file %s: %s", path, e)
        return None
    handler.setFormatter(logging.Formatter(FORMAT))
    logging.getLogger().addHandler(handler)
    return path
