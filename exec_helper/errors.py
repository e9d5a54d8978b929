"""Errors kubetray-exec turns into one line on stderr and exit code 1."""


class HelperError(Exception):
    """A failure the user must read: the message is one self-explanatory line."""


class AgentUnavailable(HelperError):
    """Nobody listens on the socket (or there is no socket yet): starting an agent may help."""


class UnsafeRuntimeDir(HelperError):
    """The socket directory is not private to this user: never talk through it."""
