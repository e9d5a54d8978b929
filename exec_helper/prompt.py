"""Answering the agent's prompts on the terminal (slow path: only during a login).

The agent asks only when the caller is interactive (spec.interactive and stdin a terminal);
this re-checks stdin, writes the question to stderr (stdout is kubectl's) and never echoes a
secret.
"""

import os
import sys
from typing import Any

from exec_helper import protocol


def answer(msg: dict[str, Any]) -> bytes:
    """Ask the user ``msg["text"]`` and encode the reply frame (a cancel when we cannot ask)."""
    text = str(msg.get("text") or "? ")
    if not os.isatty(0):
        return protocol.encode({"op": "answer", "cancel": True})
    try:
        if msg.get("secret"):
            import getpass

            value = getpass.getpass(text, stream=sys.stderr)
        else:
            sys.stderr.write(text)
            sys.stderr.flush()
            line = sys.stdin.readline()
            if not line:
                return protocol.encode({"op": "answer", "cancel": True})
            value = line.rstrip("\r\n")
    except (EOFError, KeyboardInterrupt, OSError):
        return protocol.encode({"op": "answer", "cancel": True})
    return protocol.encode({"op": "answer", "value": value})
