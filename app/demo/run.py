"""`kubetray demo`: the demo provider and API server, a demo kubeconfig, and the app."""

import base64
import json
import os
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml
from joserfc import jwt
from joserfc.jwk import KeySet

from app import atomic_file, installation, restart
from app.demo.apiserver import DemoAPIServer
from app.demo.known import CLIENT_ID
from app.demo.provider import DemoProvider
from app.errors import AppError
from app.oidc.browser import Browser
from app.settings import Settings
from exec_helper import paths

IDP_PORT, API_PORT = 48080, 48443
"""Fixed when free, so the demo identity stays the same from one run to the next."""
NAME = "kubetray-demo"
"""The demo identity's name (its kubeconfig passes --name)."""
STATE_ENV = "KUBETRAY_DEMO_STATE"
"""``FD PID``: the demo's provider and API server, handed to the process a restart execs."""
STATE_FORMAT = 1
VIA_ENV = "KUBETRAY_DEMO_VIA"
"""How the person started the demo, when not with `kubetray demo` (the Makefile: make run)."""


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


def exec_args(provider: DemoProvider, terminal: bool = False) -> list[str]:
    """kubetray-exec's arguments for the demo identity.

    ``terminal``: no desktop here, so the login is the demo's password prompt in kubectl's
    terminal (any username and password) instead of a browser page. The browser login's
    redirect comes to 127.0.0.1 on a port the system picks: the demo provider accepts any
    loopback port, and kubelogin's 8000 stays free for whatever else wants it.
    """
    grant = (
        ["--grant-type=password"]
        if terminal
        else ["--listen-address=127.0.0.1:0", "--oidc-redirect-url-hostname=127.0.0.1"]
    )
    return [
        "get-token",
        f"--oidc-issuer-url={provider.issuer}",
        f"--oidc-client-id={CLIENT_ID}",
        "--oidc-extra-scope=email",
        "--oidc-extra-scope=groups",
        "--oidc-extra-scope=offline_access",
        f"--name={NAME}",  # whichever client calls first
        *grant,
    ]


def write_kubeconfig(
    path: str, provider: DemoProvider, api: DemoAPIServer, terminal: bool = False
) -> None:
    """A kubeconfig whose user runs kubetray-exec against the demo provider (see exec_args)."""
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
                        "args": exec_args(provider, terminal),
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


def follow_this_demo(
    store: str | None, provider: DemoProvider, terminal: bool, fresh: bool = True
) -> None:
    """The demo identity takes this demo's settings: its issuer, and its login (the browser on
    a desktop, the password prompt with no browser), whatever the last demo left in the index.

    ``fresh``: a new provider (a new signing key, none of the refresh tokens it issued before).
    Tokens a previous demo left in the keyring would show as signed in and be refused by the
    API server ("Unauthorized"), so they are forgotten before the agent starts: the tray says
    the demo needs a login, and kubectl's next call logs in. A demo restarted in place keeps
    its provider, so it keeps them."""
    from app import compose
    from app.broker.logins import store_key
    from app.providers.oidc import OIDCProvider
    from exec_helper import options

    wanted = OIDCProvider().from_options(options.resolve(exec_args(provider, terminal)[1:]))
    assert wanted is not None
    settings = wanted.settings
    tokens = compose.token_store(store)
    core = compose.core(tokens, compose.stored_credentials(tokens), paths.config_dir())
    logins = core.logins
    entry = logins.find(NAME)
    if entry is not None and (fresh or entry.identity.key != settings.key):
        try:  # not a logout: the new provider knows none of these tokens, nothing to revoke
            tokens.delete(store_key(entry.identity))
        except AppError as e:  # no keyring to reach, say: the agent will say so itself
            print(f"(could not forget the last demo's login: {e.message})", file=sys.stderr)
    try:
        if entry is not None and entry.identity.key != settings.key:  # another port, say
            logins.registry.remove(entry.identity.key)
        logins.registry.adopt(logins.identity(settings, chosen=NAME), settings)
    except (AppError, OSError) as e:  # kubectl's first call remembers them
        print(f"(could not update the demo identity's settings: {e})", file=sys.stderr)


@dataclass
class Carried:
    """A demo's provider and API server as a restart in place hands them over."""

    key: dict[str, Any]
    refresh: dict[str, str]
    tls: tuple[bytes, bytes]
    idp: socket.socket
    api: socket.socket


def hand_over(provider: DemoProvider, api: DemoAPIServer) -> Callable[[], dict[str, str]]:
    """What app.restart runs just before exec: both servers stop serving (their sockets keep
    listening: callers wait in the backlog), and their sockets, the provider's signing key and
    refresh tokens and the API server's certificate go to the new process, the secrets in an
    anonymous memory file (memfd), as the agent's memory-only tokens do. Elsewhere than Linux
    (no memfd), nothing: the new process starts a new demo and says so."""

    def carry() -> dict[str, str]:
        if sys.platform != "linux":
            return {}
        provider.pause()
        api.pause()
        fds = [provider.listening_fd(), api.listening_fd()]
        doc = {
            "version": STATE_FORMAT,
            **provider.state(),
            "tls": [api.ca_pem.decode(), api.key_pem.decode()],
            "fds": fds,
        }
        fd = os.memfd_create("kubetray-demo")
        view = memoryview(json.dumps(doc).encode())
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
        for each in (*fds, fd):
            os.set_inheritable(each, True)
        return {STATE_ENV: f"{fd} {os.getpid()}"}

    return carry


