"""The Linux package for real: build the bundle and the .deb, dpkg -i it, use it, dpkg -r it.

The installed kubetray-exec goes through the exec-plugin conformance cases and real kubectl
(the same tests as the source tree, pointed at /usr/bin by KUBETRAY_TEST_INSTALLED); the
installed kubetray runs as the agent. Needs root (or password-less sudo) and dpkg.
"""

import contextlib
import json
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.packaging.conftest import as_root, pack
from tests.peers import KubetrayEnv, require, run_installed_suites

FILES = [
    "/opt/kubetray/kubetray",
    "/opt/kubetray/kubetray-exec",
    "/usr/bin/kubetray",
    "/usr/bin/kubetray-exec",
    "/usr/share/applications/kubetray.desktop",
    "/usr/share/icons/hicolor/scalable/apps/kubetray.svg",
]


@pytest.fixture(scope="module")
def deb(bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    deb, _ = pack(bundle, tmp_path_factory.mktemp("dist"))
    return deb


@pytest.fixture
def installed(deb: Path) -> Iterator[Path]:
    sudo = as_root()
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
    # Both programs say the version the package carries, git's (and the build).
    built = json.loads(Path("/opt/kubetray/_internal/kubetray-build.json").read_text())
    assert version.stdout.split()[1] == built["version"] and built["build"] in version.stdout
    app = subprocess.run(["/usr/bin/kubetray", "--version"], capture_output=True, text=True)
    assert app.stdout.split()[1] == built["version"]

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
        deadline = time.monotonic() + 60  # a Qt bundle's start, on a loaded machine
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
