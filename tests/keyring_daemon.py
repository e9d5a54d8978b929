"""A real gnome-keyring of a test's own, on a D-Bus session of its own, that the test may kill
and start again locked (what a crashed and restarted keyring daemon looks like).

The bus has no service activation: a killed keyring stays gone until ``start()``, as on a
desktop where nothing restarts it. The shared keyring of scripts/with-keyring is never touched.
"""

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from tests.peers import require

PASSWORD = "kubetray-test"
BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:dir={dir}</listen>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""


def available() -> bool:
    return all(shutil.which(p) for p in ("dbus-daemon", "gnome-keyring-daemon"))


class Keyring:
    """The bus and the daemon; ``env`` names them for a process that should use this keyring."""

    def __init__(self, base: Path) -> None:
        self._base = base
        self.env: dict[str, str] = {
            "XDG_DATA_HOME": str(base / "data"),
            "XDG_RUNTIME_DIR": str(base / "run"),
        }
        (base / "data").mkdir(parents=True)
        (base / "run").mkdir(mode=0o700)
        (base / "bus.conf").write_text(BUS_CONFIG.format(dir=base / "run"))
        self._bus = subprocess.Popen(
            ["dbus-daemon", f"--config-file={base / 'bus.conf'}", "--nofork", "--print-address=1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, **self.env},
        )
        assert self._bus.stdout is not None
        self.env["DBUS_SESSION_BUS_ADDRESS"] = self._bus.stdout.readline().strip()
        self._daemon: subprocess.Popen[str] | None = None

    def start(self, locked: bool = False) -> None:
        """Start the keyring daemon: unlocked with the login password, or ``locked`` (as it
        comes back after a crash when nobody types the password)."""
        assert self._daemon is None
        args = ["gnome-keyring-daemon", "--foreground", "--components=secrets"]
        self._daemon = subprocess.Popen(
            args if locked else [*args, "--unlock"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, **self.env},
        )
        assert self._daemon.stdin is not None
        if not locked:
            self._daemon.stdin.write(PASSWORD)
        self._daemon.stdin.close()
        try:
            self._wait_for_service()
        except BaseException:
            self.kill()  # never left running behind a failed start
            raise

    def _wait_for_service(self) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            done = subprocess.run(
                [
                    "dbus-send",
                    "--session",
                    "--print-reply",
                    "--dest=org.freedesktop.DBus",
                    "/org/freedesktop/DBus",
                    "org.freedesktop.DBus.NameHasOwner",
                    "string:org.freedesktop.secrets",
                ],
                env={**os.environ, **self.env},
                capture_output=True,
                text=True,
                check=False,
            )
            if "boolean true" in done.stdout:
                return
            time.sleep(0.05)
        raise AssertionError("gnome-keyring-daemon did not take the Secret Service name")

    def kill(self) -> None:
        """SIGKILL the daemon (a crash)."""
        if self._daemon is not None:
            self._daemon.send_signal(signal.SIGKILL)
            self._daemon.wait()
            self._daemon = None

    def unlock(self) -> None:
        """The person unlocks it: here, the daemon starts again with the login password."""
        self.kill()
        self.start()

    def close(self) -> None:
        self.kill()
        self._bus.terminate()
        self._bus.wait()
        if self._bus.stdout is not None:
            self._bus.stdout.close()


@contextlib.contextmanager
def private_keyring() -> Iterator[Keyring]:
    """A running, unlocked keyring of this test's own."""
    require(available(), "needs dbus-daemon and gnome-keyring (make test installs them)")
    base = Path(tempfile.mkdtemp(prefix="kt-kr-", dir="/tmp"))
    keyring = Keyring(base)
    try:
        keyring.start()
        yield keyring
    finally:
        keyring.close()
        shutil.rmtree(base, ignore_errors=True)
