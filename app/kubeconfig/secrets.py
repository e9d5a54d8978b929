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


def _user_secrets(user: dict[str, Any], redact: bool) -> bool:
    found = False
    for key in USER_SECRETS:
        if user.get(key):
            found = True
            if redact:
                user[key] = REDACTED
    provider = user.get("auth-provider")
    config = provider.get("config") if isinstance(provider, dict) else None
    if isinstance(config, dict):
        for key in _PROVIDER_SECRETS:
            if config.get(key):
                found = True
                if redact:
                    config[key] = REDACTED
    exec_ = user.get("exec")
    if isinstance(exec_, dict):
        args = exec_.get("args")
        if isinstance(args, list) and _redact_args(args) != args:
            found = True
            if redact:
                exec_["args"] = _redact_args(args)
        env = exec_.get("env")
        if isinstance(env, list) and redact:
            for item in env:
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
    return any(_user_secrets(copy.deepcopy(user), redact=False) for user in _users(data))


def redacted(data: dict[str, Any]) -> dict[str, Any]:
    """A copy with every secret value replaced, fit to print."""
    out = copy.deepcopy(data)
    for user in _users(out):
        _user_secrets(user, redact=True)
    return out
