"""The rest of kubelogin's get-token against the real oidc-provider: the client credentials
grant (a machine identity: CI, no person) and --oidc-request-header.

The provider's client "machine" is confidential (client_secret_basic); with
resource=https://kubernetes.test its access tokens are JWTs for audience "kubernetes", which
the API stand-in verifies with the provider's JWKS, as an API server would.
"""

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.apiserver import NAMESPACES, APIServer
from tests.entra import decode
from tests.idp import IdP, run_idp
from tests.integration.test_oidc import checker, kubeconfig, kubectl
from tests.peers import KubetrayEnv
from tests.pki import CA

pytestmark = pytest.mark.usefixtures("keyring_session")

HEADER = "X-Kubetray-Test"
HEADER_VALUE = "not-to-be-logged-8b1f"
TTL = 12
"""Seconds a machine token lives: fresh for 6 s, fetched again ahead at 3 s (app.oidc.tokens)."""


def machine_args(idp: IdP, *extra: str) -> list[str]:
    """A kubelogin kubeconfig's args for a machine identity, as kubelogin documents them."""
    return [
        "get-token",
        f"--oidc-issuer-url={idp.issuer}",
        "--oidc-client-id=machine",
        "--oidc-client-secret=machine-secret",
        "--grant-type=client-credentials",
        "--oidc-auth-request-extra-params=resource=https://kubernetes.test",
        *extra,
    ]


def nobody_here(kt: KubetrayEnv) -> None:
    """A CI job: no display, no browser, no terminal."""
    for var in ("DISPLAY", "WAYLAND_DISPLAY"):
        kt.env.pop(var, None)


def token_of(done: Any) -> str:
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["status"]["token"])


def _fetches_beyond_the_agent_s(kt: KubetrayEnv, idp: IdP) -> int:
    """Client credentials fetches that were not the agent's fetches ahead (status counts
    those once done; waits for one the provider has seen and the agent not yet counted)."""
    deadline = time.monotonic() + 30
    while True:
        fetched = idp.counts().get("client_credentials", 0)
        status = json.loads(kt.kubetray("status", "--json").stdout)
        ahead = sum(i.get("refreshes", 0) for i in status["identities"] if i["kind"] == "oidc")
        if fetched - ahead <= 1 or time.monotonic() > deadline:
            return fetched - ahead
        time.sleep(0.2)


def test_client_credentials_served_cached_and_fetched_again_with_nobody(
    kt: KubetrayEnv, tmp_path: Path
) -> None:
    nobody_here(kt)
    with (
        run_idp(clientCredentials=True, ttl={"ClientCredentials": TTL}) as idp,
        APIServer(CA(), check_token=checker(idp, audience="kubernetes")) as api,
    ):
        args = machine_args(idp, "--oidc-use-access-token")
        config = kubeconfig(kt, api, args, tmp_path / "kubeconfig")
        first = kubectl(kt, config)
        assert first.returncode == 0, first.stderr
        assert first.stdout.split() == [f"namespace/{n}" for n in NAMESPACES]
        # no login said, no browser, no prompt: only that the agent was started
        assert first.stderr.strip() in ("", "kubetray-exec: started the kubetray agent")
        second = kubectl(kt, config)
        assert second.returncode == 0 and second.stderr == ""
        # The second one from the cache: every fetch is the first one or the agent's own
        # fetch ahead (a loaded machine may reach one before this line; no clock decides).
        assert _fetches_beyond_the_agent_s(kt, idp) == 1
        served = token_of(kt.run_helper(*args, "--no-login"))  # never refused for want of a person
        assert checker(idp, audience="kubernetes")(served)
        # Fetched again ahead of expiry, with no caller at all.
        deadline = time.monotonic() + TTL
        while idp.counts().get("client_credentials", 0) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert idp.counts().get("client_credentials", 0) >= 2
        # Past the served token's expiry, callers get a new one that the API server accepts.
        # (``served`` may already be the fetch ahead, so its own exp, not the first's, counts.)
        time.sleep(max(0.0, decode(served)["exp"] + 1 - time.time()))
        assert not checker(idp, audience="kubernetes")(served)  # the served one has expired
        third = kubectl(kt, config)
        assert third.returncode == 0, third.stderr
        later = token_of(kt.run_helper(*args))
        assert later != served and checker(idp, audience="kubernetes")(later)
        counts = idp.counts()
        assert not [k for k in counts if k.startswith("error:")], counts
        assert set(counts) == {"client_credentials"}  # no login of any kind, no refresh token
        status = json.loads(kt.kubetray("status", "--json").stdout)
        entry = next(i for i in status["identities"] if i["kind"] == "oidc")
        assert entry["who"] == "machine" and entry["state"] == "ready", entry
        assert entry["refreshes"] >= 1


