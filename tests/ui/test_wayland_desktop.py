"""kubetray on a Wayland desktop as sway + waybar + mako users have it (tests/ui/wayland.py).

mako keeps a notification until it expires (by default never) and leaves closing it, after an
action, to the program: an answered notification must be closed by kubetray, or it stays."""

import json
import os
import subprocess
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
from tests.ui.desktop import require_desktop
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
