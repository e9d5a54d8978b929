"""The tray icon on a real StatusNotifierItem host: the real app (Qt's xcb plugin on Xvfb, in its
own process), a real StatusNotifierWatcher on the tests' D-Bus session, and a panel that drives
the item as panels do (tests/ui/panel.py).

A panel that starts after kubetray gets the icon (and the window that stood in goes); a panel
that goes brings the window back; the icon carries a name panels can recolour; the menu is
driven through dbusmenu; and nothing is sent to the panel that did not change.
"""

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from jeepney import DBusAddress, Properties

from tests.idp import run_idp
from tests.peers import KubetrayEnv
from tests.ui.desktop import require_desktop, running_app, xvfb
from tests.ui.panel import ITEM, Panel, late_watcher, open_dbus_router, running_watcher

pytestmark = pytest.mark.skipif(
    not os.environ.get("DBUS_SESSION_BUS_ADDRESS"), reason="no D-Bus session: run with-keyring"
)


@pytest.fixture(scope="module")
def display() -> Iterator[str]:
    require_desktop("Xvfb", "xdotool", "status-notifier-watcher")
    with xvfb() as name:
        yield name


@pytest.fixture
def panel() -> Iterator[Panel]:
    with open_dbus_router() as router:
        yield Panel(router, lambda ms: time.sleep(ms / 1000))


def until(check: Callable[[], object], timeout: float = 10.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what or check}"
        time.sleep(0.05)


def has_item(panel: Panel) -> bool:
    try:
        return len(panel.items()) == 1
    except Exception:
        return False


def row(panel: Panel, name: str) -> dict:  # type: ignore[type-arg]
    [entry] = [e for e in panel.layout() if e["label"].startswith(name)]
    return entry


def test_a_panel_that_starts_later_gets_the_icon_and_the_window_comes_back_when_it_goes(
    kt: KubetrayEnv, display: str, panel: Panel
) -> None:
    with running_app(kt, display, []) as app:
        until(lambda: "kubetray (no system tray here)" in app.visible_windows(display))
        with running_watcher():  # the panel starts a moment later, as at login
            panel.register()
            until(lambda: has_item(panel), what="the item registered")
            until(lambda: app.visible_windows(display) == [], what="the stand-in window gone")
            assert panel.properties()["IconName"] == "kubetray-none-symbolic"
        # The panel is gone (it crashed, or was removed): the window is the app again.
        until(lambda: "kubetray (no system tray here)" in app.visible_windows(display))
        with running_watcher():  # and a new panel gets the icon again
            panel.register()
            until(lambda: has_item(panel), what="the item registered again")
        assert "the icon is in the tray" in app.stderr()
        assert "Traceback" not in app.stderr()


def test_a_watcher_that_answers_after_taking_its_name_still_gets_the_icon(
    kt: KubetrayEnv, display: str, panel: Panel
) -> None:
    """status-notifier-watcher (taffybar's) owns its bus name a moment before its object
    answers, and Qt registers the icon once, at once, only warning when that fails: the icon
    would never show. Here that moment lasts a second, when a panel starts after kubetray and
    when it restarts (within the grace in which the icon stays)."""

    def answers(service: str) -> bool:  # the item the watcher lists is kubetray's, alive
        address = DBusAddress("/StatusNotifierItem", bus_name=service, interface=ITEM)
        (value,) = panel.send(Properties(address).get("IconName"))
        return bool(value[1] == "kubetray-none-symbolic")

    with running_app(kt, display, []) as app:
        until(lambda: "kubetray (no system tray here)" in app.visible_windows(display))
        with late_watcher(1.0) as watcher:  # the panel starts
            until(lambda: watcher.items(), what="the item registered")
            until(lambda: app.visible_windows(display) == [], what="the stand-in window gone")
            assert watcher.refused > 0  # it was asked before it could answer
            [service] = watcher.items()
            assert answers(service)
        with late_watcher(1.0) as watcher:  # the panel restarted: Qt registers too early
            until(lambda: watcher.items(), what="the item registered again")
            [service] = watcher.items()
            assert answers(service) and watcher.refused > 0
            assert app.visible_windows(display) == []  # it came back within the grace
        assert "Traceback" not in app.stderr()