def test_without_an_id_token_the_flag_to_add_is_named(kt: KubetrayEnv) -> None:
    """oidc-provider sends no id_token for client credentials; kubelogin then needs
    --oidc-use-access-token too, and kubetray says so in one line."""
    with run_idp(clientCredentials=True) as idp:
        done = kt.run_helper(*machine_args(idp))
        assert done.returncode == 1 and done.stdout == ""
        said = [
            line for line in done.stderr.splitlines() if "started the kubetray agent" not in line
        ]
        assert len(said) == 1, done.stderr
        assert "no id_token" in said[0] and "--oidc-use-access-token" in said[0]


def test_kubetray_login_fetches_a_machine_token(kt: KubetrayEnv) -> None:
    nobody_here(kt)
    with run_idp(clientCredentials=True) as idp:
        args = machine_args(idp, "--oidc-use-access-token")
        done = kt.kubetray("login", "--", *args[1:])
        assert done.returncode == 0, done.stderr
        name = "machine@" + idp.issuer.removeprefix("http://")
        assert done.stdout.startswith(f"logged in to {name} as machine"), done.stdout
        forced = kt.kubetray("login", name, "--force")
        assert forced.returncode == 0, forced.stderr
        assert idp.counts().get("client_credentials") == 2


def test_request_headers_reach_the_provider_on_every_request(kt: KubetrayEnv) -> None:
    headers = [
        f"--oidc-request-header={HEADER}={HEADER_VALUE}",
        "--oidc-request-header=Origin=https://portal.example",
    ]
    with run_idp(
        clientCredentials=True, password=True, allowedOrigins=["https://portal.example"]
    ) as idp:
        token_of(kt.run_helper(*machine_args(idp, "--oidc-use-access-token", *headers)))
        person = [  # a person's login too: its id_token is verified with the JWKS
            "get-token",
            f"--oidc-issuer-url={idp.issuer}",
            "--oidc-client-id=kubectl",
            "--username=dave",
            "--password=pw-dave",
            *headers,
        ]
        token_of(kt.run_helper(*person))
        with urllib.request.urlopen(idp.issuer + "/test/headers", timeout=10) as r:
            seen = json.load(r)
        requests = {(s["method"], s["path"]) for s in seen}
        wanted = {
            ("GET", "/.well-known/openid-configuration"),
            ("POST", "/token"),
            ("GET", "/jwks"),
        }
        assert wanted <= requests, requests
        for s in seen:
            assert s["headers"].get(HEADER.lower()) == HEADER_VALUE, s
            assert s["headers"].get("origin") == "https://portal.example", s
        token_posts = [s for s in seen if s["path"] == "/token"]
        assert any(s["headers"].get("authorization", "").startswith("Basic ") for s in token_posts)
        # A header value may be a key: it is in no file, status or record of the agent's.
        files = [p for d in (kt.state, kt.config) for p in d.rglob("*") if p.is_file()]
        assert files and not [p for p in files if HEADER_VALUE in p.read_text(errors="replace")]
        assert HEADER_VALUE not in kt.kubetray("status", "--json").stdout


def test_an_origin_the_provider_does_not_allow_is_refused_at_the_token_endpoint(
    kt: KubetrayEnv,
) -> None:
    """The header arrives: oidc-provider checks the Origin by client (CORS) and says no."""
    with run_idp(clientCredentials=True) as idp:
        args = machine_args(
            idp, "--oidc-use-access-token", "--oidc-request-header=Origin=https://elsewhere"
        )
        done = kt.run_helper(*args)
        assert done.returncode == 1
        assert "origin https://elsewhere not allowed for client: machine" in done.stderr
