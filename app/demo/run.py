"""`kubetray demo`: the demo provider and API server, a demo kubeconfig, and the app."""

import base64
import os
import sys
import time

import yaml
from joserfc import jwt
from joserfc.jwk import KeySet

from app import atomic_file, installation
from app.demo.apiserver import DemoAPIServer
from app.demo.provider import CLIENT_ID, DemoProvider
from app.errors import AppError
from app.oidc.browser import Browser
from app.settings import Settings
from exec_helper import paths

IDP_PORT, API_PORT = 48080, 48443
"""Fixed when free, so the demo identity stays the same from one run to the next."""
NAME = "kubetray-demo"
"""The demo identity's name (its kubeconfig passes --name)."""


def token_check(provider: DemoProvider) -> "object":
    keys = KeySet.import_key_set(provider.public_jwks())  # type: ignore[arg-type]

    def check(token: str) -> bool:
        try:
            claims = jwt.decode(token, keys, algorithms=["RS256"]).claims
        except Exception:
            return False
        aud = claims.get("aud")
        return bool(
            claims.get("iss") == provider.issuer
            and CLIENT_ID in (aud if isinstance(aud, list) else [aud])
            and float(claims.get("exp", 0)) > time.time()
        )

    return check


def write_kubeconfig(
    path: str, provider: DemoProvider, api: DemoAPIServer, terminal: bool = False
) -> None:
    """A kubeconfig whose user runs kubetray-exec against the demo provider.

    ``terminal``: no desktop here, so the login is the demo's password prompt in kubectl's
    terminal (any username and password) instead of a browser page.
    """
    grant = ["--grant-type=password"] if terminal else []
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "kubetray-demo",
        "clusters": [
            {
                "name": "kubetray-demo",
                "cluster": {
                    "server": api.url,
                    "certificate-authority-data": base64.b64encode(api.ca_pem).decode(),
                },
            }
        ],
        "users": [
            {
                "name": "kubetray-demo",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1",
                        "command": installation.helper_path(),
                        "args": [
                            "get-token",
                            f"--oidc-issuer-url={provider.issuer}",
                            f"--oidc-client-id={CLIENT_ID}",
                            "--oidc-extra-scope=email",
                            "--oidc-extra-scope=groups",
                            "--oidc-extra-scope=offline_access",
                            f"--name={NAME}",  # whichever client calls first
                            *grant,
                        ],
                        "interactiveMode": "IfAvailable",
                        "provideClusterInfo": True,
                        "installHint": "kubetray-exec comes with kubetray",
                    }
                },
            }
        ],
        "contexts": [
            {
                "name": "kubetray-demo",
                "context": {"cluster": "kubetray-demo", "user": "kubetray-demo"},
            }
        ],
    }
    atomic_file.write(path, yaml.safe_dump(doc, sort_keys=False).encode(), 0o600)


def _running_demo() -> int | None:
    """The pid of a `kubetray demo` whose provider answers on IDP_PORT, if any."""
    import json
    import urllib.request

    url = f"http://127.0.0.1:{IDP_PORT}/.well-known/openid-configuration"
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            doc = json.load(r)
    except (OSError, ValueError):
        return None
    pid = doc.get("kubetray_demo_pid") if isinstance(doc, dict) else None
    return pid if isinstance(pid, int) else None


def _running_agent() -> int | None:
    """The pid of the agent or app serving this user, if one runs."""
    from app.agent import client
    from app.errors import AgentNotRunning

    try:
        doc = client.call_json("status")
    except AgentNotRunning:
        return None
    pid = (doc.get("agent") or {}).get("pid")
    return pid if isinstance(pid, int) else -1


def forget_last_demo_login(store: str | None) -> None:
    """Each demo is a new provider: a new signing key, and no refresh token it issued before.
    Tokens a previous demo left in the keyring would show as signed in and be refused by the
    API server ("Unauthorized"), so the demo identity is logged out before the agent starts:
    the tray says it needs a login, and kubectl's next call logs in again."""
    from app import compose
    from app.broker.logins import store_key

    tokens = compose.token_store(store)
    core = compose.core(tokens, compose.stored_credentials(tokens), paths.config_dir())
    entry = core.logins.find(NAME)
    if entry is None:
        return
    try:  # not a logout: the new provider knows none of these tokens, there is nothing to revoke
        tokens.delete(store_key(entry.identity))
    except AppError as e:  # no keyring to reach, say: the agent will say so itself
        print(f"(could not forget the last demo's login: {e.message})", file=sys.stderr)


def _kubetray_path() -> str:
    """How to run kubetray, so the hints the demo and the agent print work from any shell."""
    command = installation.app_command()
    return command[0] if len(command) == 1 else "python -m app"


def run(headless: bool | None = None, store: str | None = None) -> int:
    """Start the demo, print the kubectl line, then run the app (or the agent with no desktop).

    Nothing is written before it is clear the demo can run: a demo already running is left
    alone (its kubectl line is printed again), and an agent already serving this user is named.
    """
    kubeconfig = os.path.join(paths.config_dir(), "demo", "kubeconfig")
    demo_pid, agent_pid = _running_demo(), _running_agent()
    if demo_pid is not None and demo_pid == agent_pid:
        print(f"kubetray demo is already running (pid {demo_pid}). In another terminal, run:\n")
        print(f"  kubectl --kubeconfig {kubeconfig} get ns\n", flush=True)
        return 0
    if agent_pid is not None:
        raise AppError(
            f"a kubetray agent or app already serves this user (pid {agent_pid}): the demo "
            "needs its own",
            f"stop it with: {_kubetray_path()} stop; then run kubetray demo again",
        )
    if headless is None:
        headless = sys.platform == "linux" and not (
            os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
        )
    provider = DemoProvider(IDP_PORT)
    api = DemoAPIServer(token_check(provider), API_PORT)  # type: ignore[arg-type]
    provider.start()
    api.start()
    forget_last_demo_login(store)
    # No browser can open here (no display, or SSH): the login is a prompt in kubectl's terminal.
    terminal = not Browser(Settings.load().browser_command or None).available()
    write_kubeconfig(kubeconfig, provider, api, terminal=terminal)
    print("kubetray demo: a DEMO identity provider (signs anyone in as demo@kubetray.test)")
    print(f"  provider {provider.issuer}   API server {api.url}")
    print(f"  kubetray is {_kubetray_path()} (status, stop, login: the hints below use it)")
    print("In another terminal, run:\n")
    print(f"  kubectl --kubeconfig {kubeconfig} get ns\n", flush=True)
    if terminal:
        print(
            "(no browser here: kubectl asks for a username and a password in its terminal; "
            "this DEMO provider accepts any)",
            flush=True,
        )
    # The demo's kubeconfig is not in the person's KUBECONFIG (it must not touch their files):
    # the app's own view adds it, so its window lists the demo's context.
    from app.kubeconfig.view import default_paths

    os.environ["KUBECONFIG"] = os.pathsep.join(dict.fromkeys([*default_paths(), kubeconfig]))
    if headless:
        print("(no desktop here: the headless agent runs)", flush=True)
        from app.agent.headless import run as run_agent

        return run_agent(store=store)
    from app.ui.app import run as run_app

    return run_app(store=store)
