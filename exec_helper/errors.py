"""Errors kubetray-exec turns into one line on stderr and exit code 1."""


def printable(text: str, keep: str = "") -> str:
    """``text`` for a terminal: control characters (escape sequences) shown as ``\\x1b``.

    Error lines quote input (KUBERNETES_EXEC_INFO, arguments): it must neither drive the
    terminal nor break the one-line contract. ``keep`` lists controls to let through ("\\n").
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in keep else _escape(c) for c in text)


def _escape(c: str) -> str:
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


class HelperError(Exception):
    """A failure the user must read: the message is one self-explanatory line."""


class AgentUnavailable(HelperError):
    """Nobody listens on the socket (or there is no socket yet): starting an agent may help."""


class AgentGone(HelperError):
    """The agent took the request and went away without an answer (it died or was stopped):
    asking a fresh agent once may help."""


class UnsafeRuntimeDir(HelperError):
    """The socket directory is not private to this user: never talk through it."""
