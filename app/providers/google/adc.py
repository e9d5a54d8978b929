"""gcloud's application default credentials (ADC): where the file is, and what it holds.

Where (google-auth's and gke-gcloud-auth-plugin's rule): ``$GOOGLE_APPLICATION_CREDENTIALS``,
else ``<gcloud config>/application_default_credentials.json`` with ``<gcloud config>`` =
``$CLOUDSDK_CONFIG``, else ``~/.config/gcloud`` (Linux and macOS) or ``%APPDATA%\\gcloud``
(Windows). The environment is the caller's (kubetray-exec's), never the agent's.

kubetray takes over only a person's application-default login (``"type": "authorized_user"``,
what ``gcloud auth application-default login`` writes): its client id and secret and its
refresh token are copied into the keyring, and kubetray refreshes the token itself. gcloud keeps
its file as it was (Google's refresh tokens do not rotate, so both go on working), and
``gcloud auth application-default revoke`` ends both.
"""

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

from app.oidc.errors import LoginError

FILE = "application_default_credentials.json"
AUTHORIZED_USER = "authorized_user"


def path(env: Mapping[str, str]) -> str:
    """The ADC file the caller's environment names (it may not exist)."""
    named = env.get("GOOGLE_APPLICATION_CREDENTIALS")
    if named:
        return os.path.abspath(os.path.expanduser(named))
    return os.path.join(config_dir(env), FILE)


def config_dir(env: Mapping[str, str]) -> str:
    """gcloud's configuration directory."""
    named = env.get("CLOUDSDK_CONFIG")
    if named:
        return os.path.abspath(os.path.expanduser(named))
    if sys.platform == "win32":
        return os.path.join(os.environ.get("APPDATA") or os.path.expanduser("~"), "gcloud")
    return os.path.join(os.path.expanduser("~"), ".config", "gcloud")


@dataclass(frozen=True)
class UserCredentials:
    """An authorized_user ADC file: a person's refresh token and the client it belongs to."""

    client_id: str
    client_secret: str = field(repr=False)
    refresh_token: str = field(repr=False)
    quota_project_id: str | None = None
    account: str | None = None


def read(where: str) -> UserCredentials:
    """The person's login in the ADC file ``where``, or LoginError saying what to do."""
    remedy = "run: gcloud auth application-default login (then kubectl again)"
    try:
        with open(where, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise LoginError(f"no application default credentials at {where}", remedy) from None
    except (OSError, ValueError, RecursionError) as e:
        raise LoginError(f"cannot read the application default credentials {where}: {e}") from None
    kind = doc.get("type") if isinstance(doc, dict) else None
    if kind != AUTHORIZED_USER:
        raise LoginError(
            f"{where} holds {kind or 'no'} credentials: kubetray takes over only a person's "
            f"application default login ({AUTHORIZED_USER})",
            "for a service account or workload identity federation keep gke-gcloud-auth-plugin "
            "for this cluster, or log in through kubetray (drop --use_application_default_"
            "credentials)",
        )
    assert isinstance(doc, dict)
    values = {k: doc.get(k) for k in ("client_id", "client_secret", "refresh_token")}
    missing = [k for k, v in values.items() if not isinstance(v, str) or not v]
    if missing:
        raise LoginError(f"{where} lacks {', '.join(missing)}", remedy)
    project = doc.get("quota_project_id")
    account = doc.get("account")
    return UserCredentials(
        str(values["client_id"]),
        str(values["client_secret"]),
        str(values["refresh_token"]),
        project if isinstance(project, str) and project else None,
        account if isinstance(account, str) and account else None,
    )
