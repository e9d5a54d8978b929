"""Which kubeconfig values are secrets: for redacted diffs and for where a backup may go."""

import copy
import itertools
import re
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
    """Redact a user's secrets in place; True when it had any. An exec env value is shown when
    its name says it is not a secret (``shown_env``); a value whose name says it is one
    (``_SECRET_ENV``) counts as a secret; others are hidden without counting."""
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
            if not isinstance(item, dict) or "value" not in item:
                continue
            name = item.get("name")
            if isinstance(name, str) and shown_env(name):
                continue
            if isinstance(name, str) and item.get("value") and _SECRET_ENV.search(name.upper()):
                found = True
            item["value"] = REDACTED  # env often carries cloud keys: shown only when named safe
    return found


_SECRET_ENV = re.compile(r"TOKEN|SECRET|PASSW|PASSPHRASE|CREDENTIAL|PRIVATE|API_?KEY|ACCESS_?KEY")
"""Names of env values that are (or may be) secrets: never shown, and such a value makes a
file's backup and an import's record go into the keyring."""
_SHOWN_ENV = re.compile(
    r"[A-Z0-9_]*_(PROFILE|REGION)"
    r"|AWS_STS_REGIONAL_ENDPOINTS|AWS_SDK_LOAD_CONFIG|AWS_CONFIG_FILE|AWS_ROLE_ARN"
    r"|AWS_PARTITION|AWS_DEFAULTS_MODE|AWS_USE_FIPS_ENDPOINT|AWS_USE_DUALSTACK_ENDPOINT"
    r"|CLOUDSDK_CORE_PROJECT|CLOUDSDK_CONFIG|CLOUDSDK_ACTIVE_CONFIG_NAME|CLOUDSDK_COMPUTE_ZONE"
    r"|GOOGLE_CLOUD_PROJECT|USE_GKE_GCLOUD_AUTH_PLUGIN"
    r"|AZURE_TENANT_ID|AZURE_CLIENT_ID|AZURE_AUTHORITY_HOST|AZURE_ENVIRONMENT"
    r"|AAD_SERVICE_PRINCIPAL_CLIENT_ID|AAD_LOGIN_METHOD"
)
"""Names of env values that say where or as whom to sign in, never a secret: a profile, a
region, a project, a tenant, a client id, a config file's path. Shown in diffs and kept in
plain files (an import's record). Any other name is redacted."""


def shown_env(name: str) -> bool:
    """May the value of exec env ``name`` be shown (an allow-listed, non-secret name)?"""
    upper = name.upper()
    return bool(_SHOWN_ENV.fullmatch(upper)) and not _SECRET_ENV.search(upper)


def provider_secrets(user: dict[str, Any]) -> list[str]:
    """The secret fields of a user's auth-provider config that are set."""
    provider = user.get("auth-provider")
    config = provider.get("config") if isinstance(provider, dict) else None
    return [k for k in _PROVIDER_SECRETS if isinstance(config, dict) and config.get(k)]


def secret_args(user: dict[str, Any]) -> list[str]:
    """The secret flags in a user's exec args (``--oidc-client-secret``...), by name."""
    exec_ = user.get("exec")
    args = exec_.get("args") if isinstance(exec_, dict) else None
    if not isinstance(args, list):
        return []
    found = [a.split("=", 1)[0] for a in args if isinstance(a, str) and _secret_arg(a)]
    found += [a for a, nxt in itertools.pairwise(args) if a in _SECRET_FLAGS and nxt]
    return sorted(set(found))


def secret_env(user: dict[str, Any]) -> list[str]:
    """Names of a user's exec env entries that look like secrets and have a value."""
    exec_ = user.get("exec")
    env = exec_.get("env") if isinstance(exec_, dict) else None
    return [
        str(item["name"])
        for item in (env if isinstance(env, list) else [])
        if isinstance(item, dict)
        and isinstance(item.get("name"), str)
        and item.get("value")
        and _SECRET_ENV.search(item["name"].upper())
    ]


def _users(data: dict[str, Any]) -> list[dict[str, Any]]:
    entries = data.get("users")
    if not isinstance(entries, list):
        return []
    return [e["user"] for e in entries if isinstance(e, dict) and isinstance(e.get("user"), dict)]


def user_has_secrets(user: dict[str, Any]) -> bool:
    """True when a user's body carries a secret (see ``_redact_user``)."""
    return _redact_user(copy.deepcopy(user))


def has_secrets(data: dict[str, Any]) -> bool:
    """True when any user carries a secret (such files are never backed up on disk)."""
    return any(user_has_secrets(user) for user in _users(data))


def redacted(data: dict[str, Any]) -> dict[str, Any]:
    """A copy with every secret value replaced, fit to print."""
    out = copy.deepcopy(data)
    for user in _users(out):
        _redact_user(user)
    return out
