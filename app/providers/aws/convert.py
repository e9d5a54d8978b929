"""``kubetray import`` for EKS users: an exec entry running ``aws eks get-token`` or
``aws-iam-authenticator token`` switches to kubetray-exec with the same arguments and env.

Only ``command`` changes (and an ``installHint`` is added): every flag keeps its meaning, since
kubetray-exec reads them as the tools do (command.py), and ``env`` (``AWS_PROFILE``...) stays.
An entry kubetray cannot serve (``--query``, no cluster, ...) is left alone with its reason.
"""

import os
from typing import Any

from app.providers.aws.command import AUTHENTICATOR, AWS_CLI, CommandError, parse, recognises

PROGRAMS = {AWS_CLI, AUTHENTICATOR}


def program(command: str) -> str:
    """``/usr/local/bin/aws`` → ``aws``; ``C:\\...\\aws.exe`` → ``aws``."""
    name = os.path.basename(command.replace("\\", "/")).lower()
    for suffix in (".exe", ".cmd", ".bat"):
        name = name.removesuffix(suffix)
    return name


def eks_args(exec_: Any) -> list[str] | None:
    """The arguments of an EKS exec entry; None for any other entry."""
    if not isinstance(exec_, dict) or not isinstance(exec_.get("command"), str):
        return None
    args = exec_.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        return None
    tool = program(exec_["command"])
    if tool == AWS_CLI and recognises(args) and args[:1] != ["token"]:
        return list(args)
    if tool == AUTHENTICATOR and args[:1] == ["token"]:
        return list(args)
    return None


def exec_env(exec_: dict[str, Any]) -> dict[str, str]:
    """The entry's ``env`` as a dict (malformed items are skipped: kubectl refuses them)."""
    out: dict[str, str] = {}
    for item in exec_.get("env") or []:
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            out[item["name"]] = str(item.get("value") or "")
    return out


def why_not(exec_: dict[str, Any]) -> str | None:
    """Why kubetray-exec would refuse this entry's command line (None: it serves it)."""
    args = eks_args(exec_)
    if args is None:
        return "not an aws eks get-token or aws-iam-authenticator token entry"
    try:
        parse(args, exec_env(exec_))
    except CommandError as e:
        return str(e)
    return None


def converted(exec_: dict[str, Any], helper: str, install_hint: str) -> dict[str, Any]:
    """The entry as kubetray-exec runs it."""
    out = dict(exec_)
    out.update(command=helper, installHint=install_hint)
    return out
