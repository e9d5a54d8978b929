"""Asking the running agent from kubetray's own commands (status, store, forget)."""

import contextlib
import json
import sys
from typing import Any

from app.broker.ipc_server import read_frame, write_frame
from app.errors import AgentNotRunning, AppError
from exec_helper import protocol
from exec_helper.errors import AgentUnavailable, HelperError
from exec_helper.prompt import answer
from exec_helper.transport import connect

TIMEOUT = 30.0
"""Between two frames; a login in progress sends keepalives well within it."""


def _tell(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def call(op: str, *, talk: bool = False, **fields: Any) -> dict[str, Any]:
    """Send one request and return the agent's result frame.

    With ``talk``, the agent's messages go to stderr and its prompts are answered on this
    terminal (kubetray login).
    """
    try:
        conn = connect(TIMEOUT)
    except AgentUnavailable:
        raise AgentNotRunning(
            "no kubetray agent is running", "start one with: kubetray agent"
        ) from None
    except HelperError as e:
        raise AppError(str(e)) from None
    try:
        write_frame(conn, {"op": protocol.HELLO, "version": protocol.PROTOCOL_VERSION})
        write_frame(conn, {"op": op, **fields})
        while True:
            doc = read_frame(conn)
            kind = doc.get("type")
            if kind == protocol.RESULT:
                return doc
            if talk and kind == protocol.MESSAGE:
                _tell(str(doc.get("text", "")))
            elif talk and kind == protocol.PROMPT:
                conn.sendall(protocol.frame(answer(doc)))
    finally:
        conn.close()


def invalidate(name: str) -> None:
    """Tell a running agent to drop its copy of a stored credential; no agent is fine."""
    with contextlib.suppress(AppError):
        call("invalidate", name=name)


def call_json(op: str, **fields: Any) -> dict[str, Any]:
    """call() for requests whose stdout is a JSON document."""
    result = call(op, **fields)
    if result.get("exit") != 0:
        raise AppError(str(result.get("stderr") or f"the agent refused {op}"))
    doc = json.loads(result.get("stdout") or "{}")
    if not isinstance(doc, dict):
        raise AppError(f"the agent's answer to {op} is not a JSON object")
    return doc
