"""Windows IPC names and access rules, as pure functions (tested on every platform).

The agent's named pipe is per user *and* per logon session, so two sessions of one user (a
console and an RDP login) each reach their own agent, and the pipe's DACL grants access to
that user alone, with no inherited entries.
"""

PIPE_PREFIX = "\\\\.\\pipe\\kubetray-"


def pipe_name(sid: str, session: int) -> str:
    """``\\\\.\\pipe\\kubetray-<SID>-<session>`` for a string SID like ``S-1-5-21-...``."""
    if not sid.startswith("S-1-") or not all(part.isdigit() for part in sid[2:].split("-")):
        raise ValueError(f"not a string SID: {sid!r}")
    if session < 0:
        raise ValueError(f"not a session id: {session}")
    return f"{PIPE_PREFIX}{sid}-{session}"


def security_descriptor_sddl(sid: str) -> str:
    """Owner: the user; a protected DACL (``P``, nothing inherited) allowing only them."""
    pipe_name(sid, 0)  # validates the SID
    return f"O:{sid}G:{sid}D:P(A;;GA;;;{sid})"
