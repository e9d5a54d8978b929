"""OIDC logins end to end: real oidc-provider, real headless chromium, real kubectl.

The API stand-in accepts only id_tokens that verify against the provider's keys with the
kubectl client as audience.
"""

import json
import os
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.apiserver import NAMESPACES, APIServer, id_tokens_of
from tests.idp import BROWSE, IdP, browser_available, browser_log, run_idp
from tests.peers import KubetrayEnv, exec_kubeconfig, kubectl_binaries, require
from tests.pki import CA


@pytest.fixture
def idp() -> Iterator[IdP]:
    with run_idp() as provider:
        yield provider


@pytest.fixture
def browser(kt: KubetrayEnv, keyring_session: None) -> Path:
    """The agent opens logins in the tests' real headless browser; returns its log."""
    require(
        browser_available(), "needs Debian chromium and Python playwright (make test installs them)"
    )
    log = kt.home.parent / "browser.jsonl"
    kt.env.update(KUBETRAY_BROWSER=BROWSE, KUBETRAY_TEST_BROWSER_LOG=str(log))
    return log


def checker(idp: IdP, audience: str = "kubectl") -> Any:
    return id_tokens_of(idp.jwks(), idp.issuer, audience)


@pytest.fixture
def api(idp: IdP) -> Iterator[APIServer]:
    with APIServer(CA(), check_token=checker(idp)) as server:
        yield server


def oidc_args(idp: IdP, *extra: str) -> list[str]:
    return [
        "get-token",
        f"--oidc-issuer-url={idp.issuer}",
        "--oidc-client-id=kubectl",
        "--oidc-extra-scope=email",
        "--oidc-extra-scope=groups",
        *extra,
    ]


def kubeconfig(
    kt: KubetrayEnv, api: APIServer, args: list[str], path: Path, mode: str = "Never"
) -> Path:
    return exec_kubeconfig(kt, api, args, path, mode=mode)


def kubectl(
    kt: KubetrayEnv, config: Path, version: str = "1.33"
) -> subprocess.CompletedProcess[str]:
    binaries = kubectl_binaries()
    require(version in binaries, f"kubectl {version} is not installed")
    return subprocess.run(
        [binaries[version], "--kubeconfig", str(config), "get", "ns", "-o", "name"],
        env=dict(kt.env),
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )


def kubectl_in_a_terminal(kt: KubetrayEnv, api: APIServer, args: list[str], tmp_path: Path) -> Any:
    """kubectl 1.33 in a pseudo-terminal, its exec user interactive (IfAvailable)."""
    import pexpect

    config = kubeconfig(kt, api, args, tmp_path / "kubeconfig", mode="IfAvailable")
    binaries = kubectl_binaries()
    require("1.33" in binaries, "kubectl 1.33 is not installed")
    return pexpect.spawn(
        binaries["1.33"],
        ["--kubeconfig", str(config), "get", "ns", "-o", "name"],
        env=dict(kt.env),
        encoding="utf-8",
        timeout=60,
    )


def expect(child: Any, pattern: str) -> None:
    """child.expect(pattern), failing with everything the terminal showed if it ended first."""
    import pexpect

    if child.expect([pattern, pexpect.EOF]) == 1:
        pytest.fail(f"expected {pattern!r}; the terminal showed:\n{child.before}")


def test_browser_login_then_cached(
    kt: KubetrayEnv, idp: IdP, api: APIServer, browser: Path, tmp_path: Path
) -> None:
    config = kubeconfig(kt, api, oidc_args(idp), tmp_path / "kubeconfig")
    first = kubectl(kt, config)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == [f"namespace/{n}" for n in NAMESPACES]
    # named after the kubeconfig user that runs it (kubectl --kubeconfig: read from kubectl)
    assert "Logged in to u as alice@example.test" in first.stderr, first.stderr
    second = kubectl(kt, config)
    assert second.returncode == 0 and second.stderr == ""
    opened = [e for e in browser_log(browser) if e["event"] == "opened"]
    assert len(opened) == 1
    assert "code_challenge_method=S256" in opened[0]["url"] and "nonce=" in opened[0]["url"]
    assert idp.counts().get("authorization_code") == 1
    status = json.loads(kt.kubetray("status", "--json").stdout)
    entry = next(i for i in status["identities"] if i["kind"] == "oidc")
    assert entry["who"] == "alice@example.test" and entry["groups"] == ["devs", "team-alice"]
    assert entry["state"] == "ready" and entry["refreshable"] is True


@pytest.mark.slow
def test_fifty_parallel_kubectl_one_browser(
    kt: KubetrayEnv, idp: IdP, api: APIServer, browser: Path, tmp_path: Path
) -> None:
    config = kubeconfig(kt, api, oidc_args(idp), tmp_path / "kubeconfig")
    with ThreadPoolExecutor(50) as pool:
        results = list(pool.map(lambda _: kubectl(kt, config), range(50)))
    failures = [r.stderr for r in results if r.returncode != 0]
    assert failures == []
    assert len([e for e in browser_log(browser) if e["event"] == "opened"]) == 1
    assert idp.counts().get("authorization_code") == 1


