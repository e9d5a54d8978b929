"""Living with the .deb: install one version, use it, install the next over it while it runs,
go back, remove it. As apt and every desktop updater do it, with kubectl busy all along.

Two packages of one bundle (packaging/build.py, built once for tests/packaging): 1.0.0 and
1.0.1, each with a build id of its own, which is all an installed kubetray compares. Needs root
(or password-less sudo), dpkg, kubectl, oidc-provider and the keyring.
"""

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.autostart import autostart_linux
from tests.apiserver import APIServer, id_tokens_of
from tests.idp import run_idp
from tests.integration.test_oidc import oidc_args
from tests.packaging.conftest import as_root, pack, restamp
from tests.peers import INSTALLED, KubetrayEnv, exec_kubeconfig, kubectl_binaries, require
from tests.peers import kubetray_env as make_env
from tests.pki import CA

KUBETRAY = "/usr/bin/kubetray"
OLD, NEW = "1.0.0", "1.0.1"


@pytest.fixture
def packages(bundle: Path, tmp_path: Path) -> dict[str, Path]:
    out = {}
    for version in (OLD, NEW):
        copy = restamp(bundle, tmp_path / version, version)
        deb, _ = pack(copy, tmp_path / f"dist-{version}", quick=True)
        out[version] = deb
    return out


@pytest.fixture
def kt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[KubetrayEnv]:
    """A user of the installed kubetray (kubetray-exec starts /opt/kubetray/kubetray agent)."""
    monkeypatch.setenv(INSTALLED, "/usr/bin")
    with make_env(tmp_path / "user") as env:
        env.env["XDG_CONFIG_HOME"] = str(env.home / ".config")  # where its autostart entry is
        yield env


def dpkg(*args: str) -> str:
    done = subprocess.run(
        [*as_root(), "dpkg", *args], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def cli(kt: KubetrayEnv, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KUBETRAY, *args], env=kt.env, capture_output=True, text=True, timeout=120, check=False
    )


def agent(kt: KubetrayEnv) -> dict[str, Any]:
    done = cli(kt, "status", "--json")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout)["agent"] or {})


def until(check: Any, limit: float = 60.0) -> Any:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            found = check()
        except AssertionError:
            found = None
        if found:
            return found
        time.sleep(0.1)
    pytest.fail(f"not within {limit:g} s")


def serving(kt: KubetrayEnv, version: str) -> dict[str, Any]:
    """The agent, once it says it is ``version``."""
    return dict(until(lambda: (a := agent(kt)).get("version") == version and a))


