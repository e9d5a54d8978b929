"""`kubetray demo` as a newcomer runs it: the printed kubectl line works, with one login."""

import subprocess
import sys
import time
from pathlib import Path

from tests.idp import BROWSE, browser_available, browser_log
from tests.peers import ROOT, KubetrayEnv, kubectl_binaries, require


def start_demo(kt: KubetrayEnv) -> tuple["subprocess.Popen[str]", list[str]]:
    """`kubetray demo --headless` until it prints its kubectl line and serves as the agent."""
    demo = subprocess.Popen(
        [sys.executable, "-m", "app", "demo", "--headless"],
        env=kt.env,
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


def stop(demo: "subprocess.Popen[str]") -> None:
    demo.terminate()
    demo.communicate(timeout=20)


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
