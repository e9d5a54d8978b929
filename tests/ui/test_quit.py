"""Quit after a long session exits cleanly, every time (issue 24: "Fatal Python error:
none_dealloc" once in nine). The real app in its own process (tests/ui/long_session.py: logins
through a provider, a password dialog answered and one cancelled, a login cancelled, Diagnostics
and the main window open), then SIGTERM; ten runs, five at a time."""

import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.idp import run_idp
from tests.peers import ROOT, kubetray_env
from tests.ui.test_tray import OFFSCREEN_WARNINGS

RUNS = 10
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|WARNING) [\w.]+: ")
OFFSCREEN = {*OFFSCREEN_WARNINGS, "This plugin does not support raise()"}
"""What the offscreen plugin says when a window is shown or raised (no window manager)."""


def session(issuer: str, base: Path) -> subprocess.CompletedProcess[str]:
    with kubetray_env(base) as kt:
        env = dict(kt.env, QT_QPA_PLATFORM="offscreen")
        env.pop("DBUS_SESSION_BUS_ADDRESS", None)  # Qt's own messages: no desktop service here
        return subprocess.run(
            [
                sys.executable,
                str(ROOT / "tests" / "ui" / "long_session.py"),
                issuer,
                str(kt.helper),
            ],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,  # five apps start at once, on two CPUs in CI
        )


def test_quit_after_a_long_session_exits_cleanly_every_time(tmp_path: Path) -> None:
    with run_idp(password=True) as idp, ThreadPoolExecutor(5) as pool:
        runs = list(pool.map(lambda i: session(idp.issuer, tmp_path / str(i)), range(RUNS)))
    for done in runs:
        odd = [
            line
            for line in done.stderr.splitlines()
            if line and line not in OFFSCREEN and not LOG_LINE.match(line)
        ]
        assert (done.returncode, odd) == (0, []), done.stderr[-3000:]
        assert "Logged in to bob@" in done.stderr  # the answered dialog: the session happened
        assert "Fatal Python error" not in done.stderr and "Traceback" not in done.stderr
    # The desktop starts the app with nobody reading its stderr: it keeps a log of its own.
    for i in range(RUNS):
        log = tmp_path / str(i) / "state" / "app.log"
        assert log.stat().st_mode & 0o777 == 0o600
        text = log.read_text()
        assert "kubetray app listening on" in text and "Logged in to bob@" in text
        assert "pw-bob" not in text and "pw-alice" not in text  # never a secret
