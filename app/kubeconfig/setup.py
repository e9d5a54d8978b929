"""``kubetray setup``: a cluster, an OIDC user running kubetray-exec, and a context joining them.

The user runs the helper by absolute path (GUI clients such as Lens do not see the shell's
PATH), speaks client.authentication.k8s.io/v1 and prompts only if a terminal is there. The
OIDC settings go in the user's args, or, with ``in_extension``, in the cluster's
``client.authentication.k8s.io/exec`` extension (then one user serves every such cluster and
``provideClusterInfo`` hands the settings to the helper).
"""

import copy
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from app.errors import UsageError
from app.kubeconfig.edit import Edit, find, upsert
from app.kubeconfig.view import View
from exec_helper.exec_credential import EXEC_EXTENSION

INSTALL_HINT = "kubetray-exec comes with kubetray; install kubetray, or run kubetray setup again"


@dataclass(frozen=True)
class Setup:
    """What ``kubetray setup`` was asked for."""

    issuer: str
    client_id: str
    helper: str
    scopes: tuple[str, ...] = ()
    context: str | None = None
    cluster: str | None = None
    server: str | None = None
    ca_data: str | None = None
    """Base64 PEM, embedded like ``kubectl config set-cluster --embed-certs``."""
    user: str | None = None
    in_extension: bool = False
    name: str | None = None
    """The identity's name in kubetray (``--name``); else the user's name."""
    provider_ca_data: str | None = None
    """Base64 PEM of the provider's CA when it is private (``--certificate-authority-data``)."""
    listen_addresses: tuple[str, ...] = ()


def oidc_settings(s: Setup) -> dict[str, Any]:
    """The helper's settings, as flag names (the extension's keys)."""
    out: dict[str, Any] = {"oidc-issuer-url": s.issuer, "oidc-client-id": s.client_id}
    if s.scopes:
        out["oidc-extra-scope"] = list(dict.fromkeys(s.scopes))
    if s.name:
        out["name"] = s.name
    if s.provider_ca_data:
        out["certificate-authority-data"] = [s.provider_ca_data]
    if s.listen_addresses:
        out["listen-address"] = list(s.listen_addresses)
    return out


def exec_user(helper: str, args: list[str], cluster_info: bool) -> dict[str, Any]:
    """A kubeconfig user whose credentials come from kubetray-exec."""
    exec_: dict[str, Any] = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": helper,
        "args": args,
        "interactiveMode": "IfAvailable",
        "installHint": INSTALL_HINT,
    }
    if cluster_info:
        exec_["provideClusterInfo"] = True
    return {"exec": exec_}


def _args(s: Setup) -> list[str]:
    if s.in_extension:
        return ["get-token"]
    args = ["get-token"]
    for flag, value in oidc_settings(s).items():
        values = value if isinstance(value, list) else [value]
        args += [f"--{flag}={v}" for v in values]
    return args


def _check(s: Setup, view: View) -> tuple[str, str]:
    """The cluster and context names, or a UsageError saying what is missing."""
    if urlsplit(s.issuer).scheme not in ("https", "http") or not urlsplit(s.issuer).hostname:
        raise UsageError(f"the issuer must be an https URL, not {s.issuer!r}")
    if s.server is not None and urlsplit(s.server).scheme != "https":
        raise UsageError(f"the API server must be an https URL, not {s.server!r}")
    if s.server is None:
        if not s.cluster:
            raise UsageError("say which cluster", "give --cluster NAME, or --server URL")
        if view.get("clusters", s.cluster) is None:
            known = ", ".join(sorted(e["name"] for _, e in view.merged("clusters"))) or "none"
            raise UsageError(
                f"no cluster named {s.cluster!r} in the kubeconfig (clusters: {known})",
                "give --server URL [--certificate-authority FILE] to add it",
            )
    cluster = s.cluster or s.context or urlsplit(s.server or "").hostname or "cluster"
    return cluster, s.context or cluster


def plan(s: Setup, view: View) -> tuple[Edit, str]:
    """The edit that sets the cluster, user and context up; and the context's name."""
    cluster_name, context_name = _check(s, view)
    user_name = s.user or ("kubetray" if s.in_extension else context_name)
    if not s.name:  # the identity's name in the args: it must not depend on who calls first
        s = replace(s, name=context_name if s.in_extension else user_name)
    edit = Edit()

    def set_cluster(data: dict[str, Any]) -> None:
        entry = find(data, "clusters", cluster_name)
        cluster = copy.deepcopy(entry.get("cluster") or {}) if entry else {}
        if s.server is not None:
            cluster["server"] = s.server
        if s.ca_data:
            cluster.pop("certificate-authority", None)
            cluster["certificate-authority-data"] = s.ca_data
        if s.in_extension:
            extensions = [
                e for e in cluster.get("extensions") or [] if e.get("name") != EXEC_EXTENSION
            ]
            extensions.append({"name": EXEC_EXTENSION, "extension": oidc_settings(s)})
            cluster["extensions"] = extensions
        upsert(data, "clusters", cluster_name, cluster)

    def set_user(data: dict[str, Any]) -> None:
        upsert(data, "users", user_name, exec_user(s.helper, _args(s), s.in_extension))

    def set_context(data: dict[str, Any]) -> None:
        entry = find(data, "contexts", context_name)
        context = copy.deepcopy(entry.get("context") or {}) if entry else {}
        context.update({"cluster": cluster_name, "user": user_name})
        upsert(data, "contexts", context_name, context)

    def set_current(data: dict[str, Any]) -> None:
        if not data.get("current-context"):
            data["current-context"] = context_name

    if s.server is not None or s.in_extension:
        edit.add(view.target("clusters", cluster_name), set_cluster)
    edit.add(view.target("users", user_name), set_user)
    edit.add(view.target("contexts", context_name), set_context)
    if not view.current_context:
        edit.add(view.current_context_file(), set_current)
    return edit, context_name
