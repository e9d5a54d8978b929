"""The Linux package for real: build the bundle and the .deb, dpkg -i it, use it, dpkg -r it.

The installed kubetray-exec goes through the exec-plugin conformance cases and real kubectl
(the same tests as the source tree, pointed at /usr/bin by KUBETRAY_TEST_INSTALLED); the
installed kubetray runs as the agent. Needs root (or password-less sudo) and dpkg.
"""

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.peers import ROOT, KubetrayEnv, require, run_installed_suites

FILES = [
    "/opt/kubetray/kubetray",
    "/opt/kubetray/kubetray-exec",
    "/usr/bin/kubetray",
    "/usr/bin/kubetray-exec",
    "/usr/share/applications/kubetray.desktop",
    "/usr/share/icons/hicolor/scalable/apps/kubetray.svg",
]


def _root() -> list[str]:
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], check=False).returncode == 0:
        return ["sudo", "-n"]
    require(False, "installing a .deb needs root or password-less sudo")
    return []


@pytest.fixture(scope="module")
def deb() -> Path:
    require(shutil.which("dpkg-deb") is not None, "needs dpkg-deb (Debian or Ubuntu)")
    done = subprocess.run(
        [str(ROOT / "packaging" / "linux" / "build.sh"), sys.executable],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    print(done.stdout.strip().splitlines()[-3:])  # the glibc and the package sizes
    debs = sorted((ROOT / "build" / "dist").glob("kubetray_*.deb"))
    assert debs, "no .deb built"
    return debs[-1]


@pytest.fixture
def installed(deb: Path) -> Iterator[Path]:
    sudo = _root()
    already = subprocess.run(["dpkg", "-s", "kubetray"], capture_output=True, check=False)
    require(already.returncode != 0, "kubetray is already installed here: not touching it")
    done = subprocess.run([*sudo, "dpkg", "-i", str(deb)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    try:
        yield Path("/usr/bin")
    finally:
        removed = subprocess.run([*sudo, "dpkg", "-r", "kubetray"], capture_output=True, text=True)
        assert removed.returncode == 0, removed.stderr
        left = [f for f in FILES if os.path.lexists(f)]
        assert left == [] and not os.path.exists("/opt/kubetray"), f"left behind: {left}"
        status = subprocess.run(["dpkg", "-s", "kubetray"], capture_output=True, check=False)
        assert status.returncode != 0  # not even config-files: nothing of ours remains


@pytest.mark.slow
@pytest.mark.kubectl
@pytest.mark.timeout(
    1800
)  # the build alone takes minutes on a busy machine (the fixture allows 1800 s)
def test_the_deb_installs_serves_kubectl_and_removes_cleanly(
    installed: Path, kt: KubetrayEnv, keyring_session: None
) -> None:
    for f in FILES:
        assert os.path.lexists(f), f"{f} is not installed"
    assert os.readlink("/usr/bin/kubetray-exec") == "/opt/kubetray/kubetray-exec"
    version = subprocess.run(
        ["/usr/bin/kubetray-exec", "--version"], capture_output=True, text=True, check=True
    )
    assert version.stdout.startswith("kubetray-exec ")

    # The exec-plugin checklist and real kubectl, with the installed helper and agent.
    run_installed_suites(installed, "installed helper", timeout=900)

    # The installed kubetray, started as the headless agent, answers `kubetray status`.
    with _serving(["/usr/bin/kubetray", "agent"], kt.env) as maps:
        # Qt is the desktop app's: the headless agent never loads it (nor its ICU data).
        assert "libQt6Core" not in maps()

    # The installed tray app finds Qt's plugins (PyInstaller's Qt hook, run when Qt is needed).
    with _serving(["/usr/bin/kubetray"], {**kt.env, "QT_QPA_PLATFORM": "offscreen"}) as maps:
        plugin = "/opt/kubetray/_internal/PySide6/Qt/plugins/platforms/libqoffscreen.so"
        assert plugin in maps()


@contextlib.contextmanager
def _serving(command: list[str], env: dict[str, str]) -> Iterator[Callable[[], str]]:
    """Run an installed kubetray until `kubetray status` names its pid; yield a reader of its
    memory maps; then SIGTERM it, which must stop it cleanly (exit 0)."""
    proc = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            status = subprocess.run(
                ["/usr/bin/kubetray", "status"], env=env, capture_output=True, text=True
            )
            if f"pid {proc.pid}" in status.stdout:
                break
            assert proc.poll() is None, f"the installed {shlex.join(command)} exited early"
            time.sleep(0.2)
        assert f"pid {proc.pid}" in status.stdout, status.stdout + status.stderr
        yield lambda: Path(f"/proc/{proc.pid}/maps").read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err  # a clean stop on SIGTERM
