"""Starting and ending kubetray so nobody is stranded: stop, take over, quit, demo, no display."""

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.idp import BROWSE, IdP, browser_available, run_idp
from tests.integration.test_headless import (
    URL,
    headless,  # noqa: F401 - a fixture
    kubectl_133,
    person_opens,
    read_until,
    start_demo,
    stop,
)
from tests.integration.test_oidc import kubeconfig, oidc_args
from tests.peers import ROOT, V1, KubetrayEnv, StartAgent, require


def running(kt: KubetrayEnv) -> bool:
    return (kt.runtime / "agent.sock").exists()


def test_stop_ends_the_agent_cleanly(kt: KubetrayEnv, start_agent: StartAgent) -> None:
    agent = start_agent(kt)
    done = kt.kubetray("stop")
    assert done.returncode == 0 and done.stdout == f"stopped kubetray (pid {agent.pid})\n"
    assert agent.process.wait(timeout=10) == 0
    assert not running(kt)
    again = kt.kubetray("stop")
    assert again.returncode == 0 and again.stdout == "kubetray is not running\n"


def test_no_display_is_one_line_pointing_to_the_agent(kt: KubetrayEnv) -> None:
    env = {
        k: v
        for k, v in kt.env.items()
        if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")
    }
    done = subprocess.run(
        [sys.executable, "-m", "app"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and '"kubetray agent"' in done.stderr, done.stderr
    assert not running(kt)
    # With the headless agent already running, it says so instead of asking to start one.
    kt.store_token("x", "t")
    assert kt.run_helper("--stored", "x").returncode == 0  # starts the agent
    again = subprocess.run(
        [sys.executable, "-m", "app"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert again.returncode == 1 and again.stderr.count("\n") == 1, again.stderr
    assert "the headless kubetray agent runs here (kubetray status)" in again.stderr


def test_a_second_demo_leaves_the_first_working(
    headless: KubetrayEnv,  # noqa: F811
    start_agent: StartAgent,
) -> None:
    kt = headless
    kubeconfig_path = kt.config / "demo" / "kubeconfig"
    agent = start_agent(kt)
    refused = kt.kubetray("demo")
    assert refused.returncode == 1
    assert f"already serves this user (pid {agent.pid})" in refused.stderr
    assert "stop" in refused.stderr and not kubeconfig_path.exists()  # nothing written
    agent.stop()

    first, command = start_demo(kt)
    try:
        written = kubeconfig_path.read_bytes()
        second = kt.kubetray("demo")
        assert second.returncode == 0, second.stderr
        assert f"kubetray demo is already running (pid {first.pid})" in second.stdout
        assert " ".join(command) in second.stdout
        assert kubeconfig_path.read_bytes() == written
        assert first.poll() is None and kt.agent_pid() == first.pid
        status = json.loads(kt.kubetray("status", "--json").stdout)
        assert status["agent"]["pid"] == first.pid
    finally:
        stop(first)


@pytest.fixture
def idp() -> Iterator[IdP]:
    with run_idp() as provider:
        yield provider


def start_app(kt: KubetrayEnv) -> "subprocess.Popen[str]":
    return subprocess.Popen(
        [sys.executable, "-m", "app"],
        env=dict(kt.env, QT_QPA_PLATFORM="offscreen"),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(kt: KubetrayEnv, proc: "subprocess.Popen[str]", limit: float = 30) -> None:
    deadline = time.monotonic() + limit
    while not (kt.agent_pid() == proc.pid and running(kt)):
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "it did not start serving"
        time.sleep(0.1)


def test_the_app_takes_over_from_the_agent_without_losing_the_login(
    kt: KubetrayEnv, start_agent: StartAgent, idp: IdP, keyring_session: None, tmp_path: Path
) -> None:
    require(browser_available(), "needs Debian chromium and Python playwright")
    from tests.apiserver import APIServer
    from tests.integration.test_oidc import checker
    from tests.pki import CA

    kt.env.update(KUBETRAY_BROWSER=BROWSE, KUBETRAY_TEST_BROWSER_MODE="ignore")
    agent = start_agent(kt)
    app = None
    with APIServer(CA(), check_token=checker(idp)) as api:
        config = kubeconfig(kt, api, oidc_args(idp), tmp_path / "kubeconfig")
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
            seen, _ = read_until(kubectl.stderr, "If it did not open, visit:", 30)
            url = URL.findall(seen.splitlines()[-1])[0]
            app = start_app(kt)
            assert app.stderr is not None
            said, _ = read_until(app.stderr, "taking over from the headless agent", 30)
            assert f"(pid {agent.pid})" in said
            time.sleep(1)
            assert agent.process.poll() is None and kt.agent_pid() == agent.pid  # the login goes on
            person_opens(url, kt.env, tmp_path / "person.jsonl")
            out, err = kubectl.communicate(timeout=60)
            assert kubectl.returncode == 0, seen + err
            assert "namespace/kubetray-proof" in out
            assert agent.process.wait(timeout=20) == 0
            wait_for(kt, app)
            status = json.loads(kt.kubetray("status", "--json").stdout)
            assert status["agent"]["pid"] == app.pid
            assert [i["name"] for i in status["identities"] if i["kind"] == "oidc"] == ["u"]
            said = kt.kubetray("status").stdout  # which program serves, in words
            assert re.search(rf"^agent: running \(the (tray app|app window), pid {app.pid}", said)
            again = subprocess.run(
                [kubectl_133(), "--kubeconfig", str(config), "get", "ns", "-o", "name"],
                env=kt.env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert again.returncode == 0 and again.stderr == ""  # no second login
        finally:
            stop(kubectl)
            if app is not None:
                stop(app)


def test_quitting_during_a_login_fails_its_callers_and_leaves_no_agent(
    kt: KubetrayEnv, idp: IdP, keyring_session: None, tmp_path: Path
) -> None:
    require(browser_available(), "needs Debian chromium and Python playwright")
    kt.env.update(KUBETRAY_BROWSER=BROWSE, KUBETRAY_TEST_BROWSER_MODE="ignore")
    app = start_app(kt)
    helper = None
    try:
        wait_for(kt, app)
        helper = subprocess.Popen(
            [str(kt.helper), *oidc_args(idp)],
            env=dict(kt.env, KUBERNETES_EXEC_INFO=V1),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert helper.stderr is not None
        read_until(helper.stderr, "If it did not open, visit:", 30)
        assert kt.kubetray("stop").returncode == 0
        out, err = helper.communicate(timeout=20)
        name = "kubectl@" + idp.issuer.removeprefix("http://")
        assert helper.returncode == 1 and out == ""
        assert err.strip() == f"kubetray was quit while waiting for the login to {name}"
        assert app.wait(timeout=20) == 0
        assert not running(kt)
    finally:
        if helper is not None:  # a failed assertion must not leave it to a later test's GC
            stop(helper)
        stop(app)
    again = start_app(kt)  # nothing blocks the next start
    try:
        wait_for(kt, again)
    finally:
        stop(again)


def test_the_app_says_what_to_do_when_taking_over_would_lose_memory_logins(
    kt: KubetrayEnv, start_agent: StartAgent
) -> None:
    """A memory-store agent holding a login is not taken over silently."""
    from app.demo.provider import CLIENT_ID, DemoProvider

    agent = start_agent(kt, "--store", "memory")
    provider = DemoProvider().start()
    try:
        login = kt.kubetray(
            "login",
            "--",
            f"--oidc-issuer-url={provider.issuer}",
            f"--oidc-client-id={CLIENT_ID}",
            "--grant-type=password",
            "--username=someone",
            "--password=anything",  # the demo provider takes any
        )
        assert login.returncode == 0, login.stderr
        assert "tokens are kept in memory until the agent stops (store: memory)" in login.stderr
        app = start_app(kt)
        _, err = app.communicate(timeout=60)
        assert app.returncode == 1
        assert re.search(r"holds the logins to \S+ in memory only", err), err
        assert "kubetray stop" in err
        assert agent.process.poll() is None and running(kt)  # left serving
    finally:
        provider.stop()
