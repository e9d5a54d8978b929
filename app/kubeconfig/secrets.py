"""Which kubeconfig values are secrets: for redacted diffs and for where a backup may go."""

import copy
from typing import Any

REDACTED = "<redacted>"

USER_SECRETS = ("token", "password", "client-key-data")
"""Fields of a user that are secrets themselves."""
_PROVIDER_SECRETS = ("id-token", "refresh-token", "access-token", "client-secret")
_SECRET_FLAGS = ("--oidc-client-secret", "--password")


def _secret_arg(arg: str) -> bool:
    return any(arg.startswith(flag + "=") for flag in _SECRET_FLAGS)


def _redact_args(args: list[Any]) -> list[Any]:
    out: list[Any] = []
    hide_next = False
    for arg in args:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
        elif isinstance(arg, str) and _secret_arg(arg):
            out.append(arg.split("=", 1)[0] + "=" + REDACTED)
        else:
            out.append(arg)
            hide_next = arg in _SECRET_FLAGS
    return out


def _redact_keys(mapping: dict[str, Any], keys: tuple[str, ...]) -> bool:
    found = False
    for key in keys:
        if mapping.get(key):
            mapping[key] = REDACTED
            found = True
    return found


def _redact_user(user: dict[str, Any]) -> bool:
    """Redact a user's secrets in place; True when it had any (exec env values do not count)."""
    found = _redact_keys(user, USER_SECRETS)
    provider = user.get("auth-provider")
    config = provider.get("config") if isinstance(provider, dict) else None
    if isinstance(config, dict):
        found = _redact_keys(config, _PROVIDER_SECRETS) or found
    exec_ = user.get("exec")
    if isinstance(exec_, dict):
        args = exec_.get("args")
        if isinstance(args, list) and _redact_args(args) != args:
            exec_["args"] = _redact_args(args)
            found = True
        env = exec_.get("env")
        for item in env if isinstance(env, list) else []:
            if isinstance(item, dict) and "value" in item:
                item["value"] = REDACTED  # env often carries cloud keys: never show them
    return found


def _users(data: dict[str, Any]) -> list[dict[str, Any]]:
    entries = data.get("users")
    if not isinstance(entries, list):
        return []
    return [e["user"] for e in entries if isinstance(e, dict) and isinstance(e.get("user"), dict)]


def has_secrets(data: dict[str, Any]) -> bool:
    """True when any user carries a secret (such files are never backed up on disk)."""
    return any(_redact_user(copy.deepcopy(user)) for user in _users(data))


def redacted(data: dict[str, Any]) -> dict[str, Any]:
    """A copy with every secret value replaced, fit to print."""
    out = copy.deepcopy(data)
    for user in _users(out):
        _redact_user(user)
    return out
