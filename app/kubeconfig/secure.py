"""``kubetray secure`` and ``unsecure``: static secrets from kubeconfig into the keyring and back.

A user with a static credential (``token``, ``tokenFile``, ``client-certificate(-data)`` with
``client-key(-data)``) becomes ``kubetray-exec --stored NAME``; the credential goes into the
secret store as a stored credential and the user's old body into a record (in the secret store
too), which ``unsecure`` writes back. Impersonation and other fields of the user are kept.

Basic auth is refused: an exec plugin can hand kubectl only a token or a client certificate,
and Kubernetes removed basic auth in 1.19, so a password still in use cannot be served.
"""

import base64
import binascii
import copy
import os
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app import static_credentials
from app.errors import AppError
from app.kubeconfig.edit import Edit, replace_user
from app.kubeconfig.files import KubeconfigFile
from app.kubeconfig.migrate import Skipped
from app.kubeconfig.records import UserChange
from app.kubeconfig.secrets import provider_secrets, secret_args, secret_env
from app.kubeconfig.setup import exec_user
from app.kubeconfig.view import View
from app.static_credentials import StoredCredential

STATIC = (
    "token",
    "tokenFile",
    "client-certificate-data",
    "client-key-data",
    "client-certificate",
    "client-key",
)
_BASIC = ("username", "password")


@dataclass(frozen=True)
class Move:
    """One user to rewrite and the credential that replaces its secret."""

    change: UserChange
    credential: StoredCredential


def _resolve(f: KubeconfigFile, path: str) -> str:
    """client-go resolves relative paths against the kubeconfig file's directory."""
    return path if os.path.isabs(path) else os.path.join(os.path.dirname(f.path), path)


def _read(f: KubeconfigFile, body: dict[str, Any], key: str) -> bytes:
    path = _resolve(f, str(body[key]))
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as e:
        raise AppError(f"cannot read its {key} {path}: {e.strerror}") from None


def _decode(body: dict[str, Any], key: str) -> bytes:
    try:
        return base64.b64decode(str(body[key]), validate=True)
    except (binascii.Error, ValueError):
        raise AppError(f"its {key} is not base64") from None


def credential(
    f: KubeconfigFile, name: str, body: dict[str, Any], now: datetime
) -> StoredCredential | None:
    """The static credential of a user body; None when it has none; AppError when unusable."""
    if body.get("exec") or body.get("auth-provider"):
        return None
    token = body.get("token") or None
    cert_key = [k for k in STATIC[2:] if body.get(k)]
    has_token = bool(token or body.get("tokenFile"))
    if any(body.get(k) for k in _BASIC) and not has_token and not cert_key:
        raise AppError(
            "it uses basic auth: an exec plugin can only return a token or a client "
            "certificate (and Kubernetes removed basic auth in 1.19), so it stays as it is"
        )
    if has_token and cert_key:
        raise AppError("it has both a token and a client certificate: keep one, then try again")
    if token:
        return static_credentials.token_credential(name, str(token), "the kubeconfig", now)
    if body.get("tokenFile"):
        text = _read(f, body, "tokenFile").decode("utf-8", "replace")
        return static_credentials.token_credential(name, text, str(body["tokenFile"]), now)
    if not cert_key:
        return None
    cert = _decode(body, STATIC[2]) if body.get(STATIC[2]) else _read(f, body, STATIC[4])
    key = _decode(body, STATIC[3]) if body.get(STATIC[3]) else _read(f, body, STATIC[5])
    return static_credentials.certificate_credential(
        name, cert, key, "the kubeconfig", "the kubeconfig", now
    )


def _stored_name(user: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9._@:-]", "-", user).lstrip("._@:-")[:120] or "user"
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}-{n}"
    taken.add(name)
    return name


def secured_body(body: dict[str, Any], helper: str, name: str) -> dict[str, Any]:
    """The user without its static credential, running ``kubetray-exec --stored NAME``."""
    out = {k: copy.deepcopy(v) for k, v in body.items() if k not in STATIC + _BASIC}
    out.update(exec_user(helper, ["--stored", name], cluster_info=False))
    return out