def test_agent_restart_serves_from_the_keyring(
    kt: KubetrayEnv, idp: IdP, api: APIServer, browser: Path, tmp_path: Path
) -> None:
    config = kubeconfig(kt, api, oidc_args(idp), tmp_path / "kubeconfig")
    assert kubectl(kt, config).returncode == 0
    kt.stop_agent()
    again = kubectl(kt, config)
    assert again.returncode == 0, again.stderr
    assert len([e for e in browser_log(browser) if e["event"] == "opened"]) == 1
    assert idp.counts().get("authorization_code") == 1


def test_ignored_login_fails_fast_afterwards(kt: KubetrayEnv, idp: IdP, browser: Path) -> None:
    kt.env["KUBETRAY_TEST_BROWSER_MODE"] = "ignore"
    args = oidc_args(idp, "--authentication-timeout-sec=5")
    start = time.monotonic()
    first = kt.run_helper(*args)
    assert first.returncode == 1 and "not completed within 5 s" in first.stderr
    assert time.monotonic() - start < 20
    start = time.monotonic()
    second = kt.run_helper(*args)
    assert time.monotonic() - start < 5  # not another login's wait
    assert second.returncode == 1
    assert second.stderr.strip().splitlines()[-1].startswith("login required for kubectl@127.0.0.1")
    assert 'run "kubetray login kubectl@127.0.0.1' in second.stderr
    assert len([e for e in browser_log(browser) if e["event"] == "opened"]) == 1  # no second tab


def test_non_interactive_caller_with_no_way_to_reach_anyone(
    kt: KubetrayEnv, idp: IdP, keyring_session: None
) -> None:
    kt.env.pop("DISPLAY", None)
    kt.env.pop("WAYLAND_DISPLAY", None)
    start = time.monotonic()
    done = kt.run_helper(*oidc_args(idp))
    assert time.monotonic() - start < 5
    assert done.returncode == 1 and done.stdout == ""
    assert "nothing here can show a login" in done.stderr and "kubetray login" in done.stderr


def test_device_code_login(
    kt: KubetrayEnv, idp: IdP, api: APIServer, browser: Path, tmp_path: Path
) -> None:
    config = kubeconfig(
        kt, api, oidc_args(idp, "--grant-type=device-code"), tmp_path / "kubeconfig"
    )
    done = kubectl(kt, config)
    assert done.returncode == 0, done.stderr
    assert "To log in, open http://127.0.0.1" in done.stderr and "/device?user_code=" in done.stderr
    opened = [e for e in browser_log(browser) if e["event"] == "opened"]
    assert len(opened) == 1 and "/device" in opened[0]["url"]
    assert idp.counts().get("urn:ietf:params:oauth:grant-type:device_code") == 1


def test_password_grant_prompts_in_a_real_terminal(
    kt: KubetrayEnv, keyring_session: None, tmp_path: Path
) -> None:
    import pexpect

    with run_idp(password=True) as idp, APIServer(CA(), check_token=checker(idp)) as api:
        args = oidc_args(idp, "--grant-type=password")
        child = kubectl_in_a_terminal(kt, api, args, tmp_path)
        expect(child, "Username: ")
        child.sendline("bob")
        expect(child, "Password: ")
        child.sendline("pw-bob")
        child.expect(pexpect.EOF)
        child.close()
        out = child.before
        assert child.exitstatus == 0, out
        assert "namespace/kubetray-proof" in out and "pw-bob" not in out  # no echo
        assert "as bob@example.test" in out
        # Non-interactive callers are never prompted: they fail at once with the remedy.
        kt.kubetray("logout", "u")  # the kubeconfig user's name (kubectl ran it)
        start = time.monotonic()
        done = kt.run_helper(*args)
        assert time.monotonic() - start < 5
        assert done.returncode == 1 and "needs an answer typed in a terminal" in done.stderr


def test_kubetray_login_and_logout(kt: KubetrayEnv, idp: IdP, browser: Path) -> None:
    name = "kubectl@" + idp.issuer.removeprefix("http://")
    done = kt.kubetray("login", "--", *oidc_args(idp)[1:])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"logged in to {name} as alice@example.test")
    again = kt.kubetray("login", name)
    assert again.returncode == 0  # still logged in: no new browser
    assert len([e for e in browser_log(browser) if e["event"] == "opened"]) == 1
    forced = kt.kubetray("login", name, "--force")
    assert (
        forced.returncode == 0
        and len([e for e in browser_log(browser) if e["event"] == "opened"]) == 2
    )
    out = kt.kubetray("logout", name)
    assert out.returncode == 0
    assert out.stdout.strip() == (
        f"logged out of {name} (tokens forgotten here); the refresh token is revoked at the provider"
    )
    assert idp.counts().get("revoked") == 1  # RFC 7009: the provider revoked the grant
    status = json.loads(kt.kubetray("status", "--json").stdout)
    assert next(i for i in status["identities"] if i["name"] == name)["state"] == "needs login"
    assert kt.kubetray("logout", "nobody@nowhere").returncode == 1


