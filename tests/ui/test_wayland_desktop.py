"""kubetray on a Wayland desktop as sway + waybar + mako users have it (tests/ui/wayland.py).

mako keeps a notification until it expires (by default never) and leaves closing it, after an
action, to the program: an answered notification must be closed by kubetray, or it stays."""

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.broker.broker import utcnow
from app.compose import Core
from app.oidc.browser import Browser
from app.oidc.settings import OIDCSettings
from app.settings import Settings
from app.ui.controller import TrayController
from app.ui.tray import TrayApp
from tests.core import make_core
from tests.idp import run_idp
from tests.ui.desktop import require_desktop, tray_icon
from tests.ui.wayland import start, stop, sway

pytestmark = pytest.mark.skipif(
    not os.environ.get("DBUS_SESSION_BUS_ADDRESS"), reason="no D-Bus session: run with-keyring"
)


@pytest.fixture
def mako(tmp_path: Path) -> Iterator[dict[str, str]]:
    """sway with mako, in mako's default configuration (nothing expires)."""
    require_desktop("sway", "mako", "makoctl")
    log = tmp_path / "desktop.log"
    with sway(log) as wayland:
        daemon = start(["mako", "--config", "/dev/null"], wayland, log)
        try:
            yield wayland
        finally:
            stop(daemon)


def makoctl(*args: str) -> str:
    return subprocess.run(
        ["makoctl", *args], capture_output=True, text=True, check=True, timeout=10
    ).stdout


def on_screen() -> list[dict]:  # type: ignore[type-arg]
    """mako's notifications: each {id, summary, actions}."""
    data = json.loads(makoctl("list"))["data"]
    return [
        {
            "id": n["id"]["data"],
            "summary": n["summary"]["data"],
            "actions": n["actions"]["data"],
        }
        for n in (data[0] if data else [])
    ]