def plan(
    view: View, users: list[str] | None, helper: str, taken: set[str], now: datetime
) -> tuple[Edit, list[Move], list[Skipped]]:
    """Secure the named users (the entries kubectl uses), or every user of every file."""
    if users is None:
        chosen = [(f, e) for f, e in view.every("users") if isinstance(e.get("user"), dict)]
    else:
        chosen = []
        for user in users:
            holder = view.holder("users", user)
            entry = holder.find("users", user) if holder else None
            if holder is None or entry is None or not isinstance(entry.get("user"), dict):
                raise AppError(f"no user named {user!r} in the kubeconfig")
            chosen.append((holder, entry))
    edit, moves, skipped = Edit(), [], []
    for f, entry in chosen:
        user, body = str(entry.get("name")), entry["user"]
        name = _stored_name(user, taken)
        try:
            cred = credential(f, name, body, now)
        except AppError as e:
            taken.discard(name)
            skipped.append(Skipped(f.path, user, e.message))
            continue
        if cred is None:
            taken.discard(name)
            if users is not None:
                skipped.append(Skipped(f.path, user, "it has no static credential"))
            continue
        after = secured_body(body, helper, name)
        moves.append(Move(UserChange(f.path, user, copy.deepcopy(body), after, name), cred))
        edit.add(f.path, replace_user(user, body, after))
    return edit, moves, skipped


@dataclass(frozen=True)
class Leftover:
    """A secret that stays in a kubeconfig because secure cannot move it, and what to do."""

    file: str
    user: str
    what: str
    todo: str


def leftovers(view: View) -> list[Leftover]:
    """Secrets secure does not move: auth-provider tokens, client secrets in args, exec env."""
    out: list[Leftover] = []
    for f, entry in view.every("users"):
        body, user = entry.get("user"), str(entry.get("name"))
        if not isinstance(body, dict):
            continue
        keys = provider_secrets(body)
        if keys:
            provider = body["auth-provider"]
            kind = str(provider.get("name") or "unnamed")
            config = provider.get("config") or {}
            if kind == "oidc":
                issuer = config.get("idp-issuer-url") or "ISSUER"
                client = config.get("client-id") or "CLIENT_ID"
                todo = (
                    "kubectl dropped the oidc auth-provider in 1.26: switch the user to "
                    f"kubetray-exec with: kubetray setup --issuer {issuer} --client-id {client} "
                    f"--user {user} (it logs in and keeps the tokens in the OS keyring), then "
                    "remove the auth-provider entry"
                )
            else:
                todo = (
                    f"kubectl no longer runs the {kind} auth-provider: switch to its exec "
                    "plugin (gke-gcloud-auth-plugin, Azure's kubelogin), which drops them"
                )
            what = f"the {kind} auth-provider's {', '.join(keys)}"
            out.append(Leftover(f.path, user, what, todo))
        flags = secret_args(body)
        if flags:
            out.append(
                Leftover(
                    f.path,
                    user,
                    f"a secret in its exec arguments ({', '.join(flags)})",
                    "anyone who can read the file can read it: if the provider allows a public "
                    "client (PKCE), drop the argument; otherwise keep the file mode 600",
                )
            )
        names = secret_env(body)
        if names:
            out.append(
                Leftover(
                    f.path,
                    user,
                    f"secret-looking exec env values ({', '.join(names)})",
                    "let the plugin read them from its own credential store, or set them in "
                    "the environment kubectl runs in, and remove them from the file",
                )
            )
    return out


def restorable(change: UserChange, cred: StoredCredential | None) -> UserChange:
    """The change to undo; secrets whose files are gone come back inline from ``cred``."""
    before = copy.deepcopy(change.before)
    base = os.path.dirname(change.file)

    def gone(key: str) -> bool:
        path = str(before.get(key) or "")
        return bool(path) and not os.path.exists(os.path.join(base, path))

    if cred is not None and cred.token and gone("tokenFile"):
        del before["tokenFile"]
        before["token"] = cred.token
    cert_gone = gone("client-certificate") or gone("client-key")
    if cred is not None and cred.certificate_pem and cred.key_pem and cert_gone:
        before.pop("client-certificate", None)
        before.pop("client-key", None)
        before["client-certificate-data"] = base64.b64encode(cred.certificate_pem.encode()).decode()
        before["client-key-data"] = base64.b64encode(cred.key_pem.encode()).decode()
    return UserChange(change.file, change.user, before, change.after, change.stored)
