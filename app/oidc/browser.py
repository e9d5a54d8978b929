"""Opening the login page: a command the user chose, or the desktop's default browser.

The opener never writes to kubectl's terminal: its output goes nowhere (the agent's own stdout
is its log, and a helper's stdout is reserved for the ExecCredential). A browser that cannot
start, or whose command exits non-zero within WATCH seconds (chromium run as root, xdg-open
with nothing to open), is reported through ``on_failure`` so the person gets the URL at once.
Over SSH with no display, no local browser is ever tried.
"""

import os
import shlex
import shutil
import subprocess
import sys
import threading
import webbrowser
from collections.abc import Callable

WATCH = 5.0
"""Seconds a browser command has to fail in; one still running by then counts as opened."""


def has_display() -> bool:
    """Whether a local browser window could show here."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def over_ssh() -> bool:
    """An SSH session with no display: a browser here would open where nobody looks."""
    return bool(os.environ.get("SSH_CONNECTION")) and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    )


def remote_grant(has_device_endpoint: bool) -> tuple[str, str] | None:
    """Over SSH: the grant to use instead of a browser here, and the sentence that says so."""
    if not over_ssh():
        return None
    if has_device_endpoint:
        return "device-code", "Over SSH: logging in with a device code (no browser opens here)."
    return (
        "authcode-keyboard",
        "Over SSH, and the provider has no device code login: open the URL below in any "
        "browser, then paste the code it shows (or the whole URL it ends on) here.",
    )


class Browser:
    """Opens URLs. ``command`` (with arguments; the URL goes last) overrides the desktop's."""

    def __init__(self, command: str | None = None) -> None:
        self.command = command or os.environ.get("KUBETRAY_BROWSER") or None

    def available(self) -> bool:
        """Whether a browser can be opened from here at all."""
        if over_ssh():
            return False
        return bool(self.command) or has_display()

    def _argv(self, url: str) -> list[str] | None:
        if self.command:
            return [*shlex.split(self.command), url]
        if sys.platform == "linux":
            opener = shutil.which("xdg-open")
            return [opener, url] if opener else None
        return None  # macOS and Windows: webbrowser knows the system's way

    def open(self, url: str, on_failure: Callable[[str], None] | None = None) -> bool:
        """Open ``url``; False when nothing could be started.

        A command that exits non-zero within WATCH seconds calls ``on_failure`` with why,
        from a watcher thread.
        """
        if not self.available():
            return False
        argv = self._argv(url)
        if argv is None:
            return webbrowser.open(url, new=1)
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            return False
        if on_failure is not None:
            name = os.path.basename(argv[0])
            threading.Thread(
                target=_watch, args=(proc, name, on_failure), name="browser", daemon=True
            ).start()
        return True


def _watch(proc: "subprocess.Popen[bytes]", name: str, on_failure: Callable[[str], None]) -> None:
    try:
        code = proc.wait(WATCH)
    except subprocess.TimeoutExpired:
        return  # still running: a browser window, presumably
    if code != 0:
        on_failure(f"{name} exited with code {code}")
