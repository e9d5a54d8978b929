"""Issue 21's proof: every real Kubernetes client runs kubetray-exec from a kubeconfig.

Clients: each versioned kubectl (client-go), the Python ``kubernetes`` client (sync),
``kubernetes_asyncio`` and npm ``@kubernetes/client-node`` 1.x (tests/clients). Credentials, all
served by one agent for the module: a stored token (a JWT with ``exp``), a stored client
certificate (mTLS) and an OIDC identity logged in beforehand (password grant at the real
oidc-provider). The HTTPS stand-in accepts only those. EXEC-CONSUMERS.md §8 says what each client
sends and shows; these tests hold kubetray to it.
"""

import asyncio
import base64
import contextlib
import json
import logging
import os
import pty
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.apiserver import NAMESPACES, APIServer, id_tokens_of
from tests.idp import IdP, run_idp
from tests.peers import (
    ROOT,
    KubetrayEnv,
    exec_kubeconfig,
    kubectl_binaries,
    kubetray_env,
    require,
    secret_service_available,
)
from tests.pki import CA, Issued

pytestmark = pytest.mark.keyring

CLIENTS_DIR = ROOT / "tests" / "clients"
CLIENT_CN = "kubetray-matrix-user"
MISSING = "nobody-stored-this"
KUBECTLS = sorted(kubectl_binaries(), key=lambda v: tuple(map(int, v.split(".")))) or ["1.33"]
CREDENTIALS = ["token", "cert", "oidc"]


def _jwt(claims: dict[str, Any]) -> str:
    """An unsigned JWT: only its shape and ``exp`` matter here (the stand-in compares strings)."""

    def part(doc: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}.c2lnbmF0dXJl"


TOKEN_IAT = int(time.time())
TOKEN_EXP = TOKEN_IAT + 3 * 3600
TOKEN = _jwt({"sub": "matrix", "iat": TOKEN_IAT, "exp": TOKEN_EXP})


# -- the peers, one of each for the module ---------------------------------------------------


def _checker(idp: IdP) -> Callable[[str], bool]:
    """The stand-in accepts an id_token that verifies against the provider's keys."""
    return id_tokens_of(idp.jwks(), idp.issuer, "kubectl")


@dataclass
class Served:
    """One agent, one provider, one API stand-in, and the exec args of each credential."""

    kt: KubetrayEnv
    idp: IdP
    api: APIServer
    client: Issued
    args: dict[str, list[str]]
    workdir: Path

    def kubeconfig(self, credential: str, *, args: list[str] | None = None) -> Path:
        """A kubeconfig whose only user runs kubetray-exec with ``credential``'s args."""
        path = self.workdir / f"{credential}.kubeconfig"
        write_kubeconfig(path, self.kt, self.api, args or self.args[credential], "matrix")
        return path

    def calls_for(self, identity: str) -> int:
        return len([c for c in self.kt.calls() if c["identity"] == identity])


def oidc_args(idp: IdP, *extra: str) -> list[str]:
    return [
        "get-token",
        f"--oidc-issuer-url={idp.issuer}",
        "--oidc-client-id=kubectl",
        "--oidc-extra-scope=email",
        "--grant-type=password",
        *extra,
    ]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    require(secret_service_available(), "no Secret Service: run the tests with `make test`")
    ca = CA()
    client = ca.issue(CLIENT_CN, org="system:masters")
    suffix = os.urandom(4).hex()
    tok, crt = f"matrix-tok-{suffix}", f"matrix-crt-{suffix}"
    with contextlib.ExitStack() as stack:
        idp = stack.enter_context(run_idp(password=True))
        api = stack.enter_context(
            APIServer(ca, token=TOKEN, client_cn=CLIENT_CN, check_token=_checker(idp))
        )
        kt = stack.enter_context(kubetray_env(tmp_path_factory.mktemp("matrix")))
        kt.store_token(tok, TOKEN)
        kt.store_certificate(crt, client.cert_pem, client.key_pem)
        oidc = oidc_args(idp, "--username=alice")
        login = kt.kubetray("login", "--", *oidc, "--password=pw-alice")
        assert login.returncode == 0, login.stderr
        workdir = tmp_path_factory.mktemp("kubeconfigs")
        args = {"token": ["--stored", tok], "cert": ["--stored", crt], "oidc": oidc}
        yield Served(kt, idp, api, client, args, workdir)
        for name in (tok, crt):
            kt.kubetray("forget", name)


