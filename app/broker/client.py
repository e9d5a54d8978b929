"""Asking the running agent from kubetray's own commands (status, store, forget)."""

import json
from typing import Any

from app.broker.ipc_server import read_frame, write_frame
from app.errors import AgentNotRunning, AppError
from exec_helper import protocol
from exec_helper.errors import AgentUnavailable, HelperError
from exec_helper.transport import connect

TIMEOUT = 10.0


def call(op: str, **fields: Any) -> dict[str, Any]:
    """Send one request and return the agent's result frame."""
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
            if doc.get("type") == protocol.RESULT:
                return doc
    finally:
        conn.close()


def call_json(op: str, **fields: Any) -> dict[str, Any]:
    """call() for requests whose stdout is a JSON document."""
    result = call(op, **fields)
    if result.get("exit") != 0:
        raise AppError(str(result.get("stderr") or f"the agent refused {op}"))
    doc = json.loads(result.get("stdout") or "{}")
    if not isinstance(doc, dict):
        raise AppError(f"the agent's answer to {op} is not a JSON object")
    return doc
