"""Where this installation's programs are (for kubeconfig entries and autostart)."""

import os
import shutil
import sys


def _beside(name: str) -> str | None:
    """``name`` next to this program, or next to its interpreter (a virtualenv's bin/)."""
    places = [os.path.dirname(os.path.abspath(sys.executable))]
    if not getattr(sys, "frozen", False):
        places.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))
    for here in places:
        for candidate in (name, name + ".exe"):
            path = os.path.join(here, candidate)
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return path
    return None


def helper_path() -> str:
    """kubetray-exec by absolute path: GUI clients (Lens, IDEs) do not see the shell's PATH."""
    found = _beside("kubetray-exec") or shutil.which("kubetray-exec")
    return os.path.abspath(found) if found else "kubetray-exec"


def app_command() -> list[str]:
    """How to start the tray app (for start-at-login): on Windows the windowed kubetrayw.exe,
    so no console window opens with it."""
    windowed = _beside("kubetrayw") if sys.platform == "win32" else None
    found = windowed or _beside("kubetray") or shutil.which("kubetray")
    return [os.path.abspath(found)] if found else [sys.executable, "-m", "app"]


def login_command() -> list[str]:
    """What start-at-login runs: the app, told that the session started it (it then waits for
    the panel's tray)."""
    return [*app_command(), "app", "--at-login"]
