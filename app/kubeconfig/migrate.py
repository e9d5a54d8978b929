"""``kubetray import``: users that run int128/kubelogin switch to kubetray-exec, same flags.

Recognised: ``kubectl oidc-login get-token ...``, ``kubelogin get-token ...`` and
``kubectl-oidc_login get-token ...`` with an ``--oidc-issuer-url`` (Azure's kubelogin also has
a ``get-token`` but no such flag, and is left alone, as are every other exec plugin and
auth-provider). Only ``command`` and ``args`` change, plus an ``installHint``; ``apiVersion``,
``env``, ``interactiveMode`` and ``provideClusterInfo`` are kept.
"""

import copy
import os
from dataclasses import dataclass
from typing import Any

from app.kubeconfig.edit import Edit, replace_user
from app.kubeconfig.records import UserChange
from app.kubeconfig.setup import INSTALL_HINT
from app.kubeconfig.view import View
from exec_helper import options
from exec_helper.options import OptionsError


@dataclass(frozen=True)
class Skipped:
    """A kubelogin user that stays as it is, and why."""

    file: str
    user: str
    reason: str


def kubelogin_flags(exec_: Any) -> list[str] | None:
    """The get-token flags of an int128/kubelogin exec entry; None for anything else."""
    if not isinstance(exec_, dict) or not isinstance(exec_.get("command"), str):
        return None
    args = exec_.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        return None
    program = os.path.basename(exec_["command"].replace("\\", "/")).lower()
    program = program.removesuffix(".exe")
    if program == "kubectl" and args[:2] == ["oidc-login", "get-token"]:
        flags = args[2:]
    elif program in ("kubelogin", "kubectl-oidc_login") and args[:1] == ["get-token"]:
        flags = args[1:]
    else:
        return None
    named = any(a == "--oidc-issuer-url" or a.startswith("--oidc-issuer-url=") for a in flags)
    return flags if named else None


def plan(view: View, helper: str) -> tuple[Edit, list[UserChange], list[Skipped]]:
    """Rewrite every kubelogin user of every file (shadowed entries too)."""
    edit = Edit()
    changes: list[UserChange] = []
    skipped: list[Skipped] = []
    for f, entry in view.every("users"):
        body = entry.get("user")
        flags = kubelogin_flags(body.get("exec") if isinstance(body, dict) else None)
        if flags is None or not isinstance(body, dict):
            continue
        name = str(entry.get("name"))
        try:
            options.parse_args(flags)
        except OptionsError as e:
            skipped.append(Skipped(f.path, name, str(e)))
            continue
        after = copy.deepcopy(body)
        named = any(a == "--name" or a.startswith("--name=") for a in flags)
        # The identity's name in the args: it must not depend on which client calls first.
        args = ["get-token", *flags, *([] if named else [f"--name={name}"])]
        after["exec"].update(command=helper, args=args, installHint=INSTALL_HINT)
        changes.append(UserChange(f.path, name, copy.deepcopy(body), after))
    for change in changes:
        edit.add(change.file, replace_user(change.user, change.before, change.after))
    return edit, changes, skipped
