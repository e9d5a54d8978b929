"""Answering the agent's prompts on the terminal (slow path: only during a login).

The agent asks only when the caller is interactive (spec.interactive, and stdin and stderr
terminals); this re-checks stdin, writes the question to stderr (stdout is kubectl's), never
echoes a secret, and gives up after PROMPT_TIMEOUT with one line, so a prompt nobody sees never
hangs the program that ran kubectl.
"""

import os
import sys
from typing import Any

from exec_helper import protocol


def _cancel(timeout: bool = False) -> bytes:
    return protocol.encode({"op": "answer", "cancel": True, "timeout": timeout})


def answer(msg: dict[str, Any], timeout: float = protocol.PROMPT_TIMEOUT) -> bytes:
    """Ask the user ``msg["text"]`` and encode the reply frame (a cancel when we cannot ask)."""
    text = str(msg.get("text") or "? ")
    secret = bool(msg.get("secret"))
    if not os.isatty(0):
        return _cancel()
    sys.stderr.write(text)
    sys.stderr.flush()
    try:
        value = _read_line(timeout, secret)
    except (EOFError, KeyboardInterrupt, OSError):
        return _cancel()
    finally:
        sys.stderr.flush()
    if secret or value is None:  # the person's Enter was not echoed, or never came
        sys.stderr.write("\n")
        sys.stderr.flush()
    return (
        _cancel(timeout=True)
        if value is None
        else protocol.encode({"op": "answer", "value": value})
    )


def _read_line(timeout: float, secret: bool) -> str | None:
    """A line from the terminal on stdin, None when none came within ``timeout``."""
    if sys.platform == "win32":  # no select() on a console: wait as long as it takes
        if secret:
            import getpass

            return getpass.getpass("", stream=sys.stderr)
        return sys.stdin.readline().rstrip("\r\n")
    import select
    import termios

    fd = 0
    saved = termios.tcgetattr(fd) if secret else None
    try:
        if saved is not None:
            quiet = termios.tcgetattr(fd)
            quiet[3] &= ~termios.ECHO
            termios.tcsetattr(fd, termios.TCSAFLUSH, quiet)
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            return None
        line = sys.stdin.readline()
    finally:
        if saved is not None:
            termios.tcsetattr(fd, termios.TCSAFLUSH, saved)
    if not line:
        raise EOFError
    return line.rstrip("\r\n")
