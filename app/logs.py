"""Where kubetray's processes log: stderr, and for the desktop app a file it keeps.

Every module logs under its own name (``logging.getLogger(__name__)``). The tray app is often
started by the desktop, whose stderr nobody reads, so it also writes ``app.log`` in the state
directory (rotated at 1 MB, three kept, readable by this user only). The headless agent writes
to stderr only: kubetray-exec, which starts it, sends that to ``agent.log``. Run in a terminal
(``kubetray agent``, ``kubetray demo --headless``), it writes its records to ``agent.log``
itself, and the terminal gets short lines: the message alone, none marked ``terminal=False``
(``extra={"terminal": False}``: said already), no traceback.
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


class _Short(logging.Formatter):
    """A record as a person reads it in a terminal: its message, a warning or error named."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        return text if record.levelno < logging.WARNING else f"{record.levelname.lower()}: {text}"


def _for_terminal(record: logging.LogRecord) -> bool:
    return getattr(record, "terminal", True) is not False


def to_terminal(directory: str, name: str) -> str | None:
    """Records to ``directory/name``, short lines to stderr (a terminal); the file's path, or
    None when it cannot be written (then the terminal gets the records in full)."""
    short = logging.StreamHandler(sys.stderr)
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    path = to_file(directory, name)
    if path is None:
        short.setFormatter(logging.Formatter(FORMAT))
    else:
        short.setFormatter(_Short())
        short.addFilter(_for_terminal)
    root.addHandler(short)
    return path


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
