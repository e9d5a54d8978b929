"""A real X display for tests that need a real platform plugin (Qt's StatusNotifierItem and
its XEmbed tray exist only there, not offscreen): Xvfb on a display number it picks itself,
and the real app (`app.ui.app.run`, Qt's xcb plugin) in its own process, started by
tests/ui/tray_app.py with identities already known."""

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.peers import ROOT, KubetrayEnv, require


def require_desktop(*programs: str) -> None:
    """Skip (or fail, in CI) unless each of ``programs`` is installed (make test installs
    them: scripts/install-system-deps)."""
    missing = [p for p in programs if shutil.which(p) is None]
    require(not missing, f"not installed: {', '.join(missing)} (scripts/install-system-deps)")


@contextmanager
def xvfb(size: str = "1280x720x24") -> Iterator[str]:
    """An Xvfb server until the block ends; yields its DISPLAY."""
    read, write = os.pipe()
    proc = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write), "-screen", "0", size, "-nolisten", "tcp"],
        pass_fds=(write,),
        stderr=subprocess.DEVNULL,
    )
    os.close(write)
    try:
        with os.fdopen(read) as pipe:
            number = pipe.readline().strip()
        assert number, "Xvfb did not say which display it took"
        yield f":{number}"
    finally:
        proc.terminate()
        proc.wait(5)


class RunningApp:
    """The app in its own process: its pid and everything it wrote to stderr."""

    def __init__(self, proc: "subprocess.Popen[str]", log: Path) -> None:
        self.proc = proc
        self.log = log

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def visible_windows(self, display: str) -> list[str]:
        """The titles of the app's windows that are mapped (xdotool, as a person sees them)."""
        env = dict(os.environ, DISPLAY=display)
        found = subprocess.run(
            ["xdotool", "search", "--onlyvisible", "--pid", str(self.proc.pid), "--name", "."],
            env=env,
            capture_output=True,
            text=True,
        )
        titles = []
        for window in found.stdout.split():
            name = subprocess.run(
                ["xdotool", "getwindowname", window], env=env, capture_output=True, text=True
            )
            titles.append(name.stdout.strip())
        return titles


@contextmanager
def running_app(
    kt: KubetrayEnv, display: str, identities: list[str], *extra: str, **env: str
) -> Iterator[RunningApp]:
    """`tests/ui/tray_app.py` on ``display``: the app with ``identities`` known (each
    ``NAME=ISSUER`` for a device-code identity), until the block ends (SIGTERM)."""
    log = kt.state.parent / "app-stderr.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    environment = dict(kt.env, DISPLAY=display, QT_QPA_PLATFORM="xcb", **env)
    environment.pop("WAYLAND_DISPLAY", None)
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "ui" / "tray_app.py"), *extra, *identities],
            env=environment,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    app = RunningApp(proc, log)
    try:
        deadline = time.monotonic() + 30
        while "kubetray app listening on" not in app.stderr():
            assert proc.poll() is None, app.stderr()[-3000:]
            assert time.monotonic() < deadline, app.stderr()[-3000:]
            time.sleep(0.05)
        yield app
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@contextmanager
def tray_icon(env: dict[str, str]) -> Iterator[Callable[[str], None]]:
    """`tests/ui/tray_icon.py` (the app's tray icon alone) with ``env``, until the block ends;
    yields ``show(state)``, which returns once the icon shows ``state`` ("none" at first)."""
    icon = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "ui" / "tray_icon.py")],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    )
    assert icon.stdin is not None and icon.stdout is not None
    stdin, stdout = icon.stdin, icon.stdout

    def show(state: str) -> None:
        if state != "none":
            stdin.write(state + "\n")
            stdin.flush()
        while (line := stdout.readline()) and line.strip() != f"shown {state}":
            pass  # Qt's own lines
        assert line, f"the icon's program ended before showing {state}"

    try:
        yield show
    finally:
        stdin.close()
        icon.wait(10)
        stdout.close()


_GRAB = """
import sys
from PySide6.QtGui import QGuiApplication
app = QGuiApplication(sys.argv)
app.primaryScreen().grabWindow(int(sys.argv[1])).save(sys.argv[2])
"""


def grab(env: dict[str, str], path: Path, window: str = "0") -> Any:
    """The X server's pixels of ``window`` (0: the whole screen) on ``env``'s DISPLAY, saved as
    ``path`` by a program of its own (Qt's xcb plugin), and read back as a QImage."""
    from PySide6.QtGui import QImage

    grabbed = subprocess.run(
        [sys.executable, "-c", _GRAB, window, str(path)],
        env=dict(env, QT_QPA_PLATFORM="xcb"),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert grabbed.returncode == 0, grabbed.stderr
    return QImage(str(path))
