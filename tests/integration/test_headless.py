"""Where a kubectl user is: no keyring, no display, SSH, a browser that fails.

The fresh-machine test follows the README: `make run` starts `kubetray demo`, and its kubectl
line is run in a real terminal by a person who answers the demo's password prompt.
"""

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
import yaml

from app.oidc import browser
from tests.apiserver import APIServer
from tests.idp import BROWSE, IdP, browser_available, browser_log, run_idp
from tests.integration.test_oidc import checker, expect, kubeconfig, oidc_args
from tests.peers import ROOT, KubetrayEnv, StartAgent, kubectl_binaries, require
from tests.pki import CA

URL = re.compile(r"https?://\S+")


@pytest.fixture
def headless(kt: KubetrayEnv, tmp_path: Path) -> KubetrayEnv:
    """A machine with no display, no D-Bus session and so no Secret Service."""
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "QT_QPA_PLATFORM"):
        kt.env.pop(name, None)
    kt.env["XDG_RUNTIME_DIR"] = str(tmp_path / "xdg")  # nowhere a session bus could be found
    (tmp_path / "xdg").mkdir(mode=0o700)
    return kt


def kubectl_133() -> str:
    binaries = kubectl_binaries()
    require("1.33" in binaries, "kubectl 1.33 is not installed")
    return binaries["1.33"]


def start_demo(kt: KubetrayEnv, *args: str) -> tuple["subprocess.Popen[str]", list[str]]:
    """`kubetray demo` as `make run` starts it; returns it with the kubectl line's words."""
    demo = subprocess.Popen(
        [sys.executable, "-m", "app", "demo", *args],
        env=kt.env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert demo.stdout is not None
    deadline = time.monotonic() + 30
    lines: list[str] = []
    while time.monotonic() < deadline:
        line = demo.stdout.readline()
        lines.append(line)
        if line.strip().startswith("kubectl --kubeconfig") or not line:
            break
    command = lines[-1].split()
    assert command[:2] == ["kubectl", "--kubeconfig"], "".join(lines)
    while kt.agent_pid() != demo.pid:
        assert time.monotonic() < deadline and demo.poll() is None, "the demo's agent did not start"
        time.sleep(0.1)
    return demo, command


def stop(proc: "subprocess.Popen[Any]") -> None:
    if proc.poll() is None:
        proc.terminate()
    proc.communicate(timeout=20)


def scan(kt: KubetrayEnv, *secrets: str) -> None:
    """None of ``secrets`` in any file kubetray keeps (config, state, runtime, home)."""
    for directory in (kt.config, kt.state, kt.runtime, kt.home):
        for path in directory.rglob("*"):
            if path.is_file() and not path.is_socket():
                data = path.read_bytes()
                for secret in secrets:
                    assert secret.encode() not in data, f"{secret[:12]}… in {path}"


def test_readme_first_command_on_a_fresh_headless_machine(headless: KubetrayEnv) -> None:
    import pexpect

    kt = headless
    kubectl = kubectl_133()
    demo, command = start_demo(kt)
    try:
        child = pexpect.spawn(kubectl, command[1:], env=kt.env, encoding="utf-8", timeout=60)
        expect(child, "no OS keyring here: tokens are kept in memory until the agent stops")
        expect(child, "Username: ")
        child.sendline("me")
        expect(child, "Password: ")
        child.sendline("any-demo-password")
        child.expect(pexpect.EOF)
        child.close()
        out = str(child.before)
        assert child.exitstatus == 0, out
        assert "kubetray-demo" in out and "any-demo-password" not in out
        again = subprocess.run(
            [kubectl, *command[1:]],
            env=kt.env,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert again.returncode == 0 and again.stderr == ""  # from memory, nobody asked
        assert "kubetray-demo" in again.stdout
        status = kt.kubetray("status")
        assert "secrets: no OS keyring here: tokens are kept in memory" in status.stdout
        doctor = kt.kubetray("doctor", "--kubeconfig", command[2]).stdout
        said = re.search(r"^WARN +tokens: in memory only \((.+)\): every login ends", doctor, re.M)
        assert said and "no D-Bus session bus" in said.group(1), doctor
        assert not (kt.state / "token-journal").exists()  # its key would need the keyring
        exec_args = yaml.safe_load(Path(command[2]).read_text())["users"][0]["user"]["exec"]
        credential = kt.run_helper(*exec_args["args"])
        assert credential.returncode == 0, credential.stderr
        token = re.search(r'"token":\s*"([^"]+)"', credential.stdout)
        assert token is not None
        scan(kt, token.group(1), token.group(1).rsplit(".", 1)[-1], "any-demo-password")
    finally:
        stop(demo)


def test_memory_store_is_said_and_lasting_secrets_refuse(
    headless: KubetrayEnv, tmp_path: Path
) -> None:
    kt = headless
    empty = tmp_path / "empty"
    empty.write_text("apiVersion: v1\nkind: Config\n")
    doctor = kt.kubetray("doctor", "--kubeconfig", str(empty))
    lines = doctor.stdout.splitlines()
    warn = next(i for i, line in enumerate(lines) if line.startswith("WARN  keyring:"))
    assert "tokens are kept in memory until the agent stops" in lines[warn]
    assert "stored credentials, secure and keyring backups need one" in lines[warn]
    assert lines[warn].count("no OS keyring") == 1 and "keyring.backends" not in lines[warn]
    assert lines[warn + 1].strip().startswith("fix: ") and "dbus-run-session" in lines[warn + 1]
    assert "all checks passed" not in doctor.stdout  # not under a WARN
    assert re.search(r"\b\d+ warning\(s\)", lines[-1]), lines[-1]  # the summary counts it

    token = tmp_path / "token"
    token.write_text("a-static-token-to-keep")
    done = kt.kubetray("store", "keep", "--token-file", str(token))
    assert done.returncode == 1 and done.stdout == ""
    error, hint = done.stderr.splitlines()
    assert error.startswith("error: no OS keyring here: ")
    assert "on a server" in hint and "dbus-run-session" in hint
    assert "OIDC logins work without a keyring" in hint
    assert not (kt.config / "stored.json").exists()

    config = tmp_path / "kubeconfig"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "a-static-token-in-kubeconfig"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            }
        )
    )
    before = config.read_bytes()
    done = kt.kubetray("secure", "--all", "--kubeconfig", str(config), "--yes")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "error: no OS keyring here: " in done.stderr and "dbus-run-session" in done.stderr
    assert config.read_bytes() == before
    scan(kt, "a-static-token-in-kubeconfig", "a-static-token-to-keep")