def test_the_icon_has_a_name_to_recolour_and_pixels_for_the_rest(
    kt: KubetrayEnv, display: str, panel: Panel, tmp_path: Path
) -> None:
    with running_watcher():
        panel.register()
        data = tmp_path / "data"
        with running_app(kt, display, ["dev=https://idp.invalid"], XDG_DATA_HOME=str(data)):
            until(lambda: has_item(panel))
            props = panel.properties()
            assert props["IconName"] == "kubetray-login-symbolic"
            sizes = sorted((w, h) for w, h, _ in props["IconPixmap"])
            assert sizes == [(22, 22), (32, 32), (64, 64)]  # for a panel without the name
            assert props["Status"] == "Active" and props["Menu"] != "/NO_DBUSMENU"
            assert "dev: needs login" in props["ToolTip"][2]
            # The name is where a panel looks it up: the user's hicolor theme.
            installed = data / "icons" / "hicolor" / "scalable" / "status"
            assert (installed / "kubetray-login-symbolic.svg").is_file()


def test_the_menu_through_dbusmenu_logs_in_and_cancels(
    kt: KubetrayEnv, display: str, panel: Panel
) -> None:
    with run_idp() as idp, running_watcher():
        panel.register()
        with running_app(kt, display, [f"team={idp.issuer}"]) as app:
            until(lambda: has_item(panel))
            labels = [e["label"] for e in panel.layout() if not e["separator"]]
            assert labels == [
                "Open kubetray",
                "team · needs login",
                "Tokens are kept in memory unt…he agent stops (store: memory)",
                "Add cluster…",
                "Settings",
                "Diagnostics",
                "About kubetray",
                "Quit kubetray",
            ]
            panel.about_to_show()
            panel.click("Log in", within="team")
            until(lambda: row(panel, "team")["label"].startswith("team · enter code "))
            shown = [c["label"] for c in row(panel, "team")["children"] if not c["separator"]]
            assert shown[1:] == ["Open login page", "Copy link", "Cancel login", "Remove identity…"]
            until(
                lambda: any(
                    t.startswith("kubetray: log in to team") for t in app.visible_windows(display)
                ),
                what="the device code window",
            )
            panel.click("Cancel login", within="team")
            until(lambda: row(panel, "team")["label"] == "team · needs login")
            panel.activate()  # a left click on the icon: the window
            until(lambda: "kubetray" in app.visible_windows(display))
            panel.click("Quit kubetray")
            app.proc.wait(20)
            assert app.proc.returncode == 0 and "Traceback" not in app.stderr()


def test_only_what_changed_goes_to_the_panel(kt: KubetrayEnv, display: str, panel: Panel) -> None:
    """Issue 30 measured 75 tooltips in 75 s, and 56 layouts when a login started."""
    with run_idp() as idp, running_watcher():
        panel.register()
        # A browser that opens (and shows nothing): no "did not open" notification meanwhile.
        identities = [f"team={idp.issuer}", "ops=https://idp.invalid"]
        with running_app(kt, display, identities, KUBETRAY_BROWSER="true"):
            until(lambda: has_item(panel))
            panel.listen()
            time.sleep(3.5)  # three ticks of the app's timer: nothing changed
            assert panel.received() == []
            panel.click("Log in", within="team")
            until(lambda: row(panel, "team")["label"].startswith("team · enter code "))
            sent = panel.received()
            # The row's line and its entries changed: their properties, not a new layout.
            assert "LayoutUpdated" not in sent and "NewIcon" not in sent, sent
            assert 1 <= sent.count("ItemsPropertiesUpdated") <= 8, sent
            assert sent.count("NewToolTip") <= 1, sent
            panel.click("Cancel login", within="team")
            until(lambda: row(panel, "team")["label"] == "team · needs login")