@pytest.mark.slow
def test_refresh_ahead_and_a_hundred_callers_never_revoke_the_grant(
    kt: KubetrayEnv, keyring_session: None
) -> None:
    """Tokens live 8 s: the agent refreshes ahead (~2 s before callers would need it)."""
    with run_idp(password=True, ttl={"IdToken": 8, "AccessToken": 8}) as idp:
        args = oidc_args(idp, "--grant-type=password", "--username=carol", "--password=pw-carol")
        first = kt.run_helper(*args)
        assert first.returncode == 0, first.stderr
        tokens = {json.loads(first.stdout)["status"]["token"]}
        deadline = time.monotonic() + 14

        def call(_: int) -> tuple[int, str, float]:
            start = time.monotonic()
            done = kt.run_helper(*args)
            return done.returncode, done.stdout, time.monotonic() - start

        waits = []
        with ThreadPoolExecutor(20) as pool:
            while time.monotonic() < deadline:
                for code, out, wait in pool.map(call, range(20)):
                    assert code == 0
                    tokens.add(json.loads(out)["status"]["token"])
                    waits.append(wait)
        counts = idp.counts()
        assert len(waits) >= 100
        assert counts.get("refresh_token", 0) >= 2  # refreshed ahead, more than once
        assert len(tokens) >= 3
        assert counts.get("error:invalid_grant", 0) == 0 and counts.get("revoked", 0) == 0
        assert counts.get("password") == 1  # one login for everything
        status = json.loads(kt.kubetray("status", "--json").stdout)
        assert next(i for i in status["identities"] if i["kind"] == "oidc")["refreshes"] >= 2


def test_authcode_keyboard_in_a_real_terminal(
    kt: KubetrayEnv, idp: IdP, api: APIServer, keyring_session: None, tmp_path: Path
) -> None:
    """No browser on this machine (an SSH session): the URL is shown, the redirect pasted back."""
    import re
    import sys

    import pexpect

    require(browser_available(), "needs Debian chromium and Python playwright")
    args = oidc_args(
        idp,
        "--grant-type=authcode-keyboard",
        "--oidc-redirect-url-authcode-keyboard=http://127.0.0.1/callback",
    )
    child = kubectl_in_a_terminal(kt, api, args, tmp_path)
    child.expect(r"log in: (\S+)")
    url = child.match.group(1)
    expect(child, "Enter the code")
    # The person opens the URL on another machine's browser; here, the tests' browser does.
    log = tmp_path / "keyboard-browser.jsonl"
    subprocess.run(
        [sys.executable, BROWSE.split()[-1], url],
        env=dict(os.environ, KUBETRAY_TEST_BROWSER_LOG=str(log)),
        check=True,
        timeout=60,
    )
    redirect = next(e["callback"] for e in browser_log(log) if e["event"] == "done")
    assert re.search(r"[?&]code=", redirect)
    child.sendline(redirect)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    assert "namespace/kubetray-proof" in child.before


def test_access_token_instead_of_id_token(kt: KubetrayEnv, keyring_session: None) -> None:
    with run_idp(password=True) as idp:
        base = oidc_args(idp, "--grant-type=password", "--username=erin", "--password=pw-erin")
        id_token = json.loads(kt.run_helper(*base).stdout)["status"]["token"]
        access = kt.run_helper(*base, "--oidc-use-access-token")
        assert access.returncode == 0, access.stderr
        token = json.loads(access.stdout)["status"]["token"]
        assert id_token.count(".") == 2 and token != id_token and token.count(".") != 2


def test_cancel_ends_a_waiting_login_for_its_callers(
    kt: KubetrayEnv, idp: IdP, browser: Path
) -> None:
    kt.env["KUBETRAY_TEST_BROWSER_MODE"] = "ignore"
    name = "kubectl@" + idp.issuer.removeprefix("http://")
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(kt.run_helper, *oidc_args(idp))
        deadline = time.monotonic() + 20
        while not browser_log(browser) and time.monotonic() < deadline:
            time.sleep(0.1)
        start = time.monotonic()
        cancelled = kt.kubetray("cancel", name)
        assert (
            cancelled.returncode == 0
            and cancelled.stdout.strip() == f"cancelled the login to {name}"
        )
        done = waiting.result(timeout=20)
    assert time.monotonic() - start < 5
    assert done.returncode == 1 and "the login was cancelled" in done.stderr
    assert kt.kubetray("cancel", name).returncode == 1  # nothing left to cancel