def _listening(fd: int) -> socket.socket | None:
    try:
        sock = socket.socket(fileno=fd)
    except OSError:
        return None
    os.set_inheritable(fd, False)
    if sock.family != socket.AF_INET or not sock.getsockopt(
        socket.SOL_SOCKET, socket.SO_ACCEPTCONN
    ):
        sock.close()
        return None
    return sock


def take_over() -> Carried | None:
    """The demo the process this one replaced handed over (None: none, or not to this
    process, or unreadable). The variable goes either way."""
    value = os.environ.pop(STATE_ENV, None)
    if not value:
        return None
    try:
        fd_text, pid = value.split(" ")
        fd = int(fd_text)
    except ValueError:
        return None
    if pid != str(os.getpid()):
        return None  # inherited by a child, not handed to it
    try:
        with open(fd, "rb") as f:
            doc = json.loads(f.read())
        if not isinstance(doc, dict) or doc.get("version") != STATE_FORMAT:
            raise ValueError("another format")
        idp_fd, api_fd = (int(x) for x in doc["fds"])
        cert, key = (str(x).encode() for x in doc["tls"])
        refresh = {str(k): str(v) for k, v in dict(doc["refresh"]).items()}
        jwk = dict(doc["key"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    idp, api = _listening(idp_fd), _listening(api_fd)
    if idp is None or api is None:
        for sock in (idp, api):
            if sock is not None:
                sock.close()
        return None
    return Carried(jwk, refresh, (cert, key), idp, api)


def _kubetray_path() -> str:
    """How to run kubetray, so the hints the demo and the agent print work from any shell."""
    command = installation.app_command()
    return command[0] if len(command) == 1 else "python -m app"


def _ran_as() -> str:
    """What the person typed to start the demo (the Makefile says when it was make run)."""
    return os.environ.get(VIA_ENV) or "kubetray demo"


def run(headless: bool | None = None, store: str | None = None) -> int:
    """Start the demo, print the kubectl line, then run the app (or the agent with no desktop).

    Nothing is written before it is clear the demo can run: a demo already running is left
    alone (its kubectl line is printed again), and an agent already serving this user is named.
    A restart in place (kubetray restart, an upgrade) asks neither: the agent's socket it was
    handed is its own, and the provider and API server come across with their keys (see
    hand_over), so the demo's login goes on working.
    """
    kubeconfig = os.path.join(paths.config_dir(), "demo", "kubeconfig")
    restarted = restart.restarting()
    carried = take_over()
    if not restarted:
        demo_pid, agent_pid = _running_demo(), _running_agent()
        if demo_pid is not None and demo_pid == agent_pid:
            print(f"kubetray demo is already running (pid {demo_pid}). In another terminal, run:\n")
            print(f"  kubectl --kubeconfig {kubeconfig} get ns\n", flush=True)
            return 0
        if agent_pid is not None:
            raise AppError(
                f"a kubetray agent or app already serves this user (pid {agent_pid}): the demo "
                "needs its own",
                f"stop it with: {_kubetray_path()} stop; then run {_ran_as()} again",
            )
    if headless is None:
        headless = sys.platform == "linux" and not (
            os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
        )
    if carried is not None:
        provider = DemoProvider(key=carried.key, listening=carried.idp, refresh=carried.refresh)
        api = DemoAPIServer(
            token_check(provider),  # type: ignore[arg-type]
            tls=carried.tls,
            listening=carried.api,
        )
    else:
        provider = DemoProvider(IDP_PORT)
        api = DemoAPIServer(token_check(provider), API_PORT)  # type: ignore[arg-type]
    provider.start()
    api.start()
    restart.carry(hand_over(provider, api))
    # No browser can open here (no display, or SSH): the login is a prompt in kubectl's terminal.
    # Decided as the agent that serves it would: the headless agent has no use for the app's
    # saved browser command (Settings), which had a headless demo ask to open a URL.
    saved = "" if headless else Settings.load().browser_command
    terminal = not Browser(saved or None).available()
    follow_this_demo(store, provider, terminal, fresh=carried is None)
    write_kubeconfig(kubeconfig, provider, api, terminal=terminal)
    if carried is not None:
        print("kubetray demo restarted in place: the same provider, API server and demo login")
    else:
        if restarted:
            print(
                "kubetray restarted: the demo starts afresh (a new provider: log in again)",
                flush=True,
            )
        print("kubetray demo: a DEMO identity provider (signs anyone in as demo@kubetray.test)")
        print(f"  provider {provider.issuer}   API server {api.url}")
        print(f"  kubetray is {_kubetray_path()} (status, stop, login: the hints below use it)")
    print("In another terminal, run:\n")
    print(f"  kubectl --kubeconfig {kubeconfig} get ns\n", flush=True)
    if terminal and carried is None:
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
        if carried is None:
            print("(no desktop here: the headless agent runs)", flush=True)
        from app.agent.headless import run as run_agent

        return run_agent(store=store)
    from app.ui.app import run as run_app

    return run_app(store=store)
