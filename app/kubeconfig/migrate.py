"""``kubetray import``: users that run a tool kubetray replaces switch to kubetray-exec.

Each provider recognises its own tool's exec entries and converts their arguments, keeping
every flag's meaning (Provider.convert): int128/kubelogin's ``get-token`` (``kubectl
oidc-login get-token ...``, ``kubelogin get-token ...``, ``kubectl-oidc_login get-token ...``
with an ``--oidc-issuer-url``), and the cloud tools of the providers this kubetray has. Other
exec plugins and auth-providers are left alone, but for an auth-provider that kubectl 1.26+
cannot run and a provider converts (Azure's ``azure``): it becomes an exec entry. Only
``command`` and ``args`` change (and ``env`` where a provider says), plus an ``installHint``;
``apiVersion``, ``interactiveMode`` and ``provideClusterInfo`` are kept.
"""

import copy
from dataclasses import dataclass, replace

from app.kubeconfig import patch
from app.kubeconfig.edit import Edit, replace_user
from app.kubeconfig.records import UserChange
from app.kubeconfig.setup import INSTALL_HINT
from app.kubeconfig.view import View
from app.providers import Providers, default
from app.providers.oidc import kubelogin_flags
from exec_helper.options import OptionsError

__all__ = ["Skipped", "kubelogin_flags", "plan"]

EXEC_API_VERSION = "client.authentication.k8s.io/v1beta1"
"""What an auth-provider user becomes (what kubelogin convert-kubeconfig writes)."""


@dataclass(frozen=True)
class Skipped:
    """A kubelogin user that stays as it is, and why."""

    file: str
    user: str
    reason: str


def plan(
    view: View, helper: str, providers: Providers | None = None
) -> tuple[Edit, list[UserChange], list[Skipped]]:
    """Rewrite every user of every file (shadowed entries too) that runs a tool a provider
    replaces."""
    providers = providers or default()
    edit = Edit()
    changes: list[UserChange] = []
    skipped: list[Skipped] = []
    for f, entry in view.every("users"):
        body = entry.get("user")
        if not isinstance(body, dict):
            continue
        exec_ = body.get("exec")
        legacy = body.get("auth-provider")
        if not isinstance(exec_, dict):
            if not isinstance(legacy, dict):
                continue
            # An auth-provider kubectl >= 1.26 cannot run (azure, gcp): a provider that
            # converts it says so (Provider.convert gets {"auth-provider": ...}).
            exec_ = {"auth-provider": legacy}
        name = str(entry.get("name"))
        try:
            found = providers.convert(exec_, name)
        except OptionsError as e:
            skipped.append(Skipped(f.path, name, str(e)))
            continue
        if found is None:
            continue
        converted = found[1]
        after = copy.deepcopy(body)
        if "auth-provider" in exec_:
            del after["auth-provider"]
            after["exec"] = {"apiVersion": EXEC_API_VERSION, "provideClusterInfo": False}
        after["exec"].update(command=helper, args=list(converted.args), installHint=INSTALL_HINT)
        if converted.env is not None:
            if converted.env:
                after["exec"]["env"] = [dict(e) for e in converted.env]
            else:
                after["exec"].pop("env", None)
        changes.append(UserChange(f.path, name, copy.deepcopy(body), after))
    # Only the users' bodies change, every other byte of each file stays; the undo gets the
    # bodies as they were spelled (app.kubeconfig.patch).
    edit.minimal = True
    texts = {
        f.path: patch.user_texts(f.text, {c.user for c in changes if c.file == f.path})
        for f in view.files
        if f.text is not None and any(c.file == f.path for c in changes)
    }
    changes = [replace(c, text=texts.get(c.file, {}).get(c.user)) for c in changes]
    for change in changes:
        edit.add(change.file, replace_user(change.user, change.before, change.after))
    return edit, changes, skipped
