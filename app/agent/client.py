"""Asking the running agent from kubetray's own commands (status, login, store, forget)."""

import contextlib
import json
from typing import Any

from app.errors import AgentNotRunning, AppError
from exec_helper import protocol
from exec_helper.errors import AgentUnavailable, HelperError
from exec_helper.exchange import exchange


def call(op: str, *, talk: bool = False, **fields: Any) -> dict[str, Any]:
    """Send one request and return the agent's result (``exit``, ``stdout``, ``stderr``).

    With ``talk``, the agent's messages go to stderr and its prompts are answered on this
    terminal (kubetray login).
    """
    try:
        code, out, err = exchange(json.dumps({"op": op, **fields}).encode(), talk=talk)
    except AgentUnavailable:
        raise AgentNotRunning(
            "no kubetray agent is running", "start one with: kubetray agent"
        ) from None
    except HelperError as e:
        raise AppError(str(e)) from None
    return {"type": protocol.RESULT, "exit": code, "stdout": out, "stderr": err}


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