def write_kubeconfig(
    path: Path, kt: KubetrayEnv, api: APIServer, args: list[str], user: str
) -> None:
    """What a user writes by hand: v1, never interactive, cluster info given."""
    exec_kubeconfig(kt, api, args, path, user=user)


# -- the clients: each lists namespaces N times, one outcome per attempt ----------------------

Outcome = dict[str, Any]
"""``{"ok": [namespace names]}`` or ``{"error": what the client reported}``."""


def run_kubectl(version: str, config: Path, times: int, served: Served) -> list[Outcome]:
    """A process per command (client-go keeps nothing between them)."""
    binaries = kubectl_binaries()
    require(version in binaries, f"kubectl {version} is not installed (the kubectl package has it)")
    out = []
    for _ in range(times):
        done = subprocess.run(
            [binaries[version], "--kubeconfig", str(config), "get", "namespaces", "-o", "name"],
            env=served.kt.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if done.returncode == 0:
            out.append({"ok": [n.removeprefix("namespace/") for n in done.stdout.split()]})
        else:
            out.append({"error": done.stderr})
    return out


def run_python_sync(config: Path, times: int, caplog: pytest.LogCaptureFixture) -> list[Outcome]:
    """Load and list N times in this process. A failing plugin is only logged; the request
    then goes out without credentials and comes back 401, so the log is what the user sees."""
    import kubernetes

    out: list[Outcome] = []
    for _ in range(times):
        caplog.clear()
        with caplog.at_level(logging.ERROR):
            client = kubernetes.config.new_client_from_config(config_file=str(config))
            try:
                items = kubernetes.client.CoreV1Api(client).list_namespace().items
                out.append({"ok": [ns.metadata.name for ns in items]})
            except kubernetes.client.ApiException as e:
                logged = "\n".join(r.getMessage() for r in caplog.records)
                out.append({"error": logged, "status": e.status})
            finally:
                client.close()
    return out


def run_python_asyncio(config: Path, times: int) -> list[Outcome]:
    """Load and list N times in one process; the plugin runs at each load."""
    from kubernetes_asyncio import client
    from kubernetes_asyncio import config as kconfig
    from kubernetes_asyncio.config.config_exception import ConfigException

    async def attempt() -> Outcome:
        try:
            api_client = await kconfig.new_client_from_config(config_file=str(config))
        except ConfigException as e:
            return {"error": str(e)}
        async with api_client:
            listed = await client.CoreV1Api(api_client).list_namespace()
            return {"ok": [ns.metadata.name for ns in listed.items]}

    async def main() -> list[Outcome]:
        return [await attempt() for _ in range(times)]

    return asyncio.run(main())


def client_node_available() -> bool:
    return (
        shutil.which("node") is not None
        and (CLIENTS_DIR / "node_modules" / "@kubernetes" / "client-node").is_dir()
    )


def run_client_node(config: Path, times: int, served: Served) -> list[Outcome]:
    """One KubeConfig and one API object for all N calls (a long-lived program)."""
    require(
        client_node_available(),
        "@kubernetes/client-node is not installed: run `make test` (npm ci in tests/clients)",
    )
    env = {k: v for k, v in served.kt.env.items() if k != "KUBECONFIG"}
    done = subprocess.run(
        ["node", str(CLIENTS_DIR / "list_namespaces.mjs"), str(config), str(times)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=CLIENTS_DIR,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


CLIENTS = [
    *[pytest.param(f"kubectl-{v}", marks=pytest.mark.kubectl, id=f"kubectl-{v}") for v in KUBECTLS],
    pytest.param("python", id="python"),
    pytest.param("asyncio", id="asyncio"),
    pytest.param("client-node", id="client-node"),
]


@pytest.fixture
def list_namespaces(
    served: Served, caplog: pytest.LogCaptureFixture
) -> Callable[[str, Path, int], list[Outcome]]:
    """``list_namespaces(client, kubeconfig, times)``: run that client, one outcome per call."""

    def run(client: str, config: Path, times: int) -> list[Outcome]:
        if client.startswith("kubectl-"):
            return run_kubectl(client.removeprefix("kubectl-"), config, times, served)
        if client == "python":
            return run_python_sync(config, times, caplog)
        if client == "asyncio":
            return run_python_asyncio(config, times)
        return run_client_node(config, times, served)

    return run


# -- the matrix ------------------------------------------------------------------------------


@pytest.mark.parametrize("credential", CREDENTIALS)
@pytest.mark.parametrize("client", CLIENTS)
def test_client_lists_namespaces(
    served: Served,
    list_namespaces: Callable[[str, Path, int], list[Outcome]],
    client: str,
    credential: str,
) -> None:
    before = len(served.api.seen)
    outcomes = list_namespaces(client, served.kubeconfig(credential), 2)
    assert outcomes == [{"ok": NAMESPACES}] * 2
    seen = set(served.api.outcomes()[before:])
    assert seen == {"cert" if credential == "cert" else "token"}


@pytest.mark.parametrize("client", CLIENTS)
def test_a_missing_credential_says_why_on_every_call(
    served: Served, list_namespaces: Callable[[str, Path, int], list[Outcome]], client: str
) -> None:
    """Three calls from one process (kubectl: three commands), each within the agent's
    one-second memory of the failure: the reason reaches the client every time."""
    config = served.kubeconfig("missing", args=["--stored", MISSING])
    outcomes = list_namespaces(client, config, 3)
    assert len(outcomes) == 3
    for n, outcome in enumerate(outcomes, 1):
        assert "ok" not in outcome, f"call {n} listed namespaces without a credential"
        assert f"no stored credential named '{MISSING}'" in outcome["error"], (n, outcome)
    if client == "python":  # logged, and the request went out with nothing: the server said no
        assert {o["status"] for o in outcomes} == {401}


@pytest.mark.parametrize("credential", CREDENTIALS)
def test_the_helper_says_when_the_credential_ends(served: Served, credential: str) -> None:
    """A JWT's ``exp``, a certificate's notAfter, an id_token's expiry: each less a margin, so
    caching clients (client-go, client-node, asyncio) neither re-run per call nor outlive it."""
    done = served.kt.run_helper(*served.args[credential])
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)["status"]
    assert "expirationTimestamp" in status, f"no expiry for a {credential}: {status.keys()}"
    ends = datetime.strptime(status["expirationTimestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=UTC
    )
    assert ends > datetime.now(UTC)
    lifetimes = {
        "token": (datetime.fromtimestamp(TOKEN_IAT, UTC), datetime.fromtimestamp(TOKEN_EXP, UTC)),
        "cert": (served.client.cert.not_valid_before_utc, served.client.cert.not_valid_after_utc),
    }
    if credential in lifetimes:  # handed out before its end, by at most half its lifetime
        start, end = lifetimes[credential]
        assert end - (end - start) / 2 <= ends < end


@pytest.mark.parametrize("credential", CREDENTIALS)
def test_client_node_runs_the_plugin_once_while_the_credential_lasts(
    served: Served, credential: str
) -> None:
    """client-node caches a reply by user name until its expirationTimestamp, and without one
    runs the plugin for every API call (EXEC-CONSUMERS.md §8.1)."""
    identity = served.args[credential][1] if credential != "oidc" else oidc_identity_name(served)
    before = served.calls_for(identity)
    outcomes = run_client_node(served.kubeconfig(credential), 5, served)
    assert outcomes == [{"ok": NAMESPACES}] * 5
    assert served.calls_for(identity) - before == 1


def oidc_identity_name(served: Served) -> str:
    rows = [i for i in served.kt.kubetray_json("status")["identities"] if i["kind"] == "oidc"]
    alice = [r for r in rows if r.get("who", "").startswith("alice")]
    assert len(alice) == 1, rows
    return str(alice[0]["name"])


# -- names, and a login nobody can answer ----------------------------------------------------


@pytest.mark.parametrize("client", ["kubectl-1.33", "python", "asyncio", "client-node"])
def test_an_identity_is_named_after_the_kubeconfig_user_whoever_calls_first(
    served: Served,
    list_namespaces: Callable[[str, Path, int], list[Outcome]],
    client: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first call logs in (password and user in the args) and names the identity. kubectl
    says which file with --kubeconfig; Python's config_file= and client-node pass nothing, so
    the name must come from the kubeconfig itself (here the default ~/.kube/config)."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    user = f"matrix-{client}"
    username = client.replace(".", "-")
    args = oidc_args(served.idp, f"--username={username}", f"--password=pw-{username}")
    config = served.kt.home / ".kube" / "config"
    write_kubeconfig(config, served.kt, served.api, args, user)
    try:
        assert list_namespaces(client, config, 1) == [{"ok": NAMESPACES}]
    finally:
        config.unlink()
    rows = [i for i in served.kt.kubetray_json("status")["identities"] if i["kind"] == "oidc"]
    mine = [r["name"] for r in rows if r.get("who", "").startswith(username)]
    assert mine == [user]


def test_asyncio_in_a_terminal_fails_fast_with_the_reason(served: Served, tmp_path: Path) -> None:
    """kubernetes_asyncio in a terminal: stdout is one, so it says interactive; stdin is
    inherited (the terminal) but stderr is captured, so a prompt would be invisible while the
    program waits. kubetray-exec must not prompt: the one-line reason arrives in the
    ConfigException, within 5 s."""
    args = oidc_args(served.idp)  # no username or password: only a person could answer
    config = tmp_path / "kubeconfig"
    write_kubeconfig(config, served.kt, served.api, args, "matrix-terminal")
    script = (
        "import asyncio, json, sys, time\n"
        "from kubernetes_asyncio import config\n"
        "async def main():\n"
        "    start = time.monotonic()\n"
        "    try:\n"
        "        c = await config.new_client_from_config(config_file=sys.argv[1])\n"
        "        await c.close()\n"
        "        out = {'ok': True}\n"
        "    except Exception as e:\n"
        "        out = {'error': str(e), 'type': type(e).__name__}\n"
        "    out['seconds'] = time.monotonic() - start\n"
        "    out['stdout_tty'] = sys.stdout.isatty()\n"
        "    sys.stderr.write(json.dumps(out) + '\\n')\n"
        "asyncio.run(main())\n"
    )
    primary, secondary = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-c", script, str(config)],
            env={k: v for k, v in served.kt.env.items() if k != "KUBECONFIG"},
            stdin=secondary,
            stdout=secondary,
            stderr=subprocess.PIPE,
            text=True,
            timeout=30,
            check=False,
        )
    finally:
        os.close(secondary)
        os.close(primary)
    result = json.loads(done.stderr.strip().splitlines()[-1])
    assert result["stdout_tty"] is True
    assert result["type"] == "ConfigException", result
    assert result["seconds"] < 5, result
    assert "exec: process returned 1" in result["error"]
    assert "login required for " in result["error"] and "kubetray login " in result["error"]
    assert len(result["error"].splitlines()) == 1, result["error"]
