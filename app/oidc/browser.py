"""Opening the login page: a command the user chose, or the desktop's default browser.

The opener never writes to kubectl's terminal: its output goes nowhere (the agent's own stdout
is its log, and a helper's stdout is reserved for the ExecCredential). A browser that cannot
start, or whose command exits non-zero within WATCH seconds (chromium run as root, xdg-open
with nothing to open), is reported through ``on_failure`` so the person gets the URL at once;
one that fails within SETTLE seconds is known before open() returns, so the login says the
URL once, with why the browser failed. Over SSH with no display, no local browser is ever tried.
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
SETTLE = 0.5
"""Seconds open() waits for a command that fails at once (``false``, chromium run as root, a
missing xdg-open handler): its failure is then known before the person is told where to log
in, so the login URL is said once. A browser that keeps running costs this much, once."""


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

    def open(
        self, url: str, on_failure: Callable[[str], None] | None = None, settle: float = SETTLE
    ) -> bool:
        """Open ``url``; False when it did not open, and ``on_failure`` hears why at once (it
        could not be started, or it exited non-zero within ``settle`` seconds).

        A command still running after ``settle`` counts as opened; if it exits non-zero
        within WATCH seconds, ``on_failure`` hears it later, from a watcher thread. The GUI
        thread passes 0: it never waits.
        """
        if not self.available():
            return False
        argv = self._argv(url)
        if argv is None:
            if webbrowser.open(url, new=1):
                return True
            _tell(on_failure, "the system's browser could not be started")
            return False
        name = os.path.basename(argv[0])
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as e:
            _tell(on_failure, f"{name} could not be started: {e.strerror or e}")
            return False
        code: int | None
        try:
            code = proc.wait(settle) if settle > 0 else proc.poll()
        except subprocess.TimeoutExpired:
            code = None
        if code is None:  # still running: a browser window, or a slow failure (watched)
            threading.Thread(
                target=_watch,
                args=(proc, name, on_failure or _ignore, WATCH - settle),
                name="browser",
                daemon=True,
            ).start()
            return True
        if code != 0:
            _tell(on_failure, f"{name} exited with code {code}")
            return False
        return True  # handed the URL to the browser and left (xdg-open, open, start)


def _ignore(_why: str) -> None:
    pass


def _tell(on_failure: Callable[[str], None] | None, why: str) -> None:
    if on_failure is not None:
        on_failure(why)


def _watch(
    proc: "subprocess.Popen[bytes]", name: str, on_failure: Callable[[str], None], left: float
) -> None:
    try:
        code = proc.wait(left)
    except subprocess.TimeoutExpired:
        return  # still running: a browser window, presumably
    if code != 0:
        on_failure(f"{name} exited with code {code}")
