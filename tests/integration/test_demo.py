"""`kubetray demo` as a newcomer runs it: the printed kubectl line works, with one login."""

import subprocess
import sys
import time
from pathlib import Path

from tests.idp import BROWSE, browser_available, browser_log
from tests.peers import ROOT, KubetrayEnv, kubectl_binaries, require


def test_demo_prints_a_kubectl_line_that_works(
    kt: KubetrayEnv, keyring_session: None, tmp_path: Path
) -> None:
    require(browser_available(), "needs Debian chromium and Python playwright")
    binaries = kubectl_binaries()
    require("1.33" in binaries, "kubectl 1.33 is not installed")
    log = tmp_path / "browser.jsonl"
    kt.env.update(KUBETRAY_BROWSER=BROWSE, KUBETRAY_TEST_BROWSER_LOG=str(log))
    demo = subprocess.Popen(
        [sys.executable, "-m", "app", "demo", "--headless"],
        env=kt.env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
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
        done = subprocess.run(
            [binaries["1.33"], *command[1:]],
            env=kt.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert "kubetray-demo" in done.stdout.split()  # the table kubectl prints by default
        assert "as demo@kubetray.test" in done.stderr
        again = subprocess.run(
            [binaries["1.33"], *command[1:]], env=kt.env, capture_output=True, text=True, timeout=60
        )
        assert again.returncode == 0 and again.stderr == ""
        assert len([e for e in browser_log(log) if e["event"] == "opened"]) == 1
    finally:
        demo.terminate()
        demo.communicate(timeout=20)
