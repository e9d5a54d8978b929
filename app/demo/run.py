"""`kubetray demo`: the demo provider and API server, a demo kubeconfig, and the app."""

import base64
import os
import sys
import time

import yaml
from joserfc import jwt
from joserfc.jwk import KeySet

from app import installation
from app.demo.apiserver import DemoAPIServer
from app.demo.provider import CLIENT_ID, DemoProvider
from exec_helper import paths

IDP_PORT, API_PORT = 48080, 48443
"""Fixed when free, so the demo identity stays the same from one run to the next."""


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


def write_kubeconfig(path: str, provider: DemoProvider, api: DemoAPIServer) -> None:
    """A kubeconfig whose user runs kubetray-exec against the demo provider."""
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
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    with open(
        os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8"
    ) as f:
        yaml.safe_dump(doc, f, sort_keys=False)


def run(headless: bool | None = None) -> int:
    """Start the demo, print the kubectl line, then run the app (or the agent with no desktop)."""
    provider = DemoProvider(IDP_PORT).start()
    api = DemoAPIServer(token_check(provider), API_PORT).start()  # type: ignore[arg-type]
    kubeconfig = os.path.join(paths.config_dir(), "demo", "kubeconfig")
    write_kubeconfig(kubeconfig, provider, api)
    if headless is None:
        headless = sys.platform == "linux" and not (
            os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
        )
    print("kubetray demo: a DEMO identity provider (signs anyone in as demo@kubetray.test)")
    print(f"  provider {provider.issuer}   API server {api.url}")
    print("In another terminal, run:\n")
    print(f"  kubectl --kubeconfig {kubeconfig} get ns\n", flush=True)
    if headless:
        print("(no desktop here: the headless agent runs; kubectl's terminal shows the login URL)")
        from app import agent

        return agent.run()
    from app.ui.app import run as run_app

    return run_app()