class Kubectl:
    """kubectl get ns, again and again, with each kubeconfig, until stopped."""

    def __init__(self, binary: str, configs: list[Path], kt: KubetrayEnv) -> None:
        self.calls = 0
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._loop, args=(binary, c, kt), daemon=True) for c in configs
        ]
        for t in self._threads:
            t.start()

    def _loop(self, binary: str, config: Path, kt: KubetrayEnv) -> None:
        while not self._stop.is_set():
            done = subprocess.run(
                [binary, "--kubeconfig", str(config), "get", "ns", "-o", "name"],
                env=kt.env,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            self.calls += 1
            if done.returncode != 0 or "namespace/default" not in done.stdout:
                self.failed.append(done.stderr.strip()[-500:])

    def stop(self) -> "Kubectl":
        self._stop.set()
        for t in self._threads:
            t.join(120)
        return self


def ours_running() -> list[int]:
    """Processes of the installed kubetray (their program may be replaced or deleted)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            continue
        if exe.startswith("/opt/kubetray/"):
            out.append(int(pid))
    return out


@pytest.mark.slow
@pytest.mark.kubectl
@pytest.mark.timeout(1800)
def test_upgrade_downgrade_and_removal_under_a_running_kubetray(
    packages: dict[str, Path], kt: KubetrayEnv, keyring_session: None, tmp_path: Path, name: str
) -> None:
    already = subprocess.run(["dpkg", "-s", "kubetray"], capture_output=True, check=False)
    require(already.returncode != 0, "kubetray is already installed here: not touching it")
    kubectl = kubectl_binaries().get("1.33")
    require(kubectl is not None, "kubectl 1.33 is not installed")
    assert kubectl is not None
    started = time.monotonic()
    figures: dict[str, Any] = {}
    installed = False
    try:
        dpkg("-i", str(packages[OLD]))
        installed = True
        with run_idp(password=True) as idp:
            check_oidc = id_tokens_of(idp.jwks(), idp.issuer, "kubectl")
            with APIServer(CA(), check_token=lambda t: t == "static-token" or check_oidc(t)) as api:
                token = kt.inputs() / "token"
                token.write_text("static-token")
                assert cli(kt, "store", name, "--token-file", str(token)).returncode == 0
                carol = oidc_args(idp, "--grant-type=password", "--username=carol")
                carol.append("--password=pw-carol")
                configs = [
                    exec_kubeconfig(kt, api, ["--stored", name], tmp_path / "static.yaml"),
                    exec_kubeconfig(kt, api, carol, tmp_path / "oidc.yaml"),
                ]
                for config in configs:  # starts the installed agent; carol logs in once
                    first = subprocess.run(
                        [kubectl, "--kubeconfig", str(config), "get", "ns"],
                        env=kt.env,
                        capture_output=True,
                        text=True,
                        timeout=120,
                    )
                    assert first.returncode == 0, first.stderr
                before = serving(kt, OLD)

                # The upgrade, with kubectl busy: nobody is refused, nobody logs in again.
                busy = Kubectl(kubectl, configs, kt)
                time.sleep(2)
                said = dpkg("-i", str(packages[NEW]))
                after = serving(kt, NEW)
                time.sleep(2)
                busy.stop()
                assert busy.failed == [], busy.failed[:5]
                # postinst says what became of every user's kubetray: restarted, or already
                # current (it noticed the new build first); never restarted twice.
                (line,) = [x for x in said.splitlines() if f"(pid {before['pid']})" in x]
                assert "restarts now" in line or "not restarted" in line, said
                figures["postinst"] = line.split("): ", 1)[-1]
                assert after["pid"] == before["pid"] and after["restarted_from"]["version"] == OLD
                assert idp.counts()["password"] == 1
                figures["upgrade"] = (after["restart_seconds"], busy.calls, len(busy.failed))

                # A new login with the new version, then status and stop work.
                dave = oidc_args(idp, "--grant-type=password", "--username=dave")
                new_login = kt.run_helper(*dave, "--password=pw-dave")
                assert new_login.returncode == 0, new_login.stderr
                assert idp.counts()["password"] == 2
                status = cli(kt, "status")
                assert f"kubetray {NEW}" in status.stdout and "restarted: from" in status.stdout

                # Going back: the older package restarts it into the older version.
                busy = Kubectl(kubectl, configs, kt)
                time.sleep(1)
                dpkg("-i", str(packages[OLD]))
                back = serving(kt, OLD)
                busy.stop()
                assert busy.failed == [], busy.failed[:5]
                assert idp.counts()["password"] == 2
                figures["downgrade"] = (back["restart_seconds"], busy.calls, len(busy.failed))
                stopped = cli(kt, "stop")
                assert stopped.returncode == 0 and "stopped kubetray" in stopped.stdout

                # The tray app, upgraded while it runs: it restarts and says so once.
                log = tmp_path / "app.err"
                with open(log, "w") as err:
                    app = subprocess.Popen(
                        [KUBETRAY],
                        env=dict(kt.env, QT_QPA_PLATFORM="offscreen"),
                        stdout=subprocess.DEVNULL,
                        stderr=err,
                    )
                try:
                    until(lambda: agent(kt).get("pid") == app.pid)
                    busy = Kubectl(kubectl, configs, kt)
                    time.sleep(1)
                    dpkg("-i", str(packages[NEW]))
                    updated = serving(kt, NEW)
                    busy.stop()
                    assert busy.failed == [], busy.failed[:5]
                    assert updated["pid"] == app.pid
                    # The app answers status before its windows and notice are up.
                    told = f"told the person: kubetray was updated to {NEW}"
                    until(lambda: told in (kt.state / "app.log").read_text(), 30)
                    figures["app"] = (updated["restart_seconds"], busy.calls, len(busy.failed))

                    # Removal: the running app stops, its start-at-login entry goes.
                    entry = kt.home / ".config" / "autostart" / "kubetray.desktop"
                    entry.parent.mkdir(parents=True)
                    old = autostart_linux.content(["/opt/kubetray/kubetray"]).decode()
                    entry.write_text(old.replace("TryExec=/opt/kubetray/kubetray\n", ""))
                    removed = dpkg("-r", "kubetray")
                    installed = False
                    assert f"stopped kubetray (pid {app.pid})" in removed, removed
                    assert "removed the start-at-login entry" in removed, removed
                    assert app.wait(timeout=30) == 0
                finally:
                    if app.poll() is None:
                        app.kill()
                assert not entry.exists()
                assert ours_running() == []
                assert not (kt.runtime / "agent.sock").exists()
    finally:
        if installed:
            subprocess.run([*as_root(), "dpkg", "-r", "kubetray"], capture_output=True, check=False)
    print(f"postinst said: {figures.pop('postinst', None)}")
    for what, (seconds, calls, failed) in figures.items():
        print(f"{what}: restart {seconds:.3f} s; {calls} kubectl calls during it, {failed} failed")
    print(f"the whole test: {time.monotonic() - started:.0f} s")
