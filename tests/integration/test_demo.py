"""`kubetray demo` as a newcomer runs it: the printed kubectl line works, with one login."""

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from tests.idp import BROWSE, browser_available, browser_log
from tests.peers import ROOT, KubetrayEnv, kubectl_binaries, require, running_agent


def start_demo(
    kt: KubetrayEnv, env: dict[str, str] | None = None
) -> tuple["subprocess.Popen[str]", list[str]]:
    """`kubetray demo --headless` until it prints its kubectl line and serves as the agent."""
    demo = subprocess.Popen(
        [sys.executable, "-m", "app", "demo", "--headless"],
        env=env or kt.env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert demo.stdout is not None
    lines = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = demo.stdout.readline()
        lines.append(line)
        if line.strip().startswith("kubectl --kubeconfig"):
            break
    command = lines[-1].split()
    assert command[:2] == ["kubectl", "--kubeconfig"] and command[3:] == ["get", "ns"]
    assert "DEMO identity provider" in "".join(lines)
    while kt.agent_pid() != demo.pid:
        assert time.monotonic() < deadline and demo.poll() is None
        time.sleep(0.1)
    return demo, command


def stop(demo: "subprocess.Popen[str]") -> str:
    """Terminate the demo; what it printed after its kubectl line."""
    demo.terminate()
    return demo.communicate(timeout=20)[0] or ""


def test_demo_prints_a_kubectl_line_that_works_and_again_after_a_restart(
    kt: KubetrayEnv, keyring_session: None, tmp_path: Path
) -> None:
    require(browser_available(), "needs Debian chromium and Python playwright")
    binaries = kubectl_binaries()
    require("1.33" in binaries, "kubectl 1.33 is not installed")
    log = tmp_path / "browser.jsonl"
    kt.env.update(KUBETRAY_BROWSER=BROWSE, KUBETRAY_TEST_BROWSER_LOG=str(log))

    def kubectl(command: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [binaries["1.33"], *command[1:]],
            env=kt.env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def logins() -> int:
        return len([e for e in browser_log(log) if e["event"] == "opened"])

    demo, command = start_demo(kt)
    try:
        done = kubectl(command)
        assert done.returncode == 0, done.stderr
        assert "kubetray-demo" in done.stdout.split()  # the table kubectl prints by default
        assert "as demo@kubetray.test" in done.stderr
        again = kubectl(command)
        assert again.returncode == 0 and again.stderr == ""
        assert logins() == 1
    finally:
        stop(demo)
    # A second demo: a new provider (new signing key) while the keyring still holds the first
    # one's tokens. Issue 30: "Unauthorized", with kubetray saying "ready".
    demo, command = start_demo(kt)
    try:
        status = subprocess.run(
            [sys.executable, "-m", "app", "status"],
            env=kt.env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert "kubetray-demo" in status.stdout and "needs login" in status.stdout, status.stdout
        done = kubectl(command)
        assert done.returncode == 0, done.stderr
        assert "Unauthorized" not in done.stderr and "kubetray-demo" in done.stdout.split()
        assert logins() == 2  # logged in again, once
    finally:
        stop(demo)


def exec_args(kubeconfig: str) -> list[str]:
    """The kubetray-exec arguments the demo wrote into its kubeconfig."""
    doc = yaml.safe_load(Path(kubeconfig).read_text())
    return list(doc["users"][0]["user"]["exec"]["args"])


def test_a_demo_restarts_in_place_and_its_login_goes_on(
    kt: KubetrayEnv, keyring_session: None, tmp_path: Path
) -> None:
    """`kubetray restart` of a running demo (fresh eyes: it killed the demo after 30 s): the
    same process serves at once, its provider and API server answer on the same ports with the
    same signing key and refresh tokens, so kubectl goes on without a login."""
    require(browser_available(), "needs Debian chromium and Python playwright")
    binaries = kubectl_binaries()
    require("1.33" in binaries, "kubectl 1.33 is not installed")
    log = tmp_path / "browser.jsonl"
    kt.env.update(KUBETRAY_BROWSER=BROWSE, KUBETRAY_TEST_BROWSER_LOG=str(log))

    def kubectl(command: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [binaries["1.33"], *command[1:]], env=kt.env, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip

    demo, command = start_demo(kt)
    out = ""
    try:
        done = kubectl(command)
        assert done.returncode == 0, done.stderr
        before = Path(command[2]).read_text()
        restarted = kt.kubetray("restart")
        assert restarted.returncode == 0, restarted.stderr
        status = kt.kubetray("status", "--json")  # at once: it waits in the socket's backlog
        assert status.returncode == 0, status.stderr
        agent: dict[str, Any] = {}
        for _ in range(100):  # the answer may still be the old process's
            agent = json.loads(kt.kubetray("status", "--json").stdout)["agent"] or {}
            if "restart_seconds" in agent:
                break
            time.sleep(0.1)
        assert agent.get("pid") == demo.pid and demo.poll() is None
        print(f"demo restarted in place, serving after {agent['restart_seconds']} s")
        assert Path(command[2]).read_text() == before  # same ports, same CA
        again = kubectl(command)
        assert again.returncode == 0, again.stderr
        assert "kubetray-demo" in again.stdout.split()
        # The refresh token the old process issued is honoured by the new one.
        refreshed = kt.run_helper(*exec_args(command[2]), "--force-refresh")
        assert refreshed.returncode == 0, refreshed.stderr
        assert [e["event"] for e in browser_log(log)].count("opened") == 1  # no new login
    finally:
        out = stop(demo)
    assert "kubetray demo restarted in place" in out, out


@contextlib.contextmanager
def xvfb() -> Iterator[str]:
    """A virtual X display (Debian's Xvfb, as a desktop session has one); its DISPLAY."""
    binary = shutil.which("Xvfb")
    require(binary is not None, "needs Xvfb (Debian xvfb)")
    assert binary is not None
    read, write = os.pipe()
    server = subprocess.Popen(
        [binary, "-displayfd", str(write), "-nolisten", "tcp", "-screen", "0", "1024x768x24"],
        pass_fds=(write,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write)
    try:
        with os.fdopen(read) as f:
            number = f.readline().strip()
        require(number.isdigit(), "Xvfb did not start")
        yield f":{number}"
    finally:
        server.terminate()
        server.wait(10)


def test_the_demo_identity_follows_this_demo_and_says_when_no_demo_runs(
    kt: KubetrayEnv, keyring_session: None, tmp_path: Path
) -> None:
    """A demo with no desktop (a password prompt) then one on a desktop: the login is the
    browser's (fresh eyes: it stayed the password grant and failed after 5 minutes). Once the
    demo is stopped, its login says so and how to start it, not "connection refused"."""
    require(browser_available(), "needs Debian chromium and Python playwright")
    log = tmp_path / "browser.jsonl"
    bare = {
        k: v
        for k, v in kt.env.items()
        if k not in ("DISPLAY", "WAYLAND_DISPLAY", "SSH_CONNECTION", "SSH_TTY", "SSH_CLIENT")
    }
    demo, command = start_demo(kt, bare)
    try:
        assert "--grant-type=password" in exec_args(command[2])
    finally:
        stop(demo)
    with xvfb() as display:
        desktop = {**bare, "DISPLAY": display}
        desktop.update(KUBETRAY_BROWSER=BROWSE, KUBETRAY_TEST_BROWSER_LOG=str(log))
        kt.env.update(desktop)
        demo, command = start_demo(kt)
        try:
            args = exec_args(command[2])
            assert "--grant-type=password" not in args
            assert "--listen-address=127.0.0.1:0" in args  # never kubelogin's 8000
            index = json.loads((kt.config / "identities.json").read_text())
            grants = [e["settings"].get("grant_type") for e in index["identities"].values()]
            assert grants == ["auto"], index
            login = kt.kubetray("login", "kubetray-demo")  # stdin: not a terminal
            assert login.returncode == 0, login.stderr
            assert [e["event"] for e in browser_log(log)].count("opened") == 1
        finally:
            stop(demo)
    login = kt.kubetray("login", "kubetray-demo", "--force")  # a login again, as if expired
    assert login.returncode != 0
    assert "the kubetray demo is not running" in login.stderr, login.stderr
    assert "kubetray demo" in login.stderr and "connection refused" not in login.stderr


def test_make_run_names_itself_when_an_agent_already_runs(kt: KubetrayEnv) -> None:
    """The refusal tells the person to run again what they typed."""
    with running_agent(kt):
        done = subprocess.run(
            [sys.executable, "-m", "app", "demo", "--headless"],
            env={**kt.env, "KUBETRAY_DEMO_VIA": "make run"},
            cwd=ROOT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode != 0
    assert "then run make run again" in done.stderr, done.stderr


def test_a_headless_demo_prompts_for_a_password_whatever_browser_the_app_saved(
    kt: KubetrayEnv,
) -> None:
    """README: with no desktop kubectl asks for a username and a password. The app's saved
    Settings → Browser (a desktop's choice) had the headless demo ask to open a URL instead."""
    bare = {
        k: v
        for k, v in kt.env.items()
        if k not in ("DISPLAY", "WAYLAND_DISPLAY", "SSH_CONNECTION", "KUBETRAY_BROWSER")
    }
    saved = subprocess.run(
        [
            sys.executable,
            "-c",
            "from app.settings import Settings; "
            "s = Settings.load(); s.browser_command = 'firefox'; s.save()",
        ],
        env=bare,
        cwd=ROOT,
        check=False,
        capture_output=True,
        text=True,
    )
    assert saved.returncode == 0, saved.stderr
    demo, command = start_demo(kt, bare)
    try:
        assert "--grant-type=password" in exec_args(command[2])
    finally:
        printed = stop(demo)
    assert "Traceback" not in printed
