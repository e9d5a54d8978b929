"""Restart in place (app/restart.py, app/upgrade.py): an agent whose installation is replaced
restarts into it, the same process, while kubectl keeps calling, and nobody logs in again.

The "installation" is a build file named by KUBETRAY_BUILD_FILE (a development install has none
of its own); the packaged programs are tested the same way with real packages in
tests/packaging/test_upgrade.py.
"""

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.idp import run_idp
from tests.integration.test_oidc import expect, oidc_args
from tests.peers import KubetrayEnv

INTERACTIVE = (
    '{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1",'
    '"spec":{"interactive":true}}'
)


def installed(kt: KubetrayEnv, version: str, build: str) -> Path:
    """Put a build file in place (atomically, as a package manager would)."""
    path = kt.home.parent / "kubetray-build.json"
    kt.env["KUBETRAY_BUILD_FILE"] = str(path)
    part = path.with_suffix(".part")
    part.write_text(json.dumps({"version": version, "build": build}) + "\n")
    os.replace(part, path)
    return path


def agent_of(kt: KubetrayEnv) -> dict[str, Any]:
    done = kt.kubetray("status", "--json")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout)["agent"] or {})


def until(check: Any, limit: float = 30.0) -> Any:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    pytest.fail(f"not within {limit:g} s")


class Callers:
    """kubetray-exec called again and again, as busy kubectl users would, until stopped."""

    def __init__(self, kt: KubetrayEnv, *argsets: list[str]) -> None:
        self.results: list[tuple[int, str]] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._loop, args=(kt, args), daemon=True)
            for args in argsets
            for _ in range(2)
        ]
        for t in self._threads:
            t.start()

    def _loop(self, kt: KubetrayEnv, args: list[str]) -> None:
        while not self._stop.is_set():
            done = kt.run_helper(*args)
            self.results.append((done.returncode, done.stderr.strip()))

    def stop(self) -> list[tuple[int, str]]:
        self._stop.set()
        for t in self._threads:
            t.join(60)
        return [r for r in self.results if r[0] != 0]


@pytest.mark.slow
def test_an_upgrade_under_a_busy_agent_fails_no_call_and_logs_nobody_in_again(
    kt: KubetrayEnv, keyring_session: None, name: str
) -> None:
    build = installed(kt, "9.0.0", "one")
    kt.store_token(name, "static-token")
    with run_idp(password=True) as idp:
        oidc = oidc_args(idp, "--grant-type=password", "--username=carol", "--password=pw-carol")
        first = kt.run_helper(*oidc)  # starts the agent, logs in
        assert first.returncode == 0, first.stderr
        pid, before = kt.agent_pid(), agent_of(kt)
        assert (before["version"], before["build"]) == ("9.0.0", "one")
        callers = Callers(kt, ["--stored", name], oidc)
        time.sleep(1)
        installed(kt, "9.1.0", "two")  # "dpkg -i" of the next version
        after = until(lambda: (a := agent_of(kt))["version"] == "9.1.0" and a)
        time.sleep(1)
        failed = callers.stop()
        assert failed == [], failed
        assert len(callers.results) >= 20
        assert kt.agent_pid() == pid  # the same process, restarted in place
        assert after["build"] == "two" and after["restarted_from"]["version"] == "9.0.0"
        assert idp.counts()["password"] == 1  # the logins came back from the keyring
        seconds = after["restart_seconds"]
        print(f"restart: {seconds:.3f} s; {len(callers.results)} calls during it, none failed")
    assert build.exists()


def test_tokens_held_in_memory_cross_a_restart(kt: KubetrayEnv) -> None:
    """No keyring: the agent's memory goes across exec (an anonymous memory file)."""
    kt.env["KUBETRAY_AGENT_COMMAND"] += " --store memory"
    installed(kt, "9.0.0", "one")
    with run_idp(password=True) as idp:
        oidc = oidc_args(idp, "--grant-type=password", "--username=carol", "--password=pw-carol")
        assert kt.run_helper(*oidc).returncode == 0
        restarted = kt.kubetray("restart", "--wait")
        assert restarted.returncode == 0, restarted.stderr
        assert "restarts now" in restarted.stdout and "serves" in restarted.stdout
        again = kt.run_helper(*oidc)
        assert again.returncode == 0, again.stderr
        assert idp.counts()["password"] == 1  # not asked again
        assert "Logging in" not in again.stderr
    assert agent_of(kt)["store"] == "memory"


