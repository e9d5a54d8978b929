"""Notifications through a real notification daemon: dunst (on Xvfb, in the tests' D-Bus
session), watched with its own `dunstctl`. One notification per identity (a newer one
replaces it on screen), withdrawn once it is moot, all withdrawn at quit, and a click on it (its
default action) does what it asks, through the browser the person chose."""

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from jeepney import message_bus
from jeepney.io.blocking import Proxy, open_dbus_connection

from app.broker.broker import utcnow
from app.compose import Core
from app.errors import AppError
from app.oidc.browser import Browser
from app.oidc.settings import OIDCSettings
from app.oidc.tokens import TokenSet
from app.settings import Settings
from app.ui.controller import TrayController
from app.ui.notify import SERVICE
from app.ui.tray import TrayApp
from tests.core import give_tokens, make_core
from tests.fakes import SilentCaller
from tests.idp import run_idp
from tests.ui.desktop import require_desktop, xvfb

pytestmark = pytest.mark.skipif(
    not os.environ.get("DBUS_SESSION_BUS_ADDRESS"), reason="no D-Bus session: run with-keyring"
)

DUNSTRC = """[global]
    idle_threshold = 0
[urgency_low]
    timeout = 0
[urgency_normal]
    timeout = 0
[urgency_critical]
    timeout = 0
"""
"""Nothing expires by itself during the test: what leaves the screen, kubetray took off."""


@pytest.fixture
def dunst(tmp_path: Path) -> Iterator[None]:
    require_desktop("Xvfb", "dunst", "dunstctl")
    config = tmp_path / "dunstrc"
    config.write_text(DUNSTRC)
    with xvfb() as display:
        proc = subprocess.Popen(
            ["dunst", "-config", str(config)],
            env=dict(os.environ, DISPLAY=display),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            with open_dbus_connection("SESSION") as conn:
                bus = Proxy(message_bus, conn, timeout=2)
                deadline = time.monotonic() + 10
                while not bus.NameHasOwner(SERVICE)[0]:
                    assert proc.poll() is None and time.monotonic() < deadline, "no dunst"
                    time.sleep(0.05)
            yield
        finally:
            proc.terminate()
            proc.wait(5)


def dunstctl(*args: str) -> str:
    return subprocess.run(
        ["dunstctl", *args], capture_output=True, text=True, check=True, timeout=10
    ).stdout.strip()


def shown() -> int:
    return int(dunstctl("count", "displayed"))


def closed() -> int:
    return int(dunstctl("count", "history"))


@pytest.fixture
def core(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Core]:
    monkeypatch.setenv("KUBETRAY_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("SSH_CONNECTION", raising=False)
    made, _ = make_core(tmp_path, browser=Browser)
    yield made
    made.stop()


def wait(qtbot, check: Callable[[], bool]) -> None:  # type: ignore[no-untyped-def]
    qtbot.wait_until(check, timeout=10000)


def test_one_per_identity_withdrawn_when_moot_and_a_click_opens_the_chosen_browser(
    qtbot, dunst: None, core: Core, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    record = tmp_path / "opened.txt"
    record.touch()
    monkeypatch.setenv("KUBETRAY_BROWSER", f'sh -c \'printf "%s\\n" "$0" >> {record}\'')
    view = TrayApp(TrayController(core, Settings(), utcnow), tray=True)
    try:
        with run_idp() as idp:
            settings = OIDCSettings(
                issuer=idp.issuer, client_id="kubectl", grant_type="device-code"
            )
            core.logins.identity(settings, "team")
            core.logins.identity(OIDCSettings(issuer="https://idp.invalid", client_id="c"), "ops")
            view.refresh()
            view.controller.needs_login.emit("ops", "kubectl asked for a token")
            wait(qtbot, lambda: shown() == 1)
            view.show_notification("refresh", "ops", "ops needs a new login", "refused")
            qtbot.wait(500)
            assert (shown(), closed()) == (1, 0)  # replaced on screen, not a second one

            def kubectl() -> None:  # starts a login nobody in the app asked for
                with contextlib.suppress(AppError):
                    core.logins.token(core.logins.identity(settings, "team"), SilentCaller())

            threading.Thread(target=kubectl, daemon=True).start()
            wait(qtbot, lambda: shown() == 2)  # "kubectl needs you to log in to team"
            now = datetime.now(UTC)
            tokens = TokenSet(expires_at=now + timedelta(hours=1), issued_at=now, id_token="t")
            give_tokens(core, core.logins._store, "ops", tokens)  # type: ignore[arg-type]
            view.refresh()  # ops is signed in (elsewhere): its notification is moot
            wait(qtbot, lambda: (shown(), closed()) == (1, 1))
            link = view.controller.login_link("team")
            assert link and link.startswith(f"{idp.issuer}/device")
            opened = len(record.read_text().splitlines())
            dunstctl("action", "0")  # a click on the notification itself: its default action
            wait(qtbot, lambda: len(record.read_text().splitlines()) > opened)
            assert record.read_text().splitlines()[-1] == link  # through the chosen browser
            view.controller.notify.emit("waiting", "team", "kubectl needs you", "again")
            wait(qtbot, lambda: shown() == 1)
            view.controller.cancel("team")  # the login ends: its notification goes with it
            wait(qtbot, lambda: not view.controller.logging_in("team"))
            wait(qtbot, lambda: shown() == 0)
            view.show_notification("login", "team", "kubectl needs you to log in", "blocked")
            wait(qtbot, lambda: shown() == 1)
    finally:
        view.shutdown()  # Quit: nothing of ours stays on screen with buttons nobody answers
        qtbot.wait(50)
    assert shown() == 0


def test_a_log_in_notification_used_on_dunst_goes_and_the_login_starts(
    qtbot, dunst: None, core: Core, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("KUBETRAY_BROWSER", "true")
    view = TrayApp(TrayController(core, Settings(), utcnow), tray=True)
    try:
        with run_idp() as idp:
            settings = OIDCSettings(
                issuer=idp.issuer, client_id="kubectl", grant_type="device-code"
            )
            core.logins.identity(settings, "team")
            view.refresh()
            view.controller.needs_login.emit("team", "kubectl asked for a token")
            wait(qtbot, lambda: shown() == 1)
            dunstctl("action", "0")  # its default action: Log in
            wait(qtbot, lambda: view.controller.logging_in("team"))
            wait(qtbot, lambda: shown() == 0)
            view.controller.cancel("team")
            wait(qtbot, lambda: not view.controller.logging_in("team"))
    finally:
        view.shutdown()
        qtbot.wait(50)
    assert shown() == 0
