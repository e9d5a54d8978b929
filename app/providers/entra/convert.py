"""``kubetray import`` for Azure kubelogin users: the same command line, run by kubetray-exec.

Recognised as Azure kubelogin's convert-kubeconfig recognises them: an exec whose command
contains ``kubelogin`` (any case, any path, ``.exe``) with Azure's ``get-token`` flags (not
int128/kubelogin's, which names ``--oidc-issuer-url``), and the ``auth-provider: azure`` users
of old ``az aks get-credentials --format azure`` files, which kubectl ≥ 1.26 cannot run at all.

Every flag keeps its meaning because kubetray-exec reads Azure kubelogin's command line itself
(app.providers.entra.options): ``args`` stay exactly as they are (no ``--name``: one Entra
login serves every cluster of its tenant, so no kubeconfig user names it). ``command`` becomes
kubetray-exec and ``installHint`` kubetray's; ``apiVersion``, ``env`` (AZURE_CONFIG_DIR),
``interactiveMode`` and ``provideClusterInfo`` are kept (app.kubeconfig.migrate). An
``auth-provider: azure`` user becomes exactly what ``kubelogin convert-kubeconfig``
(devicecode, its default) writes for it.

Users whose command line kubetray refuses (azurepipelines, --pop-enabled, --legacy) are left as
they are, with the refusal as the reason: Azure kubelogin keeps serving them.
"""

from typing import Any

from app.providers.entra import options as o
from app.providers.entra import settings
from exec_helper.options import OptionsError


def azure_args(user: Any) -> list[str] | None:
    """The get-token command line of an Azure kubelogin user (an exec entry, or the one an
    ``auth-provider: azure`` entry converts to); None for any other user."""
    if not isinstance(user, dict):
        return None
    exec_ = user.get("exec")
    if isinstance(exec_, dict):
        command = exec_.get("command")
        args = exec_.get("args") or []
        if not isinstance(command, str) or "kubelogin" not in command.lower():
            return None
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            return None
        return list(args) if o.recognises(args) else None
    provider = user.get("auth-provider")
    if isinstance(provider, dict) and provider.get("name") == "azure":
        return _from_auth_provider(provider.get("config") or {})
    return None


def _from_auth_provider(config: dict[str, Any]) -> list[str]:
    """What ``kubelogin convert-kubeconfig`` (``-l devicecode``) writes for the legacy form:
    ``--legacy`` when ``config-mode`` is empty or ``"0"`` (Azure AD v1)."""
    args = [
        "get-token",
        "--login",
        o.DEVICECODE,
        "--server-id",
        str(config.get("apiserver-id", "")),
    ]
    args += [
        "--client-id",
        str(config.get("client-id", "")),
        "--tenant-id",
        str(config.get("tenant-id", "")),
    ]
    if config.get("environment"):
        args += ["--environment", str(config["environment"])]
    if str(config.get("config-mode", "")) in ("", "0"):
        args.append("--legacy")
    return args


def check(args: list[str]) -> str | None:
    """Why kubetray cannot serve this command line (one line), or None. Only what the flags
    themselves say: secrets and ids that come from the environment at run time are not
    asked for here."""
    try:
        parsed = o.parse(args, {})
    except OptionsError as e:
        return str(e)
    if parsed.login in settings.REFUSED:
        return settings.REFUSED[parsed.login]
    if parsed.pop_enabled or parsed.legacy:
        try:
            settings.from_args(parsed)
        except OptionsError as e:
            return str(e)
    return None
