"""Windows and macOS, for what can run here: the executables packaging/kubetray.spec builds per
platform (run with PyInstaller's names recorded, not built), and the tray icon per platform."""

import zipfile
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "packaging" / "kubetray.spec"


class _Analysis:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.pure: list[Any] = []
        self.scripts: list[Any] = []
        self.binaries: list[Any] = []
        self.datas: list[Any] = []


def executables(platform: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """name → EXE keyword arguments, as the spec asks PyInstaller for them on ``platform``."""
    import sys

    monkeypatch.setattr(sys, "platform", platform)
    build = tmp_path / "kubetray-build.json"  # what build.py writes first (a fresh clone has none)
    build.write_text('{"version": "0.0.0", "build": "test"}')
    monkeypatch.setenv("KUBETRAY_BUILD_FILE", str(build))
    with zipfile.ZipFile(tmp_path / "base_library.zip", "w"):
        pass
    exes: dict[str, Any] = {}

    def exe(*_args: Any, **kwargs: Any) -> str:
        exes[kwargs["name"]] = kwargs
        return str(kwargs["name"])

    collected: list[Any] = []
    spec_globals = {
        "SPECPATH": str(SPEC.parent),
        "workpath": str(tmp_path),
        "Analysis": _Analysis,
        "PYZ": lambda *a, **k: None,
        "EXE": exe,
        "COLLECT": lambda *a, **k: collected.extend(a),
        "BUNDLE": lambda *a, **k: None,
        "__file__": str(SPEC),
    }
    exec(compile(SPEC.read_text(), str(SPEC), "exec"), spec_globals)  # our own spec
    assert all(name in collected for name in exes)  # every program is in the bundle
    return exes


def test_windows_gets_a_console_cli_and_a_windowed_tray(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exes = executables("win32", tmp_path, monkeypatch)
    assert exes["kubetray"]["console"] is True  # `kubetray status` prints in a terminal
    assert exes["kubetrayw"]["console"] is False  # the tray: no console window
    iss = (ROOT / "packaging" / "windows" / "kubetray.iss").read_text()
    assert 'Filename: "{app}\\kubetrayw.exe"; Description: "Start kubetray now"' in iss


@pytest.mark.parametrize("platform", ["linux", "darwin"])
def test_one_console_program_elsewhere(
    platform: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exes = executables(platform, tmp_path, monkeypatch)
    assert set(exes) == {"kubetray"} and exes["kubetray"]["console"] is True


def test_start_at_login_runs_the_windowed_program_on_windows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from app import installation

    for name in ("kubetray.exe", "kubetrayw.exe"):
        (tmp_path / name).write_text("")
        (tmp_path / name).chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "kubetray.exe"))
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "platform", "win32")
    assert installation.app_command() == [str(tmp_path / "kubetrayw.exe")]
    monkeypatch.setattr(sys, "platform", "linux")
    assert installation.app_command() == [str(tmp_path / "kubetray.exe")]


def test_the_tray_icon_per_platform(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.ui import icons

    mac = icons.icon_files("login", platform="darwin")
    assert [p.name for p in mac] == [
        "kubetray-login-template.png",
        "kubetray-login-template@2x.png",
    ]
    linux = icons.icon_files("login", platform="linux")
    assert linux[0].name == "kubetray-login-22.png"
    windows = icons.icon_files("error", platform="win32")
    assert windows[-1].name == "kubetray-error-64.png"
    assert all(p.is_file() for p in mac + linux + windows)
    assert all(icons.symbolic_file(state).is_file() for state in icons.STATES)
    import sys

    monkeypatch.setattr(sys, "platform", "darwin")  # the default comes from sys.platform
    assert icons.icon_files("ok") == icons.icon_files("ok", platform="darwin")
