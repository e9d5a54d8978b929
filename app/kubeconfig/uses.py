"""Which kubeconfig contexts use which kubetray identity (the merged KUBECONFIG view).

The agent names identities after the kubeconfig user that runs them and the tray lists each
identity's contexts. Read again only when a kubeconfig file changes.
"""

import functools
import os
import threading
from typing import Any

from app.errors import AppError
from app.kubeconfig.files import KubeconfigError
from app.kubeconfig.view import View, default_paths
from app.model import ContextUse
from app.providers import Providers, default
from exec_helper import options
from exec_helper.exec_credential import extension

HELPER_NAMES = ("kubetray-exec", "kubetray-exec.exe")

_lock = threading.Lock()
_Scan = tuple[dict[str, list[ContextUse]], list[ContextUse]]
_cache: dict[tuple[tuple[str, int, int], ...], _Scan] = {}
"""The last scan, keyed by the files' (path, mtime, size): one entry at most."""


def is_helper(command: object) -> bool:
    """Whether a kubeconfig exec command runs kubetray-exec (by any path)."""
    return os.path.basename(str(command).replace("\\", "/")).lower() in HELPER_NAMES


@functools.cache
def _providers() -> Providers:
    return default()


def key_of(
    args: list[str], config: dict[str, Any] | None = None, env: dict[str, str] | None = None
) -> str | None:
    """The identity key a kubetray-exec command line names, or None when it names none.
    ``env``: the exec entry's own (the caller's environment is not known here)."""
    try:
        return _providers().wanted(args, config, env or {}).settings.key
    except (options.OptionsError, AppError):
        return None


def contexts_by_identity(kubeconfig: str | None = None) -> dict[str, list[ContextUse]]:
    """Identity key → the contexts whose user runs kubetray-exec for it, in kubectl's view of
    ``kubeconfig`` (a KUBECONFIG value, "" for kubectl's default file; None: this process's
    environment)."""
    return _scanned(kubeconfig)[0]


def all_contexts(kubeconfig: str | None = None) -> list[ContextUse]:
    """Every context of kubectl's view, kubetray's or not, in kubeconfig order (the window's
    list)."""
    return _scanned(kubeconfig)[1]


def _scanned(kubeconfig: str | None) -> _Scan:
    files = default_paths({"KUBECONFIG": kubeconfig} if kubeconfig is not None else None)
    stamps = tuple(_stamp(p) for p in files)
    with _lock:
        cached = _cache.get(stamps)
        if cached is not None:
            return cached
    try:
        found = _scan(View.load(files))
    except (KubeconfigError, OSError):
        found = ({}, [])
    with _lock:
        _cache.clear()
        _cache[stamps] = found
    return found


def _stamp(path: str) -> tuple[str, int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (path, 0, -1)
    return (path, st.st_mtime_ns, st.st_size)


def _scan(view: View) -> _Scan:
    users = {str(e.get("name")): (f.path, e) for f, e in view.merged("users")}
    clusters = {str(e.get("name")): e for _, e in view.merged("clusters")}  # once, not per context
    out: dict[str, list[ContextUse]] = {}
    every: list[ContextUse] = []
    for where, entry in view.merged("contexts"):
        ctx = entry.get("context")
        if not isinstance(ctx, dict):
            continue
        user_name, cluster = str(ctx.get("user", "")), str(ctx.get("cluster", ""))
        every.append(ContextUse(str(entry.get("name")), user_name, cluster, where.path))
        file, user = users.get(user_name, ("", {}))
        body = user.get("user")
        exec_ = body.get("exec") if isinstance(body, dict) else None
        if not isinstance(exec_, dict) or not is_helper(exec_.get("command")):
            continue
        key = key_of(
            [str(a) for a in exec_.get("args") or []],
            cluster_config(clusters.get(cluster)),
            exec_env(exec_.get("env")),
        )
        if key is not None:
            out.setdefault(key, []).append(
                ContextUse(str(entry.get("name")), user_name, cluster, file)
            )
    return out, every


def cluster_config(entry: dict[str, Any] | None) -> dict[str, Any] | None:
    """A kubeconfig cluster entry's kubetray extension (per-cluster config), if any."""
    body = entry.get("cluster") if entry else None
    value = extension(body) if isinstance(body, dict) else None
    return value if isinstance(value, dict) else None


def exec_env(items: object) -> dict[str, str]:
    """An exec entry's env, as kubectl gives it to the helper."""
    if not isinstance(items, list):
        return {}
    return {
        str(e["name"]): str(e.get("value", ""))
        for e in items
        if isinstance(e, dict) and "name" in e
    }
