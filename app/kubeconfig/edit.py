"""Write entries into a kubeconfig file: atomic replace, same mode, a timestamped backup.

Minimal on purpose (the kubeconfig issue makes it complete: the merged KUBECONFIG view,
client-go's lock file, comments). Entries are replaced by name; everything else is kept.
"""

import os
import shutil
import time
from typing import Any

import yaml

from app.errors import AppError


def default_path() -> str:
    """The first file of $KUBECONFIG, else ~/.kube/config (where kubectl writes)."""
    env = os.environ.get("KUBECONFIG")
    if env:
        return env.split(os.pathsep)[0]
    return os.path.join(os.path.expanduser("~"), ".kube", "config")


def _load(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except FileNotFoundError:
        return {"apiVersion": "v1", "kind": "Config", "preferences": {}}
    except yaml.YAMLError as e:
        raise AppError(f"{path} is not valid YAML: {e}", "fix the file, then try again") from None
    if doc is None:
        return {"apiVersion": "v1", "kind": "Config"}
    if not isinstance(doc, dict):
        raise AppError(f"{path} is not a kubeconfig (its top level is not a mapping)")
    return doc


def _upsert(entries: list[dict[str, Any]], name: str, key: str, value: dict[str, Any]) -> None:
    for entry in entries:
        if entry.get("name") == name:
            entry[key] = value
            return
    entries.append({"name": name, key: value})


def add_exec_user(
    path: str,
    context: str,
    server: str,
    helper: str,
    args: list[str],
    ca_data: str | None = None,
) -> str | None:
    """Add (or replace) cluster, user and context ``context``; returns the backup's path."""
    doc = _load(path)
    cluster: dict[str, Any] = {"server": server}
    if ca_data:
        cluster["certificate-authority-data"] = ca_data
    _upsert(doc.setdefault("clusters", []), context, "cluster", cluster)
    _upsert(
        doc.setdefault("users", []),
        context,
        "user",
        {
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": helper,
                "args": args,
                "interactiveMode": "IfAvailable",
                "provideClusterInfo": True,
                "installHint": "kubetray-exec comes with kubetray: install kubetray",
            }
        },
    )
    _upsert(
        doc.setdefault("contexts", []), context, "context", {"cluster": context, "user": context}
    )
    doc.setdefault("current-context", context)
    backup = None
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    mode = 0o600
    if os.path.exists(path):
        mode = os.stat(path).st_mode & 0o777
        backup = f"{path}.kubetray-{time.strftime('%Y%m%d-%H%M%S')}.bak"
        shutil.copy2(path, backup)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(
        os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "w", encoding="utf-8"
    ) as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    os.replace(tmp, path)
    return backup
