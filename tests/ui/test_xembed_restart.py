"""A restart of the tray app on an XEmbed tray (trayer): the real app (Qt's xcb plugin on
Xvfb, in its own process) with its icon embedded in trayer, restarted by `kubetray restart`.

Qt's XEmbed icon is a visible top-level widget of the app (QSystemTrayIconSys): a restart that
waited for every visible widget waited for ever. It waits for the windows a person sees, and
only for those."""

import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.peers import KubetrayEnv
from tests.ui.desktop import require_desktop, running_app, xvfb
from tests.ui.test_panel import until

pytestmark = pytest.mark.skipif(
    not os.environ.get("DBUS_SESSION_BUS_ADDRESS"), reason="no D-Bus session: run with-keyring"
)


@pytest.fixture
def trayer() -> Iterator[str]:
    """Xvfb with trayer, a real XEmbed tray (no StatusNotifierWatcher on the bus)."""
    require_desktop("Xvfb", "xdotool", "trayer")

    with xvfb() as display:
        tray = subprocess.Popen(
            ["trayer", "--edge", "top", "--align", "right", "--widthtype", "request"],
            env=dict(os.environ, DISPLAY=display),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            yield display
        finally:
            tray.terminate()
            tray.wait(5)


def agent(kt: KubetrayEnv) -> dict[str, Any]:
    status = kt.kubetray_json("status")
    return {**(status.get("agent") or {}), "started": status["started"]}


def test_the_tray_app_restarts_on_an_xembed_tray_and_waits_only_for_a_person_s_window(
    kt: KubetrayEnv, trayer: str
) -> None:
    with running_app(kt, trayer, ["dev=https://idp.invalid"]) as app:
        until(lambda: "the icon is in the tray" in app.stderr(), what="the icon in trayer")
        icon_only = app.visible_windows(trayer)  # the embedded icon (and trayer's panel)
        assert "kubetray" in icon_only, icon_only
        pid = app.proc.pid
        asked = kt.kubetray("restart", "--wait", timeout=120)
        assert asked.returncode == 0, asked.stdout + asked.stderr
        assert "restarts now" in asked.stdout and "serves" in asked.stdout, asked.stdout
        first = agent(kt)
        assert first["pid"] == pid and first.get("restarted_from"), first  # in place
        until(lambda: app.stderr().count("the icon is in the tray") == 2, what="the icon back")
        # A window a person opened is never closed under them: the restart waits for it.
        shown = kt.kubetray()  # a second kubetray brings the running one forward
        assert "brought it forward" in shown.stdout, shown.stdout + shown.stderr
        until(
            lambda: app.visible_windows(trayer).count("kubetray") > icon_only.count("kubetray"),
            what="the main window",
        )
        asked = kt.kubetray("restart")
        assert asked.returncode == 0 and "restarts" in asked.stdout, asked.stderr
        until(lambda: agent(kt).get("restart"), what="the restart pending")
        assert agent(kt)["restart"]["waits_for"] == "kubetray's windows to close"
        assert agent(kt).get("started") == first.get("started")  # not restarted meanwhile
        assert "Traceback" not in app.stderr()