@pytest.fixture
def core(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Core]:
    monkeypatch.setenv("KUBETRAY_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("KUBETRAY_BROWSER", "true")  # a browser that opens and shows nothing
    monkeypatch.delenv("SSH_CONNECTION", raising=False)
    made, _ = make_core(tmp_path, browser=Browser)
    yield made
    made.stop()


def test_a_notification_answered_on_mako_is_closed_by_kubetray(
    qtbot, mako: dict[str, str], core: Core
) -> None:  # type: ignore[no-untyped-def]
    view = TrayApp(TrayController(core, Settings(), utcnow), tray=True)
    try:
        with run_idp() as idp:
            settings = OIDCSettings(
                issuer=idp.issuer, client_id="kubectl", grant_type="device-code"
            )
            core.logins.identity(settings, "team")
            view.refresh()
            # Its Log in button (makoctl invoke -n ID login): the login starts, and the
            # notification, answered, goes.
            view.controller.needs_login.emit("team", "kubectl asked for a token")
            qtbot.wait_until(lambda: len(on_screen()) == 1, timeout=10000)
            [note] = on_screen()
            assert "login" in note["actions"], note
            makoctl("invoke", "-n", str(note["id"]), "login")
            qtbot.wait_until(lambda: view.controller.logging_in("team"), timeout=10000)
            qtbot.wait_until(lambda: on_screen() == [], timeout=10000)
            view.controller.cancel("team")
            qtbot.wait_until(lambda: not view.controller.logging_in("team"), timeout=10000)
            # A click on the notification itself (its default action) answers it too.
            view.show_notification("failure", "team", "Login to team failed", "refused")
            qtbot.wait_until(lambda: len(on_screen()) == 1, timeout=10000)
            [note] = on_screen()
            makoctl("invoke", "-n", str(note["id"]))
            qtbot.wait_until(lambda: view.main_window is not None, timeout=10000)
            qtbot.wait_until(lambda: on_screen() == [], timeout=10000)
    finally:
        view.shutdown()
        qtbot.wait(50)
    assert on_screen() == []


WAYBAR_STYLE = Path("/etc/xdg/waybar/style.css")
"""waybar's default look: a dark translucent bar, the tray on a blue (#2980b9) box."""
STYLES = {
    "waybar's default style": "",
    "a dark bar": "window#waybar { background: #000000; } #tray { background: transparent; }",
    "a light bar": "window#waybar { background: #ffffff; } #tray { background: transparent; }",
}
BAR = 30


def tray_crop(shot: Path) -> "QImage":  # noqa: F821 - Qt's, imported where a QApplication is
    """The tray's box in a screenshot of the bar: the right end of it, from the first column
    (right to left) that is the tray's background to where that background ends."""
    from PySide6.QtGui import QImage

    image = QImage(str(shot))
    y = 2
    right = image.width() - 1
    background = image.pixelColor(right - 1, y)
    left = right
    while left > 0 and image.pixelColor(left - 1, y) == background:
        left -= 1
    return image.copy(left, 0, right - left, BAR - 4)


@pytest.mark.parametrize("style", STYLES.values(), ids=STYLES.keys())
def test_the_icon_reads_on_waybar_in_every_state(qapp, tmp_path: Path, style: str) -> None:  # type: ignore[no-untyped-def]
    """waybar draws the named icon as it is, without recolouring it: measured from grim's
    screenshot of the panel, the icon stands out by 3:1 in every state, and the state's
    colour is there."""
    from PySide6.QtGui import QColor

    from tests.ui.test_icons import legibility, reads, source_fills

    require_desktop("sway", "waybar", "grim")
    assert WAYBAR_STYLE.is_file(), "waybar's default style.css is missing"
    css = tmp_path / "style.css"
    css.write_text(WAYBAR_STYLE.read_text() + "\n" + style + "\n")
    config = tmp_path / "waybar.json"
    config.write_text(json.dumps({"layer": "top", "height": BAR, "modules-right": ["tray"]}))
    data = tmp_path / "data"
    log = tmp_path / "desktop.log"
    with sway(log) as wayland:
        env = dict(os.environ, **wayland, XDG_DATA_HOME=str(data), QT_QPA_PLATFORM="wayland")
        env.pop("DISPLAY", None)
        bar = start(
            ["waybar", "-c", str(config), "-s", str(css)],
            dict(wayland, XDG_DATA_HOME=str(data)),
            log,
        )
        measured = {}
        try:
            with tray_icon(env) as show:
                for state in ("none", "ok", "expiring", "login", "error"):
                    show(state)
                    shot = tmp_path / f"{state}.png"

                    def drawn(shot: Path = shot, state: str = state) -> bool:
                        subprocess.run(["grim", str(shot)], env=env, check=True, timeout=10)
                        crop = tray_crop(shot)
                        return crop.width() > 10 and colour_present(crop, source_fills(state)[1])

                    deadline = time.monotonic() + 20
                    while not drawn():
                        assert time.monotonic() < deadline, f"{state}: not drawn"
                    crop = tray_crop(shot)
                    panel = crop.pixelColor(1, 1)
                    measured[state] = legibility(crop, QColor(panel))
                    assert reads(crop, QColor(panel)), (state, panel.name(), measured[state])
        finally:
            stop(bar)
    print(f"waybar, {style or 'default'}: {measured}")


def colour_present(crop: "QImage", colour: str, near: int = 24) -> bool:  # noqa: F821
    """Whether a few pixels of ``colour`` (the state's badge) are in ``crop``."""
    from PySide6.QtGui import QColor

    from tests.ui.test_icons import distance

    want = QColor(colour)
    pixels = (crop.pixelColor(x, y) for y in range(crop.height()) for x in range(crop.width()))
    return sum(distance(c, want) <= near for c in pixels) >= 4


def windows(wayland: dict[str, str]) -> list[dict]:  # type: ignore[type-arg]
    """sway's windows: each {name, floating, width, height}."""
    tree = json.loads(
        subprocess.run(
            ["swaymsg", "-t", "get_tree"],
            env=dict(os.environ, **wayland),
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout
    )
    out = []

    def walk(node: dict, floating: bool) -> None:  # type: ignore[type-arg]
        if node.get("name") and node.get("type") in ("con", "floating_con") and not node["nodes"]:
            rect = node["rect"]
            out.append(
                {
                    "name": node["name"],
                    "floating": floating,
                    "width": rect["width"],
                    "height": rect["height"],
                }
            )
        for child in node.get("nodes", []):
            walk(child, floating)
        for child in node.get("floating_nodes", []):
            walk(child, True)

    walk(tree, False)
    return out


def test_the_link_and_device_code_windows_float_at_their_size_on_sway(kt, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Copy link… on Wayland opens a small window of ours (the clipboard needs a focused
    window): sway stretched it over the whole screen; it floats at its own size, and so does
    the device code's window."""
    from tests.peers import ROOT
    from tests.ui.panel import Panel, open_dbus_router
    from tests.ui.test_panel import has_item, row, until

    require_desktop("sway", "waybar", "swaymsg")
    config = tmp_path / "waybar.json"
    config.write_text(json.dumps({"layer": "top", "height": BAR, "modules-right": ["tray"]}))
    log = tmp_path / "desktop.log"
    with run_idp() as idp, sway(log) as wayland, open_dbus_router() as router:
        bar = start(["waybar", "-c", str(config), "-s", str(WAYBAR_STYLE)], wayland, log)
        panel = Panel(router, lambda ms: time.sleep(ms / 1000))
        env = dict(kt.env, **wayland, QT_QPA_PLATFORM="wayland", KUBETRAY_BROWSER="true")
        env.pop("DISPLAY", None)
        with (tmp_path / "app.log").open("w") as out:
            app = subprocess.Popen(
                [sys.executable, str(ROOT / "tests" / "ui" / "tray_app.py"), f"team={idp.issuer}"],
                env=env,
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            until(lambda: has_item(panel), timeout=30, what="the icon on waybar")
            panel.about_to_show()
            panel.click("Log in", within="team")
            until(lambda: row(panel, "team")["label"].startswith("team · enter code "))
            code = "kubetray: log in to team"  # the device code's window
            until(lambda: any(w["name"] == code for w in windows(wayland)), what=code)
            [device] = [w for w in windows(wayland) if w["name"] == code]
            assert device["floating"] and device["height"] < 700, device
            panel.click("Copy link…", within="team")
            title = "kubetray: the login link for team"
            until(lambda: any(w["name"] == title for w in windows(wayland)), what=title)
            [link] = [w for w in windows(wayland) if w["name"] == title]
            assert link["floating"], link
            assert link["width"] < 800 and link["height"] < 300, link  # the screen: 1280 x 720
        finally:
            app.terminate()
            app.wait(20)
            stop(bar)
        assert "Traceback" not in (tmp_path / "app.log").read_text()