@pytest.fixture
def idp() -> Iterator[IdP]:
    with run_idp() as provider:
        yield provider


@pytest.fixture
def api(idp: IdP) -> Iterator[APIServer]:
    with APIServer(CA(), check_token=checker(idp)) as server:
        yield server


def read_until(stream: IO[str], pattern: str, limit: float) -> tuple[str, float]:
    """Lines of ``stream`` up to the one containing ``pattern``; and when it came."""
    seen = ""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            break
        seen += line
        if pattern in line:
            return seen, time.monotonic()
    pytest.fail(f"no {pattern!r} within {limit} s; stderr was:\n{seen}")


def person_opens(url: str, env: dict[str, str], log: Path) -> None:
    """Someone opens the URL by other means (here: the tests' real browser)."""
    done = subprocess.run(
        [*BROWSE.split(), url],
        env={**env, "KUBETRAY_TEST_BROWSER_LOG": str(log), "KUBETRAY_TEST_BROWSER_MODE": "login"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def test_a_browser_that_fails_at_once_is_reported_with_the_url_once(
    kt: KubetrayEnv,
    start_agent: StartAgent,
    idp: IdP,
    api: APIServer,
    keyring_session: None,
    tmp_path: Path,
) -> None:
    require(browser_available(), "needs Debian chromium and Python playwright")
    kt.env["KUBETRAY_BROWSER"] = "false"  # exits 1 at once, like chromium run as root
    config = kubeconfig(kt, api, oidc_args(idp), tmp_path / "kubeconfig")
    start_agent(kt)
    start = time.monotonic()
    kubectl = subprocess.Popen(
        [kubectl_133(), "--kubeconfig", str(config), "get", "ns", "-o", "name"],
        env=kt.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert kubectl.stderr is not None
        seen, when = read_until(kubectl.stderr, "The browser did not open", 30)
        assert when - start < browser.WATCH, seen  # at once: not after a running browser's watch
        assert "(false exited with code 1)" in seen
        urls = URL.findall(seen.splitlines()[-1])
        assert urls and "/auth?" in urls[0]
        person_opens(urls[0], kt.env, tmp_path / "person.jsonl")  # the login kept waiting
        out, err = kubectl.communicate(timeout=60)
        assert kubectl.returncode == 0, seen + err
        assert "namespace/kubetray-proof" in out
        assert (seen + err).count(urls[0]) == 1, seen + err  # the URL said once
        assert "If it did not open" not in seen + err  # its failure was known before
    finally:
        stop(kubectl)


def test_over_ssh_no_browser_starts_and_the_device_code_logs_in(
    kt: KubetrayEnv, idp: IdP, api: APIServer, keyring_session: None, tmp_path: Path
) -> None:
    require(browser_available(), "needs Debian chromium and Python playwright")
    for name in ("DISPLAY", "WAYLAND_DISPLAY"):
        kt.env.pop(name, None)
    agent_log = tmp_path / "agent-browser.jsonl"
    kt.env.update(
        SSH_CONNECTION="192.0.2.10 50022 192.0.2.20 22",
        KUBETRAY_BROWSER=BROWSE,  # set, yet never used over SSH
        KUBETRAY_TEST_BROWSER_LOG=str(agent_log),
    )
    import pexpect

    config = kubeconfig(kt, api, oidc_args(idp), tmp_path / "kubeconfig", mode="IfAvailable")
    child = pexpect.spawn(
        kubectl_133(),
        ["--kubeconfig", str(config), "get", "ns", "-o", "name"],
        env=kt.env,
        encoding="utf-8",
        timeout=60,
    )
    expect(child, "Over SSH: logging in with a device code \\(no browser opens here\\)")
    expect(child, r"To log in, open (\S+/device\?user_code=\S+)")
    url = child.match.group(1).rstrip(")")
    person_opens(url, kt.env, tmp_path / "person.jsonl")
    child.expect(pexpect.EOF)
    child.close()
    out = str(child.before)
    assert child.exitstatus == 0, out
    assert "namespace/kubetray-proof" in out
    assert browser_log(agent_log) == []  # kubetray started no browser
    assert idp.counts().get("urn:ietf:params:oauth:grant-type:device_code") == 1


def test_over_ssh_without_a_device_endpoint_the_code_is_pasted(kt: KubetrayEnv) -> None:
    """The demo provider has no device endpoint: kubetray says so and asks for the code."""
    import pexpect
    import requests

    from app.demo.provider import CLIENT_ID, DemoProvider

    for name in ("DISPLAY", "WAYLAND_DISPLAY"):
        kt.env.pop(name, None)
    kt.env.update(SSH_CONNECTION="192.0.2.10 50022 192.0.2.20 22", KUBETRAY_BROWSER="false")
    provider = DemoProvider().start()
    try:
        child = pexpect.spawn(
            sys.executable,
            [
                "-m",
                "app",
                "login",
                "--",
                f"--oidc-issuer-url={provider.issuer}",
                f"--oidc-client-id={CLIENT_ID}",
                "--oidc-redirect-url-authcode-keyboard=http://127.0.0.1/",
            ],
            env=kt.env,
            cwd=str(ROOT),
            encoding="utf-8",
            timeout=60,
        )
        expect(child, "Over SSH, and the provider has no device code login")
        expect(child, r"Open this URL in a browser and log in: (\S+)")
        url = child.match.group(1)
        expect(child, "Enter the code")
        # The person, in a browser elsewhere: clicks Sign in, lands on a page that cannot load,
        # and pastes the URL it ended on.
        signed_in = requests.post(url, allow_redirects=False, timeout=10)
        child.sendline(signed_in.headers["Location"])
        expect(child, "logged in to")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0, child.before
    finally:
        provider.stop()


def test_forget_works_without_a_keyring(headless: KubetrayEnv) -> None:
    """With no keyring there are no stored credentials: forget goes on to the login identities
    instead of failing on the keyring (it used to, so a leftover identity could not be removed)."""
    done = headless.kubetray("forget", "nobody")
    assert done.returncode != 0
    assert "no stored credential or OIDC identity named 'nobody'" in done.stderr, done.stderr
    assert "keyring" not in done.stderr


def test_asking_for_the_keyring_where_there_is_none_refuses_at_start(
    headless: KubetrayEnv,
) -> None:
    """--store keyring (or the setting) on a machine without one: one line and a hint at start,
    not an agent that fails every kubectl call later."""
    done = headless.kubetray("agent", "--store", "keyring")
    assert done.returncode == 1
    error, hint = done.stderr.splitlines()
    assert error.startswith("error: no OS keyring here: ") and "set to keyring" in error
    assert "--store auto" in hint and "--store memory" in hint
    assert headless.kubetray("status").stdout.startswith("agent: not running")
