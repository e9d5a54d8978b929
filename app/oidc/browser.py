"""Opening the login page: a command the user chose, or the desktop's default browser.

The opener never writes to kubectl's terminal: its output goes nowhere (the agent's own stdout
is its log, and a helper's stdout is reserved for the ExecCredential).
"""

import os
import shlex
import subprocess
import sys
import webbrowser


class Browser:
    """Opens URLs. ``command`` (with arguments; the URL goes last) overrides the desktop's."""

    def __init__(self, command: str | None = None) -> None:
        self.command = command or os.environ.get("KUBETRAY_BROWSER") or None

    def available(self) -> bool:
        """Whether a browser can be opened from here at all."""
        if self.command:
            return True
        if sys.platform in ("darwin", "win32"):
            return True
        return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))

    def open(self, url: str) -> bool:
        """Open ``url``; False when nothing could be started."""
        if self.command:
            try:
                subprocess.Popen(
                    [*shlex.split(self.command), url],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            except OSError:
                return False
            return True
        if not self.available():
            return False
        return webbrowser.open(url, new=1)