def test_a_restart_waits_for_the_login_in_flight(kt: KubetrayEnv) -> None:
    """A person is answering a login's prompts: the upgrade waits for them, then restarts."""
    import pexpect

    kt.env["KUBETRAY_AGENT_COMMAND"] += " --store memory"
    installed(kt, "9.0.0", "one")
    with run_idp(password=True) as idp:
        args = oidc_args(idp, "--grant-type=password")
        env = dict(kt.env, KUBERNETES_EXEC_INFO=INTERACTIVE)
        child = pexpect.spawn(str(kt.helper), args, env=env, encoding="utf-8", timeout=60)
        expect(child, "Username: ")
        started = agent_of(kt)
        installed(kt, "9.1.0", "two")
        time.sleep(2.5)  # the new build settles (app/upgrade.py), then the agent notices it
        waiting = until(lambda: (a := agent_of(kt)).get("restart") and a)
        assert "login" in str(waiting["restart"]["waits_for"]), waiting
        assert waiting["version"] == "9.0.0"
        child.sendline("bob")
        expect(child, "Password: ")
        child.sendline("pw-bob")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0, child.before
        after = until(lambda: (a := agent_of(kt))["version"] == "9.1.0" and a)
        assert after["pid"] == started["pid"]
        served = kt.run_helper(*args)  # not interactive: only what memory holds, handed over
        assert served.returncode == 0, served.stderr
        assert idp.counts()["password"] == 1


def test_a_package_s_restart_request_restarts_only_an_agent_on_another_build(
    kt: KubetrayEnv,
) -> None:
    """The package's scripts ask with ``restart --if-outdated`` after installing: an agent that
    noticed the new build first and restarted itself is told it is current, not restarted a
    second time (status keeps where it came from), and one still on the old build restarts."""
    kt.env["KUBETRAY_AGENT_COMMAND"] += " --store memory"
    installed(kt, "9.0.0", "one")
    assert kt.run_helper("--stored", "nothing-here").returncode == 1  # starts the agent
    pid = kt.agent_pid()
    installed(kt, "9.1.0", "two")  # dpkg -i; the agent notices by itself...
    time.sleep(2.5)
    kt.kubetray("status")
    first = until(lambda: (a := agent_of(kt))["version"] == "9.1.0" and a)
    assert first["restarted_from"]["version"] == "9.0.0"
    started = json.loads(kt.kubetray("status", "--json").stdout)["started"]
    asked = kt.kubetray("restart", "--if-outdated")  # ...before postinst asks
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout == (
        f"kubetray 9.1.0 (pid {pid}) already runs the kubetray installed now: not restarted\n"
    )
    time.sleep(1)
    still = json.loads(kt.kubetray("status", "--json").stdout)
    assert still["started"] == started  # no second restart
    assert still["agent"]["restarted_from"]["version"] == "9.0.0"

    installed(kt, "9.2.0", "three")  # postinst asks before the agent noticed: it restarts
    asked = kt.kubetray("restart", "--if-outdated", "--wait")
    assert asked.returncode == 0, asked.stderr
    assert f"kubetray 9.1.0 (pid {pid}) restarts now" in asked.stdout, asked.stdout
    after = until(lambda: (a := agent_of(kt))["version"] == "9.2.0" and a)
    assert after["restarted_from"]["version"] == "9.1.0" and after["pid"] == pid


def test_a_removed_installation_stops_the_agent_once_idle(kt: KubetrayEnv) -> None:
    build = installed(kt, "9.0.0", "one")
    kt.env["KUBETRAY_AGENT_COMMAND"] += " --store memory"
    done = kt.run_helper("--stored", "nothing-here")  # starts the agent (a clear refusal)
    pid = kt.agent_pid()
    assert done.returncode == 1 and pid is not None
    build.unlink()  # apt remove
    kt.kubetray("status")  # notices the build file is gone...
    time.sleep(5.5)  # ...and that it stays gone (install.sh swaps directories in two steps)
    kt.kubetray("status")
    until(lambda: not _alive(pid))
    assert not (kt.runtime / "agent.sock").exists()


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
